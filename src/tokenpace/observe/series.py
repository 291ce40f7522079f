"""Time series of the scraped gauges and counters, and what they add up to over a run.

Times are seconds from the start of the load (the first point, the preflight scrape, lies just
before 0). Gauges are as scraped; counters as their increase since the first scrape, so a series
starts at 0 and its last value is the run's total. A counter that went down (the engine
restarted) has no value from then on.
"""

from __future__ import annotations

from typing import Any

from .families import QUANTITIES
from .snapshot import Snapshot

GAUGE_PEAKS = ("waiting", "running", "kv_usage", "prefix_cache_hit_rate", "spec_acceptance_rate",
               "spec_accept_length")


def series(snapshots: list[Snapshot], start_ns: int) -> dict[str, list[Any]]:
    """{"t_s": [...], quantity: [...]} for every quantity seen in at least one scrape."""
    if not snapshots:
        return {"t_s": []}
    keys = [k for k in QUANTITIES if any(k in s.values for s in snapshots)]
    out: dict[str, list[Any]] = {"t_s": [round((s.t_ns - start_ns) / 1e9, 4) for s in snapshots]}
    for key in keys:
        if QUANTITIES[key].kind == "counter":
            out[key] = _increases([s.values.get(key) for s in snapshots])
        else:
            out[key] = [s.values.get(key) for s in snapshots]
    return out


def _increases(values: list[float | None]) -> list[float | None]:
    base = next((v for v in values if v is not None), None)
    out: list[float | None] = []
    broken = False
    for v in values:
        if v is None or base is None or broken:
            out.append(None)
        elif v < base:
            broken = True  # the counter was reset: nothing after it is comparable
            out.append(None)
        else:
            out.append(v - base)
    return out


def peaks(s: dict[str, list[Any]], *, until_s: float | None) -> dict[str, dict[str, float]]:
    """Max and mean of each gauge over the points taken during the load (0 <= t <= until_s), and
    for the queue the share of those points with a request waiting."""
    out: dict[str, dict[str, float]] = {}
    t = s.get("t_s", [])
    inside = [i for i, ts in enumerate(t) if ts >= 0 and (until_s is None or ts <= until_s)]
    for key in GAUGE_PEAKS:
        values = [s[key][i] for i in inside if key in s and s[key][i] is not None]
        if values:
            out[key] = {"max": max(values), "mean": sum(values) / len(values), "points": len(values)}
            if key == "waiting":
                out[key]["queued_fraction"] = sum(1 for v in values if v >= 1) / len(values)
    return out


def totals(s: dict[str, list[Any]], *, prompt_excludes_cached: bool = False) -> dict[str, float | None]:
    """Counter increases over the run, and the rates derived from them. ``prompt_excludes_cached``:
    the engine's prompt tokens leave out cache hits (llama.cpp), so its queries are their sum."""
    def total(key: str) -> float | None:
        values = [v for v in s.get(key, []) if v is not None]
        return values[-1] if values else None

    out: dict[str, float | None] = {k: total(k) for k in QUANTITIES
                                    if QUANTITIES[k].kind == "counter" and k in s}
    if prompt_excludes_cached and out.get("prompt_tokens") is not None and out.get("prefix_cache_hits") is not None:
        out["prefix_cache_queries"] = out["prompt_tokens"] + out["prefix_cache_hits"]
    queries, hits = out.get("prefix_cache_queries"), out.get("prefix_cache_hits")
    if queries and hits is not None:
        out["prefix_cache_hit_rate"] = hits / queries
    drafts, draft_tokens, accepted = (out.get(k) for k in ("spec_drafts", "spec_draft_tokens",
                                                            "spec_accepted_tokens"))
    if draft_tokens and accepted is not None:
        out["spec_acceptance_rate"] = accepted / draft_tokens  # REFERENCE section 3
    if drafts and accepted is not None:
        out["spec_mean_acceptance_length"] = 1 + accepted / drafts
    return out
