"""`tokenpace bench --workers N` against the built-in server on loopback, checked against its send
log: the same seeded workload sends the same request set from 1 or 2 processes, and a worker
killed mid-run leaves every request accounted for."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tokenpace import read_records
from tokenpace.errors import ExitCode
from tokenpace.servers import BuiltinServerConfig, read_send_log, start_server_process

pytestmark = pytest.mark.slow


def _bench(url, out, *args, timeout_s=180):
    env = dict(os.environ, COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "tokenpace", "bench", "--url", url, "--quiet",
                           "--out", str(out), *args], capture_output=True, text=True,
                          timeout=timeout_s, env=env)


def _run(tmp_path, name, workers, load_args):
    """One run against a fresh logged server; returns (result, records, server events)."""
    log = tmp_path / f"{name}.sends.jsonl"
    server = start_server_process(BuiltinServerConfig(send_log_path=str(log), seed=3))
    try:
        out = tmp_path / f"{name}.json"
        proc = _bench(server.url, out, "--seed", "11", "--input-tokens", "uniform:min=8,max=64",
                      "--output-tokens", "uniform:min=4,max=24", "--workers", str(workers), *load_args)
        # INVALID_RUN: on a busy machine the schedule lag can exceed its limit; the request set
        # must be the same all the same
        assert proc.returncode in (ExitCode.OK, ExitCode.INVALID_RUN), proc.stderr
    finally:
        server.stop()
    return json.loads(out.read_text()), read_records(tmp_path / f"{name}.records.jsonl"), read_send_log(log)


def _suffix(request_id):
    return request_id.rsplit("-", 1)[1]  # tp-<run id>-<index>: the run id differs between runs


def _view(records, events):
    per_index = {r.index: (r.requested_input_tokens, r.requested_output_tokens, r.prompt_tokens,
                           r.output_tokens, r.status) for r in records}
    # not the preflight request: its id ends in 12 hex digits, all of them decimal one time in 280
    received = sorted(_suffix(e["request_id"]) for e in events if e["kind"] == "received"
                      and not e["request_id"].startswith("tp-preflight-"))
    written = sum(e["tokens"] for e in events if e["kind"] == "token")
    return per_index, received, written


@pytest.mark.parametrize("load_args", [
    ("--concurrency", "5", "--requests", "30"),
    ("--rate", "60", "--requests", "40", "--arrival", "poisson"),
], ids=["closed", "open"])
def test_one_and_two_workers_send_the_same_request_set(tmp_path, load_args):
    one, one_records, one_events = _run(tmp_path, "one", 1, load_args)
    two, two_records, two_events = _run(tmp_path, "two", 2, load_args)

    assert "workers" not in one["load_generator"]
    assert two["load_generator"]["workers"]["count"] == 2
    assert {row["pid"] for row in two["load_generator"]["workers"]["per_worker"]} != {os.getpid()}
    one_view, two_view = _view(one_records, one_events), _view(two_records, two_events)
    requests = int(load_args[load_args.index("--requests") + 1])
    assert sorted(one_view[0]) == list(range(requests))
    assert one_view[0] == two_view[0]  # same indices, lengths asked, prompt tokens the server counted
    assert one_view[1] == two_view[1] and len(one_view[1]) == requests  # what the server received
    assert one_view[2] == two_view[2]  # tokens the server wrote
    for key in ("server_total", "client_total"):
        assert (one["summary"]["tokens"]["mismatch"][key] == two["summary"]["tokens"]["mismatch"][key])
    assert one["summary"]["counts"]["ok"] == two["summary"]["counts"]["ok"] == requests
    if "--rate" in load_args:  # the same send times: offsets from request 0's, to the microsecond
        def offsets(records):
            base = next(r.scheduled_ns for r in records if r.index == 0)
            return {r.index: round((r.scheduled_ns - base) / 1e3) for r in records}
        assert offsets(one_records) == offsets(two_records)


def _worker_pids(parent_pid):
    return [p.pid for p in psutil.Process(parent_pid).children()
            if "spawn_main" in " ".join(p.cmdline())]


def _start(url, out, *args):
    return subprocess.Popen([sys.executable, "-m", "tokenpace", "bench", "--url", url, "--quiet",
                             "--out", str(out), "--input-tokens", "16", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, COLUMNS="120"))


def _wait_for(predicate, what, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"no {what} after {timeout_s} s")


def _accounted(tmp_path, log):
    """Every request the server received has exactly one final record; counts add up."""
    records = read_records(tmp_path / "run.records.jsonl")
    final = [r for r in records if not r.retried]
    assert len({r.index for r in final}) == len(final)
    received = {e["request_id"] for e in read_send_log(log)
                if e["kind"] == "received" and not e["request_id"].startswith("tp-preflight-")}
    assert received <= {r.request_id for r in records}
    counts = json.loads((tmp_path / "run.json").read_text())["summary"]["counts"]
    assert counts["sent"] == counts["ok"] + counts["error"] + counts["timeout"] + counts["cancelled"]
    assert counts["sent"] == len(final)
    return records, counts


def test_a_worker_killed_mid_run_leaves_every_request_accounted(tmp_path):
    log = tmp_path / "sends.jsonl"
    server = start_server_process(BuiltinServerConfig(send_log_path=str(log)))
    try:
        proc = _start(server.url, tmp_path / "run.json", "--workers", "2", "--concurrency", "4",
                      "--requests", "16", "--output-tokens", "150")
        try:
            pids = _wait_for(lambda: len(_worker_pids(proc.pid)) == 2 and _worker_pids(proc.pid),
                             "two worker processes")
            _wait_for(lambda: sum(e["kind"] == "received" for e in _events(log)) >= 4,
                      "requests at the server", timeout_s=60)
            os.kill(max(pids), signal.SIGKILL)
            _, stderr = proc.communicate(timeout=120)
        finally:
            proc.kill()
    finally:
        server.stop()
    assert proc.returncode == ExitCode.INVALID_RUN, stderr
    records, counts = _accounted(tmp_path, log)
    assert counts["errors_by_kind"].get("worker_died", 0) >= 1
    died = [r for r in records if r.error_kind == "worker_died"]
    assert all(r.sent_ns is not None and r.done_ns is not None for r in died)
    load = json.loads((tmp_path / "run.json").read_text())["load_generator"]
    assert load["valid"] is False
    assert any("died" in reason for reason in load["invalid_reasons"])
    assert [d["exit_code"] for d in load["workers"]["deaths"]] == [-signal.SIGKILL]


def _events(log):
    try:
        return read_send_log(log)  # flushed every 0.2 s
    except (FileNotFoundError, ValueError):
        return []


def test_ctrl_c_stops_every_worker_and_keeps_the_records(tmp_path):
    log = tmp_path / "sends.jsonl"
    server = start_server_process(BuiltinServerConfig(send_log_path=str(log)))
    try:
        proc = _start(server.url, tmp_path / "run.json", "--workers", "2", "--concurrency", "4",
                      "--duration", "60", "--output-tokens", "100", "--grace", "1")
        try:
            pids = _wait_for(lambda: len(_worker_pids(proc.pid)) == 2 and _worker_pids(proc.pid),
                             "two worker processes")
            _wait_for(lambda: (tmp_path / "run.records.jsonl").exists()
                      and (tmp_path / "run.records.jsonl").read_bytes().count(b"\n") >= 4, "records")
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
    finally:
        server.stop()
    assert proc.returncode == ExitCode.INTERRUPTED, stderr
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in pids)
    _accounted(tmp_path, log)
