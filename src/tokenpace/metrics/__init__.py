"""Metrics: pure functions from ``RequestRecord``s to the run summary (docs/CONTRACTS.md).

Definitions follow REFERENCE section 1 exactly; each module states the choices it makes.
"""

from tokenpace.metrics.chunks import output_token_count
from tokenpace.metrics.cost import usd_per_1m_tokens
from tokenpace.metrics.latency import (
    chunk_gaps,
    e2e,
    e2e_from_scheduled,
    itl_samples,
    schedule_lag,
    tpot,
    ttfc,
    ttft,
    ttft_from_scheduled,
)
from tokenpace.metrics.ratings import RATING_THRESHOLDS_MS, rate
from tokenpace.metrics.slo import DEFAULT_ATTAINMENT, SLO, SLO_PRESETS, parse_slo
from tokenpace.metrics.stats import describe, quantile_ci
from tokenpace.metrics.summary import LATENCY_NAMES, judge_goodput, judge_goodputs, summarize
from tokenpace.metrics.window import Window, measurement_window

__all__ = [
    "DEFAULT_ATTAINMENT", "LATENCY_NAMES", "RATING_THRESHOLDS_MS", "SLO", "SLO_PRESETS", "Window",
    "chunk_gaps", "describe", "judge_goodput", "judge_goodputs", "e2e", "e2e_from_scheduled", "itl_samples",
    "measurement_window", "output_token_count", "parse_slo", "quantile_ci", "rate",
    "schedule_lag", "summarize", "tpot", "ttfc", "ttft", "ttft_from_scheduled",
    "usd_per_1m_tokens",
]
