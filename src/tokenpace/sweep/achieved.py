"""Offered against achieved load, per sweep step, and the steps that fell short.

A step offers a load: a request rate (open loop) or a concurrency (closed loop, the auto probes
too). What it achieved is read from the step's records over its steady-state window:

- rate: ``achieved_rps`` = the step's requests/s (ok requests by their progress inside the window);
  ``scheduled_rps`` = the requests the arrival process planned inside the window per second (a
  Poisson schedule of n requests is off its nominal rate by about 1/sqrt(n) by chance alone);
  ``sent_rps`` = those actually sent (a load generator that fell behind, or a cap, sends fewer);
- concurrency: ``achieved`` = the mean number of requests in flight over the window.

Below saturation a target keeps up with what it is offered, so a step that achieved less than
``SHORTFALL`` of it there is flagged: either its window held no steady state (it was shorter than a
few request latencies: raise the requests or the duration per step) or the client or the target
fell behind. Above saturation achieving less is the point of the step, and is not flagged. A
concurrency is flagged wherever it was not held (a closed loop holds it even past saturation).
"""

from __future__ import annotations

from typing import Any

from tokenpace.runner.loadcheck import mean_in_flight

AT_SATURATION = 1.01
SHORTFALL = 0.95  # achieved below this fraction of offered, below saturation: flagged
STEADY_LATENCIES = 10.0  # a window shorter than this many p50 E2E latencies is mostly ramp-up


def load_figures(result: Any, *, concurrency_axis: bool, offered: float) -> dict[str, Any]:
    """Offered and achieved load of one step that ran (module docstring)."""
    summary = result.summary
    w = summary["window"]
    duration_s = w.get("duration_s") or 0.0
    measured = [r for r in result.records if r.measured]
    if concurrency_axis:
        window = None if w.get("start_ns") is None else (w["start_ns"], w["end_ns"])
        return {"offered": offered, "achieved": mean_in_flight(measured, window), "unit": "concurrency"}
    start, end = w.get("start_ns"), w.get("end_ns")

    def per_s(stamps: list[int | None]) -> float | None:
        if start is None or duration_s <= 0:
            return None
        return sum(1 for t in stamps if t is not None and start <= t <= end) / duration_s

    return {"offered": offered, "achieved": summary["throughput"].get("requests_s"), "unit": "req/s",
            "scheduled_rps": per_s([r.scheduled_ns for r in measured]),
            "sent_rps": per_s([r.sent_ns for r in measured])}


def flag_shortfall(entry: dict[str, Any], saturation_rps: float | None) -> None:
    """Set ``entry["load"]["short"]`` (True, False, or None when it cannot be judged) and
    ``short_reason``: the step achieved less than ``SHORTFALL`` of its offered load below
    saturation (module docstring)."""
    load = entry.get("load") or {}
    achieved = load.get("achieved")
    if entry.get("status") != "ok" or achieved is None or not load.get("offered"):
        load["short"], load["short_reason"] = None, None
        return
    if load.get("unit") == "concurrency":
        expected, below_saturation = load["offered"], True
    else:
        expected = load.get("scheduled_rps") or load["offered"]
        # At the saturation rate itself a target still completes what it is offered (the auto
        # rates are rounded to 4 digits: 1% of slack keeps that step in).
        below_saturation = saturation_rps is not None and load["offered"] <= AT_SATURATION * saturation_rps
    short = below_saturation and achieved < SHORTFALL * expected
    load["short"] = short
    load["short_reason"] = _why(entry, achieved, expected) if short else None


def _why(entry: dict[str, Any], achieved: float, expected: float) -> str:
    load, s = entry["load"], entry.get("summary") or {}
    unit = load.get("unit", "")
    said = f"achieved {achieved:.3g} {unit} of the {expected:.3g} offered ({achieved / expected:.0%})"
    if unit != "concurrency":
        said += " below saturation"
    window_s = (s.get("window") or {}).get("duration_s") or 0.0
    e2e_ms = ((s.get("latency_ms") or {}).get("e2e") or {}).get("p50")
    if e2e_ms and window_s < STEADY_LATENCIES * e2e_ms / 1000:
        return (f"{said}: its steady-state window ({window_s:.3g} s) is shorter than {STEADY_LATENCIES:g} "
                f"request latencies (p50 E2E {e2e_ms / 1000:.3g} s): the engine spent much of it filling up; "
                "raise --requests-per-step or --duration-per-step")
    if unit == "concurrency":
        return f"{said}: the load generator did not hold the concurrency (too few requests per step, or the client fell behind)"
    return f"{said}: the load generator or the target fell behind"


def flag_group(entries: list[dict[str, Any]], saturation_rps: float | None) -> None:
    """``flag_shortfall`` for every step of one combination. Saturation: the auto probe's rate, else
    the most any rate step of the combination achieved (the target's throughput as measured)."""
    achieved = [e["load"].get("achieved") for e in entries
                if e.get("status") == "ok" and e["load"].get("unit") == "req/s"]
    seen = max((a for a in achieved if a is not None), default=None)
    saturation = saturation_rps if saturation_rps is not None else seen
    for e in entries:
        if e.get("summary") is not None:
            flag_shortfall(e, saturation)
