"""One step's entry in the sweep document, from the run (bench or sim) that the step was.

The entry carries the step's whole summary, so the sweep file alone is enough for every analysis
and plot; the step's own result file (records beside it) stays on disk for `tokenpace report`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tokenpace.metrics import SLO_PRESETS, judge_goodputs
from tokenpace.results import RunResult
from tokenpace.sweep.achieved import load_figures

# The presets a sweep recommends an operating point for (REFERENCE section 2).
RECOMMEND_PRESETS = ("chat", "code", "summarization", "batch")
ROLES = ("sync", "saturation", "step")  # sync/saturation: the --rate auto probes
STATUSES = ("ok", "invalid", "failed", "interrupted", "skipped")


def gpu_hours_per_1m(gpus: int, tokens_s: float | None) -> float | None:
    """GPU-hours one million tokens take at ``tokens_s``: the cost with the price left out."""
    return None if not tokens_s else gpus / (tokens_s * 3600.0) * 1e6


def entry_of_result(result: RunResult, *, index: int, role: str, group: str, combo: dict[str, str],
                    axis: str, value: float, gpus: int, sweep_path: Path) -> dict[str, Any]:
    """The entry of a step that ran (status ok, invalid, failed by its records, or interrupted)."""
    summary = result.summary
    status, reason = result.status.status, result.status.reason  # the one rule (results.status)
    if result.record_figures is None:
        result.record_figures = record_figures(result, axis=axis, value=value)
    figures = result.record_figures
    thr = summary["throughput"]
    good = summary.get("goodput") or {}
    return {
        "index": index, "role": role, "group": group, "vary": combo,
        "load": {"axis": axis, "value": value, **_shape(result), **figures["load"]},
        "status": status, "reason": reason,
        "result_path": os.path.relpath(result.result_path, sweep_path.parent),
        "target": result.target,
        "summary": summary,
        "load_generator": result.load,
        "engine_metrics": result.engine_metrics,  # --scrape-metrics
        # --sim --calibration: whether the step stayed within the decode batches the calibration saw
        "calibration": (result.engine or {}).get("calibration"),
        "goodput_by_preset": figures["goodput_by_preset"],
        "gpus": gpus,
        "gpu_hours_per_1m_output_tokens": gpu_hours_per_1m(gpus, thr.get("output_tokens_s")),
        "gpu_hours_per_1m_good_output_tokens": gpu_hours_per_1m(gpus, good.get("output_tokens_s")),
    }


def record_figures(result: RunResult, *, axis: str, value: float) -> dict[str, Any]:
    """What a step's entry needs from its records: goodput under each recommended preset, and the
    offered and achieved load (``achieved.load_figures``)."""
    by_preset = {}
    judged = judge_goodputs(result.records, [SLO_PRESETS[name] for name in RECOMMEND_PRESETS],
                            window=result.window_ns)
    for name, g in zip(RECOMMEND_PRESETS, judged):
        by_preset[name] = {"fraction": g["fraction"], "met": g["verdict"]["met"],
                           "good_requests_s": g["requests_s"], "good_output_tokens_s": g["output_tokens_s"]}
    return {"goodput_by_preset": by_preset,
            "load": load_figures(result, concurrency_axis=axis == "concurrency", offered=value)}


def entry_without_run(*, index: int, role: str, group: str, combo: dict[str, str], axis: str,
                      value: float, status: str, reason: str) -> dict[str, Any]:
    """A step that has no run: failed before any request (an error), or skipped."""
    return {"index": index, "role": role, "group": group, "vary": combo,
            "load": {"axis": axis, "value": value}, "status": status, "reason": reason,
            "result_path": None, "target": None, "summary": None, "load_generator": None,
            "engine_metrics": None,
            "goodput_by_preset": None, "gpus": None, "gpu_hours_per_1m_output_tokens": None,
            "gpu_hours_per_1m_good_output_tokens": None}


def _shape(result: RunResult) -> dict[str, Any]:
    c = result.load_config
    return {"concurrency": c.concurrency if c.rate is not None else c.effective_concurrency(),
            "rate": c.rate, "requests": c.requests, "duration_s": c.duration_s}

