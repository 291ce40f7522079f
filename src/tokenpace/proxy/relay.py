"""One request through the proxy: forwarded upstream, the answer relayed to the client read by read
(never buffered: each read is written before it is parsed; reads are parsed in batches; written
from the upstream connection's data callback, ``tap.py``, or by a task awaiting each read,
``_relay_stream``), and measured on the way into the same ``RequestRecord`` the bench client fills,
with the bench client's own parsing and stamping. A request's end work (its last reads parsed, the record finished and handed to
``record_done``) runs once the client has the whole answer, behind the relay (``finisher.py``).

Stamps are the proxy's: ``sent_ns`` when the request reached the proxy, each chunk when it arrived
from upstream. What the proxy changes: hop-by-hop headers are dropped, ``Accept-Encoding`` is not
forwarded (so that the stream arrives readable), and an ``X-Request-ID`` is added when the client
sent none. The ``Authorization`` header is forwarded and never stored; an upstream error text that
echoes it is masked in the record.

| status | error_kind | when |
|---|---|---|
| error | ``http_<status>`` | the upstream answered >= 400 (relayed unchanged) |
| error | ``connect`` | no connection upstream (the client gets a 502) |
| error | ``reset_before_headers`` / ``reset_mid_stream`` | upstream closed early; the client's connection is cut too |
| cancelled | ``client_disconnected`` | the client left; the upstream request is closed at once |
| (any) | as the bench client's | stream errors, malformed SSE, empty responses |
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Callable
from time import monotonic_ns
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from tokenpace.client.chunks import classify_response, error_message
from tokenpace.client.progress import Progress, finish_record, one_line
from tokenpace.client.responses import apply_events, keep_server_timing, parser_stopped, stream_ended
from tokenpace.client.sse import SSEParser
from tokenpace.record import RequestRecord

from .tap import ClientGone, tapped

HOP_BY_HOP = frozenset(h.lower() for h in (
    "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE", "Trailer", "Trailers",
    "Transfer-Encoding", "Upgrade", "Host", "Content-Length", "Accept-Encoding"))
_RESPONSE_DROP = frozenset(("connection", "keep-alive", "transfer-encoding", "content-length",
                            "content-encoding", "upgrade", "trailer"))
GENERATION_PATHS = {"chat/completions": "chat", "completions": "completions"}
_ERROR_BODY_BYTES = 64 * 1024
# Reads of a stream relayed before they are parsed, together: the relay loop only writes and stamps.
# Stamps are taken at each read, so batching changes when a chunk is parsed, never its time.
PARSE_BATCH = 16
_STAGGER = itertools.count()


def forward_headers(headers: Any) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}


def response_headers(headers: Any) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _RESPONSE_DROP}


class Timing:
    """The proxy's own share of one request's latency, ns: the time it held the request before
    sending it upstream, plus the time it held the response headers and the first read."""

    __slots__ = ("received_ns", "upstream_sent_ns", "added_ns")

    def __init__(self, received_ns: int) -> None:
        self.received_ns = received_ns
        self.upstream_sent_ns = 0
        self.added_ns = 0


async def relay_generation(request: web.Request, session: aiohttp.ClientSession, url: str, api: str,
                           record_done: Any, hasher: Any = None,
                           defer: Callable[[Callable[[], object]], None] | None = None,
                           start_turn: Callable[[], Awaitable[None]] | None = None,
                           tap: bool = True) -> web.StreamResponse:
    """Forward one generation request and relay its answer; ``record_done(record, timing)`` once.

    ``hasher`` (advise.hashchain.PromptHasher): the record gets the prompt's hash chain, computed
    when the answer has been relayed, so that it never delays this request (about 0.7 µs a block).
    ``defer`` (``Finisher.defer``): where the end work goes once the client has its whole answer (the
    last parse, finishing the record, ``record_done``); without it, that work runs before returning.
    ``start_turn`` (``LoopSlices.send_turn``): in a burst of arrivals, the upstream request waits for a
    send slot of the loop's turn, so that the streams already flowing are relayed in between (the wait
    counts in the proxy's added latency; a client that leaves meanwhile is recorded).
    ``tap``: a stream is relayed from the upstream connection's data callback (``tap.py``); False,
    or a stream that cannot be tapped: a task awaits each read and writes it."""
    timing = Timing(monotonic_ns())
    body = await request.read()
    headers = forward_headers(request.headers)
    request_id = request.headers.get("X-Request-ID") or uuid.uuid4().hex
    headers.setdefault("X-Request-ID", request_id)
    record = RequestRecord(request_id=request_id, index=0, api=api, sent_ns=timing.received_ns)
    obj = _read_request(record, body)
    prompt = obj if hasher is not None else None
    secret = _bearer(request.headers.get("Authorization"))
    progress = Progress(streaming=record.stream, secrets=(secret,) if secret else ())
    progress.last_read_ns = timing.received_ns
    resp: web.StreamResponse | None = None
    tail: Unparsed | None = None
    try:
        try:
            if start_turn is not None:
                await start_turn()
            timing.upstream_sent_ns = monotonic_ns()
            async with session.post(url, data=body, headers=headers) as upstream:
                headers_at = monotonic_ns()
                progress.response_seen = True
                record.http_status = upstream.status
                out_headers = response_headers(upstream.headers)
                if upstream.status >= 400:
                    resp = await _relay_error(request, upstream, out_headers, record, progress)
                elif upstream.content_type == "text/event-stream":
                    resp = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=out_headers)
                    await resp.prepare(request)
                    timing.added_ns = (timing.upstream_sent_ns - timing.received_ns) + (monotonic_ns() - headers_at)
                    tail = Unparsed()
                    if not tap or not await _relay_tapped(request, resp, upstream, record, progress, timing, tail):
                        await _relay_stream(resp, upstream, record, progress, timing, tail)
                else:
                    resp = await _relay_whole(request, upstream, out_headers, record, progress, headers_at, timing)
        except BaseException:  # a failure after the whole answer: what arrived is measured first
            if tail is not None:
                tail.end(record, progress)
            raise
    except asyncio.CancelledError:
        progress.fail("cancelled", "client_disconnected", None, monotonic_ns())
        _hand_over(defer, record, progress, timing, record_done, hasher, prompt, tail)
        raise
    except ClientGone:  # leaving the `async with` closed the upstream request: the engine stops too
        progress.fail("cancelled", "client_disconnected", None, monotonic_ns())
    except aiohttp.ClientConnectorError as exc:
        progress.fail("error", "connect", one_line(exc), monotonic_ns())
        resp = _error_response(502, f"tokenpace proxy: upstream unreachable: {one_line(exc)}")
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
        kind = "reset_mid_stream" if progress.response_seen else "reset_before_headers"
        progress.fail("error", kind, one_line(exc), monotonic_ns())
        if resp is not None and resp.prepared:
            _cut(request)  # the client must see the stream broken, not ended
        else:
            resp = _error_response(502, f"tokenpace proxy: upstream closed the connection: {one_line(exc)}")
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        kind = "total_timeout" if isinstance(exc, asyncio.TimeoutError) else "client_error"
        progress.fail("timeout" if kind == "total_timeout" else "error", kind, one_line(exc) or kind, monotonic_ns())
        if resp is not None and resp.prepared:
            _cut(request)
        else:
            resp = _error_response(504 if kind == "total_timeout" else 502, f"tokenpace proxy: {kind}")
    _hand_over(defer, record, progress, timing, record_done, hasher, prompt, tail)
    return resp


def _read_request(record: RequestRecord, body: bytes) -> dict[str, Any] | None:
    """The request's own fields into the record; the body as an object (None: not a JSON object)."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    record.stream = obj.get("stream") is True
    model = obj.get("model")
    record.model = model if type(model) is str else None
    max_tokens = obj.get("max_tokens", obj.get("max_completion_tokens"))
    if type(max_tokens) is int:
        record.requested_output_tokens = max_tokens
    return obj


