"""`--rate auto`: which request rates to try, and when to stop early.

Probes come first: the synchronous rate (one request at a time, closed loop at concurrency 1:
``requests/s`` of that run), then the saturation rate: closed loops at rising concurrency
(``saturation_ladder``: 4, 16, 64, ... up to ``--saturation-concurrency``) until throughput stops
growing (less than ``GROWTH`` more than the best so far, within noise); the saturation rate is the
most any of them completed per second over its steady-state window. The rates then run from the
synchronous rate to the saturation rate, denser near saturation, where latency changes fastest,
and on past it, so that the overload region is seen too:

    rate_i = sync + (saturation - sync) * (1 - (1 - i / (m - 1))^2),   i = 0 .. m-1, m = n - 2

then ``OVERLOAD`` times the saturation rate (n = 8: 0, 36, 64, 84, 96 and 100% of the way, then
115% and 135% of saturation). A rate step whose SLO figure is more than ``STOP_MARGIN``
times its limit, or whose attainment is below half the target, misses the SLO by a wide margin:
the higher rates are skipped (they can only be worse) and say so, except that one rate past
saturation still runs when the SLO was met at a lower one (the overload region, seen once).
"""

from __future__ import annotations

STOP_MARGIN = 2.0
DEFAULT_AUTO_STEPS = 8
OVERLOAD = (1.15, 1.35)  # rates past saturation, as fractions of it
GROWTH = 0.05  # a saturation probe that adds less than this to the best throughput ends the ladder
LADDER_FACTOR = 4
LADDER_START = 4


def saturation_ladder(cap: int) -> list[int]:
    """The concurrencies the saturation probes may try, ascending, ending at ``cap``."""
    out, c = [], LADDER_START
    while c < cap:
        out.append(c)
        c *= LADDER_FACTOR
    return out + [cap]


def still_growing(best_rps: float | None, rps: float | None) -> bool:
    """Whether a probe's throughput grew past the best so far by more than the noise."""
    return rps is not None and (best_rps is None or rps > (1 + GROWTH) * best_rps)


def auto_rates(sync_rps: float, saturation_rps: float, steps: int = DEFAULT_AUTO_STEPS) -> list[float]:
    """The rates from the synchronous rate to past saturation (module docstring), ascending and
    distinct."""
    if steps < 2:
        raise ValueError("auto rates need at least 2 steps")
    if not (sync_rps > 0 and saturation_rps > 0):
        raise ValueError("both probes must have completed requests")
    lo, hi = sorted((sync_rps, saturation_rps))
    past = [hi * f for f in OVERLOAD]
    if hi / lo < 1.05:  # the target does not batch: its one rate, then past it
        return _distinct([lo] + past)
    below = max(steps - len(OVERLOAD), 2)
    rates = [lo + (hi - lo) * (1 - (1 - i / (below - 1)) ** 2) for i in range(below)] + past
    return _distinct(rates)


def _distinct(rates: list[float]) -> list[float]:
    out: list[float] = []
    for r in rates:
        r = float(f"{r:.4g}")
        if not out or r > out[-1]:
            out.append(r)
    return out


def how_chosen(sync_rps: float, saturation_rps: float, saturation_concurrency: int, steps: int,
               ladder: str = "") -> str:
    past = " and ".join(f"{f:.0%}" for f in OVERLOAD)
    return (f"synchronous probe (concurrency 1): {sync_rps:.4g} req/s; saturation probes "
            f"({ladder or f'concurrency {saturation_concurrency}'}): {saturation_rps:.4g} req/s at concurrency "
            f"{saturation_concurrency}; {max(steps - len(OVERLOAD), 2)} rates from the first to the second, denser "
            f"near saturation: sync + (sat - sync) x (1 - (1 - i/(m-1))^2), then {past} of saturation (overload)")


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
