"""The sweep report from a sweep file: the adapter from the document (``kind: "sweep"``) to the
neutral ``SweepStep``s the sweep page draws. The auto probes are left off the curves (their load is
a concurrency on a rate axis) and named in the findings; failed, invalid, interrupted and skipped
steps are kept in the steps table and left out of the curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenpace.reports.html.sweep_page import render_sweep_html
from tokenpace.reports.html.sweep_plots import SweepStep
from tokenpace.reports.sweep_provenance import headline, provenance


def sweep_steps(doc: dict[str, Any]) -> list[SweepStep]:
    analysis = doc.get("analysis") or {}
    knees = {a["knee"]["index"] for a in analysis.values() if a.get("knee", {}).get("index") is not None}
    out = []
    for e in doc.get("steps", []):
        if e["role"] != "step":
            continue
        summary = dict(e.get("summary") or {})
        summary["gpu_hours"] = {"per_1m_output": e.get("gpu_hours_per_1m_output_tokens"),
                                "per_1m_good_output": e.get("gpu_hours_per_1m_good_output_tokens")}
        out.append(SweepStep(offered_load=e["load"]["value"], summary=summary, group=e["group"],
                             valid=e["status"] == "ok", knee=e["index"] in knees,
                             achieved_load=e["load"].get("achieved"), gpus=e.get("gpus") or 1))
    return out


def _recommendations(doc: dict[str, Any], load_label: str, priced: bool) -> list[dict[str, Any]]:
    """One row per (combination, SLO): the sweep's own SLO first when it has one, then each preset."""
    rows = []
    for group, a in (doc.get("analysis") or {}).items():
        own = a.get("max_goodput")
        recs = list(a.get("recommendations", []))
        if a.get("slo") and (doc.get("slo") or "") not in {r["slo"] for r in recs}:  # a preset's row says it
            recs.insert(0, {"slo": f"{doc.get('slo') or 'given'} (this sweep's SLO)", "limits": _limits(a["slo"]),
                            **({"load": None} if own is None else own)})
        for r in recs:
            cost = r.get("usd_per_1m_output_tokens") if priced else r.get("gpu_hours_per_1m_output_tokens")
            row = {"combination": group or "—", "SLO": r["slo"], "limits": r["limits"],
                   load_label: "none meets it" if r["load"] is None else
                   f"{r['load']:.3g}" + (" (interpolated)" if r.get("interpolated") else ""),
                   "good req/s": "—" if r.get("good_requests_s") is None else f"{r['good_requests_s']:.3g}",
                   ("$ / 1M output" if priced else "GPU-h / 1M output"): "—" if cost is None else f"{cost:.3g}"}
            rows.append(row)
    return rows


def _limits(slo: dict[str, Any]) -> str:
    from tokenpace.metrics import SLO
    from tokenpace.sweep.findings import limits_text

    return limits_text(SLO(**{k: slo.get(k) for k in ("ttft_ms", "tpot_ms", "e2e_ms")},
                           attainment=slo.get("attainment") or 0.9))


def render_sweep_document(doc: dict[str, Any]) -> str:
    c = doc.get("config") or {}
    load_label = "concurrency" if c.get("axis") == "concurrency" else "request rate (req/s)"
    priced = (c.get("base") or {}).get("gpu_hour_usd") is not None
    slo = next((a["slo"] for a in (doc.get("analysis") or {}).values() if a.get("slo")), None)
    limits = {} if not slo else {m: slo[f"{m}_ms"] for m in ("ttft", "tpot") if slo.get(f"{m}_ms")}
    findings = [f"Rates{' for ' + g if g else ''}: {r.get('how', '')}" for g, r in (doc.get("rate_choice") or {}).items()]
    for group, a in (doc.get("analysis") or {}).items():
        findings += [f"{group}: {s}" if group else s for s in a.get("sentences", [])]
    findings += list(doc.get("comparison") or [])
    if doc.get("interrupted"):
        findings.insert(0, "INTERRUPTED: the sweep stopped early; the completed steps are kept.")
    title = "tokenpace sweep" + (" (simulated)" if c.get("simulated") else "")
    return render_sweep_html(title, sweep_steps(doc), load_label=load_label, limits_ms=limits,
                             recommendations=_recommendations(doc, load_label, priced), findings=findings,
                             cost_unit="$" if priced else "GPU-hours", headline=headline(doc),
                             configuration=provenance(doc), exact=c, rate_axis=c.get("axis") != "concurrency",
                             perceived=doc.get("perceived") or ())


def write_sweep_html(doc: dict[str, Any], path: str | Path) -> Path:
    from tokenpace.reports.html import write_page

    return write_page(render_sweep_document(doc), path)