def _bearer(value: str | None) -> str | None:
    if not value:
        return None
    return value.split(None, 1)[1] if value.lower().startswith("bearer ") and " " in value else value


class Unparsed:
    """A stream's reads relayed and stamped but not parsed yet, with its parser: what is left to
    measure. ``measuring`` is false once the measurement has ended ([DONE], an error in the stream);
    ``eof_ns`` is when the upstream's answer ended (0: not seen)."""

    __slots__ = ("parser", "pending", "measuring", "eof_ns")

    def __init__(self) -> None:
        self.parser = SSEParser(strict=True)
        self.pending: list[tuple[int, bytes]] = []
        self.measuring = True
        self.eof_ns = 0

    def flush(self, record: RequestRecord, progress: Progress) -> None:
        if self.measuring and self.pending:
            self.measuring = _measure(self.pending, self.parser, record, progress)

    def end(self, record: RequestRecord, progress: Progress) -> None:
        """Parse what is left; if the answer ended without [DONE], the stream's end is judged."""
        self.flush(record, progress)
        if self.measuring and self.eof_ns:
            self.measuring = False
            stream_ended(self.parser, record, progress, self.eof_ns)


async def _relay_stream(resp: web.StreamResponse, upstream: aiohttp.ClientResponse, record: RequestRecord,
                        progress: Progress, timing: Timing, tail: Unparsed) -> None:
    """Relay until the upstream's answer ends. What is left unparsed stays in ``tail``, parsed by
    ``tail.end`` once the client has the whole answer, or, on a failure, before it is recorded."""
    parser = tail.parser
    read = upstream.content.readany
    write = resp.write
    pending = tail.pending  # reads relayed and stamped, not yet parsed
    first = True
    # Streams that move in step (one engine step sends a chunk to each) would otherwise all parse at
    # the same reads: the first batch's size is staggered across streams, and a batch is parsed only
    # after the loop has relayed what else arrived with it.
    batch = next(_STAGGER) % PARSE_BATCH + 1
    while True:
        data = await read()
        now = monotonic_ns()
        if not data:
            tail.eof_ns = now
            break
        try:
            await write(data)  # relay first, measure after: the client never waits for the parse
        except (ConnectionError, RuntimeError) as exc:  # aiohttp: "Cannot write to closing transport"
            raise ClientGone from exc
        if first:
            timing.added_ns += monotonic_ns() - now
            first = False
        if tail.measuring:
            pending.append((now, data))
            if len(pending) >= batch:
                batch = PARSE_BATCH
                await asyncio.sleep(0)  # behind the other streams' reads that are ready now
                tail.measuring = _measure(pending, parser, record, progress)
    await resp.write_eof()


