"""Each request's end work, done behind the relay: the last parse of a stream's reads, the record
finished, written to the JSONL sink and exported.

Streams that move in step end in step: an engine step sends the last token of many streams at
once. Finished one after another at the moment each stream ended (~50-80 µs each at 200 streams:
up to 16 reads left to parse, the record, its line, the exporter), their end work held the last
tokens of the streams behind them for milliseconds. The finisher takes that work off the relay's
path: a request hands over its end work once the client has its whole answer, and the finisher
runs the queued work in slices of at most ``slice_ns`` of the loop's time, yielding to the event
loop between slices, so a read that arrives meanwhile waits at most one slice. A read is never
held between its arrival and its write to the client: that happens in the request's own task.

A fixed slice alone starves under a sustained load: when the loop's turns grow long (every turn
relays hundreds of reads), one slice of 0.1 ms a turn finished fewer requests than ended, and the
queue, each piece holding a record and its unparsed reads, grew without bound (~100 MiB a minute
at 200 streams on a busy machine, benchmarks/RESULTS.md 24h). So a slice may also last ``share``
of the time the rest of the loop ran since the previous slice: the finisher gets at most about a
fifth of the loop when it has a backlog, a request's end work costs far less than a fifth of its
relaying, and the queue stays bounded; a read waits at most a quarter of the turn before it longer.

Nothing is lost: work handed over before ``start`` or after ``close`` runs at once, and ``close``
runs whatever is still queued. The queue holds each request's record and unparsed reads only until
its turn.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from time import monotonic_ns

SLICE_NS = 100_000  # the longest the finisher holds the loop before it yields to the relay, while turns are short
SHARE = 0.25  # with a backlog, a slice may also last this share of the loop's other work since the last one


class Finisher:
    def __init__(self, slice_ns: int = SLICE_NS, share: float = SHARE) -> None:
        self.slice_ns = slice_ns
        self.share = share
        self.done = 0  # pieces of end work run
        self.failed = 0  # of which raised (reported through the loop's exception handler)
        self._queue: deque[Callable[[], object]] = deque()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    @property
    def queued(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        """Run queued work from now on in the running loop."""
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="tokenpace-proxy-finisher")

    def defer(self, work: Callable[[], object]) -> None:
        """Run ``work()`` behind the relay; at once when the finisher is not running."""
        if self._task is None:
            self._call(work)
            return
        self._queue.append(work)
        assert self._wake is not None
        self._wake.set()

    async def close(self) -> None:
        """Stop the background task and run what is still queued, in order."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        self.drain()

    def drain(self) -> None:
        queue = self._queue
        while queue:
            self._call(queue.popleft())

    async def _run(self) -> None:
        queue = self._queue
        wake = self._wake
        assert wake is not None
        while True:
            await wake.wait()
            wake.clear()
            last_end = monotonic_ns()
            while queue:
                start = monotonic_ns()
                deadline = start + max(self.slice_ns, int((start - last_end) * self.share))
                while queue:
                    self._call(queue.popleft())
                    if monotonic_ns() >= deadline:
                        break
                last_end = monotonic_ns()
                await asyncio.sleep(0)  # the relay's reads that arrived during the slice go first

    def _call(self, work: Callable[[], object]) -> None:
        try:
            work()
        except Exception as exc:  # one request's bug must not stop the others' records
            self.failed += 1
            _report(exc)
        finally:
            self.done += 1


def _report(exc: Exception) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise exc from None
    loop.call_exception_handler({"message": "tokenpace proxy: finishing a request's record failed",
                                 "exception": exc})
