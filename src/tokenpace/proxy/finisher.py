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

Nothing is lost: work handed over before ``start`` or after ``close`` runs at once, and ``close``
runs whatever is still queued. The queue holds each request's record and unparsed reads only until
its turn (under a sustained overload it grows with the backlog, as the relay's own queues do).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from time import monotonic_ns

SLICE_NS = 100_000  # the longest the finisher holds the loop before it yields to the relay


class Finisher:
    def __init__(self, slice_ns: int = SLICE_NS) -> None:
        self.slice_ns = slice_ns
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
            while queue:
                deadline = monotonic_ns() + self.slice_ns
                while queue:
                    self._call(queue.popleft())
                    if monotonic_ns() >= deadline:
                        break
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
