"""The client's timeouts act in virtual time: the engine cancels the request at that moment and its
KV blocks are free for the next one; without a timeout nothing is cut (issue 14, cause 2)."""

from __future__ import annotations

from tokenpace import BenchConfig
from tokenpace.runner.simulate import SimRunConfig, run_sim
from tokenpace.simulator import SimConfig, SimRequest, simulate

NS = 1_000_000_000
# 100 blocks of 16 tokens: a 1,000-token prompt with a long reply holds most of the cache, and a
# second 1,000-token prompt only fits once the first has let its blocks go.
SMALL = dict(model="llama-3.1-8b", gpu="h100-sxm", num_gpu_blocks=100, concurrency=1)


def test_a_timed_out_request_frees_its_blocks_at_that_moment():
    reqs = [SimRequest(1000, 550), SimRequest(1000, 10)]
    res = simulate(SimConfig(**SMALL, timeout_s=0.5), reqs)
    first, second = res.records
    assert (first.status, first.error_kind, first.done_ns) == ("timeout", "total_timeout", NS // 2)
    assert 0 < first.output_tokens < 550 and first.chunk_ns[-1] <= NS // 2
    # The client sends the next request when it gives up, and it finds the whole cache free: its
    # first token comes one prefill step later, not after the first request's 550 tokens.
    assert second.status == "ok" and second.sent_ns == NS // 2
    assert (second.first_token_ns - second.sent_ns) / NS < 0.2
    # After the cancel only the second request's 64 blocks (1,010 tokens) are ever in use.
    assert max(row.kv_usage for row in res.timeline if row.t_ns >= NS // 2) <= 0.64


def test_ttft_timeout_cancels_a_request_still_waiting():
    # Two clients: the second prompt cannot fit next to the first's, waits, and gives up at 0.3 s.
    reqs = [SimRequest(1000, 550), SimRequest(1000, 10)]
    res = simulate(SimConfig(**{**SMALL, "concurrency": 2}, ttft_timeout_s=0.3), reqs)
    first, second = res.records
    assert first.status == "ok" and first.output_tokens == 550
    assert (second.status, second.error_kind, second.done_ns, second.output_tokens) == \
        ("timeout", "ttft_timeout", 3 * NS // 10, 0)


def test_no_timeout_unless_given(tmp_path):
    # 24,000 output tokens on a slow GPU take longer than bench's 600 s default, which used to cut
    # them after the run; a simulated client without a timeout waits for every one.
    load = BenchConfig(concurrency=1, requests=2, input_tokens="128", output_tokens="24000", timeout_s=None,
                       out=str(tmp_path / "sim.json"))
    res = run_sim(SimRunConfig(load=load, engine=SimConfig(model="llama-3.1-8b", gpu="rtx-a6000")))
    assert {r.status for r in res.records} == {"ok"}
    assert max(r.done_ns - r.sent_ns for r in res.records) > 600 * NS
