"""The plan on the console: the winner's sentence, the ranked table, why the others fall out."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table

from tokenpace.reports.validated import band_line


def input_words(t: dict[str, Any]) -> str:
    """The traffic's prompt lengths in words, with what it shares."""
    sp = t.get("shared_prefix")
    if sp:
        return (f"{sp['prefix_tokens']:,} shared ({sp['groups']} prefix groups) + {t['input_tokens']} "
                f"(mean {t['mean_input_tokens']:,.0f})")
    if t.get("trace_block_ids") and t.get("mean_uncached_input_tokens") is not None:
        return (f"{t['input_tokens']} (mean {t['mean_input_tokens']:,.0f}, of which at least "
                f"{t['mean_uncached_input_tokens']:,.0f} not in shared blocks)")
    return str(t["input_tokens"])


def render_plan(doc: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    t, slo = doc["traffic"], doc["slo"]
    limits = ", ".join(f"{k} <= {v:g} ms" for k, v in slo["limits_ms"].items())
    console.print(f"[bold]tokenpace plan[/]: {doc['model']} at {t['rate_rps']:g} req/s ({t['arrival']}), input "
                  f"{input_words(t)}, output {t['output_tokens']}; SLO {slo['name'] or ''} ({limits}, "
                  f"{slo['attainment']:.0%} of requests)")
    pred = doc["predictor"]
    console.print(f"priced by: {pred['name']}; {band_line(pred['error_band'])} ({pred['error_band']['source']})")
    unpriced = doc.get("unpriced") or []
    console.print(f"{doc['candidates']} candidates: {len(doc['ranked'])} meet the SLO"
                  + (f", {len(unpriced)} meet it on a GPU without a price" if unpriced else "")
                  + f", {len(doc['rejected'])} do not or were not simulated")
    if doc["winner"]:
        console.print(f"\n[bold green]Winner[/]: {doc['winner']['sentence']}")
        for engine, line in doc["winner"]["flags"].items():
            console.print(f"  {engine}: {line}")
    elif unpriced:
        console.print("\n[bold yellow]No priced candidate meets the SLO;[/] those below do, on GPUs the price table "
                      "lacks (give their prices with --prices FILE to rank them).")
    else:
        console.print("\n[bold red]No candidate meets the SLO at this traffic.[/]")
    if doc["ranked"]:
        table = Table(title="Meet the SLO, cheapest first", show_lines=False)
        for col in ("#", "deployment", "replicas", "GPUs", "$/h", "$/1M out", "max req/s each",
                    "headroom", "TTFT p99", "TPOT p99", "limit"):
            table.add_column(col, justify="left" if col == "deployment" else "right")
        frontier = {r["candidate"]["label"] for r in doc["frontier"]}
        for r in doc["ranked"][:20]:
            c, a = r["cost"], r["at_rate"]
            mark = " *" if r["candidate"]["label"] in frontier else ""
            table.add_row(str(r["rank"]), r["candidate"]["label"] + mark, str(r["replicas"]), str(c["gpus"]),
                          f"{c['usd_per_hour']:,.2f}", f"{c['usd_per_1m_output_tokens']:,.3f}",
                          _num(r["max_rps_per_replica"], "{:.2f}"), _num(r["headroom"], "{:+.0%}"),
                          _ms(a["ttft_p99_ms"]), _ms(a["tpot_p99_ms"]), r["binding"] or "")
        console.print(table)
        console.print("* on the Pareto frontier of cost against p99 TTFT; capacity and headroom are "
                      f"measured for the {doc['finalists']} cheapest")
    if unpriced:
        table = Table(title="Meet the SLO, no price (--prices FILE)", show_lines=False)
        for col in ("deployment", "replicas", "GPUs", "max req/s each", "TTFT p99", "TPOT p99", "limit"):
            table.add_column(col, justify="left" if col == "deployment" else "right")
        for r in unpriced[:20]:
            a = r["at_rate"]
            table.add_row(r["candidate"]["label"], str(r["replicas"]), str(r["replicas"] * r["candidate"]["tp"]),
                          _num(r["max_rps_per_replica"], "{:.2f}"), _ms(a["ttft_p99_ms"]), _ms(a["tpot_p99_ms"]),
                          r["binding"] or "")
        console.print(table)
    why = Counter(("no measured tables" if r["binding"] == "predictor" else "pruned" if r["pruned"]
                   else r["binding"] or "no price") for r in doc["rejected"])
    if why:
        console.print("Not chosen: " + ", ".join(f"{n} by {k}" for k, n in why.most_common()) +
                      " (memory: does not fit; ttft/tpot/e2e: misses that limit even at the lightest load; "
                      "pruned: its best case costs more than the finalists; no measured tables: --predictor kernels has "
                      "none for that GPU)")
    for line in doc.get("what_ifs") or []:
        console.print(f"what-if: {line}")
    for g in (doc.get("growth") or {}).get("finalists", [])[:5]:
        console.print(f"growth x{doc['growth']['factor']:g}: {g['label']}: another replica above "
                      f"{g['needs_another_replica_above_rps']:.1f} req/s; {g['replicas_at_growth']} "
                      f"replica{'s' if g['replicas_at_growth'] != 1 else ''} at {doc['growth']['rate_rps']:g} req/s")


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f} ms"


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else fmt.format(v)
