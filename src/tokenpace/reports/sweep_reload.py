"""Load a sweep file for reporting; with another SLO, price or GPU count, judge it again: every
step's summary is recomputed from its own records and the analysis is redone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenpace.metrics import parse_slo
from tokenpace.results import load_run
from tokenpace.sweep.findings import analyse_group, compare_groups
from tokenpace.sweep.steps import gpu_hours_per_1m


def rejudge_sweep(doc: dict[str, Any], path: Path, *, slo: str | None = None,
                  gpu_hour_usd: float | None = None, gpus: int | None = None) -> dict[str, Any]:
    if slo is None and gpu_hour_usd is None and gpus is None:
        return doc
    c = doc.get("config") or {}
    base = c.setdefault("base", {})
    slo = slo if slo is not None else doc.get("slo")
    price = gpu_hour_usd if gpu_hour_usd is not None else base.get("gpu_hour_usd")
    for e in doc.get("steps", []):
        if not e.get("result_path"):
            continue
        n = gpus if gpus is not None else e.get("gpus") or 1
        step = load_run(path.parent / e["result_path"], slo=slo, gpu_hour_usd=price, gpus=n)
        e["summary"], e["gpus"] = step["summary"], n
        e["gpu_hours_per_1m_output_tokens"] = gpu_hours_per_1m(n, e["summary"]["throughput"]["output_tokens_s"])
        e["gpu_hours_per_1m_good_output_tokens"] = gpu_hours_per_1m(
            n, (e["summary"].get("goodput") or {}).get("output_tokens_s"))
    doc["slo"], base["gpu_hour_usd"] = slo, price
    parsed = parse_slo(slo) if slo else None
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in doc.get("steps", []):
        groups.setdefault(e["group"], []).append(e)
    doc["analysis"] = {g: analyse_group(members, axis=c.get("axis", "rate"), slo=parsed, price=price,
                                        up_to_saturation=bool(c.get("auto")) and not any(
                                            e["status"] == "skipped" for e in members))
                       for g, members in groups.items()}
    doc["comparison"] = compare_groups(doc["analysis"], parsed)
    return doc
