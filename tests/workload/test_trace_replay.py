"""Trace replay against the built-in server: the trace's arrival times (scaled) are when requests go
out, its lengths are what the server receives, and schedule lag is still measured."""

from __future__ import annotations

import asyncio
import json

import pytest

from tokenpace.client import OpenAIClient
from tokenpace.config import BenchConfig
from tokenpace.runner.loadgen import NS, LoadGenerator, LoadSettings
from tokenpace.servers import BuiltinServerConfig, running_server
from tokenpace.workload import plan_requests, workload_from_config

MODEL = BuiltinServerConfig().model
FAST = dict(prefill_base_s=0.002, prefill_per_token_s=0.0, decode_base_s=0.002, decode_per_running_s=0.0,
            jitter_frac=0.0)  # fmt: skip
TIMESTAMPS_MS = [10_000, 10_100, 10_250, 10_400, 10_700, 11_000, 11_060, 11_600]


@pytest.mark.slow
def test_trace_timing_and_lengths_on_the_builtin_server(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": 40 + 10 * i, "output_length": 3 + i,
                                         "hash_ids": [1, 2 + i]}) + "\n"
                             for i, t in enumerate(TIMESTAMPS_MS)))
    spec = workload_from_config(BenchConfig(trace=str(trace), time_scale=0.5, api="completions"))
    planned = list(plan_requests(spec))
    records = []

    async def run() -> LoadGenerator:
        async with running_server(BuiltinServerConfig(**FAST)) as url:
            async with OpenAIClient(url, MODEL, api="completions") as client:
                loadgen = LoadGenerator(client.send, iter(planned),  # a finite plan ends by itself
                                        LoadSettings(concurrency=None, open_loop=True, total_requests=None,
                                                     end_after_s=None, grace_s=5.0),
                                        api="completions", stream=True, on_record=records.append)
                await loadgen.run()
                return loadgen

    loadgen = asyncio.run(run())
    records.sort(key=lambda r: r.index)
    assert [r.status for r in records] == ["ok"] * len(TIMESTAMPS_MS), records[0].error_message
    expected_s = [(t - TIMESTAMPS_MS[0]) * 0.5 / 1000 for t in TIMESTAMPS_MS]
    scheduled_s = [(r.scheduled_ns - loadgen.start_ns) / NS for r in records]
    assert scheduled_s == pytest.approx(expected_s, abs=1e-6)
    lags_ms = [(r.sent_ns - r.scheduled_ns) / 1e6 for r in records]
    assert all(0 <= lag < 50 for lag in lags_ms), lags_ms  # lag measured, and small here
    # the server counts one token per word: it received exactly the trace's input lengths
    assert [r.prompt_tokens for r in records] == [40 + 10 * i for i in range(len(TIMESTAMPS_MS))]
    assert [r.output_tokens for r in records] == [3 + i for i in range(len(TIMESTAMPS_MS))]
