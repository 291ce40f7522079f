"""Runs a relay (``-m tokenpace proxy ...`` or a script such as ``_passthrough.py``) with three
probes inside its process, for ``proxy_overhead.py --probe``: what the relay's event loop was doing
when a token was late.

- every garbage collection: when it started, how long it took (wall), its generation and what it
  freed (``gc.callbacks``);
- a 1 ms ticker on the relay's own event loop (started with aiohttp's runner): each tick's time and
  the thread's CPU time then, so that a gap of more than 1 ms between ticks is a turn of the loop
  that long (the loop's lag), and the CPU time in the gap says whether the relay was working
  (CPU time ~ wall time) or not running at all (the OS gave its CPU to another process);
- every read a relay takes from a stream (aiohttp's ``StreamReader.readany`` returning data, or,
  with ``--relay tap``, each read the tap writes: ``tokenpace.proxy.tap.Tap.feed``): its time, so
  that reads can be grouped into the bursts the server's steps make.

All times are ``time.monotonic_ns()``, the clock the server's send log and the client's stamps use,
so that a late token can be placed against the collections and long turns around it. The probes
cost ~1 µs a read and a callback a millisecond.

    python benchmarks/_relay_probe.py OUT.json -m tokenpace proxy --upstream URL --listen HOST:PORT
    python benchmarks/_relay_probe.py OUT.json benchmarks/_passthrough.py URL PORT

OUT.json is written when the relay exits (SIGTERM stops both gracefully): {"gc": [[start_ns,
wall_ns, generation, collected], ...], "ticks": [ns, ...], "tick_cpu": [thread CPU ns, ...],
"reads": [ns, ...], "gc_threshold": [...]}.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path
from time import monotonic_ns, thread_time_ns

from aiohttp import web_runner
from aiohttp.streams import StreamReader

from _relay_hold import run_relay  # the benchmarks' folder is the script's own: on the path

TICK_S = 0.001


def install() -> dict[str, list]:
    out: dict[str, list] = {"gc": [], "ticks": [], "tick_cpu": [], "reads": []}
    started = [0]

    def on_gc(phase: str, info: dict) -> None:
        now = monotonic_ns()
        if phase == "start":
            started[0] = now
        else:
            out["gc"].append([started[0], now - started[0], info["generation"], info["collected"]])

    gc.callbacks.append(on_gc)

    readany = StreamReader.readany
    reads = out["reads"]

    async def probed_readany(self):
        data = await readany(self)
        if data:
            reads.append(monotonic_ns())
        return data

    StreamReader.readany = probed_readany

    from tokenpace.proxy.tap import Tap  # the tapped relay's reads never go through readany

    feed = Tap.feed

    def probed_feed(self, data):
        reads.append(monotonic_ns())
        return feed(self, data)

    Tap.feed = probed_feed

    setup = web_runner.BaseRunner.setup
    ticks, tick_cpu = out["ticks"], out["tick_cpu"]

    async def probed_setup(self, *args, **kwargs):
        await setup(self, *args, **kwargs)
        loop = asyncio.get_running_loop()

        def tick() -> None:
            ticks.append(monotonic_ns())
            tick_cpu.append(thread_time_ns())
            loop.call_later(TICK_S, tick)

        loop.call_soon(tick)

    web_runner.BaseRunner.setup = probed_setup
    return out


def main() -> None:
    target = Path(sys.argv[1])
    rest = sys.argv[2:]
    out = install()
    try:
        run_relay(rest)
    finally:
        import orjson

        out["gc_threshold"] = list(gc.get_threshold())
        target.write_bytes(orjson.dumps(out))


if __name__ == "__main__":
    main()
