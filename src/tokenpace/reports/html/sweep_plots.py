"""Sweep figures from the steps' summaries (each step's summary is a run summary): latency
percentiles against throughput with the SLO limits and the knee, goodput against offered load
(with y = x: every offered request good), cost per 1M tokens against load (log scale), and output
tokens/s per user against output tokens/s per GPU with the Pareto frontier (the trade-off aiperf
and NVIDIA's material plot); one colour per combination of a --vary grid.

Axes fit the data: an SLO limit far above the curves is not drawn as a line that squashes them,
but marked by an arrow at the top of the axes. Legends sit outside the axes, right of them, so
they never cover a curve.

They take a neutral list of ``SweepStep``s; ``sweep_document.py`` makes them from a sweep file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import cycle
from typing import Any

from tokenpace.reports.gates import figure_value
from tokenpace.reports.html.svg import COLORS, figure, to_svg
from tokenpace.sweep.analysis import pareto_frontier

PALETTE = ("#2e86de", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#d35400")


@dataclass(frozen=True)
class SweepStep:
    offered_load: float  # concurrency or request rate, as the sweep varied it
    summary: dict[str, Any]
    group: str = ""  # the --vary combination; "" for a plain sweep
    valid: bool = True  # failed or invalid steps are drawn hollow and left out of the analysis
    knee: bool = False
    achieved_load: float | None = None  # what the step achieved of ``offered_load``, same unit
    gpus: int = 1  # GPUs serving the step (per-GPU throughput)

LEGEND_IN = 2.4  # inches right of the axes for the legend
LIMIT_IN_VIEW = 1.25  # an SLO limit up to this many times the highest point is drawn in the axes


def _groups(steps: Sequence[SweepStep]) -> dict[str, list[SweepStep]]:
    out: dict[str, list[SweepStep]] = {}
    for step in sorted(steps, key=lambda s: s.offered_load):
        out.setdefault(step.group, []).append(step)
    return out


def _xy(steps: list[SweepStep], x_path: str | None, y_path: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for s in steps:
        x = s.offered_load if x_path is None else figure_value(s.summary, x_path)
        y = figure_value(s.summary, y_path)
        if x is not None and y is not None and s.valid:
            xs.append(x)
            ys.append(y)
    return xs, ys


def latency_vs_throughput_svg(steps: Sequence[SweepStep], limits_ms: dict[str, float]) -> str:
    name = "sweep-latency"
    width = 10.4 + LEGEND_IN
    with figure(name, width_in=width, height_in=3.6, cols=2) as (fig, axes):
        for ax, metric, label in zip(axes, ("ttft", "tpot"), ("TTFT", "TPOT")):
            knee_labelled = False
            top = 0.0
            for color, (group, members) in zip(cycle(PALETTE), _groups(steps).items()):
                for q, style in (("p50", "-o"), ("p99", "--s")):  # one colour per combination
                    xs, ys = _xy(members, "throughput.output_tokens_s", f"{metric}.{q}")
                    ax.plot(xs, ys, style, color=color, markersize=3.5, label=f"{group} {q}".strip())
                    top = max([top, *ys])
                for s in (s for s in members if s.knee and s.valid):
                    ax.plot(figure_value(s.summary, "throughput.output_tokens_s"),
                            figure_value(s.summary, f"{metric}.p99"), "*", color=COLORS["limit"],
                            markersize=12, label=None if knee_labelled else "knee")
                    knee_labelled = True
            ax.set(title=f"{label} against throughput", xlabel="output tokens/s", ylabel="ms")
            _slo_limit(ax, limits_ms.get(metric), top)
        _legend_outside(fig, axes, width)
        return to_svg(fig, name)


def _slo_limit(ax: Any, limit_ms: float | None, top: float) -> None:
    """The SLO limit as a dotted line when it lies near the data; far above it, an arrow at the
    top of the axes saying where it is, so the curves keep the whole height."""
    if limit_ms is None:
        return
    if top <= 0 or limit_ms <= LIMIT_IN_VIEW * top:
        ax.axhline(limit_ms, color=COLORS["limit"], linestyle=":", label=f"SLO ≤ {limit_ms:g} ms")
        return
    # Headroom above the highest point holds the note, so that it never covers a curve.
    ax.set_ylim(0, top * 1.3)
    ax.annotate(f"SLO ≤ {limit_ms:,.0f} ms (above)", xy=(0.02, 1.0), xycoords="axes fraction",
                xytext=(0.06, 0.91), textcoords="axes fraction", ha="left", va="center", fontsize=7,
                color=COLORS["limit"], arrowprops={"arrowstyle": "->", "color": COLORS["limit"]})


def _legend_outside(fig: Any, axes: Any, width_in: float) -> None:
    """One legend for the figure, right of the axes (the labels of every axes, each once)."""
    fig.subplots_adjust(right=1 - (LEGEND_IN + 0.2) / width_in)
    seen: dict[str, Any] = {}
    for ax in (axes if hasattr(axes, "__len__") else [axes]):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="upper left", fontsize=7, frameon=False,
                   bbox_to_anchor=(1 - LEGEND_IN / width_in, 1 - 0.3 / fig.get_figheight()))


def per_load_svg(steps: Sequence[SweepStep], name: str, title: str, ylabel: str,
                 series: Sequence[tuple[str, str]], load_label: str, *, identity: bool = False,
                 log_y: bool = False) -> str:
    """One or more summary figures (path, label) against offered load. ``identity``: draw y = x
    (the same unit on both axes: every offered request served, or good); ``log_y``: a log scale
    (cost spans orders of magnitude between a light and a saturated load)."""
    width = 5.2 + LEGEND_IN
    with figure(name, width_in=width) as (fig, ax):
        ys_all: list[float] = []
        for color, (group, members) in zip(cycle(PALETTE), _groups(steps).items()):
            for (path, label), style in zip(series, ("-o", "--s", ":^")):
                xs, ys = _xy(members, None, path)
                ax.plot(xs, ys, style, color=color, markersize=3.5, label=f"{group} {label}".strip())
                ys_all += ys
        if identity:
            loads = [s.offered_load for s in steps if s.valid]
            if loads:
                hi = max(loads)
                ax.plot([0, hi], [0, hi], color=COLORS["wait"], linestyle=":", linewidth=1,
                        label="y = x (all offered load good)")
        if log_y and any(y > 0 for y in ys_all):
            ax.set_yscale("log")
        ax.set(title=title, xlabel=load_label, ylabel=ylabel + (" (log scale)" if log_y else ""))
        _legend_outside(fig, ax, width)
        return to_svg(fig, name)


def per_user_vs_per_gpu_svg(steps: Sequence[SweepStep]) -> str:
    """Output tokens/s per user (1000 / p50 TPOT: how fast one stream reads) against output
    tokens/s per GPU, every valid step of every combination, and the Pareto frontier across them."""
    name = "sweep-pareto"
    width = 5.2 + LEGEND_IN
    with figure(name, width_in=width, height_in=3.4) as (fig, ax):
        points: list[tuple[float, float]] = []
        for color, (group, members) in zip(cycle(PALETTE), _groups(steps).items()):
            xs, ys = [], []
            for s in members:
                point = per_user_and_per_gpu(s)
                if point is not None:
                    xs.append(point[0])
                    ys.append(point[1])
            ax.plot(xs, ys, "o", color=color, markersize=4, alpha=0.85, label=group or "steps")
            points += list(zip(xs, ys))
        front = [points[i] for i in pareto_frontier(points)]
        if front:
            ax.plot([p[0] for p in front], [p[1] for p in front], "-", color="#333333", linewidth=1.2,
                    label="Pareto frontier")
        ax.set(title="Throughput per GPU against speed per user", xlabel="output tokens/s per user (1000 / p50 TPOT)",
               ylabel="output tokens/s per GPU")
        _legend_outside(fig, ax, width)
        return to_svg(fig, name)


def per_user_and_per_gpu(step: SweepStep) -> tuple[float, float] | None:
    tpot = figure_value(step.summary, "tpot.p50")
    thr = figure_value(step.summary, "throughput.output_tokens_s")
    if not step.valid or not tpot or thr is None:
        return None
    return 1000.0 / tpot, thr / max(step.gpus, 1)
