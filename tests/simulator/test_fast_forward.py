"""Fast-forwarding runs of decode steps (the engine's jump) gives what stepping one by one gives.

Between the events that change a batch, the engine advances a run of pure decode steps as one
event, pricing every step through the predictor's vectorised ``decode_run_s``. These tests hold it
to the exact floats of ``step_s`` and the exact records and statistics of a run stepped one step
per event (``jump_decode_steps=False``), for several workloads, engine presets, policies and both
predictors, with chunked prefill, preemption, client timeouts, a prefix cache and speculative
decoding.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from tokenpace.simulator import SimConfig, SimRequest, SpecDecodeConfig, StepBatch, simulate
from tokenpace.simulator.catalog import get_gpu, get_model, get_precision
from tokenpace.simulator.kernels.tables import tables_available
from tokenpace.simulator.roofline import RooflineParams, RooflinePredictor
from tokenpace.simulator.step import decode_run_s, decode_steps

needs_tables = pytest.mark.skipif(not tables_available(), reason="aiconfigurator-core is not installed "
                                  "(pip install 'tokenpace[kernels]')")


def roofline(model="llama-3.1-8b", gpu="h100-sxm", weights="bf16", kv="bf16", tp=1, **params):
    return RooflinePredictor(get_model(model), get_gpu(gpu), get_precision(weights), get_precision(kv), tp,
                             RooflineParams(**params))


ROOFLINES = {
    "default": lambda: roofline(),
    "fp8-tp2": lambda: roofline("llama-3.1-70b", weights="fp8", kv="fp8", tp=2),
    "mfu-mbu": lambda: roofline(mfu=0.41, mbu=0.63, seq_overhead_s=2e-5, token_overhead_s=1e-6),
    "decode-mfu": lambda: roofline(decode_mfu=0.3),
    "gemv-pass": lambda: roofline(row_group=4, row_remainder="gemv-pass", gemv_row_s=1e-4, gemm_step_s=3e-4),
    "pad": lambda: roofline(row_group=8),
    "moe": lambda: roofline("mixtral-8x7b", tp=2),
}

BATCHES = [
    StepBatch(decode_context=(1,)),
    StepBatch(decode_context=(1024, 1500, 3, 77)),
    StepBatch(decode_context=tuple(range(100, 100 + 7 * 350, 7))),
    StepBatch(decode_context=(5000, 9000, 12000), decode_tokens_per_seq=4),
]


def _check_run(pred, batch, steps):
    run = list(decode_run_s(pred, batch, steps))
    one_by_one = [pred.step_s(b) for b in decode_steps(batch, steps)]
    assert run == one_by_one  # the same floats, not merely close
    assert len(set(run)) > 1  # the contexts grow: the steps differ


@pytest.mark.parametrize("name", ROOFLINES)
@pytest.mark.parametrize("batch", BATCHES, ids=["one", "four", "350", "spec"])
def test_roofline_run_gives_step_s_float_for_float(name, batch):
    _check_run(ROOFLINES[name](), batch, 700)


@needs_tables
@pytest.mark.parametrize("engine,model,tp,dtype", [("vllm", "llama-3.1-8b", 1, "fp8"),
                                                   ("trtllm", "llama-3.1-8b", 1, "fp8"),
                                                   ("sglang", "llama-3.1-70b", 2, "bf16")])
@pytest.mark.parametrize("batch", BATCHES, ids=["one", "four", "350", "spec"])
def test_kernel_run_gives_step_s_float_for_float(engine, model, tp, dtype, batch):
    from tokenpace.simulator.kernels.predictor import KernelPredictor

    pred = KernelPredictor(get_model(model), get_gpu("h100-sxm"), get_precision(dtype), get_precision(dtype), tp,
                           engine=engine)
    # Long enough for the mean KV length to cross the table's grid points (and land on some).
    _check_run(pred, batch, 3000)


def test_a_predictor_without_a_run_method_is_priced_step_by_step():
    class Affine:
        def step_s(self, batch):
            return 0.01 + 1e-7 * sum(batch.decode_context) + 1e-4 * len(batch.decode_context)

    batch = StepBatch(decode_context=(10, 20))
    assert list(decode_run_s(Affine(), batch, 3)) == [Affine().step_s(StepBatch(decode_context=(10 + i, 20 + i)))
                                                      for i in range(3)]
    with pytest.raises(ValueError):
        decode_run_s(Affine(), StepBatch(prefill=((5, 0),), decode_context=(1,)), 2)


def open_loop(seed: int = 3, n: int = 150, prefix: bool = False) -> list[SimRequest]:
    rng = np.random.default_rng(seed)
    t, reqs = 0.0, []
    for i in range(n):
        t += float(rng.exponential(0.04))
        shared = prefix and i % 2 == 1
        reqs.append(SimRequest(int(rng.integers(600, 2500)), int(rng.integers(1, 400)), arrival_s=t,
                               prefix_group="sys" if shared else None, prefix_tokens=512 if shared else 0))
    return reqs


def closed(n: int, prompt: int, output: int) -> list[SimRequest]:
    return [SimRequest(prompt, output) for _ in range(n)]


CASES = {
    "open-default": (SimConfig(), lambda: open_loop()),
    "open-small-cache-preempting": (SimConfig(num_gpu_blocks=700, max_num_seqs=512), lambda: open_loop(n=200)),
    "closed-c64": (SimConfig(concurrency=64), lambda: closed(400, 1024, 256)),
    "closed-c512-preempting": (SimConfig(concurrency=512, max_num_seqs=512, num_gpu_blocks=4000),
                               lambda: closed(1200, 700, 200)),
    "timeouts": (SimConfig(timeout_s=3.0, ttft_timeout_s=1.0, num_gpu_blocks=1500), lambda: open_loop(n=200)),
    "small-token-budget": (SimConfig(max_batched_tokens=64, num_gpu_blocks=4000), lambda: open_loop()),
    "prefix-cache": (SimConfig(prefix_caching=True, num_gpu_blocks=3000), lambda: open_loop(prefix=True)),
    "prefill-first": (SimConfig(policy="prefill-first", num_gpu_blocks=3000), lambda: open_loop()),
    "static": (SimConfig(policy="static", max_num_seqs=16), lambda: open_loop(n=80)),
    "spec-decode": (SimConfig(policy="decode-first", spec_decode=SpecDecodeConfig(3, 0.7, 0.05, "sampled")),
                    lambda: open_loop(n=100)),
    "vllm-preset": (SimConfig(engine="vllm", concurrency=256, num_gpu_blocks=3000), lambda: closed(700, 900, 150)),
    "trtllm-preset-fp8": (SimConfig(engine="trtllm", weights="fp8", concurrency=128), lambda: closed(500, 2000, 300)),
    "sglang-preset": (SimConfig(engine="sglang", concurrency=96), lambda: closed(400, 600, 120)),
    "arrival-host-time-open": (SimConfig(roofline=RooflineParams(arrival_s=0.004)), lambda: open_loop()),
    "arrival-host-time-c64": (SimConfig(concurrency=64, roofline=RooflineParams(arrival_s=0.002)),
                              lambda: closed(400, 1024, 256)),
    "kernels": (SimConfig(predictor="kernels", weights="fp8", concurrency=64), lambda: closed(300, 1024, 256)),
    "kernels-trtllm-open": (SimConfig(predictor="kernels", engine="trtllm", weights="fp8"), lambda: open_loop()),
}


def _without_event_counts(result) -> str:
    d = result.to_dict()
    stats = d.pop("stats")
    stats.pop("events")  # a jump is one event where stepping makes k
    stats.pop("timeline", None)  # its rows differ in how many steps each spans (checked below)
    d.pop("timeline", None)
    d["config"].pop("jump_decode_steps")
    return json.dumps({**d, "stats": stats}, sort_keys=True)


@pytest.mark.parametrize("name", CASES)
def test_fast_forward_gives_the_records_and_stats_of_stepping(name):
    cfg, make = CASES[name]
    if cfg.predictor == "kernels" and not tables_available():
        pytest.skip("aiconfigurator-core is not installed (pip install 'tokenpace[kernels]')")
    cfg = dataclasses.replace(cfg, timeline=True)
    fast = simulate(cfg, make())
    slow = simulate(dataclasses.replace(cfg, jump_decode_steps=False), make())
    assert fast.stats["events"] < slow.stats["events"]  # it did jump
    assert _without_event_counts(fast) == _without_event_counts(slow)
    if name.endswith("preempting"):
        assert fast.stats["preemptions"] > 0
    if name == "timeouts":
        assert any(r.status != "ok" for r in fast.records)
    # Each jumped row is the stepped rows it stands for: the same start, first step, batch and
    # queue, and the same span to the nanosecond.
    rows, i = slow.timeline, 0
    for row in fast.timeline:
        covered = rows[i:i + row.steps]
        assert covered[0].t_ns == row.t_ns and covered[0].step_ms == row.step_ms
        assert {(r.batch_tokens, r.decode_seqs, r.prefill_tokens) for r in covered} == {
            (row.batch_tokens, row.decode_seqs, row.prefill_tokens)}
        assert (covered[0].waiting, covered[0].running, covered[0].preemptions) == (
            row.waiting, row.running, row.preemptions)
        assert sum(round(r.span_ms * 1e6) for r in covered) == round(row.span_ms * 1e6)
        i += row.steps
    assert i == len(rows)


def test_a_predictor_that_reads_every_context_gets_the_same_run():
    """A predictor with only ``step_s``, reading each context as a plain tuple: the run is priced
    step by step (``decode_run_s``'s fallback) and the cohort's contexts read one by one, and the
    result is the roofline's own, byte for byte."""
    base = roofline()

    class EveryContext:
        def step_s(self, batch):
            return base.step_s(StepBatch(prefill=batch.prefill, decode_context=tuple(batch.decode_context),
                                         decode_tokens_per_seq=batch.decode_tokens_per_seq))

    cfg = SimConfig(concurrency=96, num_gpu_blocks=2500, timeline=True)
    ours = simulate(cfg, closed(300, 1024, 200), predictor=EveryContext())
    direct = simulate(cfg, closed(300, 1024, 200), predictor=base)
    assert ours.records == direct.records
    assert ours.timeline == direct.timeline
    assert ours.stats == direct.stats
