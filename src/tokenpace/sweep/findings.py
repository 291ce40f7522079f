"""The analysis of a sweep, from its step entries: per combination the knee, the max goodput under
the SLO with its load and cost, each step's quadrant, a recommendation per SLO preset; across a
`--vary` grid, how each combination compares with the first. Plain sentences say it all again.

Only steps with status ok and role "step" are analysed (the auto probes and failed, invalid,
interrupted or skipped steps are shown but left out).
"""

from __future__ import annotations

from typing import Any

from tokenpace.metrics import SLO, SLO_PRESETS
from tokenpace.sweep.analysis import QUADRANT_WORDS, CurvePoint, knee, pareto_frontier, quadrants, slo_crossing
from tokenpace.sweep.steps import RECOMMEND_PRESETS


def dig(d: Any, *keys: str) -> Any:
    """d[k1][k2]...; None where a key is missing or a level is not a dict."""
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def analysed(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((e for e in entries if e["status"] == "ok" and e["role"] == "step"),
                  key=lambda e: e["load"]["value"])


def _latency(e: dict[str, Any], q: str = "p99") -> float | None:
    s = e["summary"]
    return dig(s, "latency_ms", "ttft", q) or dig(s, "latency_ms", "e2e", q)


def _point(e: dict[str, Any], good: dict[str, Any] | None, attainment_of: str | None = None) -> CurvePoint:
    s = e["summary"]
    return CurvePoint(
        load=e["load"]["value"], output_tokens_s=dig(s, "throughput", "output_tokens_s"),
        latency_ms=_latency(e), requests_s=dig(s, "throughput", "requests_s"),
        attainment=None if good is None else good.get("fraction"),
        good_requests_s=None if good is None else good.get("requests_s", good.get("good_requests_s")),
        good_output_tokens_s=None if good is None else good.get("output_tokens_s", good.get("good_output_tokens_s")),
        extra={"ttft_p99_ms": dig(s, "latency_ms", "ttft", "p99"), "tpot_p99_ms": dig(s, "latency_ms", "tpot", "p99")})


def _cost(best: dict[str, Any], price: float | None, gpus: int) -> dict[str, Any]:
    out = {}
    for name, tok in (("output_tokens", best.get("output_tokens_s")),
                      ("good_output_tokens", best.get("good_output_tokens_s"))):
        hours = None if not tok else gpus / (tok * 3600.0) * 1e6
        out[f"gpu_hours_per_1m_{name}"] = hours
        out[f"usd_per_1m_{name}"] = None if hours is None or price is None else hours * price
    return out


def limits_text(slo: SLO) -> str:
    parts = [f"{m.upper()} ≤ {v:g} ms" for m, v in slo.limits_ms().items()]
    return (", ".join(parts) or "no latency limit") + f" for {slo.attainment:.0%} of requests"


def analyse_group(entries: list[dict[str, Any]], *, axis: str, slo: SLO | None, price: float | None,
                  up_to_saturation: bool = False) -> dict[str, Any]:
    """``up_to_saturation``: the loads ran up to the measured saturation rate (--rate auto), so an
    SLO that held everywhere is limited by the engine's throughput, not by latency."""
    steps = analysed(entries)
    gpus = next((e["gpus"] for e in steps if e.get("gpus")), 1)
    unit = "concurrency" if axis == "concurrency" else "req/s"
    points = [_point(e, e["summary"].get("goodput")) for e in steps]
    k = knee(points)
    knee_out = {**k, "index": None if k["index"] is None else steps[k["index"]]["index"]}
    if k["index"] is not None:
        p = points[k["index"]]
        knee_out.update(output_tokens_s=p.output_tokens_s, ttft_p99_ms=p.latency_ms)
    quads, thresholds = quadrants(points, [dig(e["summary"], "latency_ms", "ttft", "p99") for e in steps],
                                  None if slo is None else slo.ttft_ms)
    best = None
    if slo is not None:
        best = slo_crossing(points, slo.attainment)
        if best is not None:
            best.update(_cost(best, price, gpus), step=steps[best["step"]]["index"])
    held = ("the SLO held up to the saturation rate: throughput, not latency, is the limit"
            if up_to_saturation else "the SLO held at every load tested: the limit lies higher")
    recs = [_recommend(name, steps, price, gpus, unit, held) for name in RECOMMEND_PRESETS]
    out = {"steps_analysed": [e["index"] for e in steps], "load_unit": unit, "knee": knee_out,
           "slo": None if slo is None else slo.to_dict(), "max_goodput": best,
           "quadrants": {"thresholds": thresholds,
                         "steps": {str(e["index"]): q for e, q in zip(steps, quads)}},
           "recommendations": recs}
    out["curve"] = [_curve_point(e) for e in steps]
    short = [e for e in entries if (e.get("load") or {}).get("short")]
    out["short_steps"] = [e["index"] for e in short]
    out["sentences"] = _sentences(out, steps, quads, unit, slo, held) + [
        f"Step {e['index']} ({e['load']['value']:g} {'concurrency' if e['load'].get('unit') == 'concurrency' else 'req/s'}) "
        f"{e['load']['short_reason']}." for e in short]
    return out


def _curve_point(e: dict[str, Any]) -> dict[str, Any]:
    """One analysed step as the comparison across a grid reads it: its load, p99s and which SLOs
    it met (``slo``: the sweep's own, None without one)."""
    s = e["summary"]
    met = {name: (g or {}).get("met") for name, g in (e.get("goodput_by_preset") or {}).items()}
    met["slo"] = dig(s, "goodput", "verdict", "met")
    return {"index": e["index"], "load": e["load"]["value"], "ttft_p99_ms": dig(s, "latency_ms", "ttft", "p99"),
            "tpot_p99_ms": dig(s, "latency_ms", "tpot", "p99"), "met": met}


def _recommend(name: str, steps: list[dict[str, Any]], price: float | None, gpus: int, unit: str,
               held: str) -> dict[str, Any]:
    slo = SLO_PRESETS[name]
    points = [_point(e, e["goodput_by_preset"][name]) for e in steps]
    best = slo_crossing(points, slo.attainment)
    rec: dict[str, Any] = {"slo": name, "limits": limits_text(slo), "load": None, "interpolated": False,
                           "good_requests_s": None, "output_tokens_s": None}
    if best is None:
        rec["text"] = f"{name} ({rec['limits']}): no load tested meets it; lower the load or add capacity"
        return rec
    rec.update({k: best[k] for k in ("load", "interpolated", "between", "good_requests_s",
                                     "good_output_tokens_s", "output_tokens_s")})
    rec.update(_cost(best, price, gpus))
    where = f"{best['load']:.3g} {unit}" + (" (interpolated)" if best["interpolated"] else "")
    cost = (f"${rec['usd_per_1m_output_tokens']:.3g} per 1M output tokens" if rec["usd_per_1m_output_tokens"] is not None
            else f"{rec['gpu_hours_per_1m_output_tokens']:.3g} GPU-hours per 1M output tokens"
            if rec["gpu_hours_per_1m_output_tokens"] is not None else "cost unknown")
    note = f"; {held}" if best["held_at_every_step"] else ""
    rec["text"] = (f"{name} ({rec['limits']}): run at {where}: {best['good_requests_s'] or 0:.3g} good req/s, "
                   f"{cost}{note}")
    return rec


def _sentences(out: dict[str, Any], steps: list[dict[str, Any]], quads: list[str | None], unit: str,
               slo: SLO | None, held: str) -> list[str]:
    if not steps:
        return ["No step completed validly: nothing to analyse."]
    said = []
    k = out["knee"]
    if k["index"] is None:
        said.append(f"No knee: {k['reason']}.")
    else:
        said.append(f"The knee is at {k['load']:g} {unit} ({k['output_tokens_s']:,.0f} output tok/s, p99 TTFT "
                    f"{k['ttft_p99_ms']:,.0f} ms): past it, latency rises faster than throughput.")
    if slo is not None:
        best = out["max_goodput"]
        if best is None:
            said.append(f"No step met the SLO ({limits_text(slo)}), not even the lowest load.")
        else:
            where = (f"{best['load']:.3g} {unit}, interpolated between {best['between'][0]:g} and {best['between'][1]:g}"
                     if best["interpolated"] else f"{best['load']:g} {unit}")
            cost = ""
            if best.get("usd_per_1m_good_output_tokens") is not None:
                cost = (f", ${best['usd_per_1m_output_tokens']:.3g} per 1M output tokens and "
                        f"${best['usd_per_1m_good_output_tokens']:.3g} per 1M good ones")
            limit = ("" if best["held_at_every_step"] or best["limit_load"] == best["load"]
                     else f"; the SLO holds up to about {best['limit_load']:.3g} {unit} (interpolated)")
            said.append(f"Max goodput under the SLO ({limits_text(slo)}): {best['good_requests_s'] or 0:.3g} req/s "
                        f"at {where}{cost}{limit}." + (f" {held[0].upper()}{held[1:]}." if best["held_at_every_step"] else ""))
    avoid = [e["load"]["value"] for e, q in zip(steps, quads) if q == "avoid"]
    if avoid:
        said.append(f"Avoid {', '.join(f'{v:g}' for v in avoid)} {unit}: {QUADRANT_WORDS['avoid']}.")
    return said


def compare_groups(analysis: dict[str, dict[str, Any]], slo: SLO | None) -> list[str]:
    """`--vary`: each combination's best SLO-meeting point against the first combination's, and
    why: both combinations' p99 TTFT and TPOT at one load they both ran (``_why_load``)."""
    if len(analysis) < 2:
        return []
    name = slo.name if slo is not None else "chat"
    key = None if slo is not None else "chat"

    def best(a: dict[str, Any]) -> float | None:
        if key is None:
            b = a["max_goodput"]
            return None if b is None else b["good_requests_s"]
        rec = next(r for r in a["recommendations"] if r["slo"] == key)
        return rec["good_requests_s"]

    groups = list(analysis)
    base_name, base = groups[0], best(analysis[groups[0]])
    said = []
    for g in groups[1:]:
        value = best(analysis[g])
        if value is None and base is None:
            line = f"Neither {base_name} nor {g} meets the {name} SLO at any load tested."
        elif base is None:
            line = f"{g} meets the {name} SLO at up to {value:.3g} good req/s; {base_name} meets it at no load tested."
        elif value is None:
            line = f"{g} meets the {name} SLO at no load tested; {base_name} reaches {base:.3g} good req/s."
        else:
            change = (value - base) / base * 100 if base else 0.0
            verb = "raises" if value > base else "lowers" if value < base else "keeps"
            line = (f"{g} {verb} max goodput under the {name} SLO from {base:.3g} to {value:.3g} req/s "
                    f"({change:+.0f}%) against {base_name} on this traffic.")
        said.append(line + _side_by_side(analysis[base_name], analysis[g], base_name, g, key or "slo"))
    return said


def _side_by_side(a: dict[str, Any], b: dict[str, Any], a_name: str, b_name: str, met_key: str) -> str:
    """" At X req/s, where A first misses the SLO: p99 TPOT 101 ms against 54 ms, p99 TTFT ..."
    (the lowest load both ran at which either misses it; else the highest load both ran)."""
    at_a = {p["load"]: p for p in a.get("curve") or []}
    at_b = {p["load"]: p for p in b.get("curve") or []}
    common = sorted(set(at_a) & set(at_b))
    if not common:
        return ""
    missed = [x for x in common if at_a[x]["met"].get(met_key) is False or at_b[x]["met"].get(met_key) is False]
    load = missed[0] if missed else common[-1]
    where = "where one of them first misses the SLO" if missed else "the highest load both ran"
    unit = a.get("load_unit", "")
    parts = []
    for metric, label in (("tpot_p99_ms", "p99 TPOT"), ("ttft_p99_ms", "p99 TTFT")):
        x, y = at_a[load].get(metric), at_b[load].get(metric)
        if x is not None and y is not None:
            parts.append(f"{label} {y:,.0f} ms for {b_name} against {x:,.0f} ms for {a_name}")
    return f" At {load:g} {unit} ({where}): {'; '.join(parts)}." if parts else ""


def frontier(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The analysed steps of every combination on the Pareto frontier of output tokens/s per user
    (1000 / p50 TPOT) against output tokens/s per GPU, fastest per user first."""
    points, steps = [], []
    for e in (e for e in entries if e["status"] == "ok" and e["role"] == "step"):
        tpot, thr = dig(e["summary"], "latency_ms", "tpot", "p50"), dig(e["summary"], "throughput", "output_tokens_s")
        if tpot and thr is not None:
            points.append((1000.0 / tpot, thr / (e.get("gpus") or 1)))
            steps.append(e)
    return [{"index": steps[i]["index"], "group": steps[i]["group"], "load": steps[i]["load"]["value"],
             "per_user_tokens_s": points[i][0], "per_gpu_tokens_s": points[i][1]}
            for i in reversed(pareto_frontier(points))]
