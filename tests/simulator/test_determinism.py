"""Same inputs, same bytes; and jumping over identical decode steps changes nothing a user sees."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from tokenpace.simulator import SimConfig, SimRequest, SpecDecodeConfig, simulate


def workload(seed: int = 7, n: int = 200) -> list[SimRequest]:
    rng = np.random.default_rng(seed)
    t, reqs = 0.0, []
    for i in range(n):
        t += float(rng.exponential(0.05))
        reqs.append(SimRequest(int(rng.integers(600, 3000)), int(rng.integers(1, 500)), arrival_s=t,
                               prefix_group="sys" if i % 2 else None, prefix_tokens=512 if i % 2 else 0))
    return reqs


CONFIGS = [
    SimConfig(prefix_caching=True, num_gpu_blocks=3000),
    SimConfig(policy="prefill-first", num_gpu_blocks=3000),
    SimConfig(policy="decode-first", spec_decode=SpecDecodeConfig(3, 0.7, 0.05, "sampled")),
    SimConfig(policy="static", max_num_seqs=16),
    # A cache too small for the load: decodes preempt each other, and the jump length is bounded by
    # each sequence's room left in its blocks.
    SimConfig(num_gpu_blocks=900, max_num_seqs=512),
]


def dump(result) -> str:
    return json.dumps(result.to_dict(), sort_keys=True)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.policy)
def test_same_inputs_give_byte_identical_results(cfg):
    assert dump(simulate(cfg, workload())) == dump(simulate(cfg, workload()))


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.policy)
def test_jumping_over_decode_steps_matches_stepping_one_by_one(cfg):
    reqs = workload(n=120)
    fast = simulate(cfg, reqs)
    slow = simulate(dataclasses.replace(cfg, jump_decode_steps=False), reqs)
    assert fast.stats["engine_steps"] == slow.stats["engine_steps"]
    assert fast.stats["events"] < slow.stats["events"]
    for a, b in zip(fast.records, slow.records):
        assert a.chunk_tokens == b.chunk_tokens
        assert a.cached_prompt_tokens == b.cached_prompt_tokens
        gap = np.abs(np.array(a.chunk_ns) - np.array(b.chunk_ns))
        if cfg.spec_decode is None:  # step time is affine in context: equal up to rounding (1 ns/step)
            assert gap.max() <= len(a.chunk_ns) + 2
        else:  # tokens per step vary, so the context grows unevenly: interpolation is close, not exact
            assert (gap <= 1e-5 * np.array(b.chunk_ns)).all()


def test_result_json_round_trips_into_records():
    from tokenpace.record import RequestRecord

    res = simulate(SimConfig(), workload(n=20))
    data = json.loads(dump(res))
    again = [RequestRecord.from_dict(d) for d in data["records"]]
    assert again == res.records
