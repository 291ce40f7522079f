"""`tokenpace sim` shows progress only when it is slow: nothing for a quick run, and virtual time,
requests and speed for a long one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tokenpace.config import BenchConfig
from tokenpace.runner import sim_progress
from tokenpace.runner.simulate import SimRunConfig, run_sim


def test_a_quick_simulation_prints_no_progress(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tokenpace", "sim", "--requests", "20", "--output-tokens", "20",
                           "--out", str(tmp_path / "sim.json")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_a_slow_simulation_reports_virtual_time_requests_and_speed(tmp_path, monkeypatch, capsys):
    # "Slow" made short: progress from the start, a line every 20 ms.
    monkeypatch.setattr(sim_progress, "QUIET_S", 0.0)
    monkeypatch.setattr(sim_progress, "PLAIN_EVERY_S", 0.02)
    load = BenchConfig(requests=3000, concurrency=64, output_tokens="200", progress_mode="json",
                       out=str(tmp_path / "sim.json"))
    result = run_sim(SimRunConfig(load=load))
    objects = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert len(objects) >= 2, objects  # during the run, and where it ended
    assert all(o["type"] == "sim_progress" and o["total"] == 3000 for o in objects)
    last = objects[-1]
    assert (last["done"], last["sent"], last["in_flight"]) == (3000, 3000, 0)
    assert last["virtual_s"] == pytest.approx(result.sim.stats["sim_end_ns"] / 1e9)
    done = [o["done"] for o in objects]
    assert done == sorted(done)  # counts only grow
