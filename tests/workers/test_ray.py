"""`--ray`: load workers as Ray actors, on a real Ray cluster started on 127.0.0.1 in the test."""

from __future__ import annotations

import asyncio
import os
import re

import pytest

from tokenpace.config import BenchConfig
from tokenpace.errors import ClusterError
from tokenpace.runner.bench import run_bench_async
from tokenpace.servers import BuiltinServerConfig, read_send_log, start_server_process

from .test_workers_e2e import _view

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow



def _run(tmp_path, name, **scale):
    log = tmp_path / f"{name}.sends.jsonl"
    server = start_server_process(BuiltinServerConfig(send_log_path=str(log), seed=3))
    try:
        config = BenchConfig(url=server.url, rate=50.0, requests=30, seed=5,
                             input_tokens="uniform:min=8,max=64", output_tokens="uniform:min=4,max=24",
                             progress=False, out=str(tmp_path / f"{name}.json"), **scale)
        result = asyncio.run(run_bench_async(config))
    finally:
        server.stop()
    return result, read_send_log(log)


def test_two_ray_actors_send_what_one_process_sends(ray_cluster, tmp_path):
    one, one_events = _run(tmp_path, "one")
    two, two_events = _run(tmp_path, "ray", ray="auto", workers=2)

    workers = two.load["workers"]
    assert workers["backend"] == "ray" and workers["count"] == 2
    assert {row["pid"] for row in workers["per_worker"]}.isdisjoint({os.getpid()})
    for row in workers["per_worker"]:  # each actor's clock offset is stated in the result
        assert row["status"] == "done"
        assert row["clock"]["uncertainty_ms"] >= 0 and "wall_offset_ms" in row["clock"]
    one_view, two_view = _view(one.records, one_events), _view(two.records, two_events)
    assert sorted(one_view[0]) == list(range(30))
    assert one_view == two_view  # request set, lengths, server-counted tokens, tokens written
    assert (one.summary["tokens"]["mismatch"]["server_total"]
            == two.summary["tokens"]["mismatch"]["server_total"])
    counts = two.summary["counts"]
    assert counts["sent"] == counts["ok"] == 30


def test_a_node_clock_beyond_the_limit_is_refused_and_one_within_is_measured(ray_cluster):
    from tokenpace.runner.ray_backend import RayBackend

    config = BenchConfig(ray="auto", workers=2, max_clock_offset_ms=50.0)
    with pytest.raises(ClusterError, match=r"ms off .*--max-clock-offset 50 ms") as refused:
        asyncio.run(RayBackend.connect(config, clock_skew_ns=200_000_000))
    # The injected 200 ms, found within the measurement's own bound (a busy machine's round trips
    # widen it: +198.2 ms was measured once, which a match on "+200." refused).
    offset, bound = map(float, re.search(r"is ([+-][\d.]+) ± ([\d.]+) ms off", str(refused.value)).groups())
    assert abs(offset - 200.0) <= bound + 1.0

    backend = asyncio.run(RayBackend.connect(config, clock_skew_ns=20_000_000))
    try:
        for clock in backend.clocks:  # the injected 20 ms, found within the measurement's own bound
            assert abs(clock["wall_offset_ms"] - 20.0) <= clock["uncertainty_ms"] + 1.0
    finally:
        asyncio.run(backend.close())


def test_an_unreachable_cluster_is_one_line_and_exit_code_8(tmp_path):
    import socket
    import subprocess
    import sys

    from tokenpace.errors import ExitCode

    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run([sys.executable, "-m", "tokenpace", "bench", "--ray", f"127.0.0.1:{port}",
                           "--requests", "4", "--quiet", "--out", str(tmp_path / "run.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == ExitCode.CLUSTER
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"tokenpace: error: cannot reach the Ray cluster at 127.0.0.1:{port}")
    assert "Traceback" not in proc.stderr


def test_an_actor_killed_mid_run_leaves_every_request_accounted(ray_cluster, tmp_path):
    import signal
    import threading
    import time

    import psutil

    from tokenpace import read_records

    log = tmp_path / "sends.jsonl"
    server = start_server_process(BuiltinServerConfig(send_log_path=str(log)))
    killed: list[int] = []

    def kill_one_actor_once_requests_flow() -> None:
        # Kill once all four slots (two per actor) have a request in flight and the driver has
        # had time to collect their launch notices: it drains each actor every 50 ms, and a notice
        # not yet collected dies with the actor. A request takes about 1.5 s, so at 0.5 s after the
        # fourth arrived both actors still have theirs open.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            actors = [p for p in psutil.process_iter(["pid", "cmdline"])
                      if (p.info["cmdline"] or [""])[0].startswith("ray::LoadActor")]
            try:
                arrivals = sorted(e["t_ns"] for e in read_send_log(log) if e["kind"] == "received"
                                  and not e["request_id"].startswith("tp-preflight-"))
            except (FileNotFoundError, ValueError):
                arrivals = []
            if len(actors) == 2 and len(arrivals) >= 4 and time.monotonic_ns() - arrivals[3] >= 500_000_000:
                victim = max(p.pid for p in actors)
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
            time.sleep(0.05)

    killer = threading.Thread(target=kill_one_actor_once_requests_flow, daemon=True)
    try:
        config = BenchConfig(url=server.url, concurrency=4, requests=16, input_tokens="16",
                             output_tokens="150", progress=False, out=str(tmp_path / "run.json"),
                             ray="auto", workers=2)
        killer.start()
        result = asyncio.run(run_bench_async(config))
        killer.join(5)
    finally:
        server.stop()
    assert killed, "no actor was killed"
    counts = result.summary["counts"]
    assert counts["sent"] == counts["ok"] + counts["error"] + counts["timeout"] + counts["cancelled"]
    assert counts["errors_by_kind"].get("worker_died", 0) >= 1
    assert result.load["valid"] is False and result.load["workers"]["deaths"]
    records = read_records(tmp_path / "run.records.jsonl")
    received = {e["request_id"] for e in read_send_log(log)
                if e["kind"] == "received" and not e["request_id"].startswith("tp-preflight-")}
    assert received <= {r.request_id for r in records}  # every request the server saw has a record
    assert len({r.index for r in records if not r.retried}) == counts["sent"]
