"""Continuous batching as tokenpace sees it: closed-loop runs at concurrency 1, 4, 8 and 16 against a
llama-server with 8 slots.

Up to 8 concurrent requests each get a slot at once: their prompts are prefilled together and they
decode in one batch, so none waits for another request to finish. Past 8 the extra requests wait
for a slot: their TTFT includes a whole service time of the request ahead, and jumps.

On this engine TTFT does not stay flat up to 8 as it would on a GPU: on CPU a batched prefill of
c prompts takes about c times as long (it is compute-bound), and so does a decode step for this
model (its 262k-token output layer makes every generated token cost the same work, batched or not),
so output tokens/s hardly grow with concurrency. What separates "a free slot" from "a queue" is
whether a request's TTFT is shorter than a whole request; that, and the jump past 8, are asserted.
The shapes, not absolute numbers: those depend on the CPU and whatever else runs on it.
"""

from __future__ import annotations

import pytest

from tokenpace.config import BenchConfig
from tokenpace.runner.bench import run_bench

pytestmark = pytest.mark.engine

CONCURRENCIES = (1, 4, 8, 16)
INPUT_TOKENS, OUTPUT_TOKENS = 32, 16
ROUNDS = 2  # requests per run = ROUNDS x concurrency: every slot is busy more than once


def test_ttft_stays_below_a_request_until_slots_are_full_then_queues(llama_url, tmp_path):
    latency = {}
    for concurrency in CONCURRENCIES:
        requests = max(4, ROUNDS * concurrency)
        result = run_bench(BenchConfig(
            url=llama_url, api="completions", concurrency=concurrency, requests=requests,
            input_tokens=str(INPUT_TOKENS), output_tokens=str(OUTPUT_TOKENS), timeout_s=120,
            seed=concurrency, progress=False, out=str(tmp_path / f"c{concurrency}.json")))
        assert result.summary["counts"]["ok"] == requests, [(r.index, r.error_kind, r.error_message) for r in result.records if r.status != "ok"]
        latency[concurrency] = lat = result.summary["latency_ms"]
        print(f"\nconcurrency {concurrency:>2}: TTFT p50 {lat['ttft']['p50']:8.1f} ms, "
              f"p90 {lat['ttft']['p90']:8.1f} ms; E2E min {lat['e2e']['min']:8.1f} ms; "
              f"TPOT p50 {lat['tpot']['p50']:6.1f} ms; "
              f"{result.summary['throughput']['output_tokens_s']:.1f} output tok/s", end="")
    print()

    # Free slots: no request waits for another to finish (with one slot, at concurrency 4 the
    # third request in line would wait two whole requests).
    for concurrency in (1, 4, 8):
        assert latency[concurrency]["ttft"]["p90"] < latency[concurrency]["e2e"]["min"], concurrency
    # Slots full: half the requests in flight wait for a slot, and TTFT jumps.
    assert latency[16]["ttft"]["p50"] > 1.5 * latency[8]["ttft"]["p50"]
