"""The HTML page of a plan (`tokenpace plan --html`): what was asked, the winner, the frontier of
cost against p99 TTFT, each finalist's curve, the ranked table and why the rest fell out. Same
page conventions as the run report (inline CSS and SVG, no script)."""

from __future__ import annotations

from collections import Counter
from itertools import cycle
from typing import Any

from tokenpace.reports.html.markup import esc, num, plot, section, table
from tokenpace.reports.html.style import CSS
from tokenpace.reports.html.svg import COLORS, figure, to_svg
from tokenpace.reports.html.sweep_plots import PALETTE
from tokenpace.reports.plan_console import input_words
from tokenpace.reports.validated import band_text

FINALIST_CURVES = 6


def render_plan_html(doc: dict[str, Any]) -> str:
    t, slo = doc["traffic"], doc["slo"]
    title = f"tokenpace plan: {doc['model']} at {t['rate_rps']:g} req/s"
    limits = ", ".join(f"{k} ≤ {v:g} ms" for k, v in slo["limits_ms"].items())
    pred = doc["predictor"]
    asked = table(("", ""), [
        ("model", doc["model"]), ("traffic", f"{t['rate_rps']:g} req/s, {t['arrival']} arrivals"),
        ("input tokens", input_words(t)), ("output tokens", t["output_tokens"]),
        ("SLO", f"{slo['name'] or ''} ({limits}, {slo['attainment']:.0%} of requests)"),
        ("candidates", doc["candidates"]), ("predictor", f"{pred['name']}: {pred.get('detail', pred.get('applies_to', ''))}"),
        ("validated error", _band(pred["error_band"])),
        ("tool", f"tokenpace {doc['tool']['version']}, {doc['created']}"),
    ])
    w = doc["winner"]
    if w:
        flags = "".join(f"<li><b>{esc(k)}</b>: <code>{esc(v)}</code></li>" for k, v in w["flags"].items())
        winner = f'<p class="winner">{esc(w["sentence"])}</p><ul>{flags}</ul>'
    elif doc.get("unpriced"):
        winner = ("<p>No priced candidate meets the SLO; those under “Meet the SLO, no price” do, on GPUs the "
                  "price table lacks (give their prices with <code>--prices FILE</code> to rank them).</p>")
    else:
        winner = "<p>No candidate meets the SLO at this traffic.</p>"
    figures = ""
    if doc["ranked"]:
        figures = ('<div class="grid">'
                   + plot("plan-frontier", frontier_svg(doc), "Every configuration that meets the SLO: cost "
                          "against p99 TTFT at your rate; the line joins the Pareto frontier.")
                   + plot("plan-finalists", finalists_svg(doc, slo["attainment"]), "Each finalist: the share "
                          "of requests within the SLO as one replica's load rises (the simulator's probes); "
                          "dotted: the SLO's attainment.")
                   + "</div>")
    frontier = {r["candidate"]["label"] for r in doc["frontier"]}
    ranked = table(("#", "deployment", "replicas", "GPUs", "$/h", "$ per 1M output", "capacity req/s each",
                    "headroom", "TTFT p99 ms", "TPOT p99 ms", "binding limit"),
                   [(r["rank"], r["candidate"]["label"] + (" ★" if r["candidate"]["label"] in frontier else ""),
                     r["replicas"], r["cost"]["gpus"], num(r["cost"]["usd_per_hour"], 2),
                     num(r["cost"]["usd_per_1m_output_tokens"], 3), num(r["max_rps_per_replica"], 2),
                     "—" if r["headroom"] is None else f"{r['headroom']:+.0%}",
                     num(r["at_rate"]["ttft_p99_ms"], 0), num(r["at_rate"]["tpot_p99_ms"], 1), r["binding"] or "—")
                    for r in doc["ranked"]])
    unpriced = table(("deployment", "replicas", "GPUs", "capacity req/s each", "TTFT p99 ms", "TPOT p99 ms",
                      "binding limit"),
                     [(r["candidate"]["label"], r["replicas"], r["replicas"] * r["candidate"]["tp"],
                       num(r["max_rps_per_replica"], 2), num(r["at_rate"]["ttft_p99_ms"], 0),
                       num(r["at_rate"]["tpot_p99_ms"], 1), r["binding"] or "—")
                      for r in doc.get("unpriced") or []])
    why = Counter(("no measured kernel tables for its GPU" if r["binding"] == "predictor" else
                   "pruned (costs more than the finalists at best)" if r["pruned"] else
                   {"memory": "does not fit in memory"}.get(r["binding"], f"misses {r['binding']} even nearly idle"))
                  for r in doc["rejected"])
    rejected = table(("why not", "candidates"), why.most_common()) if why else "<p>None: every candidate meets the SLO.</p>"
    prices = table(("GPU", "$ per GPU-hour", "source", "read"),
                   [(g, num(p["usd_per_gpu_hour"], 3), p["source"], p.get("read") or "—") for g, p in doc["prices"].items()])
    body = (f"<h1>{esc(title)}</h1>" + section("asked", "What was asked", asked)
            + section("winner", "Winner", winner) + (section("curves", "Curves", figures) if figures else "")
            + section("ranked", "Meet the SLO, cheapest first", ranked)
            + (section("unpriced", "Meet the SLO, no price", unpriced) if doc.get("unpriced") else "")
            + section("rejected", "The rest", rejected) + section("prices", "Prices", prices))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")


def _band(band: dict[str, Any]) -> str:
    return f"{band_text(band)} ({band['source']})"


def frontier_svg(doc: dict[str, Any]) -> str:
    with figure("plan-frontier") as (fig, ax):
        xs = [r["cost"]["usd_per_hour"] for r in doc["ranked"]]
        ys = [r["at_rate"]["ttft_p99_ms"] for r in doc["ranked"]]
        ax.scatter(xs, ys, s=14, color=COLORS["wait"], label="meets the SLO")
        fx = [r["cost"]["usd_per_hour"] for r in doc["frontier"]]
        fy = [r["at_rate"]["ttft_p99_ms"] for r in doc["frontier"]]
        ax.plot(fx, fy, "o-", color=COLORS["base"], label="Pareto frontier")
        for r in doc["frontier"]:
            ax.annotate(r["candidate"]["label"].split(" (")[0], (r["cost"]["usd_per_hour"], r["at_rate"]["ttft_p99_ms"]),
                        fontsize=7, xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel("$ per hour, all replicas")
        ax.set_ylabel("TTFT p99 at your rate (ms)")
        ax.set_title("Cost against tail latency")
        ax.legend(loc="upper right", fontsize=7, frameon=False)
        return to_svg(fig, "plan-frontier")


def finalists_svg(doc: dict[str, Any], attainment: float) -> str:
    with figure("plan-finalists") as (fig, ax):
        colors = cycle(PALETTE)
        for r in doc["ranked"][:FINALIST_CURVES]:
            probes = sorted(r["probes"] or (), key=lambda p: p["rate_rps"])
            if not probes:
                continue
            ax.plot([p["rate_rps"] for p in probes], [p["attainment"] for p in probes], "o-", markersize=3,
                    color=next(colors), label=r["candidate"]["label"].split(" (")[0])
        ax.axhline(attainment, color=COLORS["limit"], linestyle=":", linewidth=1)
        ax.set_xlabel("one replica's load (req/s)")
        ax.set_ylabel("requests within the SLO")
        ax.set_ylim(-0.02, 1.05)
        ax.set_title("Finalists: SLO attainment against load")
        ax.legend(loc="best", fontsize=7, frameon=False)
        return to_svg(fig, "plan-finalists")
