"""The garbage collector during a run: no automatic collection while chunks are being stamped.

A collection stops the event loop, and every chunk that arrives meanwhile is stamped late by the
whole pause. With automatic collection on, a 512-stream run (1,536 requests of 64 chunks, the
built-in server) ran ~530 young collections of ~1 ms CPU each, ~50 middle ones of up to 9 ms, and a
full collection every ~6 s of 23-35 ms CPU (a ``gc.freeze()`` at the start leaves the old
generation empty, so CPython's "a quarter of the old objects are new" guard never holds a full
collection back), while not one of them found garbage: the client's objects die by reference
count. Without them the chunks' timing error p99 fell 2.4x at 256 streams and 3.6x at 512
(benchmarks/RESULTS.md 22d).

``quiet_gc()`` therefore collects once, freezes what exists (later collections never walk it) and
turns automatic collection off until the run ends, when it is restored as it was. A safety valve
bounds what a run that does make reference cycles (failing requests' exceptions, a user's hook)
can hold: every ``check_s`` seconds, once more than ``valve_objects`` tracked objects were made
and not freed since the last collection, it collects the young generation. In a healthy run the
count levels off (~13,000 at 256 streams after 3 or 8 waves, ~23,000 at 512) and the valve never
opens.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

VALVE_OBJECTS = 200_000  # young tracked objects before the valve collects (~0.1-0.2 s of collection)
CHECK_S = 1.0


@asynccontextmanager
async def quiet_gc(*, valve_objects: int = VALVE_OBJECTS, check_s: float = CHECK_S) -> AsyncIterator[None]:
    """No automatic garbage collection inside the block (see the module doc); the state before it
    is restored on every exit path."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None

    def check() -> None:
        nonlocal timer
        if gc.get_count()[0] > valve_objects:
            gc.collect(0)  # survivors move to the next generation: the count starts again
        timer = loop.call_later(check_s, check)

    timer = loop.call_later(check_s, check)
    try:
        yield
    finally:
        timer.cancel()
        gc.unfreeze()
        if was_enabled:
            gc.enable()
