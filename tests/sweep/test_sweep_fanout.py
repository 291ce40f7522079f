"""Sweeps scaled out: a simulated grid fanned out to processes or Ray tasks gives the serial sweep's
files; a measured sweep spreads each step's load over worker processes (or Ray actors) and sends
what one process sends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokenpace.config import BenchConfig
from tokenpace.errors import ExitCode
from tokenpace.reports.sweep_provenance import provenance
from tokenpace.servers import BuiltinServerConfig, start_server_process
from tokenpace.simulator.config import SimConfig
from tokenpace.sweep import SweepConfig, run_sweep

pytestmark = pytest.mark.slow

BASE = dict(requests=24, input_tokens="uniform:min=64,max=512", output_tokens="uniform:min=8,max=64",
            slo="chat", seed=11, progress=False)
GRIDS = {
    # given loads: one task per step
    "loads": dict(axis="concurrency", loads=[1, 4, 16], vary=[("quant", ["bf16", "fp8"])]),
    # --rate auto: one task per combination (the probes choose each one's rates)
    "auto": dict(axis="rate", loads=None, auto_steps=3, saturation_concurrency=16,
                 vary=[("policy", ["chunked-prefill", "prefill-first"])]),
}
# More chunks a step than a columnar part holds when written record by record (131,072), so that
# the parts are compared too: a step saved in the fan-out's parent once split them where the serial
# one did not.
BASE_BY_GRID = {"loads": dict(requests=600, output_tokens="uniform:min=200,max=300")}


def sim_sweep(folder: Path, grid: str | dict, sim: SimConfig | None = None, **fan_out
              ) -> tuple[dict, dict[str, bytes]]:
    """The sweep document and every step file's bytes; run in ``folder`` with a relative --out, so
    that the saved paths of two runs are the same strings."""
    folder.mkdir()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        base = BASE | BASE_BY_GRID.get(grid, {}) if isinstance(grid, str) else BASE
        result = run_sweep(SweepConfig(base=BenchConfig(**base), sim=sim or SimConfig(), out="sweep.json",
                                       progress=False, **(GRIDS[grid] if isinstance(grid, str) else grid),
                                       **fan_out))
    finally:
        os.chdir(cwd)
    doc = json.loads((folder / "sweep.json").read_text())
    steps = folder / "sweep.steps"
    files = {str(p.relative_to(steps)): p.read_bytes() for p in sorted(steps.rglob("*")) if p.is_file()}
    return doc, files


def same_sweep(a: tuple[dict, dict[str, bytes]], b: tuple[dict, dict[str, bytes]]) -> None:
    doc_a, files_a = a
    doc_b, files_b = b
    assert doc_a["config"].pop("fan_out")["backend"] == "serial"
    doc_b["config"].pop("fan_out")
    assert doc_a == doc_b  # every step's figures, the analysis, the rate choice
    assert files_a.keys() == files_b.keys()
    for name in files_a:  # each step's result, records, timeline and columns, byte for byte
        assert files_a[name] == files_b[name], name


@pytest.mark.parametrize("grid", sorted(GRIDS))
def test_two_processes_give_the_serial_sweeps_files(tmp_path, grid):
    serial = sim_sweep(tmp_path / "serial", grid)
    fanned = sim_sweep(tmp_path / "jobs", grid, jobs=2)
    assert fanned[0]["config"]["fan_out"] == {"backend": "processes", "jobs": 2,
                                              "tasks": 6 if grid == "loads" else 2}
    # the header says how the steps ran (console and HTML); a serial sweep has no such line
    tasks = 6 if grid == "loads" else 2
    assert ("Scale-out", f"steps simulated in 2 processes ({tasks} tasks)") in provenance(fanned[0])
    assert "Scale-out" not in dict(provenance(serial[0]))
    steps = serial[0]["steps"]
    assert len({s["group"] for s in steps}) == 2 and all(s["status"] in ("ok", "skipped") for s in steps)
    if grid == "auto":  # the second group's steps are numbered after the first group's, as serially
        first = [s for s in steps if s["group"] == steps[0]["group"]]
        assert steps[len(first)]["index"] == len(first) and steps[len(first)]["role"] == "sync"
    same_sweep(serial, fanned)


def test_a_step_that_fails_in_a_process_is_the_serial_sweeps_failed_step(tmp_path):
    # A 70B model in bf16 does not fit one H100: the tp=1 steps fail when simulated, tp=4 runs.
    grid = dict(axis="concurrency", loads=[1, 4], vary=[("tp", ["1", "4"])])
    engine = SimConfig(model="llama-3.1-70b")
    serial = sim_sweep(tmp_path / "serial", grid, sim=engine)
    fanned = sim_sweep(tmp_path / "jobs", grid, sim=engine, jobs=2)
    assert [s["status"] for s in serial[0]["steps"]] == ["failed", "failed", "ok", "ok"]
    assert "no room for a KV cache" in serial[0]["steps"][0]["reason"]
    same_sweep(serial, fanned)


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenpace", *argv], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("argv, message", [
    (["--concurrency", "1,2", "--jobs", "2"], "--jobs and the steps' Ray tasks are for simulated sweeps"),
    (["--sim", "--concurrency", "1,2", "--workers", "2"], "--workers spreads a measured step's load"),
    (["--sim", "--concurrency", "1,2", "--jobs", "2", "--ray", "auto"], "give --jobs or --ray, not both"),
    (["--sim", "--concurrency", "1,2", "--jobs", "0"], "must be a whole number >= 1 or auto"),
])
def test_scale_out_flags_that_do_not_fit_are_one_line_and_exit_2(tmp_path, argv, message):
    proc = _cli("sweep", *argv, "--requests-per-step", "4", "--quiet", "--out", str(tmp_path / "s.json"))
    assert proc.returncode == ExitCode.USAGE
    assert message in proc.stderr.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr and not (tmp_path / "s.json").exists()


def measured_sweep(tmp_path: Path, name: str, **scale) -> list[dict]:
    server = start_server_process(BuiltinServerConfig(seed=3, decode_base_s=0.002, prefill_base_s=0.001))
    try:
        result = run_sweep(SweepConfig(
            base=BenchConfig(url=server.url, requests=16, input_tokens="uniform:min=8,max=64",
                             output_tokens="uniform:min=4,max=24", seed=5, progress=False, **scale),
            axis="concurrency", loads=[1, 4], out=str(tmp_path / f"{name}.json"), progress=False))
    finally:
        server.stop()
    return result.steps


def step_view(step: dict, tmp_path: Path) -> list[tuple]:
    """What a step sent: each request's index, its prompt and output lengths as planned, the tokens
    received."""
    from tokenpace.results.records import read_records

    records = read_records(tmp_path / step["result_path"].replace(".json", ".records.jsonl"))
    return sorted((r.index, r.requested_input_tokens, r.requested_output_tokens, r.output_tokens) for r in records)


def test_a_measured_sweep_on_two_worker_processes_sends_what_one_process_sends(tmp_path):
    one = measured_sweep(tmp_path, "one")
    two = measured_sweep(tmp_path, "two", workers=2)
    assert [s["status"] for s in one + two] == ["ok"] * 4
    # concurrency 1 holds one stream: one process; concurrency 4: the two asked for
    assert "workers" not in two[0]["load_generator"]
    doc = json.loads((tmp_path / "two.json").read_text())
    assert ("Scale-out", "each step's load from 2 worker processes") in provenance(doc)
    assert two[1]["load_generator"]["workers"]["count"] == 2
    assert two[1]["load_generator"]["workers"]["backend"] == "processes"
    for a, b in zip(one, two):
        assert step_view(a, tmp_path) == step_view(b, tmp_path)
        assert a["summary"]["tokens"]["mismatch"] == b["summary"]["tokens"]["mismatch"]
        counts = b["summary"]["counts"]
        assert counts["sent"] == counts["ok"] == 16


def test_sigterm_stops_a_fanned_out_sweep_with_its_processes_and_keeps_the_steps(tmp_path):
    import signal
    import time

    import psutil

    out = tmp_path / "s.json"
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", "sweep", "--sim", "--concurrency", "1,8,64,256",
                             "--vary", "quant=bf16,fp8", "--duration-per-step", "900", "--jobs", "2",
                             "--quiet", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out.exists() and json.loads(out.read_text())["steps"]):
        time.sleep(0.2)
    children = psutil.Process(proc.pid).children(recursive=True)
    assert children  # the pool's processes
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED, stderr
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True and doc["steps"][0]["status"] == "ok"
    assert len(doc["steps"]) < 8
    psutil.wait_procs(children, timeout=10)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def test_a_task_sends_back_its_files_and_figures_not_its_records(tmp_path, monkeypatch):
    """What crosses from a worker to the sweep: each step's files as bytes and the figures judged
    from its records, never the records themselves (they were pickled back and judged twice)."""
    from tokenpace.sweep.fanout import compute, tasks_of

    monkeypatch.chdir(tmp_path)
    config = SweepConfig(base=BenchConfig(**BASE), sim=SimConfig(), out="sweep.json", progress=False,
                         **GRIDS["auto"])
    outcomes = compute(config, tasks_of(config)[0])
    ran = [o for o in outcomes if o.result is not None]
    assert len(ran) >= 3  # the sync probe, at least one saturation probe, the chosen rates
    for outcome in ran:
        assert list(outcome.result.records) == [] and outcome.result.sim is None
        assert outcome.records > 0
        assert set(outcome.result.record_figures) == {"goodput_by_preset", "load"}
        assert set(outcome.result.record_figures["goodput_by_preset"]) == {"chat", "code", "summarization", "batch"}
        lines = outcome.files.records.splitlines()
        assert len(lines) == outcome.records and json.loads(lines[0])["request_id"].startswith("sim-")
        assert "manifest.json" in outcome.files.columns and outcome.files.timeline
    assert not list(tmp_path.iterdir())  # the task wrote only in its own scratch directory, now gone


def test_run_files_copied_under_another_name_are_the_same_bytes(tmp_path):
    import dataclasses

    from tokenpace.results import result_paths, timeline_path
    from tokenpace.results.bundle import pack, unpack
    from tokenpace.runner.simulate import SimRunConfig, run_sim

    run = run_sim(SimRunConfig(load=BenchConfig(**BASE, concurrency=4, out=str(tmp_path / "a" / "run.json")),
                               engine=SimConfig()))
    result_path, records_path = result_paths(str(tmp_path / "b" / "copy.json"), kind="sim")
    copy = dataclasses.replace(run, result_path=result_path, records_path=records_path,
                               timeline_path=timeline_path(records_path))
    unpack(pack(run), copy)

    def tree(folder: Path, stem: str) -> dict[str, bytes]:
        return {str(p.relative_to(folder)).replace(stem, "X"): p.read_bytes()
                for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(f"{stem}.json")}

    assert tree(tmp_path / "a", "run") == tree(tmp_path / "b", "copy")
    assert len(tree(tmp_path / "b", "copy")) >= 4  # records, timeline, a columnar part and its manifest
