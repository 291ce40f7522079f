"""`tokenpace proxy` as a real process: a load test through it, its records reported, its console
view drawn, bad flags refused, SIGINT a clean exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tokenpace.errors import ExitCode
from tokenpace.runner.sink import read_records

from .helpers import run_cli


def _start_proxy(upstream: str, *extra: str) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, COLUMNS="160")
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", "proxy", "--upstream", upstream,
                             "--listen", "127.0.0.1:0", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    line = proc.stdout.readline()
    assert line.startswith("tokenpace proxy on http://127.0.0.1:"), line + proc.stderr.read()
    return proc, line.split()[3]


def test_bench_through_the_proxy_then_report_and_compare(logged_server, tmp_path):
    server, _log = logged_server
    live = tmp_path / "live.jsonl"
    proc, url = _start_proxy(server.url, "--slo", "chat", "--records", str(live), "--watch")
    try:
        bench = run_cli("bench", "--url", url, "--requests", "12", "--concurrency", "4", "--output-tokens", "8",
                        "--out", str(tmp_path / "run.json"))
        assert bench.returncode == 0, bench.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "TTFT p50 / p99 ms" in out  # the --watch view was drawn
    records = read_records(live)  # bench's preflight request went through the proxy too
    assert len(records) == 13 and all(r.status == "ok" for r in records)
    assert sum(r.output_tokens == 8 for r in records) == 12
    report = run_cli("report", str(live), "--slo", "chat")
    assert report.returncode == 0, report.stderr
    assert "live traffic" in report.stdout and "Load generator" not in report.stdout
    assert "Requests: sent 13 = ok 13" in report.stdout
    compare = run_cli("compare", str(live), str(tmp_path / "run.json"))
    assert compare.returncode == 0, compare.stderr
    assert "base: " in compare.stdout and "live traffic" in compare.stdout


def test_bad_flags_exit_2():
    for args in (["--upstream", "127.0.0.1:8000"], ["--upstream", "http://x/v1", "--listen", "nope"],
                 ["--upstream", "http://x/v1", "--slo", "ttft=fast"],
                 ["--upstream", "http://x/v1", "--starts-per-turn", "-1"],
                 ["--upstream", "http://x/v1", "--accepts-per-turn", "-1"],
                 ["--upstream", "http://x/v1", "--gc", "sometimes"],
                 ["--upstream", "http://x/v1", "--gc-full-every", "0"],
                 ["--upstream", "http://x/v1", "--relay", "buffered"]):
        result = run_cli("proxy", *args)
        assert result.returncode == ExitCode.USAGE, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
