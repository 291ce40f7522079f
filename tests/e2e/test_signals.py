"""Signals on a real `tokenpace bench` process: nothing hangs, nothing completed is lost."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tokenpace import read_records
from tokenpace.errors import ExitCode

from .helpers import run_cli


def _start_long_run(out, *extra):
    return subprocess.Popen([sys.executable, "-m", "tokenpace", "bench", "--duration", "60",
                             "--concurrency", "4", "--output-tokens", "400", "--grace", "1",
                             "--out", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_records(records_path, n, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if records_path.exists() and len(records_path.read_bytes().splitlines()) >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} records in {records_path} after {timeout_s} s")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_sending_saves_partial_results_and_exits_130(tmp_path, sig):
    out = tmp_path / "run.json"
    proc = _start_long_run(out, "--output-tokens", "60")  # short requests complete; long ones below
    _wait_for_records(tmp_path / "run.records.jsonl", 4)
    sent_at = time.monotonic()
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=30)
    elapsed = time.monotonic() - sent_at
    assert proc.returncode == ExitCode.INTERRUPTED, stderr
    assert elapsed < 1.0 + 1.0 + 1.5, elapsed  # grace + 1 s, plus process teardown on a busy machine
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True
    c = doc["summary"]["counts"]
    assert c["ok"] >= 4
    assert c["sent"] == c["ok"] + c["error"] + c["timeout"] + c["cancelled"]
    assert len(read_records(out.parent / doc["records_path"])) == c["sent"]
    assert "INTERRUPTED" in stdout


def test_in_flight_requests_are_cancelled_after_grace_with_partial_tokens(tmp_path):
    out = tmp_path / "run.json"
    proc = _start_long_run(out)  # 400-token streams take ~4 s: in flight when the signal comes
    _wait_for_records(tmp_path / "run.records.jsonl", 0)  # the file appears when sending starts
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    doc = json.loads(out.read_text())
    records = read_records(out.parent / doc["records_path"])
    cancelled = [r for r in records if r.status == "cancelled"]
    assert len(cancelled) == doc["summary"]["counts"]["cancelled"] >= 1
    assert all(r.chunk_ns and r.output_tokens for r in cancelled)  # partial tokens kept


def test_after_sigkill_the_jsonl_holds_every_completed_request_and_report_reads_it(tmp_path):
    out = tmp_path / "run.json"
    records_path = tmp_path / "run.records.jsonl"
    proc = _start_long_run(out, "--output-tokens", "20")
    _wait_for_records(records_path, 10)
    proc.kill()
    proc.communicate(timeout=30)
    assert not out.exists()  # no chance to write the summary...
    records = read_records(records_path)  # ...but every completed request is on disk
    assert len(records) >= 10
    assert len({r.request_id for r in records}) == len(records)
    report = run_cli("report", str(records_path))
    assert report.returncode == 0, report.stderr
    assert f"sent {len(records)} = ok" in report.stdout


@pytest.mark.parametrize("load", [("--rate", "20"), ("--concurrency", "4")], ids=["open", "closed"])
def test_signal_after_the_last_request_is_sent_cuts_the_wait_to_the_grace(tmp_path, load):
    # Two 20,000-token streams (~200 s each) and a 600 s --timeout: once both are sent, a
    # count-bounded run would wait for them up to --timeout. A signal must shorten that wait to the
    # grace (10 s by default) and cancel them, wherever the runner is.
    out = tmp_path / "run.json"
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", "bench", *load, "--requests", "2",
                             "--builtin-timing", "parametric", "--output-tokens", "20000",
                             "--timeout", "600", "--no-progress", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_records(tmp_path / "run.records.jsonl", 0)
    time.sleep(2.0)  # both requests sent (20 per second) and streaming
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=120)  # far below the 600 s timeout
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the run waited for --timeout after the signal") from None
    assert proc.returncode == ExitCode.INTERRUPTED, stderr
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True
    records = read_records(out.parent / doc["records_path"])
    assert [r.status for r in records] == ["cancelled", "cancelled"]
    assert all(r.output_tokens for r in records)  # partial tokens kept
