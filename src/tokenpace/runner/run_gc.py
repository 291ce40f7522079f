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

A process that serves for days (``tokenpace proxy``) also needs what the valve leaves: objects that
survived a valve collection and became garbage later sit in the older generations, which nothing
collects while the collector is off. ``idle`` (a callable: true when no request is in flight) runs a
full collection at a quiet moment, once more than ``idle_objects`` objects were made since the last
one; ``full_every_s`` runs one at the latest that long after the last, quiet or not, if the valve
has collected since: only then can old garbage pile up (young garbage is the valve's; what survived
a quiet moment's collection is little). A healthy load that never pauses is never collected. In
the proxy at 200 streams the automatic collector ran a middle-generation collection every 2.6-4 s of 1.7-5.0 ms
that freed nothing, and 19-44% of the slowest 1% of tokens were relayed across a collection
(benchmarks/RESULTS.md 24h). A full collection while every stream is in flight walks them all
(tens of ms), so the deadline is long (minutes) and only taken after the valve has opened.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

VALVE_OBJECTS = 200_000  # young tracked objects before the valve collects (~0.1-0.2 s of collection)
CHECK_S = 1.0
IDLE_OBJECTS = 1_000  # objects made since the last collection before a quiet moment collects


@asynccontextmanager
async def quiet_gc(*, valve_objects: int = VALVE_OBJECTS, check_s: float = CHECK_S,
                   idle: Callable[[], bool] | None = None, idle_objects: int = IDLE_OBJECTS,
                   full_every_s: float | None = None) -> AsyncIterator[None]:
    """No automatic garbage collection inside the block (see the module doc); the state before it
    is restored on every exit path. ``idle`` and ``full_every_s``: full collections for a process
    that serves for days, at quiet moments and at the latest every ``full_every_s``."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None
    last_full = loop.time()
    made = 0  # objects counted since the last full collection (the young count restarts at each)

    def check() -> None:
        nonlocal timer, last_full, made
        young = gc.get_count()[0]
        overdue = full_every_s is not None and made > 0 and loop.time() - last_full >= full_every_s
        if overdue or (idle is not None and made + young > idle_objects and idle()):
            gc.collect()
            last_full, made = loop.time(), 0
        elif young > valve_objects:
            gc.collect(0)  # survivors move to the next generation: the count starts again
            made += young  # > 0: old garbage may now pile up, the deadline holds
        timer = loop.call_later(check_s, check)

    timer = loop.call_later(check_s, check)
    try:
        yield
    finally:
        timer.cancel()
        gc.unfreeze()
        if was_enabled:
            gc.enable()
