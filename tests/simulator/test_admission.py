"""Admission cannot loop: a 20,000-token prompt whose next chunk does not fit is preempted at most
once, and is not re-admitted until its whole context fits (issue 14, cause 1)."""

from __future__ import annotations

import pytest

from tokenpace.simulator import SimConfig, SimRequest, simulate

# 20,000-token prompts, 2,000-token replies, every request queued at once: the case that made the
# simulator preempt thousands of times. 40 requests fill a BF16 KV cache (~508k tokens) about twice.
LONG = dict(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8", kv_cache_dtype="bf16", concurrency=2048,
            max_num_seqs=1024)


def run(**kw):
    res = simulate(SimConfig(**{**LONG, **kw}), [SimRequest(20_000, 2_000) for _ in range(40)])
    assert all(r.status == "ok" and r.output_tokens == 2_000 for r in res.records)
    return res


@pytest.mark.parametrize("admission", ["context", "prompt", "prompt+output"])
def test_long_prompts_do_not_thrash(admission):
    res = run(admission=admission)
    # What is left is a decoder preempted now and then when the cache is full, as in a real engine.
    assert res.stats["preemptions"] <= 5


def test_no_evict_admission_never_preempts():
    assert run(admission="prompt+output").stats["preemptions"] == 0


def test_a_preempted_prompt_waits_until_its_whole_context_fits():
    # The old first-chunk admission still preempts a prompt that does not fit, but only once each:
    # never the loop of re-admitting it on its first chunk.
    res = run(admission="chunk")
    assert res.stats["preemptions"] <= len(res.records)
    assert max(row.preempted for row in res.timeline) <= 1
