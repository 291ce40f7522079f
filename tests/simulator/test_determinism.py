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
    # Every jumped step is priced as stepping prices it (test_fast_forward.py): the same records.
    assert fast.records == slow.records


def test_result_json_round_trips_into_records():
    from tokenpace.record import RequestRecord

    res = simulate(SimConfig(), workload(n=20))
    data = json.loads(dump(res))
    again = [RequestRecord.from_dict(d) for d in data["records"]]
    assert again == res.records


def _closed(n: int, prompt: int = 1024, output: int = 256) -> list[SimRequest]:
    return [SimRequest(prompt, output) for _ in range(n)]


# Chunked prefill advances its plain decodes as one cohort (simulator/cohort.py). Configurations
# where the cohort must schedule preemptions (a cache too small for the running decodes), jump while
# some members are short of blocks, give way to the one-by-one pass (a token budget smaller than
# the decodes), and lose members to client timeouts in the middle of a jump.
COHORT_CASES = {
    "open-tight-cache": (SimConfig(num_gpu_blocks=300, max_num_seqs=512), lambda: workload(n=150)),
    "open-small-cache": (SimConfig(num_gpu_blocks=900, max_num_seqs=512), lambda: workload(n=200)),
    "budget-below-decodes": (SimConfig(max_batched_tokens=64, num_gpu_blocks=4000), lambda: workload(n=150)),
    "timeouts": (SimConfig(timeout_s=3.0, ttft_timeout_s=1.0, num_gpu_blocks=1500), lambda: workload(n=200)),
    "no-jump": (SimConfig(jump_decode_steps=False, num_gpu_blocks=1200), lambda: workload(n=120)),
    "closed-1024-preempting": (SimConfig(concurrency=512, max_num_seqs=512, num_gpu_blocks=4000, timeline=True),
                               lambda: _closed(1500, 700, 200)),
    "vllm-context-admission": (SimConfig(engine="vllm", concurrency=256, num_gpu_blocks=3000),
                               lambda: _closed(800, 900, 150)),
    # Members holding more than a block of room (output reserved at admission) wait outside the
    # ring of due blocks until they are within a block of their due step (cohort_blocks.py); jumps
    # span several blocks.
    "output-reserved": (SimConfig(admission="prompt+output", concurrency=48, num_gpu_blocks=2500),
                        lambda: _closed(300, 700, 300)),
    "whole-prompt-preempting": (SimConfig(admission="prompt", concurrency=300, max_num_seqs=512,
                                          num_gpu_blocks=3000), lambda: _closed(900, 500, 200)),
}


@pytest.mark.parametrize("name", COHORT_CASES)
def test_decode_cohort_gives_the_bytes_of_stepping_each_sequence(name, monkeypatch):
    import importlib

    sim_module = importlib.import_module("tokenpace.simulator.simulate")  # the module, not the function
    cfg, make = COHORT_CASES[name]
    with_cohort = simulate(cfg, make())
    original = sim_module.build_engine
    monkeypatch.setattr(sim_module, "build_engine",
                        lambda *a, **kw: original(*a, **{**kw, "cohort": False}))
    without = simulate(cfg, make())
    assert with_cohort.stats["preemptions"] == without.stats["preemptions"]
    assert dump(with_cohort) == dump(without)
    if name in ("open-tight-cache", "closed-1024-preempting", "whole-prompt-preempting"):
        assert without.stats["preemptions"] > 0  # the case exercises preemption
