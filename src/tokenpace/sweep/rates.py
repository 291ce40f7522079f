"""`--rate auto`: which request rates to try, and when to stop early.

Two probes come first: the synchronous rate (one request at a time, closed loop at concurrency 1:
``requests/s`` of that run) and the saturation rate (closed loop at a high concurrency: the most
the target completes per second). The rates then run from the synchronous rate to the saturation
rate, denser near saturation, where latency changes fastest:

    rate_i = sync + (saturation - sync) * (1 - (1 - i / (n - 1))^2),   i = 0 .. n-1

(n = 8: 0, 27, 49, 67, 82, 92, 98 and 100% of the way). A rate step whose SLO figure is more than
``STOP_MARGIN`` times its limit, or whose attainment is below half the target, misses the SLO by
a wide margin: the higher rates are skipped (they can only be worse) and say so.
"""

from __future__ import annotations

STOP_MARGIN = 2.0
DEFAULT_AUTO_STEPS = 8


def auto_rates(sync_rps: float, saturation_rps: float, steps: int = DEFAULT_AUTO_STEPS) -> list[float]:
    """The rates between the probes (module docstring), ascending and distinct."""
    if steps < 2:
        raise ValueError("auto rates need at least 2 steps")
    if not (sync_rps > 0 and saturation_rps > 0):
        raise ValueError("both probes must have completed requests")
    lo, hi = sorted((sync_rps, saturation_rps))
    if hi / lo < 1.05:  # the target does not batch: one rate is all there is to try
        return [round(lo, 4)]
    rates = [lo + (hi - lo) * (1 - (1 - i / (steps - 1)) ** 2) for i in range(steps)]
    out: list[float] = []
    for r in rates:
        r = float(f"{r:.4g}")
        if not out or r > out[-1]:
            out.append(r)
    return out


def how_chosen(sync_rps: float, saturation_rps: float, saturation_concurrency: int, steps: int) -> str:
    return (f"synchronous probe (concurrency 1): {sync_rps:.4g} req/s; saturation probe (concurrency "
            f"{saturation_concurrency}): {saturation_rps:.4g} req/s; {steps} rates from the first to the "
            "second, denser near saturation: sync + (sat - sync) x (1 - (1 - i/(n-1))^2)")


def wide_miss(goodput: dict | None) -> str | None:
    """Why a step misses its SLO by a wide margin (module docstring), or None."""
    if not goodput:
        return None
    slo = goodput.get("slo") or {}
    target = slo.get("attainment") or 0.9
    fraction = goodput.get("fraction")
    if fraction is not None and fraction < target / 2:
        return f"only {fraction:.0%} of requests met the SLO (target {target:.0%})"
    for metric, line in (goodput.get("verdict") or {}).items():
        if not isinstance(line, dict) or line.get("value_ms") is None:
            continue
        if line["value_ms"] > STOP_MARGIN * line["threshold_ms"]:
            return (f"{metric.upper()} at the SLO percentile is {line['value_ms']:,.0f} ms, more than "
                    f"{STOP_MARGIN:g}x its {line['threshold_ms']:,.0f} ms limit")
    return None
