"""Two runs of the same requests, matched request by request: a measured run and its simulation
(``tokenpace sim`` with the bench's workload and seed), or one workload measured on two servers.

Request i of both runs then asked for the same lengths, and much of each percentile's spread comes
from that draw of lengths (at 1 client a TTFT p50 over 16 requests moves by ±20% with which prompt
lengths it holds). Resampling the requests in pairs (``reports.bootstrap.paired_quantiles``) keeps
the draw common to both runs, so the noise judgement holds only how the two runs disagree.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tokenpace.metrics.latency import PER_REQUEST
from tokenpace.record import RequestRecord


def same_requests(base: Sequence[RequestRecord], new: Sequence[RequestRecord]) -> bool:
    """Whether both runs hold the same requests: measured records (warmup and retries left out) with
    the same indices, each index asking for the same output length in both where both say. The
    prompts are not compared: a simulation of a chat-templated run is given the token counts the
    server saw, not the words the bench asked for."""
    a, b = _by_index(base), _by_index(new)
    if not a or a.keys() != b.keys():
        return False
    return all(a[i].requested_output_tokens is None or b[i].requested_output_tokens is None
               or a[i].requested_output_tokens == b[i].requested_output_tokens for i in a)


def paired_samples_ms(base: Sequence[RequestRecord], new: Sequence[RequestRecord],
                      name: str) -> tuple[np.ndarray, np.ndarray]:
    """A per-request latency metric (``metrics.latency.PER_REQUEST``) of both runs, aligned by
    request index; NaN where a request failed or has no value (``paired_quantiles`` leaves those
    pairs out). Only for runs that ``same_requests`` accepts."""
    a, b = _by_index(base), _by_index(new)
    metric = PER_REQUEST[name]
    order = sorted(a)
    return _values(metric, (a[i] for i in order)), _values(metric, (b[i] for i in order))


def _by_index(records: Sequence[RequestRecord]) -> dict[int, RequestRecord]:
    return {r.index: r for r in records if r.measured}


def _values(metric, records) -> np.ndarray:
    out = [metric(r) if r.status == "ok" else None for r in records]
    return np.array([np.nan if v is None else v for v in out], dtype=np.float64)
