"""What a sweep's curve says: the knee, the highest goodput that meets an SLO, each step's quadrant.

Pure functions of per-step figures (no records, no I/O), so each is tested on hand-made curves.

**Knee.** Kneedle (Satopää et al., "Finding a 'Kneedle' in a Haystack", ICDCS workshops 2011) on
p99 TTFT against output-token throughput, steps in load order: both axes are scaled to [0, 1]
(``x = (thr - min) / (max - min)``, the same for latency) and the knee is the step that maximises
``x - y``, the point farthest above the chord where latency is still low relative to the
throughput already reached. It is the maximum-curvature point of a convex rising curve, and needs
no threshold. Three guards: fewer than three usable steps give no knee; so does a curve whose
p99 TTFT never climbs past ``MIN_CLIMB`` times its lowest value, and one that does not bend
upward (no step at least ``MIN_BEND`` below the line from the first step to the last in scaled
units: latency grew evenly or fastest at first). Each means the load never saturated the target.

**Max goodput under an SLO.** A step meets the SLO when its attainment (the fraction of requests
that met every limit) reaches the SLO's target (0.90 by default). Between a step that meets it and
the next-higher load that does not, the crossing load is found by linear interpolation of
attainment against load; throughput is interpolated linearly to that load, and the goodput there
is the target times that throughput (at the crossing, by its definition, that fraction of requests
is good; interpolating goodput itself would follow its collapse past the crossing). The answer is
the highest goodput among the meeting steps and those crossings, and ``limit_load`` is the highest
load at which the SLO still holds (the crossing above the highest meeting step).

**Quadrants.** Throughput is high at or above half the highest valid step's output throughput.
Latency is high above the SLO's TTFT limit, or (without one) above ``UNLOADED_FACTOR`` times the
lowest load's p99 TTFT. High latency with low throughput is the quadrant to avoid: overload (the
engine is thrashing or queueing without finishing more work) or a misconfiguration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

MIN_CLIMB = 1.5  # p99 TTFT must climb this much over the sweep for a knee to exist
MIN_BEND = 0.1  # and the knee must lie this far (in scaled units) below the first-to-last line
HIGH_THROUGHPUT_FRACTION = 0.5
UNLOADED_FACTOR = 2.0


@dataclass(frozen=True)
class CurvePoint:
    """One valid step, reduced to what the analysis reads."""

    load: float  # offered load: concurrency or requests/s, as the sweep varied it
    output_tokens_s: float | None
    latency_ms: float | None  # the knee's latency: p99 TTFT (E2E when TTFT is undefined)
    # Optional, for the SLO crossing and cost at the best point:
    attainment: float | None = None
    good_requests_s: float | None = None
    good_output_tokens_s: float | None = None
    requests_s: float | None = None
    extra: dict = field(default_factory=dict)  # more figures to interpolate (e.g. p99s)


def knee(points: Sequence[CurvePoint]) -> dict:
    """The knee (module docstring): {"index": i in ``points`` or None, "load", "method", "reason"}."""
    method = ("Kneedle: the step maximising normalised throughput minus normalised p99 TTFT, "
              "steps in load order (Satopää et al. 2011)")
    usable = [(i, p) for i, p in enumerate(points)
              if p.output_tokens_s is not None and p.latency_ms is not None]
    if len(usable) < 3:
        return {"index": None, "load": None, "method": method,
                "reason": f"{len(usable)} usable step(s): a knee needs at least 3"}
    xs = [p.output_tokens_s for _, p in usable]
    ys = [p.latency_ms for _, p in usable]
    lo_y, hi_y = min(ys), max(ys)
    if lo_y > 0 and hi_y / lo_y < MIN_CLIMB or hi_y == lo_y:
        return {"index": None, "load": None, "method": method,
                "reason": f"p99 TTFT climbed only {hi_y / lo_y if lo_y else 1:.2f}x over the sweep "
                          f"(a knee needs {MIN_CLIMB:g}x): the load never saturated the target; raise it"}
    lo_x, hi_x = min(xs), max(xs)
    span_x = (hi_x - lo_x) or 1.0
    diffs = [(x - lo_x) / span_x - (y - lo_y) / (hi_y - lo_y) for x, y in zip(xs, ys)]
    best = max(range(len(diffs)), key=lambda k: (diffs[k], -k))  # earliest on ties
    if diffs[best] < MIN_BEND:
        return {"index": None, "load": None, "method": method,
                "reason": "p99 TTFT did not bend upward against throughput (no step lies well below the "
                          "line from the first step to the last): the load never saturated the target"}
    index = usable[best][0]
    return {"index": index, "load": points[index].load, "method": method, "reason": None}


def slo_crossing(points: Sequence[CurvePoint], target: float) -> dict | None:
    """The highest goodput meeting the SLO (module docstring), or None when no step met it.

    Returns {"load", "good_requests_s", "good_output_tokens_s", "output_tokens_s", "requests_s",
    "attainment", "interpolated", "between": [lo, hi] | None, "step": index of the meeting step
    it is at or above, "held_at_every_step", "limit_load"} plus the interpolated ``extra`` figures."""
    ordered = sorted((p.load, i, p) for i, p in enumerate(points) if p.attainment is not None)
    if not ordered:
        return None
    candidates = []
    for k, (load, i, p) in enumerate(ordered):
        if p.attainment < target:
            continue
        candidates.append(_at_step(i, p))
        if k + 1 < len(ordered) and ordered[k + 1][2].attainment < target:
            candidates.append(_crossing(i, p, ordered[k + 1][2], target))
    if not candidates:
        return None
    best = dict(max(candidates, key=lambda c: (c["good_requests_s"] or 0.0, c["load"])))
    best["held_at_every_step"] = all(p.attainment >= target for _, _, p in ordered)
    best["limit_load"] = max(c["load"] for c in candidates)
    return best


def _at_step(index: int, p: CurvePoint) -> dict:
    return {"load": p.load, "good_requests_s": p.good_requests_s,
            "good_output_tokens_s": p.good_output_tokens_s, "output_tokens_s": p.output_tokens_s,
            "requests_s": p.requests_s, "attainment": p.attainment, "interpolated": False,
            "between": None, "step": index, **{k: v for k, v in p.extra.items()}}


def _crossing(index: int, lo: CurvePoint, hi: CurvePoint, target: float) -> dict:
    """Interpolate to the load where attainment falls to ``target`` between ``lo`` and ``hi``."""
    drop = lo.attainment - hi.attainment
    t = (lo.attainment - target) / drop if drop > 0 else 0.0
    out = {"load": _lerp(lo.load, hi.load, t), "attainment": target, "interpolated": True,
           "between": [lo.load, hi.load], "step": index}
    for name in ("output_tokens_s", "requests_s"):
        out[name] = _lerp(getattr(lo, name), getattr(hi, name), t)
    for good, total in (("good_requests_s", "requests_s"), ("good_output_tokens_s", "output_tokens_s")):
        out[good] = (target * out[total] if out[total] is not None
                     else _lerp(getattr(lo, good), getattr(hi, good), t))
    for name, value in lo.extra.items():
        out[name] = _lerp(value, hi.extra.get(name), t)
    return out


def _lerp(a: float | None, b: float | None, t: float) -> float | None:
    if a is None or b is None:
        return a if t == 0 else None
    return a + (b - a) * t


def quadrants(points: Sequence[CurvePoint], ttft_p99_ms: Sequence[float | None],
              ttft_limit_ms: float | None) -> tuple[list[str | None], dict]:
    """Each point's quadrant ("efficient", "underused", "saturated", "avoid"; None without data)
    and the thresholds used."""
    thr = [p.output_tokens_s for p in points if p.output_tokens_s is not None]
    high_thr = HIGH_THROUGHPUT_FRACTION * max(thr) if thr else None
    basis = "the SLO's TTFT limit"
    limit = ttft_limit_ms
    if limit is None:
        by_load = sorted((p.load, t) for p, t in zip(points, ttft_p99_ms) if t is not None)
        limit = UNLOADED_FACTOR * by_load[0][1] if by_load else None
        basis = f"{UNLOADED_FACTOR:g}x the lowest load's p99 TTFT"
    out: list[str | None] = []
    for p, t in zip(points, ttft_p99_ms):
        if p.output_tokens_s is None or t is None or high_thr is None or limit is None:
            out.append(None)
            continue
        high_lat, high_t = t > limit, p.output_tokens_s >= high_thr
        out.append({(False, True): "efficient", (False, False): "underused",
                    (True, True): "saturated", (True, False): "avoid"}[(high_lat, high_t)])
    return out, {"high_throughput_from_output_tokens_s": high_thr, "high_latency_above_ms": limit,
                 "latency_basis": basis,
                 "throughput_basis": f"{HIGH_THROUGHPUT_FRACTION:g}x the highest step's output tokens/s"}


QUADRANT_WORDS = {
    "efficient": "high throughput at low latency: a good operating point",
    "underused": "low latency but low throughput: the hardware has headroom (paying for idle capacity)",
    "saturated": "high throughput at high latency: the engine is full; fine for batch work, not for users",
    "avoid": "high latency with low throughput: overload or misconfiguration; avoid",
}


def pareto_frontier(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (higher is better on each), in
    ascending x: the trade-off between speed per user and throughput per GPU that a configuration
    can reach. A point equal to another on both axes is kept once (the first)."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1], i))
    frontier, best_y = [], float("-inf")
    for i in order:  # from the fastest per user down: keep each that raises the best throughput
        if points[i][1] > best_y:
            frontier.append(i)
            best_y = points[i][1]
    return sorted(frontier, key=lambda i: points[i][0])
