"""Speculative decoding helps at low load and can hurt a saturated server."""

from __future__ import annotations

import pytest

from sim_helpers import output_tokens_per_s, tpot_ms
from tokenpace.simulator import SimConfig, SimRequest, SpecDecodeConfig, simulate

SPEC = SpecDecodeConfig(num_draft_tokens=4, acceptance_rate=0.6, draft_cost=0.1)


def test_expected_tokens_per_step():
    # (1 − 0.6^5) / (1 − 0.6) = 0.92224 / 0.4 = 2.3056; speedup 2.3056 / (4 × 0.1 + 1) = 1.647.
    assert SPEC.expected_tokens_per_step == pytest.approx(2.3056)
    assert SPEC.low_load_speedup == pytest.approx(1.6469, rel=1e-3)
    assert SpecDecodeConfig(4, 1.0).expected_tokens_per_step == 5.0
    assert SpecDecodeConfig(4, 0.0).expected_tokens_per_step == 1.0


def test_spec_decode_raises_throughput_at_low_load():
    reqs = [SimRequest(512, 256) for _ in range(4)]
    plain = simulate(SimConfig(concurrency=1), reqs)
    spec = simulate(SimConfig(concurrency=1, spec_decode=SPEC), reqs)
    gain = output_tokens_per_s(spec) / output_tokens_per_s(plain)
    assert 1.4 < gain < 1.7  # close to the low-load speedup of 1.65 (TTFT is not sped up)
    assert tpot_ms(spec.records[0]) < 0.65 * tpot_ms(plain.records[0])


def test_spec_decode_lowers_throughput_at_saturation():
    # 256 streams × 5 tokens = 1,280 tokens per verification step: compute-bound on an H100.
    reqs = [SimRequest(128, 128) for _ in range(768)]
    plain = simulate(SimConfig(concurrency=256), reqs)
    spec = simulate(SimConfig(concurrency=256, spec_decode=SPEC), reqs)
    assert output_tokens_per_s(spec) < 0.8 * output_tokens_per_s(plain)


@pytest.mark.parametrize("acceptance", ["expected", "sampled"])
def test_chunks_carry_several_tokens_and_add_up(acceptance):
    spec = SpecDecodeConfig(4, 0.7, 0.1, acceptance)
    res = simulate(SimConfig(concurrency=8, spec_decode=spec), [SimRequest(300, 200) for _ in range(16)])
    for r in res.records:
        assert r.chunk_tokens[0] == 1  # the prompt's step yields one token
        assert sum(r.chunk_tokens) == r.output_tokens == 200
        assert max(r.chunk_tokens) <= 5 and min(r.chunk_tokens) >= 1
        assert len(r.chunk_ns) == len(r.chunk_tokens)
        mean = (r.output_tokens - 1) / (len(r.chunk_tokens) - 1)
        assert mean == pytest.approx(spec.expected_tokens_per_step, rel=0.25)


def test_sampled_acceptance_depends_on_the_seed_only():
    spec = SpecDecodeConfig(4, 0.7, 0.1, "sampled")
    reqs = [SimRequest(300, 100) for _ in range(8)]
    a = simulate(SimConfig(concurrency=4, spec_decode=spec, seed=1), reqs)
    b = simulate(SimConfig(concurrency=4, spec_decode=spec, seed=1), reqs)
    c = simulate(SimConfig(concurrency=4, spec_decode=spec, seed=2), reqs)
    assert [r.chunk_tokens for r in a.records] == [r.chunk_tokens for r in b.records]
    assert [r.chunk_tokens for r in a.records] != [r.chunk_tokens for r in c.records]
