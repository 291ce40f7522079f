"""Live progress of one run: what the person running it watches, and what a signal does.

Modes (``BenchConfig.progress_mode``):

- ``auto``: ``live`` on a terminal, ``plain`` otherwise;
- ``live``: a rich view redrawn ``LIVE_REFRESH_S`` apart (live_view.render);
- ``plain``: one line every ``PLAIN_EVERY_S``, and one at the end, with no escape codes;
- ``json``: one JSON object per line on the same schedule (``{"type": "progress", ...}``);
- ``off``: nothing (a signal's one-line notice still prints).

Drawn from the event loop (never from a background thread, which would hold the GIL while chunks
arrive and distort their timestamps), and never per chunk: a refresh reads the rolling figures of
live_stats.py, whose cost is bounded whatever the run's length.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import IO, Any

from rich.console import Console
from rich.live import Live

from tokenpace.record import RequestRecord
from tokenpace.runner.live_stats import Frame, LiveStats
from tokenpace.runner.live_view import json_line, plain_line, render

LIVE_REFRESH_S = 0.25
PLAIN_EVERY_S = 5.0
COUNTDOWN_EVERY_S = 1.0  # plain and json lines during the grace period after a signal


class LiveProgress:
    def __init__(self, stats: LiveStats, *, mode: str = "auto", console: Console | None = None,
                 file: IO[str] | None = None, step: str | None = None, watch: Any = None,
                 plain_every_s: float | None = None) -> None:
        self.stats = stats
        self.console = console or Console(stderr=True)
        # plain and json lines: to ``file``, else the given console's file, else stderr
        self.file = file if file is not None else console.file if console is not None else sys.stderr
        if mode == "auto":
            mode = "live" if self.console.is_terminal else "plain"
        self.mode = mode
        self.step, self.watch = step, watch
        self.plain_every_s = plain_every_s
        self.last_frame: Frame | None = None
        self._loadgen: Any = None
        self._grace_s = 0.0
        self._stop_deadline: float | None = None
        self._cancelled = False
        self._live: Live | None = None
        self._refresher: asyncio.Task | None = None

    # -- fed by the run -----------------------------------------------------------------------

    def attach(self, loadgen: Any, grace_s: float) -> None:
        """The load generator whose sent count and requests in flight the view reads."""
        self._loadgen, self._grace_s = loadgen, grace_s
        self.stats.sent = lambda: loadgen.sent_count
        self.stats.in_flight = loadgen.in_flight_records

    def add(self, record: RequestRecord) -> None:
        if self.mode != "off":  # off: nothing is kept or computed
            self.stats.add(record)

    def stopping(self, signal_name: str) -> None:
        """A first signal: sending stopped; say what happens now (always, even with mode off)."""
        flying = len(self._loadgen.in_flight_records()) if self._loadgen is not None else 0
        self._stop_deadline = time.monotonic() + self._grace_s
        if flying:
            what = (f"{flying} request{'s' if flying != 1 else ''} in flight get {self._grace_s:g} s to finish; "
                    f"{signal_name} again cancels them now")
        else:
            what = "no request is in flight"
        self._say(f"tokenpace: {signal_name}: sending stopped; {what}")
        self._reschedule()

    def cancelling(self) -> None:
        """A second signal: the requests in flight are cancelled now."""
        flying = len(self._loadgen.in_flight_records()) if self._loadgen is not None else 0
        self._cancelled = True
        self._say(f"tokenpace: cancelling {flying} request{'s' if flying != 1 else ''} in flight now "
                  "(their partial tokens are kept)")

    # -- drawing ------------------------------------------------------------------------------

    def frame(self) -> Frame:
        f = self.stats.frame(engine=engine_figures(self.watch) if self.watch is not None else None)
        f.step = self.step
        if self._stop_deadline is not None:
            f.stopping = {"in_flight": f.in_flight, "cancelled": self._cancelled,
                          "grace_left_s": max(0.0, self._stop_deadline - time.monotonic())}
        self.last_frame = f
        return f

    def draw(self) -> None:
        if self.mode == "off":
            return
        f = self.frame()
        if self.mode == "live":
            assert self._live is not None
            self._live.update(render(f), refresh=True)
        else:
            self.file.write((json_line(f) if self.mode == "json" else plain_line(f)) + "\n")
            self.file.flush()

    def _say(self, line: str) -> None:
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False)
        else:
            self.file.write(line + "\n")
            self.file.flush()

    def _interval(self) -> float:
        if self.mode == "live":
            return LIVE_REFRESH_S
        if self._stop_deadline is not None:
            return COUNTDOWN_EVERY_S
        return PLAIN_EVERY_S if self.plain_every_s is None else self.plain_every_s

    def _reschedule(self) -> None:
        """After a signal, plain and json lines come every second (the countdown) from now."""
        if self._refresher is not None and self.mode in ("plain", "json"):
            self._refresher.cancel()
            self._refresher = asyncio.ensure_future(self._refresh_forever())

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(self._interval())
            self.draw()

    def __enter__(self) -> LiveProgress:
        self.stats.start()
        if self.mode == "off":
            return self
        if self.mode == "live":
            self._live = Live(console=self.console, auto_refresh=False, transient=True)
            self._live.start()
            self.draw()
        self._refresher = asyncio.ensure_future(self._refresh_forever())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
        if self.mode != "off":
            with contextlib.suppress(Exception):  # the final frame: where the run ended
                self.draw()
        if self._live is not None:
            self._live.stop()  # transient: the summary that follows takes its place
            self._live = None
        sys.stderr.flush()


def engine_figures(watch: Any) -> dict[str, float | None]:
    """--scrape-metrics: the engine's latest waiting, running, KV use and prefix-cache hit rate
    (the engine's own rate, else hits / queries since the first scrape); {} before any scrape."""
    snapshots = getattr(watch, "snapshots", None) or []
    if not snapshots:
        return {}
    first, last = snapshots[0].values, snapshots[-1].values
    hit_rate = last.get("prefix_cache_hit_rate")
    if hit_rate is None and "prefix_cache_queries" in last and "prefix_cache_hits" in last:
        queries = last["prefix_cache_queries"] - first.get("prefix_cache_queries", 0.0)
        hits = last["prefix_cache_hits"] - first.get("prefix_cache_hits", 0.0)
        hit_rate = hits / queries if queries > 0 else None
    return {"waiting": last.get("waiting"), "running": last.get("running"),
            "kv_usage": last.get("kv_usage"), "prefix_cache_hit_rate": hit_rate}
