"""Helpers for the simulator tests: the per-request latencies and throughput a user reads."""

from __future__ import annotations


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
