"""Goodput: the requests (and output tokens) per second that met every limit of an SLO.

- ``good_requests``: measured requests with status ok that meet every limit (``SLO.good_mask``).
  Errors, timeouts and cancellations are misses.
- ``fraction`` = good_requests / all measured requests (None when there are none).
- ``requests_s`` / ``output_tokens_s``: good requests by their progress inside the window, and
  output tokens of good requests whose chunks arrived inside the window, per second of the window
  (the same counting rules as throughput). ``output_tokens`` is that token count.
- ``verdict``: per limit, ``value_ms`` is the metric at the attainment percentile (p90 for the
  default 0.90) over ok requests where it is defined, linear interpolation as in ``describe``;
  ``met`` is ``value_ms <= threshold_ms``, or None when no request had a value to judge. The
  overall ``met`` is ``fraction >= attainment``: the per-limit lines say which limit failed, and
  only the overall one counts errors.
"""

from __future__ import annotations

import numpy as np

from tokenpace.metrics.columns import Columns
from tokenpace.metrics.slo import SLO
from tokenpace.metrics.stats import select_quantile
from tokenpace.metrics.throughput import progress_in_window, window_output_tokens
from tokenpace.metrics.window import Window


def goodput(cols: Columns, slo: SLO, window: Window) -> dict:
    """The summary's ``goodput`` section."""
    return goodput_of(goodput_sums(cols, slo, window), slo, window, verdict_values(cols, slo))


def goodput_sums(cols: Columns, slo: SLO, window: Window) -> dict:
    """What ``goodput`` counts: sums a summary by row blocks adds up, block by block, and hands to
    ``goodput_of`` (with each limit's percentile, selected over every block: ``verdict_values``)."""
    good = slo.good_mask(cols.ok, cols.values_ms)
    return {"measured": len(cols), "good_requests": int(good.sum()),
            "good_tokens": window_output_tokens(cols, window, good),
            "progress": float(progress_in_window(cols, window, good).sum())}


def goodput_of(sums: dict, slo: SLO, window: Window, values: dict[str, float | None]) -> dict:
    """The ``goodput`` section from its ``goodput_sums`` and each limit's attainment percentile."""
    good_requests, good_tokens = sums["good_requests"], sums["good_tokens"]
    fraction = good_requests / sums["measured"] if sums["measured"] else None
    return {
        "slo": slo.to_dict(),
        "good_requests": good_requests,
        "requests_s": window.rate(sums["progress"]),
        "output_tokens_s": window.rate(good_tokens),
        "output_tokens": good_tokens,
        "fraction": fraction,
        "verdict": verdict_lines(slo, values, fraction),
    }


def verdict(cols: Columns, slo: SLO, fraction: float | None) -> dict:
    return verdict_lines(slo, verdict_values(cols, slo), fraction)


def verdict_values(cols: Columns, slo: SLO) -> dict[str, float | None]:
    """Per limit, its metric at the attainment percentile over ok requests where it is defined."""
    out: dict[str, float | None] = {}
    for metric in slo.limits_ms():
        values = cols.values_ms[metric][cols.ok]
        values = values[~np.isnan(values)]  # a fresh array: selected in place
        out[metric] = select_quantile(values, slo.attainment) if values.size else None
    return out


def verdict_lines(slo: SLO, values: dict[str, float | None], fraction: float | None) -> dict:
    lines: dict = {}
    for metric, limit in slo.limits_ms().items():
        value = values[metric]
        lines[metric] = {"threshold_ms": limit, "value_ms": value,
                         "met": None if value is None else bool(value <= limit)}
    lines["met"] = bool(fraction is not None and fraction >= slo.attainment)
    return lines
