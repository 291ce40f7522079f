"""Sweeps on a real local Ray cluster (two CPUs on 127.0.0.1, started in the test): a simulated grid
as Ray tasks gives the serial sweep's files; a measured sweep's steps run on Ray actors."""

from __future__ import annotations


import pytest

from .test_sweep_fanout import measured_sweep, same_sweep, sim_sweep, step_view

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow



@pytest.mark.parametrize("grid", ["loads", "auto"])
def test_ray_tasks_give_the_serial_sweeps_files(ray_cluster, tmp_path, grid):
    serial = sim_sweep(tmp_path / "serial", grid)
    on_ray = sim_sweep(tmp_path / "ray", grid, ray="auto")
    assert on_ray[0]["config"]["fan_out"]["backend"] == "ray"
    same_sweep(serial, on_ray)


def test_a_measured_sweep_on_two_ray_actors_sends_what_one_process_sends(ray_cluster, tmp_path):
    one = measured_sweep(tmp_path, "one")
    two = measured_sweep(tmp_path, "ray", ray="auto", workers=2)
    assert [s["status"] for s in one + two] == ["ok"] * 4
    assert two[0]["load_generator"]["workers"]["count"] == 1  # concurrency 1: one actor
    workers = two[1]["load_generator"]["workers"]
    assert workers["backend"] == "ray" and workers["count"] == 2
    assert all("wall_offset_ms" in row["clock"] for row in workers["per_worker"])
    for a, b in zip(one, two):
        assert step_view(a, tmp_path) == step_view(b, tmp_path)
        assert b["summary"]["counts"]["sent"] == b["summary"]["counts"]["ok"] == 16


@pytest.mark.parametrize("sim", [True, False])
def test_an_unreachable_cluster_fails_the_sweep_once_with_exit_code_9(tmp_path, sim):
    import socket

    from tokenpace.errors import ExitCode

    from .test_sweep_fanout import _cli

    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _cli("sweep", *(["--sim"] if sim else []), "--concurrency", "1,2", "--requests-per-step", "4",
                "--ray", f"127.0.0.1:{port}", "--quiet", "--out", str(tmp_path / "s.json"))
    assert proc.returncode == ExitCode.CLUSTER, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"tokenpace: error: cannot reach the Ray cluster at 127.0.0.1:{port}")
    assert "Traceback" not in proc.stderr
