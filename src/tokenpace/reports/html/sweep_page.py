"""The HTML report of a sweep: curves across steps, then the recommended operating points.
Same page conventions as the run report (inline CSS and SVG, no script)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tokenpace.reports.gates import figure_value
from tokenpace.reports.html import sweep_plots
from tokenpace.reports.html.markup import esc, ms, num, plot, section, table
from tokenpace.reports.html.style import CSS
from tokenpace.reports.html.sweep_plots import SweepStep


def render_sweep_html(title: str, steps: Sequence[SweepStep], *, load_label: str = "offered load",
                      limits_ms: dict[str, float] | None = None,
                      recommendations: Sequence[dict[str, Any]] = (), findings: Sequence[str] = (),
                      cost_unit: str = "$", headline: str = "",
                      configuration: Sequence[tuple[str, str]] = (), exact: dict[str, Any] | None = None,
                      rate_axis: bool = False, perceived: Sequence[dict[str, Any]] = ()) -> str:
    """``cost_unit``: "$" (the summaries' cost section) or "GPU-hours" (each summary carries
    ``gpu_hours.per_1m_output`` / ``per_1m_good_output``: the cost when no price was given).
    ``headline`` and ``configuration`` ((label, text) rows) say what was swept; ``exact``: the
    configuration as the sweep file holds it. ``rate_axis``: the load is a request rate, the
    unit of goodput, so the goodput plot gets its y = x line. ``perceived``: the sweep's
    streamed-against-not-streamed comparisons (``sweep.perceived``)."""
    limits_ms = limits_ms or {}
    cost_series = ((("cost.usd_per_1m_output_tokens", "per 1M output"),
                    ("cost.usd_per_1m_good_output_tokens", "per 1M good"))
                   if cost_unit == "$" else
                   (("gpu_hours.per_1m_output", "per 1M output"), ("gpu_hours.per_1m_good_output", "per 1M good")))
    latency = plot("sweep-latency", sweep_plots.latency_vs_throughput_svg(steps, limits_ms),
                   "p50 solid, p99 dashed, one colour per combination; the star marks the knee; red: "
                   "the SLO limit (an arrow at the top when it lies far above the curves).")
    figures = [
        plot("sweep-goodput", sweep_plots.per_load_svg(
            steps, "sweep-goodput", "Goodput against offered load", "requests/s",
            (("goodput.requests_s", "goodput"), ("throughput.requests_s", "throughput")), load_label,
            identity=rate_axis),
            "Goodput: requests/s that met every SLO limit; throughput: requests/s completed (the achieved load)."
            + (" Dotted: y = x, where every offered request would be served and good." if rate_axis else "")),
        plot("sweep-cost", sweep_plots.per_load_svg(
            steps, "sweep-cost", "Cost per 1M tokens against load", cost_unit, cost_series, load_label, log_y=True)),
        plot("sweep-pareto", sweep_plots.per_user_vs_per_gpu_svg(steps),
             "Each step of each combination: how fast one user's stream runs (output tokens/s per user, "
             "1000 / p50 TPOT) against how much one GPU serves (output tokens/s per GPU). The line joins "
             "the steps no other step beats on both: the Pareto frontier."),
    ]
    rows = [(s.group or "—", f"{s.offered_load:g}", num(s.achieved_load, 2), "yes" if s.valid else "NO (excluded)",
             num(figure_value(s.summary, "throughput.output_tokens_s")),
             num(figure_value(s.summary, "ttft.p99")), num(figure_value(s.summary, "tpot.p99")),
             num(figure_value(s.summary, "goodput.requests_s"), 2),
             num(figure_value(s.summary, cost_series[0][0]), 3))
            for s in sorted(steps, key=lambda s: (s.group, s.offered_load))]
    steps_table = table(("combination", f"offered {load_label}", "achieved", "valid", "output tok/s",
                         "TTFT p99 ms", "TPOT p99 ms", "goodput req/s",
                         f"{'$' if cost_unit == '$' else 'GPU-h'} / 1M output"), rows)
    recs = (table(list(recommendations[0]), [list(r.values()) for r in recommendations])
            if recommendations else "<p>No recommendation in this sweep.</p>")
    curves = latency + '<div class="grid">' + "".join(figures) + "</div>"
    said = ("<ul>" + "".join(f"<li>{esc(f)}</li>" for f in findings) + "</ul>") if findings else ""
    config = (table(("", ""), configuration, cls="config") if configuration else "")
    if exact is not None:
        config += ("<details><summary>Exact configuration (as the sweep file holds it)</summary>"
                   f"<pre>{esc(json.dumps(exact, indent=2, default=str))}</pre></details>")
    body = (f"<h1>{esc(title)}</h1>" + (f'<p class="headline">{esc(headline)}</p>' if headline else "")
            + (section("configuration", "Configuration", config) if config else "")
            + (section("findings", "Findings", said) if said else "")
            + (section("perceived", "Perceived latency: streamed against not streamed",
                       _perceived(perceived, load_label)) if perceived else "")
            + section("curves", "Curves", curves)
            + section("recommendations", "Recommended operating points", recs)
            + section("steps", "Steps", steps_table))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")


def _perceived(pairs: Sequence[dict[str, Any]], load_label: str) -> str:
    out = ['<p class="small">What a user feels: when the first words appear, and when the answer is complete. '
           "Not streamed, nothing appears until the whole answer has arrived. p50, and in brackets p99 "
           "(1 user in 100 waits longer).</p>"]
    for pair in pairs:
        rows = [(f"{r['load']:g}", _p(r["streamed_first_words_ms"]), _p(r["streamed_complete_ms"]),
                 _p(r["not_streamed_complete_ms"]),
                 "—" if r.get("wait_ratio_p50") is None else f"{r['wait_ratio_p50']:,.1f}×")
                for r in pair["rows"]]
        out.append(f"<h3>{esc(pair['streamed'])} against {esc(pair['not_streamed'])}</h3>")
        out.append(table((load_label, "streamed: first words", "streamed: answer complete",
                          "not streamed: anything at all (= answer complete)",
                          "wait before anything shows, not streamed / streamed"),
                         rows))
        out.append("<ul>" + "".join(f"<li>{esc(s)}</li>" for s in pair["sentences"]) + "</ul>")
    return "".join(out)


def _p(q: dict[str, Any]) -> str:
    return f"{ms(q.get('p50'))} ({ms(q.get('p99'))})"