async def _relay_tapped(request: web.Request, resp: web.StreamResponse, upstream: aiohttp.ClientResponse,
                        record: RequestRecord, progress: Progress, timing: Timing, tail: Unparsed) -> bool:
    """``_relay_stream`` from the upstream's data callback (``tap.py``): each read written, then
    stamped; a batch parsed in a callback of its own once the loop has relayed what else arrived.
    False: this stream cannot be tapped, nothing was done."""
    stamper = _Stamper(tail, record, progress)
    done = await tapped(request, resp, upstream.content, upstream.connection, stamper)
    if done is None:
        return False
    tail.eof_ns = done.eof_ns
    timing.added_ns += done.first_write_ns
    return True


class _Stamper:
    """A tapped stream's reads, stamped on arrival and kept for the batched parse."""

    __slots__ = ("tail", "record", "progress", "batch", "scheduled", "loop")

    def __init__(self, tail: Unparsed, record: RequestRecord, progress: Progress) -> None:
        self.tail, self.record, self.progress = tail, record, progress
        self.batch = next(_STAGGER) % PARSE_BATCH + 1  # staggered across streams, as in _relay_stream
        self.scheduled = False
        self.loop = asyncio.get_running_loop()

    def __call__(self, now: int, data: bytes) -> None:
        tail = self.tail
        if tail.measuring:
            pending = tail.pending
            pending.append((now, data))
            if len(pending) >= self.batch and not self.scheduled:
                self.batch = PARSE_BATCH
                self.scheduled = True
                self.loop.call_soon(self.parse)  # behind the other streams' reads that are ready now

    def parse(self) -> None:
        self.scheduled = False
        self.tail.flush(self.record, self.progress)


