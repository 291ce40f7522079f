"""`tokenpace compare`: exit codes of --fail-if gates on constructed runs with known differences,
the noise judgement, and sim against measured."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from tokenpace.cli.main import main as cli_main
from tokenpace.reports.compare import compare_runs
from tokenpace.reports.gates import GATE_FAILED_EXIT
from tokenpace.reports.run_data import load_run_data


def cli(*args: str) -> subprocess.CompletedProcess:
    """The real command line in a subprocess (what CI and users run)."""
    env = dict(os.environ, COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "tokenpace", *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=env)


def main(*args: str) -> subprocess.CompletedProcess:
    """The same entry point in this process (no interpreter start-up per case)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main([str(a) for a in args])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


@pytest.mark.parametrize("new, gate, code", [
    ("slow", "ttft.p99 > +10%", GATE_FAILED_EXIT),   # TTFT grew by ~30%
    ("slow", "ttft.p99 > +50%", 0),
    ("slow", "ttft.p50 > +25ms", GATE_FAILED_EXIT),  # p50 grew by ~30 ms
    ("slow", "ttft.p50 > +0.035s", 0),
    ("slow", "tpot.p50 > +1%", 0),                   # decode speed unchanged
    ("same", "ttft.p99 > +10%", 0),
    ("errors", "goodput.requests_s < -5%", GATE_FAILED_EXIT),  # 10% of requests failed
    ("errors", "goodput.fraction < -0.05", GATE_FAILED_EXIT),  # a bare number: the figure's unit
    ("errors", "counts.error >= +60", GATE_FAILED_EXIT),
    ("same", "goodput.requests_s < -5%", 0),
])
def test_fail_if_exit_codes(constructed_runs, new, gate, code):
    result = main("compare", constructed_runs["base"], constructed_runs[new], "--fail-if", gate)
    assert result.returncode == code, result.stdout + result.stderr
    assert ("FAILED" in result.stdout) == (code != 0)


def test_any_failing_gate_over_several_runs_fails(constructed_runs):
    r = constructed_runs
    result = cli("compare", r["base"], r["same"], r["slow"], r["errors"],
                 "--fail-if", "ttft.p99 > +10%", "--fail-if", "goodput.requests_s < -5%")
    assert result.returncode == GATE_FAILED_EXIT
    assert "gate 'ttft.p99 > +10%' on slow.json: FAILED" in result.stdout
    assert "gate 'goodput.requests_s < -5%' on errors.json: FAILED" in result.stdout
    assert "gate 'ttft.p99 > +10%' on same.json: passed" in result.stdout


@pytest.mark.parametrize("gate, says", [
    ("ttft.p99 > 10%", "needs a sign"),
    ("ttft.p99 +10%", "expected PATH OP CHANGE"),
    ("ttft.p99 == +10%", "expected PATH OP CHANGE"),
    ("latency.p99 > +10%", "unknown figure"),
    ("ttft > +10%", "which statistic"),
    ("goodput.requests_s < -5ms", "only applies to latency"),
    ("ttft.p99 > +10 parsecs", "expected PATH OP CHANGE"),
    ("ttft.p42 > +10%", "no number at ttft.p42"),
    ("", "expected PATH OP CHANGE"),
])
def test_bad_expression_is_one_line_usage_error(constructed_runs, gate, says):
    result = main("compare", constructed_runs["base"], constructed_runs["slow"], "--fail-if", gate)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokenpace: error:") and says in lines[0], result.stderr


def test_compare_needs_two_runs_and_existing_files(constructed_runs, tmp_path):
    assert main("compare", constructed_runs["base"]).returncode == 2
    assert main("compare", constructed_runs["base"], tmp_path / "missing.json").returncode == 2


def test_noise_judgement_from_records(constructed_runs):
    runs = [load_run_data(constructed_runs[k]) for k in ("base", "same", "slow")]
    rows = {row.path: row for row in compare_runs(runs).rows}
    same, slow = 1, 2
    # Same distribution, other seed: the medians and the tails agree within noise.
    assert rows["ttft.p50"].cells[same].noise.verdict == "within noise"
    assert rows["ttft.p99"].cells[same].noise.verdict == "within noise"
    # TTFT 30% slower: beyond noise, with an interval around the true +30 ms shift at p50.
    cell = rows["ttft.p50"].cells[slow]
    assert cell.noise.beyond and 25 < cell.noise.ci95[0] < cell.noise.ci95[1] < 35
    assert rows["ttft.p99"].cells[slow].noise.beyond
    # Decode speed is identical: TPOT (exactly 10 ms per token) is within noise.
    assert not rows["tpot.p50"].cells[slow].noise.beyond
    # p90 is shown but not judged (fewer judgements, fewer false alarms).
    assert rows["ttft.p90"].cells[slow].noise is None
    assert rows["ttft.p50"].cells[slow].relative == pytest.approx(0.30, abs=0.02)


def test_p99_needs_enough_samples(tmp_path):
    from .runs import make_records, write_run
    small = [load_run_data(write_run(tmp_path, f"s{i}", make_records(n=200, seed=i))) for i in range(2)]
    rows = {row.path: row for row in compare_runs(small).rows}
    assert rows["ttft.p99"].cells[1].noise.verdict == "too few samples"  # 368 needed for p99
    assert rows["ttft.p50"].cells[1].noise.verdict != "too few samples"


@pytest.mark.slow
def test_simulation_compares_with_a_measurement(constructed_runs, tmp_path):
    sim = tmp_path / "sim.json"
    made = cli("sim", "--requests", "200", "--concurrency", "8", "--input-tokens", "64",
               "--output-tokens", "20", "--slo", "chat", "--gpu-hour-usd", "3", "--out", sim, "--quiet")
    assert made.returncode == 0, made.stderr
    result = cli("compare", constructed_runs["base"], sim, "--fail-if", "goodput.fraction < -0.5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "simulation" in result.stdout and "TTFT p50" in result.stdout
    # The same gate machinery applies: the simulated TTFT is far from the constructed 100 ms.
    assert cli("compare", constructed_runs["base"], sim, "--fail-if", "ttft.p50 < -50%").returncode == GATE_FAILED_EXIT


def test_a_run_whose_every_request_failed_fails_a_latency_gate(constructed_runs, tmp_path):
    from .runs import make_records, write_run

    failed = write_run(tmp_path, "all_failed", make_records(n=40, errors=40))
    result = main("compare", constructed_runs["base"], failed, "--fail-if", "ttft.p99 > +10%")
    assert result.returncode == GATE_FAILED_EXIT, result.stderr
    assert "gate 'ttft.p99 > +10%' on all_failed.json: FAILED" in result.stdout
    assert "every request of all_failed.json failed" in " ".join(result.stdout.split())


@pytest.mark.parametrize("kind, says", [
    ("sweep", "is a sweep, not a run: `tokenpace report"),
    ("calibration", "is a calibration file, not a run"),
])
def test_a_file_that_is_not_a_run_is_refused_on_either_side(constructed_runs, tmp_path, kind, says):
    other = tmp_path / f"{kind}.json"
    other.write_text(json.dumps({"schema_version": 1, "kind": kind}))
    for pair in ((other, constructed_runs["base"]), (constructed_runs["base"], other)):
        result = main("compare", *pair)
        assert result.returncode == 2, result.stdout
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], result.stderr
