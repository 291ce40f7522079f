"""The run report's engine metrics (``bench --scrape-metrics``), read from the result document's
``engine_metrics`` section only: the diagnosis, one figure of the engine over time (requests
waiting and running, KV-cache usage, prefix-cache hit rate per scrape interval, each panel only
when the engine exposes it), the engine's TTFT against the client's, the engine's own histograms
over the run, and how the scraping went."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenpace.observe.families import PROMPT_TOKENS_EXCLUDE_CACHED
from tokenpace.reports.html.markup import esc, ms, plot, table
from tokenpace.reports.html.svg import COLORS, figure, to_svg

PLOT_ID = "engine-metrics"
_H3 = '<h3 style="margin-top:1.1em">'  # inline: the page's stylesheet stays as it was for other runs
HISTOGRAMS = {"ttft": "TTFT", "itl": "ITL (per token)", "tpot": "TPOT (per request)", "e2e": "E2E",
              "queue_time": "queue time"}


def engine_metrics_html(em: dict[str, Any]) -> str:
    """The section's body; ``em`` is the document's ``engine_metrics`` (not null)."""
    parts = [_diagnosis(em.get("diagnosis") or [])]
    svg = engine_metrics_svg(em)
    if svg:
        parts.append(plot(PLOT_ID, svg, "Each point is one scrape of the engine's /metrics; time 0 is the "
                          "start of the load, the first point the baseline just before it. A hit rate "
                          "per interval is drawn only where the engine looked tokens up in it."))
    elif (em.get("scrapes") or {}).get("ok"):
        parts.append("<p>The engine exposes none of the queue, KV-cache or prefix-cache series.</p>")
    parts += [_vs_client(em.get("vs_client") or {}), _histograms(em), _scrapes(em)]
    return "".join(parts)


def _diagnosis(findings: list[dict[str, str]]) -> str:
    if not findings:
        return ("<p>No diagnosis: no scrape succeeded, the engine was not recognised, or it exposes "
                "nothing the rules read.</p>")
    items = "".join(f'<li data-rule="{esc(f["rule"])}"><b>{esc(f["rule"])}</b>: {esc(f["message"])}</li>'
                    for f in findings)
    return f'{_H3}Diagnosis</h3><ul class="diagnosis">{items}</ul>'


@dataclass(frozen=True)
class HitRateIntervals:
    """The prefix-cache hit rate over each interval between two scrapes in which tokens were
    looked up (an interval with no lookup has no rate, rather than 0)."""

    start_s: np.ndarray
    end_s: np.ndarray
    rate: np.ndarray


def interval_hit_rate(series: dict[str, list[Any]], engine: str | None) -> HitRateIntervals | None:
    """From the cumulative counters: hits added over an interval / tokens looked up over it."""
    hits = _column(series, "prefix_cache_hits")
    if engine in PROMPT_TOKENS_EXCLUDE_CACHED:  # llama.cpp: looked up = prompt + cached
        prompt = _column(series, "prompt_tokens")
        queries = None if prompt is None or hits is None else prompt + hits
    else:
        queries = _column(series, "prefix_cache_queries")
    if queries is None or hits is None:
        return None
    t = np.asarray(series["t_s"], dtype=np.float64)
    d_queries, d_hits = np.diff(queries), np.diff(hits)
    grew = d_queries > 0  # NaN (a missing or reset counter) compares False
    if not grew.any():
        return None
    return HitRateIntervals(t[:-1][grew], t[1:][grew], d_hits[grew] / d_queries[grew])


def _column(series: dict[str, list[Any]], key: str) -> np.ndarray | None:
    values = series.get(key)
    if not values or all(v is None for v in values):
        return None
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def engine_metrics_svg(em: dict[str, Any]) -> str | None:
    """One figure, a panel per quantity the engine exposes; None when it exposes none of them."""
    s, peaks, totals = em.get("series") or {}, em.get("peaks") or {}, em.get("totals") or {}
    if len(s.get("t_s") or []) < 2:
        return None
    t = np.asarray(s["t_s"], dtype=np.float64)
    waiting, running, kv = _column(s, "waiting"), _column(s, "running"), _column(s, "kv_usage")
    hit, hit_gauge = interval_hit_rate(s, em.get("engine")), _column(s, "prefix_cache_hit_rate")
    preemptions = _column(s, "preemptions")

    def requests(ax: Any) -> None:
        for values, key, color, label in ((waiting, "waiting", COLORS["ttft"], "waiting (queue depth)"),
                                          (running, "running", COLORS["stream"], "running")):
            if values is not None:
                ax.plot(t, values, color=color, linewidth=1.4, marker="o", markersize=2.5,
                        label=f"{label}{_peak(peaks.get(key))}", gid=f"engine-{key}")
        queued = (peaks.get("waiting") or {}).get("queued_fraction")
        top = max(np.nanmax(v) for v in (waiting, running) if v is not None)
        ax.set(title="Engine: requests waiting and running" + (
            "" if queued is None else f" (requests waited in {queued:.0%} of the scrapes during the load)"),
            ylabel="requests", ylim=(0, max(1.0, top) * 1.35))  # headroom for the legend
        ax.legend(loc="upper right", fontsize=8, ncols=2, frameon=False)

    def kv_usage(ax: Any) -> None:
        ax.plot(t, kv * 100, color=COLORS["p99"], linewidth=1.4, marker="o", markersize=2.5,
                gid="engine-kv-usage")
        peak = np.nanmax(kv)
        ax.set(title=f"KV-cache usage (peak {peak:.1%})", ylabel="% of the cache",
               ylim=(0, 105 if peak >= 0.5 else None))
        if preemptions is not None and (np.nan_to_num(np.diff(preemptions)) > 0).any():
            for at in t[1:][np.nan_to_num(np.diff(preemptions)) > 0]:
                ax.axvline(at, color=COLORS["error"], linestyle=":", linewidth=1)
            ax.plot([], [], color=COLORS["error"], linestyle=":",
                    label=f"preemptions ({totals.get('preemptions', 0):g} in all)")
            ax.legend(loc="best", fontsize=8)

    def hit_rate(ax: Any) -> None:
        if hit is not None:
            ax.hlines(hit.rate * 100, hit.start_s, hit.end_s, color=COLORS["p50"], linewidth=2.2,
                      gid="engine-prefix-hit-rate", label="per scrape interval")
            overall = totals.get("prefix_cache_hit_rate")
            if overall is not None:
                ax.axhline(overall * 100, color=COLORS["wait"], linestyle="--", linewidth=1,
                           label=f"whole run {overall:.0%}")
            ax.legend(loc="best", fontsize=8)
            title = "Prefix-cache hit rate per scrape interval (prompt tokens found / looked up)"
        else:
            ax.plot(t, hit_gauge * 100, color=COLORS["p50"], linewidth=1.4, marker="o", markersize=2.5,
                    gid="engine-prefix-hit-rate")
            title = "Prefix-cache hit rate (the engine's own gauge)"
        ax.set(title=title, ylabel="% of prompt tokens", ylim=(0, 105))

    panels: list[Callable[[Any], None]] = []
    if waiting is not None or running is not None:
        panels.append(requests)
    if kv is not None:
        panels.append(kv_usage)
    if hit is not None or hit_gauge is not None:
        panels.append(hit_rate)
    if not panels:
        return None
    with figure(PLOT_ID, width_in=10.4, height_in=1.0 + 1.7 * len(panels), rows=len(panels),
                sharex=True) as (fig, axes):
        axes = list(axes) if len(panels) > 1 else [axes]
        for draw, ax in zip(panels, axes):
            draw(ax)
        axes[-1].set_xlabel("seconds from the start of the load")
        return to_svg(fig, PLOT_ID)


def _peak(peak: dict[str, float] | None) -> str:
    return "" if not peak else f", peak {peak['max']:g}"


def _vs_client(vs: dict[str, Any]) -> str:
    rows = []
    for key in ("ttft", "itl", "tpot", "e2e"):
        cmp = vs.get(key)
        if not cmp or not cmp.get("client"):
            continue
        engine, client = cmp["engine"], cmp["client"]
        rows.append((HISTOGRAMS[key], ms(engine.get("mean")), ms(client.get("mean")), _diff(cmp.get("mean_diff_ms")),
                     "≈" + ms(engine.get("p50")), ms(client.get("p50")), _diff(cmp.get("p50_diff_ms"))))
    if not rows:
        return ""
    out = (_H3 + "The engine against the client</h3>"
           + table(("figure", "engine mean", "client mean", "client − engine (mean)", "engine p50",
                    "client p50", "client − engine (p50)"), rows)
           + '<p class="small">The engine times a request from its arrival in the engine, the client from '
           "sending it: the difference of the means is time outside the engine (network, HTTP server, "
           "tokenization, a proxy). The engine's p50 is interpolated inside a histogram bucket (≈); the "
           "client's figures cover every ok request, warmup included, as the engine's histograms do.</p>")
    per = vs.get("per_request")
    if per and per.get("ttft_minus_prompt_ms"):
        d = per["ttft_minus_prompt_ms"]
        out += (f'<p class="small">Per request ({per.get("requests")} with server timings): client TTFT − the '
                f"server's prompt time p50 {ms(d.get('p50'))}, p99 {ms(d.get('p99'))}, max {ms(d.get('max'))} "
                "(includes any wait for a free slot).</p>")
    return out


def _diff(value: float | None) -> str:
    return "—" if value is None else f"{value:+,.1f} ms"


def _histograms(em: dict[str, Any]) -> str:
    hists = em.get("histograms_ms") or {}
    rows = []
    for key, label in HISTOGRAMS.items():
        h = hists.get(key)
        if not h:
            continue
        bucket = h.get("p50_bucket_ms")
        rows.append((label, f"{h.get('count', 0):,}", ms(h.get("mean")),
                     "≈" + ms(h.get("p50")) + (f" (bucket {bucket[0]:g}–{bucket[1]:g} ms)" if bucket else ""),
                     "≈" + ms(h.get("p90")), "≈" + ms(h.get("p99"))))
    if not rows:
        return ""
    window = em.get("histogram_window_s")
    span = f" (from {window[0]:.2f} s to {window[1]:.2f} s)" if window else ""
    return (_H3 + "The engine's histograms over the run</h3>"
            + table(("histogram", "count", "mean", "p50", "p90", "p99"), rows)
            + f'<p class="small">Buckets at the last scrape minus the baseline{esc(span)}: the mean is exact '
            "(sum / count), the percentiles interpolated linearly inside their bucket, as Prometheus' "
            "histogram_quantile does.</p>")


def _scrapes(em: dict[str, Any]) -> str:
    sc = em.get("scrapes") or {}
    failed = sc.get("failed", 0)
    kinds = ", ".join(f"{kind} ×{n}" for kind, n in sorted((sc.get("failed_by_kind") or {}).items()))
    rows = [("engine", em.get("engine_label") or "not recognised"), ("URL", em.get("url")),
            ("interval", f"{em.get('interval_s', 0):g} s"), ("scrapes ok", sc.get("ok", 0)),
            ("scrapes failed", f"{failed} ({kinds})" if failed and kinds else failed)]
    if sc.get("last_error"):
        rows.append(("last error", sc["last_error"]))
    if em.get("preflight_error"):
        rows.append(("before the load", em["preflight_error"]))
    return _H3 + "Scrapes</h3>" + table(("", ""), rows, "narrow")
