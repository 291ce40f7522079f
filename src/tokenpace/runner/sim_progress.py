"""Progress of a slow simulation: virtual time, requests done, sent and in flight, and the speed.

Most simulations end in a second or two and show nothing: the view starts only once one has run
``QUIET_S`` of wall time. ``simulate`` runs synchronously, so the view is drawn from a thread that
reads the simulation's world (a few counters) between events: a simulation has no clock-stamped
timestamps for the thread to distort, unlike a measured run (progress.py). Modes as progress.py.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any

import orjson
from rich.console import Console
from rich.live import Live
from rich.text import Text

QUIET_S = 1.0
LIVE_REFRESH_S = 0.25
PLAIN_EVERY_S = 5.0
NS = 1_000_000_000


class SimProgress:
    def __init__(self, *, mode: str = "auto", total: int | None, duration_s: float | None,
                 console: Console | None = None, file: IO[str] | None = None,
                 quiet_s: float | None = None, plain_every_s: float | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.file = file if file is not None else sys.stderr
        self.mode = ("live" if self.console.is_terminal else "plain") if mode == "auto" else mode
        self.total, self.duration_s = total, duration_s
        self.quiet_s = QUIET_S if quiet_s is None else quiet_s
        self.plain_every_s = PLAIN_EVERY_S if plain_every_s is None else plain_every_s
        self.drawn = 0  # frames drawn (0: the simulation ended before QUIET_S)
        self._world: Any = None
        self._t0 = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Live | None = None

    def watch(self, world: Any) -> None:
        """Given the simulation's world as it starts (simulate's ``on_world``)."""
        self._world = world

    def figures(self) -> dict[str, Any] | None:
        world = self._world
        if world is None:
            return None
        wall = time.perf_counter() - self._t0
        virtual = world.loop.now_ns / NS
        return {"type": "sim_progress", "wall_s": wall, "virtual_s": virtual, "total": self.total,
                "duration_s": self.duration_s, "done": len(world.records), "sent": world.sent_count,
                "in_flight": world.in_flight_count, "speed": virtual / wall if wall > 0 else None}

    def line(self, f: dict[str, Any]) -> str:
        of = f"/{f['total']}" if f["total"] is not None else ""
        bound = f" of {f['duration_s']:g} s" if f["duration_s"] is not None else ""
        speed = "" if f["speed"] is None else f" · {f['speed']:,.0f}× real time"
        return (f"simulating · {f['virtual_s']:,.1f} s of engine time{bound} in {f['wall_s']:.1f} s{speed} · "
                f"done {f['done']}{of} · sent {f['sent']}{of} · in flight {f['in_flight']}")

    def draw(self) -> None:
        f = self.figures()
        if f is None or self.mode == "off":
            return
        self.drawn += 1
        if self.mode == "live":
            if self._live is None:
                self._live = Live(console=self.console, auto_refresh=False, transient=True,
                                  redirect_stdout=False, redirect_stderr=False)
                self._live.start()
            self._live.update(Text(self.line(f)), refresh=True)
        else:
            self.file.write((orjson.dumps(f).decode() if self.mode == "json" else self.line(f)) + "\n")
            self.file.flush()

    def _run(self) -> None:
        if self._stop.wait(self.quiet_s):
            return
        every = LIVE_REFRESH_S if self.mode == "live" else self.plain_every_s
        while True:
            self.draw()
            if self._stop.wait(every):
                return

    def __enter__(self) -> SimProgress:
        self._t0 = time.perf_counter()
        if self.mode != "off":
            self._thread = threading.Thread(target=self._run, name="tokenpace-sim-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._live is not None:
            self._live.stop()
        elif self.drawn and self.mode in ("plain", "json"):
            self.draw()  # where it ended
