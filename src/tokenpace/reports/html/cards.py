"""Summary cards: TTFT, TPOT, ITL and E2E percentiles with rating and SLO verdict; goodput,
throughput and cost."""

from __future__ import annotations

from typing import Any

from tokenpace.reports.console import inside_counts
from tokenpace.reports.html.markup import esc, ms, num

CARD_METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E"))


def latency_cards(summary: dict[str, Any]) -> str:
    latency = summary.get("latency_ms") or {}
    ratings = summary.get("ratings") or {}
    verdict = ((summary.get("goodput") or {}).get("verdict")) or {}
    cards = []
    for key, label in CARD_METRICS:
        st = latency.get(key)
        rating = ratings.get(key) or {}
        rows = "".join(f"<tr><th>{q}</th><td>{ms(st.get(q)) if st else '—'}</td>"
                       f"<td>{_badge(rating.get(q))}</td></tr>" for q in ("p50", "p90", "p99"))
        ci = (st or {}).get("p99_ci95")
        ci_line = f'<p class="small">p99 95% CI {ms(ci[0])} – {ms(ci[1])}</p>' if ci else ""
        cards.append(f'<div class="card" data-card="{key}"><h3>{label}</h3>'
                     f'<p class="small">n = {st["count"] if st else 0}, mean {ms((st or {}).get("mean"))}</p>'
                     f"<table>{rows}</table>{ci_line}{_slo_line(verdict.get(key))}</div>")
    return '<div class="cards">' + "".join(cards) + "</div>"


def _badge(rating: str | None) -> str:
    return f'<span class="badge {esc(rating)}">{esc(rating)}</span>' if rating else ""


def _slo_line(line: dict[str, Any] | None) -> str:
    if not line:
        return '<p class="small">no SLO limit</p>'
    met = line.get("met")
    word, cls = ("met", "ok") if met else (("missed", "bad") if met is False else ("no data", ""))
    return (f'<p class="slo {cls}">SLO ≤ {line["threshold_ms"]:g} ms at the attainment percentile: '
            f"{ms(line.get('value_ms'))} → <b>{word}</b></p>")


def rate_cards(summary: dict[str, Any]) -> str:
    tp, window = summary.get("throughput") or {}, summary.get("window") or {}
    cards = [("throughput", "Throughput",
              [f"{num(tp.get('output_tokens_s'))} output tok/s", f"{num(tp.get('total_tokens_s'))} total tok/s",
               f"{num(tp.get('requests_s'), 2)} req/s",
               f"cached prompt tokens {tp.get('cached_prompt_tokens', 0)} (reported apart)",
               f"window {num(window.get('duration_s'), 2)} s"
               + (f" ({'steady state; ' if str(window.get('definition', '')).startswith('Steady-state') else ''}"
                  f"{inside_counts(window)})" if "requests_sent" in window else "")])]
    g = summary.get("goodput")
    if g:
        met = g["verdict"]["met"]
        cards.append(("goodput", "Goodput",
                      [f"{num(g.get('requests_s'), 2)} good req/s", f"{num(g.get('output_tokens_s'))} good tok/s",
                       f"{(g.get('fraction') or 0):.1%} of requests good",
                       f'<span class="slo {"ok" if met else "bad"}"><b>SLO {"MET" if met else "MISSED"}</b></span>']))
    else:
        cards.append(("goodput", "Goodput", ["no SLO given (--slo)"]))
    cost = summary.get("cost")
    if cost:
        good = cost.get("usd_per_1m_good_output_tokens")
        cards.append(("cost", "Cost",
                      [f"${num(cost.get('usd_per_1m_output_tokens'), 3)} per 1M output tokens",
                       f"${num(good, 3)} per 1M good tokens" if good is not None else "no good tokens",
                       f"${cost['gpu_hour_usd']:g}/h × {cost['gpus']} GPU"]))
    else:
        cards.append(("cost", "Cost", ["no price given (--gpu-hour-usd)"]))
    html = []
    for key, title, lines in cards:
        body = "".join(f"<li>{line if line.startswith('<span') else esc(line)}</li>" for line in lines)
        html.append(f'<div class="card" data-card="{key}"><h3>{title}</h3><ul>{body}</ul></div>')
    return '<div class="cards">' + "".join(html) + "</div>"
