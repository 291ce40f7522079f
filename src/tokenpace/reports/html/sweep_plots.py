"""Sweep figures from the steps' summaries (each step's summary is a run summary): latency
percentiles against throughput with the SLO limits and the knee, goodput against offered load,
and cost per 1M tokens against load; one curve per combination of a --vary grid.

They take a neutral list of ``SweepStep``s; ``sweep_document.py`` makes them from a sweep file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import cycle
from typing import Any

from tokenpace.reports.gates import figure_value
from tokenpace.reports.html.svg import COLORS, figure, to_svg

PALETTE = ("#2e86de", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#d35400")


@dataclass(frozen=True)
class SweepStep:
    offered_load: float  # concurrency or request rate, as the sweep varied it
    summary: dict[str, Any]
    group: str = ""  # the --vary combination; "" for a plain sweep
    valid: bool = True  # failed or invalid steps are drawn hollow and left out of the analysis
    knee: bool = False


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
    with figure(name, width_in=10.4, height_in=3.6, cols=2) as (fig, axes):
        for ax, metric, label in zip(axes, ("ttft", "tpot"), ("TTFT", "TPOT")):
            knee_labelled = False
            for color, (group, members) in zip(cycle(PALETTE), _groups(steps).items()):
                for q, style in (("p50", "-o"), ("p99", "--s")):  # one colour per combination
                    xs, ys = _xy(members, "throughput.output_tokens_s", f"{metric}.{q}")
                    ax.plot(xs, ys, style, color=color, markersize=3.5, label=f"{group} {q}".strip())
                for s in (s for s in members if s.knee and s.valid):
                    ax.plot(figure_value(s.summary, "throughput.output_tokens_s"),
                            figure_value(s.summary, f"{metric}.p99"), "*", color=COLORS["limit"],
                            markersize=12, label=None if knee_labelled else "knee")
                    knee_labelled = True
            if metric in limits_ms:
                ax.axhline(limits_ms[metric], color=COLORS["limit"], linestyle=":",
                           label=f"SLO ≤ {limits_ms[metric]:g} ms")
            ax.set(title=f"{label} against throughput", xlabel="output tokens/s", ylabel="ms")
            ax.legend(fontsize=7, frameon=False)
        return to_svg(fig, name)


def per_load_svg(steps: Sequence[SweepStep], name: str, title: str, ylabel: str,
                 series: Sequence[tuple[str, str]], load_label: str) -> str:
    """One or more summary figures (path, label) against offered load."""
    with figure(name) as (fig, ax):
        for color, (group, members) in zip(cycle(PALETTE), _groups(steps).items()):
            for (path, label), style in zip(series, ("-o", "--s", ":^")):
                xs, ys = _xy(members, None, path)
                ax.plot(xs, ys, style, color=color, markersize=3.5, label=f"{group} {label}".strip())
        ax.set(title=title, xlabel=load_label, ylabel=ylabel)
        ax.legend(fontsize=7, frameon=False)
        return to_svg(fig, name)
