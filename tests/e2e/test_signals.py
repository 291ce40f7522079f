"""Signals on a real `tokenpace bench` process: nothing hangs, nothing completed is lost."""

from __future__ import annotations

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import threading
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
    # The signal ended the run, not its 60 s --duration (how fast it exits is the machine's speed;
    # a bound of grace + 2.5 s was timing on a busy machine).
    assert elapsed < 0.5 * 60, elapsed
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


@pytest.mark.parametrize("load", [("--rate", "20"), ("--concurrency", "2")], ids=["open", "closed"])
def test_signal_after_the_last_request_is_sent_cuts_the_wait_to_the_grace(tmp_path, load):
    # Two 20,000-token streams (~200 s each) and a 600 s --timeout: once both are sent, a
    # count-bounded run would wait for them up to --timeout. A signal must shorten that wait to the
    # grace (10 s by default) and cancel them, wherever the runner is.
    out = tmp_path / "run.json"
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", "bench", *load, "--requests", "2",
                             "--builtin-timing", "parametric", "--output-tokens", "20000",
                             "--timeout", "600", "--quiet", "--out", str(out)],
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


@pytest.fixture
def silent_server():
    """A TCP listener on loopback that accepts and never answers: preflight waits on it."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted
    for conn, _ in accepted:
        conn.close()
    listener.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_preflight_exits_130_with_a_message(tmp_path, silent_server, sig):
    url, accepted = silent_server
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", "bench", "--url", url,
                             "--model", "m", "--out", str(tmp_path / "run.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not accepted and time.monotonic() < deadline:  # preflight has connected and waits
        time.sleep(0.05)
    assert accepted, "preflight never connected"
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == ExitCode.INTERRUPTED, stderr
    assert stderr.strip().splitlines() == [
        "tokenpace: interrupted before the first request was sent; no result was written"]


def _children(pid):
    found = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):  # any thread may have started one
        try:
            with open(path) as fh:
                found += [int(p) for p in fh.read().split()]
        except FileNotFoundError:  # the thread ended
            pass
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_while_the_builtin_server_starts_exits_130_and_stops_it(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", "bench", "--quiet",
                             "--out", str(tmp_path / "run.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (children := _children(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert children, "the built-in server was never started"
    proc.send_signal(signal.SIGTERM)  # the server is starting (or the run just began)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    for child in children:  # the server is stopped, not left behind
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{child}") or "zombie" in _state(child)


def _state(pid):
    try:
        with open(f"/proc/{pid}/status") as fh:
            return fh.read().lower()
    except FileNotFoundError:
        return "zombie"


_SIGNAL_INSIDE = """
import os, signal, sys
import tokenpace.runner.bench as bench
from tokenpace.cli.main import main

sig, where = getattr(signal, sys.argv[1]), sys.argv[2]
module, name = (bench, "summarize") if where == "summary" else (bench, "write_result")
original = getattr(module, name)

def with_signal(*args, **kwargs):
    os.kill(os.getpid(), sig)  # delivered now, in the middle of the work
    return original(*args, **kwargs)

setattr(module, name, with_signal)
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("where", ["summary", "write"])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_signal_while_the_result_is_computed_or_written_keeps_it_whole(tmp_path, sig, where):
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-c", _SIGNAL_INSIDE, sig, where, "bench",
                           "--requests", "6", "--builtin-timing", "parametric", "--output-tokens", "4",
                           "--quiet", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == ExitCode.INTERRUPTED, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"tokenpace: interrupted after the run ended; the result was saved whole: {out}"]
    doc = json.loads(out.read_text())
    assert doc["summary"]["counts"]["ok"] == 6
    assert len(read_records(out.parent / doc["records_path"])) == 6
