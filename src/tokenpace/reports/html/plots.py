"""The run report's figures: latency distributions, the per-request timeline, load over time and
the engine timeline. Each function takes plot-ready series (``reports.series``) and returns SVG."""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenpace.reports.html.svg import COLORS, figure, to_svg
from tokenpace.reports.series import LoadOverTime, RequestBars, cdf_points

LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL (per token)", "e2e": "E2E"}


def cdf_svg(metric: str, samples_ms: np.ndarray, limit_ms: float | None, *, ascending: bool = False) -> str:
    """``ascending``: the samples are already sorted (a page draws the CDF and the histogram of
    millions of samples from one sort)."""
    name = f"cdf-{metric}"
    if not ascending:
        samples_ms = np.sort(samples_ms)
    with figure(name) as (fig, ax):
        x, y = cdf_points(samples_ms, ascending=True)
        ax.plot(x, y, color=COLORS["base"], linewidth=1.6, drawstyle="steps-post")
        for q, key in ((0.5, "p50"), (0.99, "p99")):
            value = float(np.quantile(samples_ms, q))
            ax.axvline(value, color=COLORS[key], linestyle=":", linewidth=1)
            ax.annotate(f"{key} {value:,.1f}", (value, q), xytext=(4, -10), textcoords="offset points",
                        color=COLORS[key], fontsize=8)
        _limit(ax, limit_ms)
        ax.set(title=f"{LABELS[metric]} CDF", xlabel="ms", ylabel="fraction ≤ x", ylim=(0, 1.02))
        _log_if_wide(ax, samples_ms)
        return to_svg(fig, name)


def histogram_svg(metric: str, samples_ms: np.ndarray, limit_ms: float | None) -> str:
    name = f"hist-{metric}"
    with figure(name) as (fig, ax):
        ax.hist(samples_ms, bins=min(60, max(10, int(np.sqrt(samples_ms.size)))),
                histtype="stepfilled", color=COLORS["base"], alpha=0.75)
        _limit(ax, limit_ms)
        unit = "tokens" if metric == "itl" else "requests"
        ax.set(title=f"{LABELS[metric]} histogram", xlabel="ms", ylabel=unit)
        return to_svg(fig, name)


def _limit(ax: Any, limit_ms: float | None) -> None:
    if limit_ms is not None:
        ax.axvline(limit_ms, color=COLORS["limit"], linewidth=1.2, linestyle="--", label=f"SLO ≤ {limit_ms:g} ms")
        ax.legend(loc="lower right", fontsize=8, frameon=False)


def _log_if_wide(ax: Any, ordered_ms: np.ndarray) -> None:
    lo = float(ordered_ms[0])
    if lo > 0 and float(ordered_ms[-1]) / lo > 100:
        ax.set_xscale("log")


def request_timeline_svg(bars: RequestBars) -> str:
    """Each request a horizontal line: grey from scheduled to sent (client-side wait), orange to
    the first token (queueing + prefill), blue while streaming. Drawn as three paths in all (one
    per phase, segments separated by NaN), which keeps the SVG small."""
    name = "request-timeline"
    rows = len(bars.index)
    height_in = min(9.0, 2.2 + rows * 0.012)
    with figure(name, width_in=10.4, height_in=height_in) as (fig, ax):
        y = np.arange(rows)
        width = max(0.4, min(4.0, 0.7 * (height_in - 1.2) * 72 / max(rows, 1)))  # points per row
        for start, stop, key, label in ((bars.scheduled_s, bars.sent_s, "wait", "scheduled → sent"),
                                        (bars.sent_s, bars.first_token_s, "ttft", "sent → first token"),
                                        (bars.first_token_s, bars.end_s, "stream", "streaming")):
            xs, ys = _segments(start, stop, y)
            ax.plot(xs, ys, color=COLORS[key], linewidth=width, solid_capstyle="butt", label=label)
        failed = np.array([s != "ok" for s in bars.status])
        if failed.any():
            ax.plot(np.where(np.isnan(bars.end_s), bars.sent_s, bars.end_s)[failed], y[failed], "x",
                    color=COLORS["error"], markersize=4, label="not ok")
        shown = (f"{rows} of {bars.total} requests, evenly subsampled" if bars.subsampled
                 else f"all {rows} requests")
        ax.set(title=f"Per-request timeline ({shown}, in send order)", xlabel="seconds from start",
               ylabel="request (send order)")
        ax.invert_yaxis()
        ax.legend(loc="upper right", fontsize=8, ncols=4)
        return to_svg(fig, name)


def _segments(start: np.ndarray, stop: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = ~(np.isnan(start) | np.isnan(stop))
    n = int(keep.sum())
    xs = np.full(n * 3, np.nan)
    ys = np.full(n * 3, np.nan)
    xs[0::3], xs[1::3] = start[keep], stop[keep]
    ys[0::3], ys[1::3] = y[keep], y[keep]
    return xs, ys


def load_over_time_svg(load: LoadOverTime, target_concurrency: int | None) -> str:
    name = "load-over-time"
    with figure(name, width_in=10.4, height_in=4.4, rows=2, sharex=True) as (fig, (top, bottom)):
        top.step(load.bin_start_s, load.output_tokens_s, where="post", color=COLORS["stream"])
        twin = top.twinx()
        twin.step(load.bin_start_s, load.completed_s, where="post", color=COLORS["ttft"], linewidth=1)
        twin.set_ylabel("requests/s", color=COLORS["ttft"])
        twin.grid(False)
        top.set(title=f"Throughput over time ({load.bin_s:g} s bins)", ylabel="output tokens/s")
        bottom.step(load.step_t_s, load.in_flight, where="post", color=COLORS["p99"])
        if target_concurrency:
            bottom.axhline(target_concurrency, color=COLORS["limit"], linestyle="--", linewidth=1,
                           label=f"target concurrency {target_concurrency}")
            bottom.legend(loc="lower center", fontsize=8, frameon=False)
        bottom.set(title="Requests in flight (sent, not yet done)", xlabel="seconds from start",
                   ylabel="requests")
        return to_svg(fig, name)


def engine_timeline_svg(rows: list[dict[str, Any]]) -> str:
    """The simulator's engine timeline: queue depth and running sequences, KV-cache usage,
    prefix-cache hit rate."""
    name = "engine-timeline"
    t = np.array([r.get("t_ns", 0) for r in rows], dtype=np.float64) / 1e9

    def col(key: str) -> np.ndarray:
        return np.array([np.nan if r.get(key) is None else r[key] for r in rows], dtype=np.float64)

    with figure(name, width_in=10.4, height_in=6.0, rows=3, sharex=True) as (fig, (q, kv, hit)):
        q.step(t, col("waiting"), where="post", color=COLORS["ttft"], label="waiting (queue depth)")
        q.step(t, col("running"), where="post", color=COLORS["stream"], label="running")
        q.set(title="Engine: queue depth and running sequences", ylabel="sequences")
        q.legend(loc="upper right", fontsize=8, frameon=False)
        kv.step(t, col("kv_usage") * 100, where="post", color=COLORS["p99"])
        kv.set(title="KV-cache usage", ylabel="% of blocks", ylim=(0, 105))
        hit.step(t, col("prefix_cache_hit_rate") * 100, where="post", color=COLORS["p50"])
        hit.set(title="Prefix-cache hit rate", ylabel="% of prompt tokens", ylim=(0, 105),
                xlabel="seconds from start (virtual time)")
        return to_svg(fig, name)
