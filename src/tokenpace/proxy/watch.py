"""``--watch``: a live console view of the proxy, refreshed every second: requests, in flight, and
over the last minute (the goodput window) TTFT and TPOT p50/p99 and goodput."""

from __future__ import annotations

import asyncio

import numpy as np
from rich.console import Console
from rich.live import Live
from rich.table import Table

from .app import ProxyState

REFRESH_S = 1.0


def view(state: ProxyState) -> Table:
    window = state.exporter.window
    finished, good = window.counts()
    ttfts, tpots = window.latencies_ms()
    table = Table(title=f"tokenpace proxy -> {state.config.upstream}", title_justify="left")
    for column in ("requests", "in flight", f"last {window.window_s:g} s", "TTFT p50 / p99 ms",
                   "TPOT p50 / p99 ms", "goodput" + (f" ({window.slo.name})" if window.slo and window.slo.name else "")):
        table.add_column(column, justify="right")
    table.add_row(f"{state.total:,}", f"{state.in_flight:,}", f"{finished:,}", _p50_p99(ttfts), _p50_p99(tpots),
                  f"{good / finished:.1%} ({good / window.window_s:.2f}/s)" if finished else "-")
    return table


def _p50_p99(values: list[float]) -> str:
    if not values:
        return "-"
    p50, p99 = np.percentile(values, [50, 99])
    return f"{p50:,.1f} / {p99:,.1f}"


async def watch(state: ProxyState, stop: asyncio.Event, console: Console | None = None) -> None:
    """Redraw the view until ``stop`` is set."""
    with Live(view(state), console=console, refresh_per_second=4, transient=False) as live:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), REFRESH_S)
            except asyncio.TimeoutError:
                pass
            live.update(view(state))
