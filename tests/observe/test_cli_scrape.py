"""`tokenpace bench --scrape-metrics` from the real command line: the section in the result file,
the console lines (bench and report print the same), one warning for a missing endpoint, and
one-line usage errors with exit code 2."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from tokenpace.errors import ExitCode


def run_cli(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "tokenpace", *args], capture_output=True, text=True,
                          timeout=timeout_s, env=env)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_bench_scrapes_the_builtin_server_and_report_shows_the_same(tmp_path):
    out = tmp_path / "run.json"
    proc = run_cli("bench", "--scrape-metrics", "--scrape-interval", "0.25", "--requests", "24",
                   "--concurrency", "4", "--output-tokens", "16", "--builtin-timing", "parametric",
                   "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr
    doc = json.loads(out.read_text())
    em = doc["engine_metrics"]
    assert em["engine"] == "vllm" and em["interval_s"] == 0.25 and em["url"].endswith("/metrics")
    assert doc["config"]["scrape_metrics"] is True and doc["config"]["scrape_interval_s"] == 0.25
    assert em["histograms_ms"]["ttft"]["count"] == 24 and em["vs_client"]["per_request"]["requests"] == 24
    lines = [line for line in proc.stdout.splitlines() if "Engine metrics" in line or line.startswith("  ")]
    assert any(line.startswith("Engine metrics: vLLM at http://127.0.0.1:") for line in lines)
    assert any("TTFT engine vs client (24 / 24 requests)" in line for line in lines)
    assert any("diagnosis: no queueing" in line for line in lines)
    report = run_cli("report", str(out))
    assert report.returncode == 0, report.stderr
    assert [line for line in report.stdout.splitlines() if line in lines] == lines


@pytest.mark.slow
def test_a_missing_metrics_endpoint_is_one_warning_and_the_run_succeeds(tmp_path):
    out = tmp_path / "run.json"
    url = f"http://127.0.0.1:{_closed_port()}/metrics"
    proc = run_cli("bench", "--scrape-metrics", url, "--requests", "4", "--output-tokens", "4",
                   "--builtin-timing", "parametric", "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and f"cannot connect to {url}" in warnings[0]
    em = json.loads(out.read_text())["engine_metrics"]
    assert em["scrapes"]["ok"] == 0 and em["scrapes"]["failed_by_kind"]["connect"] >= 2
    assert em["engine"] is None and em["preflight_error"]
    assert "Engine metrics: no known engine" in proc.stdout and "failed (connect" in proc.stdout


@pytest.mark.parametrize("args, needle", [
    (["--scrape-metrics", "--scrape-interval", "0.01"], "--scrape-interval must be"),
    (["--scrape-metrics", "--scrape-interval", "nan"], "--scrape-interval must be"),
    (["--scrape-interval", "2"], "--scrape-interval needs --scrape-metrics"),
    (["--scrape-metrics", "ftp://x/metrics"], "--scrape-metrics URL must start with http"),
])
def test_bad_scrape_flags_are_one_line_and_exit_2(args, needle):
    proc = run_cli("bench", *args)
    assert proc.returncode == ExitCode.USAGE
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
