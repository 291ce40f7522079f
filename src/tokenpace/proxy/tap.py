"""A stream relayed from the upstream connection's own data callback: each read written to the
client the moment aiohttp's HTTP parser hands it over, with no task woken per read.

The plain relay (``await content.readany()``, then ``await resp.write(data)``) costs, per read, a
future created and resolved, a task step, a coroutine chain resumed through aiohttp's
``StreamReader`` and its timer, the reader's buffer and flow-control bookkeeping, and three
coroutine calls to write. Here aiohttp's ``StreamReader.feed_data`` (called by the parser as the
socket's bytes are parsed) writes the read, framed as one HTTP chunk, straight to the client's
transport; the request's task only waits for the end, a failure, or back-pressure.
``benchmarks/proxy_overhead.py`` measures both (``--relay-compare``).

What is kept: every read is written before anything else is done with it (``on_read`` sees it
after); chunked framing as aiohttp writes it (the response's own ``write_eof`` ends it);
back-pressure: when the client's transport holds more than its high-water mark, reading from the
upstream is paused (aiohttp pauses its parser and the socket) until the client has drained it, so
a slow client never makes the proxy buffer more than that mark plus one socket read; the
upstream's failures (``set_exception``) and its end (``feed_eof``) reach the task as with
``readany``, the client's total timeout too (the task waits inside the reader's timer).

How: the response's ``StreamReader`` is made, for the stream's life, an instance of a subclass that
adds no state (``__class__`` assignment; aiohttp's parser creates the reader, so it cannot be
chosen), and the relay for it is found by the reader's id. This relies on aiohttp internals: the
parser calling ``feed_data``/``feed_eof``/``set_exception`` and the HTTP-chunk hooks on the reader,
the reader's ``_timer``, the response writer's ``send_headers`` and ``chunked``. ``tapped`` checks
what it can and answers False when the stream cannot be relayed this way; the caller then runs
the plain relay.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import nullcontext
from time import monotonic_ns
from typing import Any

from aiohttp import web
from aiohttp.streams import StreamReader

_TAPS: dict[int, Tap] = {}  # id(reader) -> its relay, while the reader is tapped


class _TappedReader(StreamReader):
    """A ``StreamReader`` whose data goes to its ``Tap``; no state of its own (same layout)."""

    __slots__ = ()

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        if data:
            _TAPS[id(self)].feed(data)
        return False

    def begin_http_chunk_receiving(self) -> None:  # nothing is buffered, so no chunk boundaries are kept
        pass

    def end_http_chunk_receiving(self) -> None:
        pass

    def feed_eof(self) -> None:
        StreamReader.feed_eof(self)
        _TAPS[id(self)].wake(eof=True)

    def set_exception(self, *args: Any, **kwargs: Any) -> None:
        StreamReader.set_exception(self, *args, **kwargs)
        _TAPS[id(self)].wake()


class ClientGone(Exception):
    """The client closed its connection while the answer was being relayed."""


class Tap:
    """One stream's relay inside the parser's callback. ``on_read(now_ns, data)`` is called after
    each read has been written (the measuring proxy stamps it there)."""

    __slots__ = ("transport", "high", "upstream", "on_read", "first_write_ns", "eof_ns", "paused", "gone",
                 "waiter")

    def __init__(self, transport: asyncio.Transport, upstream: Any, on_read: Callable[[int, bytes], None] | None):
        self.transport = transport
        self.high = transport.get_write_buffer_limits()[1]
        self.upstream = upstream  # the upstream connection's protocol: paused and resumed
        self.on_read = on_read
        self.first_write_ns = 0  # how long the first read took from arrival to written (the proxy's own share)
        self.eof_ns = 0
        self.paused = False
        self.gone = False
        self.waiter: asyncio.Future[None] | None = None

    def feed(self, data: bytes) -> None:
        now = monotonic_ns()
        transport = self.transport
        if self.gone or transport.is_closing():
            self.gone = True
            self.wake()
            return
        transport.write(b"%x\r\n%b\r\n" % (len(data), data))  # one HTTP chunk, as aiohttp frames it
        if not self.first_write_ns:
            self.first_write_ns = monotonic_ns() - now or 1
        if self.on_read is not None:
            self.on_read(now, data)
        if not self.paused and transport.get_write_buffer_size() > self.high:
            self.paused = True  # the client reads slower than the upstream sends: stop reading upstream
            self.upstream.pause_reading()
            self.wake()

    def wake(self, eof: bool = False) -> None:
        if eof:
            self.eof_ns = monotonic_ns()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


async def tapped(request: web.Request, resp: web.StreamResponse, content: Any, connection: Any,
                 on_read: Callable[[int, bytes], None] | None = None) -> Tap | None:
    """Relay ``content`` (the upstream response's reader) to ``resp`` (prepared) until the upstream's
    answer ends, then end ``resp``; returns the ``Tap`` (its ``eof_ns``, ``first_write_ns``), or None
    without doing anything when this stream cannot be tapped (the caller relays it the plain way).
    Raises what ``readany`` would (the upstream's failure), ``ClientGone`` if the client left."""
    writer = request.writer
    transport = request.transport
    protocol = connection.protocol if connection is not None else None
    if (type(content) is not StreamReader or transport is None or protocol is None
            or not getattr(writer, "chunked", False) or getattr(writer, "_compress", None) is not None
            or getattr(writer, "length", None) is not None or not hasattr(writer, "send_headers")):
        return None
    writer.send_headers()  # aiohttp holds the headers until the first body write
    tap = Tap(transport, protocol, on_read)
    if content.exception() is None and not content.at_eof():
        buffered = content.read_nowait()  # what arrived before the tap
        if buffered:
            tap.feed(buffered)
    timer = getattr(content, "_timer", None) or nullcontext()
    loop = asyncio.get_running_loop()
    key = id(content)
    _TAPS[key] = tap
    content.__class__ = _TappedReader
    try:
        while True:
            exc = content.exception()
            if exc is not None:
                raise exc
            if tap.gone:
                raise ClientGone
            if content.is_eof():
                break
            if tap.paused:
                try:
                    await writer.drain()  # waits while the client's transport is over its high-water mark
                except ConnectionError as err:
                    raise ClientGone from err
                tap.paused = False
                protocol.resume_reading()
                continue
            tap.waiter = loop.create_future()
            with timer:  # the client session's total timeout cancels the task inside it, as in readany
                await tap.waiter
            tap.waiter = None
    finally:
        content.__class__ = StreamReader
        del _TAPS[key]
    if not tap.eof_ns:
        tap.eof_ns = monotonic_ns()
    await resp.write_eof()
    return tap
