"""The console view of a comparison: one table, then the regression gates."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tokenpace.reports.compare import Cell, Comparison, Row

_NOISE_MARK = {"beyond noise": "[bold]beyond noise[/]", "within noise": "[dim]within noise[/]",
               "too few samples": "[dim]n too small[/]", "no records": "[dim]no records[/]"}


def render_comparison(cmp: Comparison, console: Console | None = None) -> None:
    console = console or Console()
    for i, run in enumerate(cmp.runs):
        t = run.doc.get("target") or {}
        what = ("simulation" if t.get("simulated") else
                "live traffic" if run.doc.get("live") else
                "records only" if run.doc.get("kind") == "records" else "measured")
        role = "base" if i == 0 else f"run {i}"
        console.print(f"[bold]{role}[/]: {run.path} · {what} · {run.doc.get('started_utc') or '—'}")
    for i in range(1, len(cmp.runs)):  # one table per run against the base: fits 80 columns
        console.print(_table(cmp, i))
    for result in cmp.gates:
        mark = "[bold red]FAILED[/]" if result.failed else "[green]passed[/]"
        if result.new is None or result.change is None:
            console.print(f"gate {result.gate.text!r} on {result.run}: {mark} "
                          f"(base {result.base:,.4g} → none: every request of {result.run} failed)")
            continue
        observed = f"{result.change:+.1f}%" if result.gate.relative else f"{result.change:+,.4g}"
        console.print(f"gate {result.gate.text!r} on {result.run}: {mark} "
                      f"(base {result.base:,.4g} → {result.new:,.4g}, change {observed})")


def _table(cmp: Comparison, i: int) -> Table:
    paired = i < len(cmp.paired) and cmp.paired[i]
    title = (f"{cmp.runs[i].label} against the base {cmp.runs[0].label} (noise: bootstrap 95% CI "
             "of the percentile difference" + ("; the same requests, resampled in pairs for TTFT, TPOT and E2E)"
                                               if paired else ")"))
    table = Table(title=title, title_justify="left", box=None, header_style="bold", pad_edge=False)
    for col in ("figure", "base", f"run {i}", "Δ", "Δ%", "noise"):
        table.add_column(col, justify="left" if col in ("figure", "noise") else "right", no_wrap=True)
    for row in cmp.rows:
        cell = row.cells[i]
        table.add_row(row.label, _value(row, row.cells[0]), _value(row, cell), _delta(row, cell),
                      _relative(row, cell), _noise(cell))
    return table


def _fmt(row: Row, v: float | None, signed: bool = False) -> str:
    if v is None:
        return "—"
    sign = "+" if signed else ""
    if row.unit == "$":
        return f"{v:{sign},.3f}"
    if row.path.endswith("fraction"):
        return f"{v * 100:{sign}.1f} pp" if signed else f"{v * 100:.1f}%"
    if row.unit == "":
        return f"{v:{sign},.0f}"
    return f"{v:{sign},.1f}" if abs(v) < 1e4 else f"{v:{sign},.0f}"


def _value(row: Row, cell: Cell) -> str:
    return _fmt(row, cell.value)


def _delta(row: Row, cell: Cell) -> str:
    return _fmt(row, cell.delta, signed=True)


def _relative(row: Row, cell: Cell) -> str:
    if cell.relative is None:
        return "—"
    worse = cell.relative > 0 if row.better == "lower" else cell.relative < 0
    style = "red" if worse and abs(cell.relative) >= 0.005 else ("green" if abs(cell.relative) >= 0.005 else "")
    text = f"{cell.relative * 100:+.1f}%"
    return f"[{style}]{text}[/]" if style else text


def _noise(cell: Cell) -> str:
    if cell.noise is None:
        return ""
    return _NOISE_MARK.get(cell.noise.verdict, cell.noise.verdict)
