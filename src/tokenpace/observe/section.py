"""The result document's ``engine_metrics`` section, from a finished ``EngineWatch``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenpace.record import RequestRecord

from .compare import engine_vs_client
from .diagnose import diagnose
from .families import PROMPT_TOKENS_EXCLUDE_CACHED, QUANTITIES
from .histograms import describe_ms
from .scrape import EngineWatch
from .series import peaks, series, totals


def engine_metrics_section(watch: EngineWatch, records: Sequence[RequestRecord], *,
                           start_ns: int | None, prefix_shared: bool | None) -> dict[str, Any]:
    """Everything the README documents under ``engine_metrics``. ``start_ns``: the load's start
    (time 0 of the series); ``prefix_shared``: whether the workload's prompts share prefixes
    (None: unknown)."""
    snaps = watch.snapshots
    t0 = start_ns if start_ns is not None else (snaps[0].t_ns if snaps else 0)
    done = [r.done_ns for r in records if r.done_ns is not None]
    until_s = (max(done) - t0) / 1e9 if done else None
    s = series(snaps, t0)
    run_peaks = peaks(s, until_s=until_s)
    run_totals = totals(s, prompt_excludes_cached=watch.engine in PROMPT_TOKENS_EXCLUDE_CACHED)
    base, final = watch.baseline, watch.final
    hists: dict[str, Any] = {}
    if base is not None and final is not None:
        for key in QUANTITIES:
            if QUANTITIES[key].kind == "histogram" and key in final.histograms:
                hists[key] = describe_ms(final.histograms[key].minus(base.histograms.get(key)))
    vs_client = engine_vs_client(hists, records)
    return {
        "engine": watch.engine,
        "engine_label": watch.engine_label,
        "url": watch.url,
        "interval_s": watch.interval_s,
        "scrapes": {"ok": watch.counts.ok, "failed": watch.counts.failed,
                    "failed_by_kind": dict(watch.counts.failed_by_kind),
                    "last_error": watch.counts.last_error},
        "preflight_error": watch.preflight_error,
        "series": s,
        "peaks": run_peaks,
        "totals": run_totals,
        "histograms_ms": hists,
        "histogram_window_s": None if base is None or final is None else
        [round((base.t_ns - t0) / 1e9, 4), round((final.t_ns - t0) / 1e9, 4)],
        "vs_client": vs_client,
        "diagnosis": diagnose(run_peaks, run_totals, prefix_shared=prefix_shared, ttft=vs_client.get("ttft"),
                              points_in_load=_points_in_load(s["t_s"], until_s)),
    }


def _points_in_load(t_s: list[float], until_s: float | None) -> int:
    return sum(1 for t in t_s if t >= 0 and (until_s is None or t <= until_s))
