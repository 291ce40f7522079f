"""Reading a response into its record: the SSE stream (stamped per read), a whole body, or an
error body. Each failure becomes a status and a precise error kind on the record, never an
exception."""

from __future__ import annotations

import asyncio
from time import monotonic_ns
from typing import Any

import aiohttp
import orjson

from tokenpace.record import RequestRecord

from .chunks import ChunkInfo, error_message, stream_error_kind
from .formats import ApiFormat, api_format
from .progress import Progress, one_line
from .sse import SSEParser

_ERROR_BODY_BYTES = 64 * 1024  # enough for any error message; a bigger body is cut, not awaited


_CHAT = api_format("chat")


async def read_stream(resp: aiohttp.ClientResponse, record: RequestRecord, progress: Progress,
                      fmt: ApiFormat = _CHAT) -> None:
    """Read an SSE stream whose events ``fmt`` classifies (chat's by default)."""
    parser = SSEParser(strict=True)
    read = resp.content.readany
    while True:
        try:
            data = await read()
        except aiohttp.ClientError:
            _salvage(resp.content, parser, record, progress, fmt)
            raise
        now = monotonic_ns()
        if not data:  # EOF
            if not progress.saw_done:
                stream_ended(parser, record, progress, now, fmt)
            return
        progress.last_read_ns = now  # all the watchdog needs: no timer per chunk
        # After [DONE], reading on to EOF lets the connection go back to the pool.
        if not progress.saw_done and (apply_events(parser.feed(data), now, record, progress, fmt)
                                      or parser_stopped(parser, progress, now)):
            return


def stream_ended(parser: SSEParser, record: RequestRecord, progress: Progress, now: int,
                 fmt: ApiFormat = _CHAT) -> None:
    """The stream reached EOF before [DONE]: complete what the parser holds, and judge the end."""
    # What close() completes arrived with the last read.
    if (apply_events(parser.close(), progress.last_read_ns, record, progress, fmt)
            or parser_stopped(parser, progress, now)):
        return
    progress.done_ns = now
    if not record.chunk_ns:
        progress.fail("error", "empty_response", "stream ended with no token and no [DONE]", now)
    elif record.finish_reason is None and progress.expected_tokens is not None:
        got = progress.tokens_so_far()
        if got < progress.expected_tokens:  # ignore_eos promised them all: the stream was cut
            progress.fail("error", "incomplete", f"the stream ended after {got} of "
                          f"{progress.expected_tokens} tokens with no finish_reason and no [DONE]", now)


def _salvage(content: aiohttp.StreamReader, parser: SSEParser, record: RequestRecord, progress: Progress,
             fmt: ApiFormat) -> None:
    """A read failed: take the events of the bytes that arrived before the failure. aiohttp raises a
    stored failure (bytes past a short Content-Length, a cut body) before handing those bytes
    over, which would drop tokens the server did send. They are stamped now: when we could read them."""
    buffer = getattr(content, "_buffer", None)  # not public; without it there is nothing to salvage
    if not buffer or progress.saw_done:
        return
    data = b"".join(buffer)[getattr(content, "_buffer_offset", 0):]
    buffer.clear()
    now = progress.last_read_ns = monotonic_ns()
    if not apply_events(parser.feed(data), now, record, progress, fmt):
        parser_stopped(parser, progress, now)


def parser_stopped(parser: SSEParser, progress: Progress, now: int) -> bool:
    """True (and the failure recorded) when the parser met a line it will not go past."""
    if parser.line_too_long:
        progress.fail("error", "line_too_long",
                      f"an SSE line or event longer than {parser.max_line_bytes} bytes", now)
        return True
    if parser.invalid_line is None:
        return False
    line = parser.invalid_line.decode("utf-8", "replace")
    progress.fail("error", "malformed_sse", f"not an SSE line: {line}", now)
    return True


def apply_events(events: list[Any], now: int, record: RequestRecord, progress: Progress,
                 fmt: ApiFormat = _CHAT) -> bool:
    """Apply the events of one read, all stamped ``now``. True when the stream must stop (an error)."""
    for event in events:
        payload = event.data
        if payload == "[DONE]" or (payload[:1] != "{" and payload.strip() == "[DONE]"):  # "[DONE] " too
            if not record.chunk_ns:
                progress.fail("error", "empty_response", "stream ended with [DONE] and no token", now)
                return True
            progress.saw_done = True
            progress.done_ns = now
            return False
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            progress.fail("error", "invalid_json", f"undecodable data line: {payload}", now)
            return True
        if type(obj) is not dict:
            progress.fail("error", "invalid_json", f"data line is not a JSON object: {payload}", now)
            return True
        timings = obj.get("timings")
        if timings is not None:
            keep_server_timing(record, timings)
        info = fmt.classify_event(obj)
        if info.error is not None:
            progress.fail("error", stream_error_kind(info.error), error_message(info.error), now)
            return True
        progress.add(record, info, now)
        if info.done:  # the API's own end event (message_stop, response.completed)
            if not record.chunk_ns:
                progress.fail("error", "empty_response", "stream ended with no token", now)
                return True
            progress.saw_done = True
            progress.done_ns = now
            return False
    return False


async def read_whole(resp: aiohttp.ClientResponse, record: RequestRecord, progress: Progress,
                     fmt: ApiFormat = _CHAT) -> None:
    body = await resp.read()
    now = monotonic_ns()
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        # Cut long after the message's 300 characters: a secret is masked whole before the cut.
        progress.fail("error", "malformed_response", f"undecodable body: {body[:_ERROR_BODY_BYTES]!r}", now)
        return
    info: ChunkInfo = fmt.classify_whole(obj) if type(obj) is dict else ChunkInfo()
    if type(obj) is dict and obj.get("timings") is not None:
        keep_server_timing(record, obj["timings"])
    if info.error is not None:
        progress.fail("error", "response_error", error_message(info.error), now)
        return
    progress.add(record, info, now)
    progress.saw_done = True  # a complete body is the whole response
    progress.done_ns = now


def keep_server_timing(record: RequestRecord, timings: object) -> None:
    """The server's per-request timing (llama.cpp's ``timings``), its numbers only; the last wins."""
    if type(timings) is dict:
        record.server_timing = {k: v for k, v in timings.items()
                                if type(k) is str and type(v) in (int, float)}


async def read_error_message(resp: aiohttp.ClientResponse) -> str:
    body = b""
    try:
        while len(body) < _ERROR_BODY_BYTES:
            data = await resp.content.readany()
            if not data:
                break
            body += data
    except (aiohttp.ClientError, asyncio.TimeoutError):
        pass  # the status code is the failure that matters; keep what of the body arrived
    try:
        message = error_message(orjson.loads(body))
    except orjson.JSONDecodeError:
        message = body.decode("utf-8", "replace") or (resp.reason or "")
    return one_line(message)  # whole (at most 64 KiB): redact before cutting it
