"""Runs a relay (``-m tokenpace proxy ...`` or a script such as ``_passthrough.py``) with a probe
on aiohttp's ``StreamReader``: for every read a relay takes from a stream, how long the data had
waited in the process since it arrived (``feed_data``, called as the socket's bytes are parsed)
until the relay's ``readany()`` returned it. That wait is the relay's own queueing: the event
loop's other work in between. It is kept twice: in the thread's CPU time, which counts only the
work the process did meanwhile and not the time the OS gave the CPU to someone else, and in wall
time. CPU time is no cure for a loaded machine: a relay that gets less of a CPU falls behind, its
reads come in bigger batches, and each read then waits behind more work in CPU time too. On an idle
machine it says which of the relay's own work the tail reads waited behind.
``proxy_overhead.py --hold`` uses it; the probe itself costs a few µs a read.

    python benchmarks/_relay_hold.py OUT.json -m tokenpace proxy --upstream URL --listen HOST:PORT
    python benchmarks/_relay_hold.py OUT.json benchmarks/_passthrough.py URL PORT

OUT.json is written when the relay exits (SIGTERM stops both gracefully): {"cpu_ns": [...],
"wall_ns": [...], "at_ns": [...]}, one entry per read that returned data (request bodies
included: one a request); ``at_ns`` is when the read returned (monotonic).
"""

from __future__ import annotations

import runpy
import sys
from collections import deque
from pathlib import Path
from time import monotonic_ns, thread_time_ns

from aiohttp.streams import StreamReader


def install() -> tuple[list[int], list[int], list[int]]:
    cpu_holds: list[int] = []
    wall_holds: list[int] = []
    read_at: list[int] = []
    arrived: dict[int, deque] = {}  # id(reader) -> (cpu, wall) of each piece not yet read
    feed_data = StreamReader.feed_data
    readany = StreamReader.readany

    def probed_feed_data(self, data, *args, **kwargs):
        if data:
            arrived.setdefault(id(self), deque()).append((thread_time_ns(), monotonic_ns()))
        return feed_data(self, data, *args, **kwargs)

    async def probed_readany(self):
        data = await readany(self)
        pieces = arrived.get(id(self))
        if not data:
            arrived.pop(id(self), None)
        elif pieces:
            cpu, wall = thread_time_ns(), monotonic_ns()
            first_cpu, first_wall = pieces[0]  # readany returns all that is buffered: the oldest waited longest
            cpu_holds.append(cpu - first_cpu)
            wall_holds.append(wall - first_wall)
            read_at.append(wall)
            pieces.clear()
        return data

    StreamReader.feed_data = probed_feed_data
    StreamReader.readany = probed_readany
    return cpu_holds, wall_holds, read_at


def run_relay(argv: list[str]) -> None:
    """Run the relay under test in this process: ``-m MODULE ARGS...`` or ``SCRIPT ARGS...``."""
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1]] + argv[2:]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = argv
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit:
        pass


def main() -> None:
    out = Path(sys.argv[1])
    rest = sys.argv[2:]
    cpu_holds, wall_holds, read_at = install()
    try:
        run_relay(rest)
    finally:
        import orjson

        out.write_bytes(orjson.dumps({"cpu_ns": cpu_holds, "wall_ns": wall_holds, "at_ns": read_at}))


if __name__ == "__main__":
    main()
