"""`tokenpace bench` against a real llama-server: every request accounted for, token counts from the
server's usage, output lengths honoured, for chat and completions, streaming and not."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tokenpace.config import BenchConfig
from tokenpace.metrics import summarize
from tokenpace.runner.bench import run_bench

pytestmark = pytest.mark.engine

REQUESTS, OUTPUT_TOKENS = 4, 8


def _check_run(result, *, stream: bool) -> None:
    counts = result.summary["counts"]
    assert counts["sent"] == REQUESTS
    failed = [(r.index, r.error_kind, r.error_message) for r in result.records if r.status != "ok"]
    assert counts["ok"] == REQUESTS, failed  # a healthy local engine fails nothing
    assert counts["ok"] + counts["error"] + counts["timeout"] + counts["cancelled"] == counts["sent"]
    lines = [json.loads(line) for line in result.records_path.read_text().splitlines() if line]
    assert sorted(r["index"] for r in lines if not r["warmup"]) == list(range(REQUESTS))
    for record in result.records:
        # ignore_eos is honoured: every request produced exactly the tokens it asked for.
        assert record.output_tokens == OUTPUT_TOKENS, record
        assert record.finish_reason == "length"
        assert record.output_tokens_source == "usage"
        assert record.prompt_tokens_source == "usage" and record.prompt_tokens > 0
        assert record.first_token_ns is not None and record.sent_ns < record.first_token_ns
        if stream:  # llama-server streams one token per chunk
            assert sum(record.chunk_tokens) == OUTPUT_TOKENS
            assert len(record.chunk_ns) == OUTPUT_TOKENS
    tokens = result.summary["tokens"]
    assert tokens["output_sources"] == {"usage": REQUESTS}
    assert tokens["prompt_sources"] == {"usage": REQUESTS}
    # Rates count over the steady-state window (the cooldown's drain is outside it); over the
    # whole run every token the server reported is there.
    assert summarize(result.records)["throughput"]["output_tokens"] == REQUESTS * OUTPUT_TOKENS
    assert 0 < result.summary["throughput"]["output_tokens"] <= REQUESTS * OUTPUT_TOKENS
    ttft = result.summary["latency_ms"]["ttft"]
    assert ttft["count"] == REQUESTS and ttft["p50"] > 0
    if stream:
        assert result.summary["latency_ms"]["tpot"]["count"] == REQUESTS


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
def test_bench_library(llama_url, tmp_path, api, stream):
    result = run_bench(BenchConfig(
        url=llama_url, api=api, stream=stream, concurrency=2, requests=REQUESTS,
        input_tokens="32", output_tokens=str(OUTPUT_TOKENS), timeout_s=60, progress=False,
        out=str(tmp_path / "run.json")))
    assert result.target["model"] == "gemma-3-270m"  # the alias, found by listing models
    assert not result.interrupted
    _check_run(result, stream=stream)


def test_bench_cli(llama_url, tmp_path):
    """The real command line, as a user runs it, against the real engine."""
    out = tmp_path / "cli.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tokenpace", "bench", "--url", llama_url, "--api", "chat",
         "--concurrency", "2", "--requests", str(REQUESTS), "--input-tokens", "32",
         "--output-tokens", str(OUTPUT_TOKENS), "--timeout", "60", "--quiet",
         "--out", str(out)],
        capture_output=True, text=True, timeout=180, env=dict(os.environ, COLUMNS="120"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    records = [json.loads(line) for line in out.with_suffix(".records.jsonl").read_text().splitlines()]
    failed = [(r["index"], r["error_kind"], r["error_message"]) for r in records if r["status"] != "ok"]
    counts = doc["summary"]["counts"]
    assert counts["sent"] == counts["ok"] == REQUESTS, failed
    assert doc["summary"]["tokens"]["output_sources"] == {"usage": REQUESTS}
    assert 0 < doc["summary"]["throughput"]["output_tokens"] <= REQUESTS * OUTPUT_TOKENS  # in its window
    assert len(records) == REQUESTS
    assert all(r["status"] == "ok" and r["output_tokens"] == OUTPUT_TOKENS for r in records)