def _measure(pending: list[tuple[int, bytes]], parser: SSEParser, record: RequestRecord, progress: Progress) -> bool:
    """Parse reads already relayed, each stamped with its own arrival; empties ``pending``. False
    once the measurement has ended (``[DONE]``, or an error in the stream)."""
    try:
        for now, data in pending:
            progress.last_read_ns = now
            if apply_events(parser.feed(data), now, record, progress) or parser_stopped(parser, progress, now):
                return False
            if progress.saw_done:
                return False
        return True
    finally:
        pending.clear()


async def _relay_whole(request: web.Request, upstream: aiohttp.ClientResponse, headers: dict[str, str],
                       record: RequestRecord, progress: Progress, headers_at: int, timing: Timing) -> web.Response:
    body = await upstream.read()
    now = monotonic_ns()
    resp = web.Response(status=upstream.status, reason=upstream.reason, body=body, headers=headers)
    progress.streaming = False
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        progress.fail("error", "malformed_response", "undecodable body", now)
        return resp
    info = classify_response(obj) if type(obj) is dict else classify_response({})
    if type(obj) is dict and obj.get("timings") is not None:
        keep_server_timing(record, obj["timings"])
    if info.error is not None:
        progress.fail("error", "response_error", error_message(info.error), now)
        return resp
    progress.add(record, info, now)
    progress.saw_done = True
    progress.done_ns = now
    timing.added_ns = (timing.upstream_sent_ns - timing.received_ns) + (monotonic_ns() - now)
    return resp


async def _relay_error(request: web.Request, upstream: aiohttp.ClientResponse, headers: dict[str, str],
                       record: RequestRecord, progress: Progress) -> web.Response:
    from tokenpace.client.retry_after import retry_after_s

    body = await upstream.read()
    record.retry_after_s = retry_after_s(upstream.headers)
    try:
        message = error_message(orjson.loads(body))
    except orjson.JSONDecodeError:
        message = body[:_ERROR_BODY_BYTES].decode("utf-8", "replace") or (upstream.reason or "")
    progress.fail("error", f"http_{upstream.status}", message, monotonic_ns())
    return web.Response(status=upstream.status, reason=upstream.reason, body=body, headers=headers)


def _cut(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        transport.abort()


def _error_response(status: int, message: str) -> web.Response:
    body = orjson.dumps({"error": {"message": message, "type": "proxy_error", "code": status}})
    return web.Response(status=status, body=body, content_type="application/json")


def _hand_over(defer: Callable[[Callable[[], object]], None] | None, record: RequestRecord, progress: Progress,
               timing: Timing, record_done: Any, hasher: Any, prompt: dict[str, Any] | None,
               tail: Unparsed | None) -> None:
    """The request's end work, to ``defer`` (behind the relay) or now."""
    def finish() -> None:
        _finish(record, progress, timing, record_done, hasher, prompt, tail)

    if defer is None:
        finish()
    else:
        defer(finish)


def _finish(record: RequestRecord, progress: Progress, timing: Timing, record_done: Any, hasher: Any,
            prompt: dict[str, Any] | None, tail: Unparsed | None) -> None:
    if tail is not None:
        tail.end(record, progress)
    finish_record(record, progress)
    if prompt is not None:
        record.prompt_hash_chain = hasher(prompt)
    record_done(record, timing)
