"""The console view of a sweep, from its document (so `tokenpace sweep` and `tokenpace report
sweep.json` print the same): one row per step, printed as each step ends, then the analysis in
plain sentences and the recommended operating points."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from tokenpace.reports.sweep_provenance import headline as provenance_headline
from tokenpace.reports.sweep_provenance import provenance
from tokenpace.sweep.findings import dig, frontier

_STATUS_STYLE = {"ok": "green", "invalid": "yellow", "failed": "red", "interrupted": "red", "skipped": "dim"}
# (header, width) of each column; the load column's header depends on the axis.
_COLUMNS = (("#", 3), ("role", 10), ("load", 9), ("achieved", 8), ("status", 11), ("req/s", 7), ("out tok/s", 9),
            ("TTFT p50", 8), ("TTFT p99", 8), ("TPOT p50", 8), ("TPOT p99", 8), ("goodput", 13), ("$/1M out", 8))


def _num(v: float | None, digits: int = 0) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def header(axis: str) -> str:
    names = [("concurrency" if axis == "concurrency" else "rate r/s") if n == "load" else n for n, _ in _COLUMNS]
    return "[bold]" + "  ".join(f"{n:>{w}}" for n, (_, w) in zip(names, _COLUMNS)) + "[/]"


def step_row(e: dict[str, Any]) -> str:
    s = e.get("summary") or {}
    good = s.get("goodput")
    goodput = "—" if not good else f"{_num(good.get('requests_s'), 2)} ({(good.get('fraction') or 0):.0%})"
    cost = dig(s, "cost", "usd_per_1m_output_tokens")
    role = {"sync": "sync probe", "saturation": "saturate", "step": ""}[e["role"]]
    achieved = (e.get("load") or {}).get("achieved")
    mark = "!" if (e.get("load") or {}).get("short") else ""
    cells = [str(e["index"]), role, f"{e['load']['value']:g}", _num(achieved, 2) + mark, e["status"], _num(dig(s, "throughput", "requests_s"), 2),
             _num(dig(s, "throughput", "output_tokens_s")), _num(dig(s, "latency_ms", "ttft", "p50")),
             _num(dig(s, "latency_ms", "ttft", "p99")), _num(dig(s, "latency_ms", "tpot", "p50"), 1),
             _num(dig(s, "latency_ms", "tpot", "p99"), 1), goodput, _num(cost, 3)]
    text = "  ".join(f"{c:>{w}}" for c, (_, w) in zip(cells, _COLUMNS))
    style = _STATUS_STYLE.get(e["status"], "")
    line = text.replace(f"{e['status']:>11}", f"[{style}]{e['status']:>11}[/]", 1) if style else text
    if e.get("reason") and e["status"] != "ok":
        line += f"\n     [dim]{escape(e['reason'])}[/]"
    if (e.get("load") or {}).get("short"):
        line += f"\n     [yellow]{escape(e['load']['short_reason'])}[/]"
    findings = (e.get("engine_metrics") or {}).get("diagnosis") or []
    if findings:  # --scrape-metrics: the engine's own view of this step, its first finding
        line += f"\n     [dim]engine: {escape(findings[0]['message'])}[/]"
    cal = e.get("calibration") or {}
    if cal.get("extrapolates"):  # --sim --calibration, outside the decode batches it saw
        line += f"\n     [yellow]calibration: {escape(cal['note'])}[/]"
    return line


def group_heading(group: str) -> str:
    return f"[bold]{escape(group)}[/]" if group else ""


def render_sweep(doc: dict[str, Any], console: Console | None = None, *, rows: bool = True) -> None:
    """The whole sweep: its rows (unless already printed live), then the analysis."""
    console = console or Console()
    c = doc.get("config") or {}
    axis = c.get("axis", "rate")
    if rows:
        console.print(headline(doc))
        console.print(header(axis), soft_wrap=True)
        last = None
        for e in doc.get("steps", []):
            if e["group"] != last and e["group"]:
                console.print(group_heading(e["group"]))
            last = e["group"]
            console.print(step_row(e), soft_wrap=True)
    render_analysis(doc, console)


def headline(doc: dict[str, Any]) -> str:
    """The sweep's header: what was swept (target, workload, SLO, tool, date), then its
    configuration, one line each (``reports.sweep_provenance``)."""
    head = f"[bold]tokenpace sweep[/] · {escape(provenance_headline(doc))}"
    if doc.get("interrupted"):
        head += " · [bold red]INTERRUPTED: completed steps kept[/]"
    rows = provenance(doc)
    width = max(len(label) for label, _ in rows)
    config = "\n".join(f"  [dim]{label:<{width}}[/]  {escape(text)}" for label, text in rows)
    return f"{head}\n[bold]Configuration[/]\n{config}"


def render_analysis(doc: dict[str, Any], console: Console) -> None:
    analysis = doc.get("analysis") or {}
    for group, choice in (doc.get("rate_choice") or {}).items():
        console.print(f"[dim]Rates{' for ' + escape(group) if group else ''}: {escape(choice.get('how', ''))}[/]")
    for group, a in analysis.items():
        if group:
            console.print(f"\n[bold]{escape(group)}[/]")
        else:
            console.print("")
        for sentence in a.get("sentences", []):
            console.print(escape(sentence))
        console.print("[bold]Recommended operating points[/] (per SLO preset):")
        for rec in a.get("recommendations", []):
            console.print(f"  • {escape(rec['text'])}")
    front = frontier(doc.get("steps") or [])
    if len(front) > 1:
        unit = "concurrency" if (doc.get("config") or {}).get("axis") == "concurrency" else "req/s"
        console.print("\n[bold]Pareto frontier[/] (output tokens/s per user, 1000 / p50 TPOT, against per GPU; "
                      "no other step beats these on both):")
        console.print("  " + escape("; ".join(
            f"{(p['group'] + ' at ') if p['group'] else ''}{p['load']:g} {unit}: {p['per_user_tokens_s']:,.0f} "
            f"per user, {p['per_gpu_tokens_s']:,.0f} per GPU" for p in front)), soft_wrap=True)
    comparison = doc.get("comparison") or []
    if comparison:
        console.print("\n[bold]What-if comparison[/]")
        for sentence in comparison:
            console.print(f"  • {escape(sentence)}")
    for pair in doc.get("perceived") or []:
        console.print(f"\n[bold]Perceived latency[/]: {escape(pair['streamed'])} against "
                      f"{escape(pair['not_streamed'])} "
                      "(when the first words appear, when the answer is complete)")
        for sentence in pair["sentences"]:
            console.print(f"  • {escape(sentence)}")
