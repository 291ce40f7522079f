"""The HTML report of a sweep: curves across steps, then the recommended operating points.
Same page conventions as the run report (inline CSS and SVG, no script)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenpace.reports.gates import figure_value
from tokenpace.reports.html import sweep_plots
from tokenpace.reports.html.markup import esc, num, plot, section, table
from tokenpace.reports.html.style import CSS
from tokenpace.reports.html.sweep_plots import SweepStep


def render_sweep_html(title: str, steps: Sequence[SweepStep], *, load_label: str = "offered load",
                      limits_ms: dict[str, float] | None = None,
                      recommendations: Sequence[dict[str, Any]] = (), findings: Sequence[str] = (),
                      cost_unit: str = "$") -> str:
    """``cost_unit``: "$" (the summaries' cost section) or "GPU-hours" (each summary carries
    ``gpu_hours.per_1m_output`` / ``per_1m_good_output``: the cost when no price was given)."""
    limits_ms = limits_ms or {}
    cost_series = ((("cost.usd_per_1m_output_tokens", "per 1M output"),
                    ("cost.usd_per_1m_good_output_tokens", "per 1M good"))
                   if cost_unit == "$" else
                   (("gpu_hours.per_1m_output", "per 1M output"), ("gpu_hours.per_1m_good_output", "per 1M good")))
    latency = plot("sweep-latency", sweep_plots.latency_vs_throughput_svg(steps, limits_ms),
                   "p50 solid, p99 dashed, one colour per combination; the star marks the knee; dotted red: "
                   "the SLO limit.")
    figures = [
        plot("sweep-goodput", sweep_plots.per_load_svg(
            steps, "sweep-goodput", "Goodput against offered load", "requests/s",
            (("goodput.requests_s", "goodput"), ("throughput.requests_s", "throughput")), load_label)),
        plot("sweep-cost", sweep_plots.per_load_svg(
            steps, "sweep-cost", "Cost per 1M tokens against load", cost_unit, cost_series, load_label)),
    ]
    rows = [(s.group or "—", f"{s.offered_load:g}", "yes" if s.valid else "NO (excluded)",
             num(figure_value(s.summary, "throughput.output_tokens_s")),
             num(figure_value(s.summary, "ttft.p99")), num(figure_value(s.summary, "tpot.p99")),
             num(figure_value(s.summary, "goodput.requests_s"), 2),
             num(figure_value(s.summary, cost_series[0][0]), 3))
            for s in sorted(steps, key=lambda s: (s.group, s.offered_load))]
    steps_table = table(("combination", load_label, "valid", "output tok/s", "TTFT p99 ms", "TPOT p99 ms",
                         "goodput req/s", f"{'$' if cost_unit == '$' else 'GPU-h'} / 1M output"), rows)
    recs = (table(list(recommendations[0]), [list(r.values()) for r in recommendations])
            if recommendations else "<p>No recommendation in this sweep.</p>")
    curves = latency + '<div class="grid">' + "".join(figures) + "</div>"
    said = ("<ul>" + "".join(f"<li>{esc(f)}</li>" for f in findings) + "</ul>") if findings else ""
    body = (f"<h1>{esc(title)}</h1>" + (section("findings", "Findings", said) if said else "")
            + section("curves", "Curves", curves)
            + section("recommendations", "Recommended operating points", recs)
            + section("steps", "Steps", steps_table))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")
