"""Helpers for the simulator tests: the per-request latencies and throughput a user reads, the
CPU-like hardware the calibration tests' engines run on, and a predictor of fixed step times."""

from __future__ import annotations

from tokenpace.simulator import RooflineParams, RooflinePredictor
from tokenpace.simulator.catalog import GPU, get_model, get_precision

# Little compute and modest bandwidth: a part where per-sequence and per-row costs show, as on a CPU.
CPU_LIKE = GPU(id="cpu-like", name="CPU-like", bf16_tflops=4.0, fp8_tflops=None, memory_gb=64, hbm_tb_s=0.4,
               link_gb_s=64, link="pcie")


def cpu_predictor(params: RooflineParams, hardware: GPU = CPU_LIKE) -> RooflinePredictor:
    """Llama-3.1-8B with INT4 weights and a BF16 KV cache on ``hardware``, priced with ``params``."""
    return RooflinePredictor(get_model("llama-3.1-8b"), hardware, get_precision("int4"), get_precision("bf16"), 1,
                             params)


class FixedStep:
    """A predictor whose every step takes ``step_s``; ``params`` carries what the engine reads of a
    roofline predictor's (arrival cost, join window)."""

    def __init__(self, params: RooflineParams, step_s: float = 0.010) -> None:
        self.params, self._step_s = params, step_s

    def step_s(self, batch) -> float:
        return self._step_s


# A small engine for the event tests driven by ``FixedStep``.
FIXED_STEP_ENGINE = dict(model="llama-3.1-8b", gpu="l4", weights="int4", max_num_seqs=8, max_batched_tokens=2048,
                         jump_decode_steps=True)


def ttft_ms(rec) -> float:
    return (rec.first_token_ns - rec.sent_ns) / 1e6


def tpot_ms(rec) -> float:
    return (rec.last_token_ns - rec.first_token_ns) / (rec.output_tokens - 1) / 1e6


def percentile(values, q: float) -> float:
    import numpy as np

    return float(np.percentile(values, q))


def output_tokens_per_s(result) -> float:
    ok = [r for r in result.records if r.status == "ok"]
    start = min(r.sent_ns for r in ok)
    end = max(r.last_token_ns for r in ok)
    return sum(r.output_tokens for r in ok) / ((end - start) / 1e9)


def assert_predicts(predicted, truth, rel: float) -> None:
    """A prediction matches the truth's TTFT and TPOT medians and output throughput within ``rel``."""
    import pytest

    for metric in (ttft_ms, tpot_ms):
        want = percentile([metric(r) for r in truth.records], 50)
        got = percentile([metric(r) for r in predicted.records], 50)
        assert got == pytest.approx(want, rel=rel), metric.__name__
    assert output_tokens_per_s(predicted) == pytest.approx(output_tokens_per_s(truth), rel=rel)
