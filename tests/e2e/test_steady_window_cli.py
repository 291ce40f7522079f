"""bench as a user runs it: rates over the steady-state window, an impossible load refused."""

from __future__ import annotations

import json

from .helpers import run_cli
from tokenpace import read_records
from tokenpace.errors import ExitCode


def test_bench_counts_its_rates_over_the_steady_state_window(tmp_path):
    out = tmp_path / "run.json"
    proc = run_cli("bench", "--concurrency", "4", "--requests", "24", "--input-tokens", "32",
                   "--output-tokens", "16", "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "(steady state; " in proc.stdout
    w = json.loads(out.read_text())["summary"]["window"]
    assert w["definition"].startswith("Steady-state window (closed loop at concurrency 4)")
    records = read_records(out.with_suffix(".records.jsonl"))
    sends = sorted(r.sent_ns for r in records)
    assert w["start_ns"] == sends[3]  # the 4th send: the target concurrency reached
    # The end: the first completion that no send followed (the cooldown's first would-be send):
    # 20 of the 24 completions sent the next request, so it is the 4th latest, and no later than
    # the first completion after the last send.
    done = sorted(r.done_ns for r in records)
    assert w["end_ns"] == done[-4] <= min(t for t in done if t > sends[-1])
    assert w["requests_sent"] == 24 - sum(1 for t in sends if t < w["start_ns"])


def test_a_concurrency_the_count_cannot_hold_is_refused_in_one_line(tmp_path):
    proc = run_cli("bench", "--concurrency", "64", "--requests", "10", "--out", str(tmp_path / "x.json"))
    assert proc.returncode == ExitCode.USAGE
    assert proc.stderr.count("\n") == 1 and "--concurrency 64 cannot be held with --requests 10" in proc.stderr
    assert not (tmp_path / "x.json").exists()
    proc = run_cli("sweep", "--concurrency", "8,64", "--requests-per-step", "40", "--out", str(tmp_path / "s.json"))
    assert proc.returncode == ExitCode.USAGE and "--requests-per-step 40" in proc.stderr
