"""The live view on real runs against the built-in server: what a person sees on a terminal (rich's
recording console), what a pipe and a script get, and what a Ctrl-C says."""

from __future__ import annotations

import asyncio
import io
import json
import re
import signal
import subprocess
import sys
import time

import pytest
from rich.console import Console

from tokenpace.config import BenchConfig
from tokenpace.errors import ExitCode
from tokenpace.runner.bench import run_bench_async
from tokenpace.servers import BuiltinServerConfig, start_server_process

pytestmark = pytest.mark.slow


@pytest.fixture
def faulty_server():
    """Every 4th request answers HTTP 500 at once."""
    server = start_server_process(BuiltinServerConfig(faults="http-500=every:4"))
    try:
        yield server
    finally:
        server.stop()


def test_the_terminal_view_shows_counts_latencies_errors_and_the_engine(tmp_path, faulty_server):
    console = Console(file=io.StringIO(), force_terminal=True, record=True, width=200)
    config = BenchConfig(url=faulty_server.url, requests=24, concurrency=4, output_tokens="40",
                         slo="ttft=10s", scrape_metrics=True, progress_mode="live",
                         out=str(tmp_path / "run.json"))
    result = asyncio.run(run_bench_async(config, progress_console=console))
    shown = console.export_text()
    counts = result.summary["counts"]
    assert counts["error"] == 6 and counts["ok"] == 18
    assert "tokenpace · concurrency 4" in shown
    assert "in flight 4" in shown  # requests streaming before any ended: no more "0/24" only
    assert "done 24/24 · sent 24/24 · in flight 0" in shown  # the last frame
    last = shown[shown.rindex("tokenpace · concurrency 4"):].splitlines()
    assert last[2].split() == ["errors", "http_500", "6"]
    assert last[3].split() == ["last", "10", "s", "overall"]
    assert [line.split()[0] for line in last[4:]] == ["rate", "out", "TTFT", "TPOT", "goodput", "lag", "client",
                                                       "engine"]
    assert last[8].split()[-3:] == ["75%", "SLO", "ttft=10s"]  # the 500s are not good: 18 of 24
    assert "waiting" in last[11] and "running" in last[11] and "KV" in last[11]  # --scrape-metrics
    assert max(len(line) for line in last) <= 80  # fits a narrow terminal


def _bench(tmp_path, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenpace", "bench", "--requests", "12", "--concurrency", "4",
                           "--output-tokens", "30", "--out", str(tmp_path / "run.json"), *args],
                          capture_output=True, text=True, timeout=timeout_s)


def test_piped_runs_print_plain_lines_json_objects_or_nothing(tmp_path):
    plain = _bench(tmp_path)  # stderr is a pipe: plain lines
    assert plain.returncode == ExitCode.OK, plain.stderr
    assert "\x1b" not in plain.stderr and "\x1b" not in plain.stdout
    last = plain.stderr.strip().splitlines()[-1]
    assert "done 12/12 · sent 12/12 · in flight 0" in last and "TTFT p50/p99" in last

    no_view = _bench(tmp_path, "--no-progress")  # no live view: the plain lines, as when piped
    assert "\x1b" not in no_view.stderr
    assert "done 12/12 · sent 12/12 · in flight 0" in no_view.stderr.strip().splitlines()[-1]

    js = _bench(tmp_path, "--progress", "json")
    objects = [json.loads(line) for line in js.stderr.splitlines() if line.startswith("{")]
    assert objects and all(o["type"] == "progress" for o in objects)
    assert (objects[-1]["done"], objects[-1]["sent"], objects[-1]["in_flight"]) == (12, 12, 0)
    assert objects[-1]["ttft_ms"]["p50"] > 0 and objects[-1]["errors"] == {}

    quiet = _bench(tmp_path, "--quiet")
    assert quiet.returncode == ExitCode.OK and quiet.stderr == ""
    assert "Requests: sent 12" in quiet.stdout  # the summary still prints


def _wait_for(proc: subprocess.Popen, text: str, timeout_s: float = 30.0) -> str:
    """stderr lines up to and including the first that holds ``text``."""
    seen = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return "".join(seen)
    proc.kill()
    raise AssertionError(f"no {text!r} on stderr; saw:\n{''.join(seen)}")


def test_ctrl_c_says_what_happens_counts_down_and_a_second_one_cancels(tmp_path):
    # 4 streams of 2,000 tokens (~16 s each at the built-in engine's pace): in flight at the signal.
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", "bench", "--duration", "60", "--concurrency", "4",
                             "--output-tokens", "2000", "--grace", "5", "--progress", "plain",
                             "--out", str(tmp_path / "run.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(proc, "in flight 4")  # the first progress line: all 4 are streaming
        proc.send_signal(signal.SIGINT)
        said = _wait_for(proc, "sending stopped")
        assert "tokenpace: Ctrl-C: sending stopped; 4 requests in flight get 5 s to finish; " \
               "Ctrl-C again cancels them now" in said
        countdown = _wait_for(proc, "s more (Ctrl-C again cancels them now)")
        assert "in flight 4" in countdown.splitlines()[-1]
        proc.send_signal(signal.SIGINT)
        said = _wait_for(proc, "cancelling")
        assert "tokenpace: cancelling 4 requests in flight now (their partial tokens are kept)" in said
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == ExitCode.INTERRUPTED, rest
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["summary"]["counts"]["cancelled"] == 4


def test_a_sweep_prints_its_rows_on_stdout_and_each_steps_progress_titled_on_stderr(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tokenpace", "sweep", "--concurrency", "1,2",
                           "--requests-per-step", "6", "--output-tokens", "20", "--progress", "json",
                           "--out", str(tmp_path / "sweep.json")], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    objects = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    steps = [o["step"] for o in objects]
    assert "sweep step 0 · step · concurrency 1" in steps and "sweep step 1 · step · concurrency 2" in steps
    assert steps.index("sweep step 1 · step · concurrency 2") > steps.index("sweep step 0 · step · concurrency 1")
    last_of_step0 = [o for o in objects if o["step"].startswith("sweep step 0")][-1]
    assert (last_of_step0["done"], last_of_step0["total"]) == (6, 6)
    rows = [line for line in done.stdout.splitlines() if re.match(r"\s*[01]\s{2,}\S", line)]  # the step table
    assert len(rows) == 2 and "\x1b" not in done.stdout
