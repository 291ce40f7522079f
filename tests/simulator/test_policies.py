"""Scheduling policies show the behaviour users know them for."""

from __future__ import annotations

import numpy as np
import pytest

from sim_helpers import percentile, tpot_ms, ttft_ms
from tokenpace.errors import UsageError
from tokenpace.simulator import POLICIES, SimConfig, SimRequest, simulate


def test_static_batching_blocks_the_head_of_the_line():
    # One long request is running when a short one arrives 0.1 s later.
    reqs = [SimRequest(200, 2000, arrival_s=0.0), SimRequest(200, 10, arrival_s=0.1)]
    static = simulate(SimConfig(policy="static"), reqs).records
    continuous = simulate(SimConfig(policy="chunked-prefill"), reqs).records
    assert static[1].first_token_ns >= static[0].done_ns  # waits for the whole batch to finish
    assert ttft_ms(static[1]) > 10_000
    assert ttft_ms(continuous[1]) < 50


def mixed_load(n: int = 240, seed: int = 1) -> list[SimRequest]:
    """Open loop at 6 req/s: mostly short chats, 30% long documents."""
    rng = np.random.default_rng(seed)
    t, reqs = 0.0, []
    for _ in range(n):
        t += rng.exponential(1 / 6)
        prompt = 6000 if rng.random() < 0.3 else 300
        reqs.append(SimRequest(prompt, int(rng.integers(100, 400)), arrival_s=t))
    return reqs


def test_chunked_prefill_lowers_p99_tpot_under_mixed_load():
    reqs = mixed_load()
    chunked = simulate(SimConfig(policy="chunked-prefill", max_batched_tokens=2048), reqs)
    prefill_first = simulate(SimConfig(policy="prefill-first"), reqs)
    p99_chunked = percentile([tpot_ms(r) for r in chunked.records], 99)
    p99_prefill_first = percentile([tpot_ms(r) for r in prefill_first.records], 99)
    assert p99_chunked < 0.85 * p99_prefill_first


def test_decode_first_trades_ttft_for_smoother_streams():
    reqs = mixed_load()
    decode_first = simulate(SimConfig(policy="decode-first"), reqs).records
    prefill_first = simulate(SimConfig(policy="prefill-first"), reqs).records
    def p(metric, records, q):
        return percentile([metric(r) for r in records], q)

    assert p(ttft_ms, decode_first, 50) > p(ttft_ms, prefill_first, 50)
    assert p(tpot_ms, decode_first, 99) < p(tpot_ms, prefill_first, 99)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_serves_everything_within_its_limits(policy):
    res = simulate(SimConfig(policy=policy, max_num_seqs=8, max_batched_tokens=1024), mixed_load(60))
    assert all(r.status == "ok" for r in res.records)
    assert all(r.output_tokens == r.requested_output_tokens for r in res.records)
    assert max(row.running for row in res.timeline) <= 8
    # A prompt longer than the budget may run alone (unchunked policies); otherwise the budget holds.
    for row in res.timeline:
        assert row.batch_tokens <= 1024 or row.decode_seqs == 0


def test_unknown_policy_is_a_usage_error():
    with pytest.raises(UsageError, match="chunked-prefill"):
        simulate(SimConfig(policy="fastest"), [SimRequest(10, 10, arrival_s=0.0)])
