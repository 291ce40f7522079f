"""Plain-words ratings of latency percentiles against the thresholds of REFERENCE section 2.

| metric    | excellent | acceptable   | poor     |
|-----------|-----------|--------------|----------|
| TTFT      | < 200 ms  | 200-800 ms   | > 800 ms |
| TPOT, ITL | < 30 ms   | 30-80 ms     | > 80 ms  |

REFERENCE calls TTFT poor above 1 s and TPOT poor above 100 ms, leaving 800 ms-1 s and 80-100 ms
unassigned. We rate those gaps poor: they are already outside what the field calls acceptable,
and a report should not round a miss up. ITL shares TPOT's thresholds (both are per-token
intervals). The acceptable band includes both of its ends.
"""

from __future__ import annotations

# Metric -> (excellent below, acceptable up to and including), ms. Plain data.
RATING_THRESHOLDS_MS: dict[str, tuple[float, float]] = {
    "ttft": (200.0, 800.0),
    "tpot": (30.0, 80.0),
    "itl": (30.0, 80.0),
}
RATED_PERCENTILES = ("p50", "p99")


def rate(metric: str, value_ms: float | None) -> str | None:
    """One of excellent, acceptable, poor; None when there is no value."""
    if value_ms is None:
        return None
    excellent_below, acceptable_to = RATING_THRESHOLDS_MS[metric]
    if value_ms < excellent_below:
        return "excellent"
    if value_ms <= acceptable_to:
        return "acceptable"
    return "poor"


def ratings(latency_ms: dict[str, dict | None]) -> dict[str, dict[str, str | None]]:
    """Rate p50 and p99 of each rated metric in a ``latency_ms`` section."""
    result: dict[str, dict[str, str | None]] = {}
    for metric in RATING_THRESHOLDS_MS:
        stats = latency_ms.get(metric)
        result[metric] = {p: rate(metric, stats[p] if stats else None) for p in RATED_PERCENTILES}
    return result
