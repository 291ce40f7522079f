"""Measured sweeps on loopback: the built-in simulated server, a fault-injecting server, signals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e.helpers import run_cli
from tokenpace.config import BenchConfig
from tokenpace.servers import BuiltinServerConfig, start_server_process
from tokenpace.sweep import SweepConfig, run_sweep

pytestmark = pytest.mark.slow


def test_cli_sweep_against_the_builtin_server(tmp_path):
    out = tmp_path / "sweep.json"
    proc = run_cli("sweep", "--concurrency", "1,4,16", "--requests-per-step", "32", "--input-tokens", "64",
                   "--output-tokens", "16", "--slo", "chat", "--gpu-hour-usd", "2", "--out", str(out),
                   "--quiet", timeout_s=180)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert [s["status"] for s in doc["steps"]] == ["ok"] * 3
    assert [s["load"]["value"] for s in doc["steps"]] == [1, 4, 16]
    for s in doc["steps"]:
        assert s["target"]["builtin"] is True
        assert s["summary"]["counts"]["sent"] == s["summary"]["counts"]["ok"] == 32
        assert s["load_generator"]["target_concurrency"] == s["load"]["value"]
        # Every step is a complete run of its own that `tokenpace report` reads.
        report = run_cli("report", str(out.parent / s["result_path"]))
        assert report.returncode == 0 and "TTFT" in report.stdout
    # Throughput grows with concurrency on a batching engine.
    thr = [s["summary"]["throughput"]["output_tokens_s"] for s in doc["steps"]]
    assert thr[0] < thr[1] < thr[2]
    assert "Recommended operating points" in proc.stdout and "chat (TTFT" in proc.stdout
    # The header names the target and the workload, and dates the sweep.
    assert "the built-in server (sim timing)" in proc.stdout
    assert "input 64 tokens, output 16 tokens" in proc.stdout and "started 20" in proc.stdout
    assert doc["analysis"][""]["recommendations"][0]["usd_per_1m_output_tokens"] is not None
    # The console report of the sweep file renders the same analysis.
    again = run_cli("report", str(out))
    assert again.returncode == 0 and "Recommended operating points" in again.stdout


@pytest.mark.parametrize("faulted, why", [
    ("6", "preflight"),            # step 1's preflight gets a 500: the step fails before its load
    ("7;8;9;10", "every request"),  # step 1's preflight passes, then every one of its requests fails
])
def test_a_failed_step_is_marked_and_the_sweep_goes_on(tmp_path, faulted, why):
    # The server numbers requests: step 0 is its preflight (1) and 4 requests (2-5); step 1 starts at 6.
    server = start_server_process(BuiltinServerConfig(faults=f"http-500=at:{faulted}"))
    try:
        config = SweepConfig(base=BenchConfig(url=server.url, requests=4, output_tokens="8", progress=False),
                             axis="concurrency", loads=[1, 2, 4], out=str(tmp_path / "f.json"))
        result = run_sweep(config)
    finally:
        server.stop()
    statuses = [s["status"] for s in result.steps]
    assert statuses == ["ok", "failed", "ok"], [s["reason"] for s in result.steps]
    reason = result.steps[1]["reason"]
    assert "500" in reason if why == "preflight" else "every request failed (http_500 4)" in reason
    assert result.analysis[""]["steps_analysed"] == [0, 2]
    doc = json.loads(result.path.read_text())
    assert doc["steps"][1]["status"] == "failed" and doc["steps"][2]["summary"]["counts"]["ok"] == 4


def test_sigint_keeps_completed_steps_and_exits_130(tmp_path):
    out = tmp_path / "sweep.json"
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", "sweep", "--concurrency", "1,2,4,8",
                             "--duration-per-step", "20", "--output-tokens", "64", "--grace", "1",
                             "--quiet", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # the first step (20 s) has ended and been saved
            if out.exists() and json.loads(out.read_text())["steps"]:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("no step saved")
        time.sleep(2)  # well inside the second step
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True
    assert [s["status"] for s in doc["steps"]] == ["ok", "interrupted"]
    # The interrupted step kept its partial records, as an interrupted bench does.
    partial = doc["steps"][1]
    assert partial["summary"]["counts"]["sent"] >= 1


def test_scrape_metrics_gives_every_step_the_engines_own_view(tmp_path):
    out = tmp_path / "m.json"
    proc = run_cli("sweep", "--concurrency", "1,32", "--requests-per-step", "48", "--output-tokens", "32",
                   "--scrape-metrics", "--scrape-interval", "0.2", "--out", str(out), "--quiet",
                   timeout_s=180)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    ems = [s["engine_metrics"] for s in doc["steps"]]
    assert [em["engine"] for em in ems] == ["vllm", "vllm"]
    # The engine saw more running at once in the 32-concurrency step than in the 1-concurrency one.
    assert ems[1]["peaks"]["running"]["max"] > ems[0]["peaks"]["running"]["max"]
    assert "engine: " in proc.stdout  # each step's diagnosis under its row
    assert run_cli("sweep", "--sim", "--scrape-metrics").returncode == 2


def test_stream_on_off_puts_perceived_latency_side_by_side(tmp_path):
    # Against the built-in server: 64-token replies at concurrency 1 and 4, streamed and not.
    from tokenpace.reports.html.sweep_document import write_sweep_html
    from tokenpace.sweep.spec import parse_vary

    config = SweepConfig(base=BenchConfig(requests=12, output_tokens="64", slo="chat", progress=False),
                         axis="concurrency", loads=[1, 4], vary=parse_vary(["stream=on,off"]),
                         out=str(tmp_path / "s.json"))
    result = run_sweep(config)
    assert [s["status"] for s in result.steps] == ["ok"] * 4
    for s in result.steps:  # each step asked as its combination says, and was measured so
        step = json.loads((result.path.parent / s["result_path"]).read_text())
        assert step["config"]["stream"] is (s["vary"]["stream"] == "on")
        assert (s["summary"]["latency_ms"]["tpot"] is None) is (s["vary"]["stream"] == "off")
    [pair] = result.perceived
    assert (pair["streamed"], pair["not_streamed"]) == ("stream=on", "stream=off")
    assert [r["load"] for r in pair["rows"]] == [1, 4]
    for r in pair["rows"]:
        # Streamed, the first words come long before the answer is complete; not streamed, nothing
        # shows until then: the wait before anything shows is several times longer.
        assert r["streamed_first_words_ms"]["p50"] * 3 < r["streamed_complete_ms"]["p50"]
        assert r["not_streamed_complete_ms"]["p50"] > 3 * r["streamed_first_words_ms"]["p50"]
        assert r["wait_ratio_p50"] > 3
    assert "streamed, the first words appear after" in pair["sentences"][0]
    assert "not streamed, nothing appears for" in pair["sentences"][0]
    html = write_sweep_html(json.loads(result.path.read_text()), tmp_path / "s.html").read_text()
    assert '<section id="perceived">' in html and "streamed: first words" in html


def test_api_and_output_length_what_ifs_against_the_builtin_server(tmp_path):
    from tokenpace.sweep.spec import parse_vary

    config = SweepConfig(base=BenchConfig(requests=6, progress=False), axis="concurrency", loads=[2],
                         vary=parse_vary(["api=chat,completions", "output-tokens=8,40"]),
                         out=str(tmp_path / "a.json"))
    result = run_sweep(config)
    assert [s["group"] for s in result.steps] == [
        "api=chat, output-tokens=8", "api=chat, output-tokens=40",
        "api=completions, output-tokens=8", "api=completions, output-tokens=40"]
    for s in result.steps:
        assert s["status"] == "ok"
        step = json.loads((result.path.parent / s["result_path"]).read_text())
        assert step["config"]["api"] == s["vary"]["api"]
        # The server's own counts (usage): every reply was as long as the combination asked.
        tokens = s["summary"]["tokens"]
        assert tokens["output_sources"] == {"usage": 6}
        assert tokens["mismatch"]["server_total"] == 6 * int(s["vary"]["output-tokens"])
    assert len(result.comparison) == 3
