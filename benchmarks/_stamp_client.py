"""A load client that only stamps arrivals: ``proxy_overhead.py`` runs it as a process of its own so
that the relay under test, not the client, is what is measured.

During the load each connection keeps (arrival ns, bytes) per socket read and nothing else: no HTTP
or SSE parsing, no JSON, no record. After the load, each response is de-chunked with every byte's
arrival time kept, cut into SSE events (an event arrived with the read that held its last byte),
and its token-carrying events (tokenpace's own ``classify_chunk``) are written out with their
arrival times, for matching against the server's send log.

    python benchmarks/_stamp_client.py URL STREAMS TOKENS TAG OUT.json [--cpu N]
"""

from __future__ import annotations

import asyncio
import os
import sys
from bisect import bisect_right
from pathlib import Path
from time import monotonic_ns
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import orjson  # noqa: E402

from tokenpace.client.chunks import classify_chunk  # noqa: E402


class Stamped(asyncio.Protocol):
    """One request on its own connection (``Connection: close``): the server's close ends it."""

    def __init__(self, request: bytes, done: asyncio.Future) -> None:
        self.request, self.done = request, done
        self.reads: list[tuple[int, bytes]] = []
        self.sent_ns = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.sent_ns = monotonic_ns()
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.reads.append((monotonic_ns(), data))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


def request_bytes(url: str, request_id: str, tokens: int) -> bytes:
    parts = urlsplit(url)
    body = orjson.dumps({"model": "tokenpace-sim", "messages": [{"role": "user", "content": "hello " * 8}],
                         "max_tokens": tokens, "stream": True, "stream_options": {"include_usage": True}})
    head = (f"POST {parts.path.rstrip('/')}/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nX-Request-ID: {request_id}\r\n"
            "Connection: close\r\n\r\n")
    return head.encode() + body


def token_arrivals(reads: list[tuple[int, bytes]]) -> tuple[int, list[int]]:
    """(HTTP status, arrival ns of each token-carrying SSE event) of one response."""
    raw = b"".join(data for _, data in reads)
    starts, offset = [], 0
    for _, data in reads:
        starts.append(offset)
        offset += len(data)

    def arrived(raw_offset: int) -> int:
        return reads[bisect_right(starts, raw_offset) - 1][0]

    head_end = raw.find(b"\r\n\r\n")
    if head_end < 0:
        return 0, []
    head = raw[:head_end].decode("latin-1").lower()
    status = int(head.split(None, 2)[1])
    pos = head_end + 4
    body, where = bytearray(), []  # where: (body offset, raw offset) at the start of each piece
    if "transfer-encoding: chunked" in head:
        while True:
            line_end = raw.find(b"\r\n", pos)
            if line_end < 0:
                break
            size = int(raw[pos:line_end].split(b";")[0], 16)
            if size == 0:
                break
            where.append((len(body), line_end + 2))
            body += raw[line_end + 2:line_end + 2 + size]
            pos = line_end + 2 + size + 2
    else:
        where.append((0, pos))
        body += raw[pos:]
    piece_starts = [b for b, _ in where]
    out, event_start = [], 0
    while True:
        end = body.find(b"\n\n", event_start)
        if end < 0:
            break
        event = bytes(body[event_start:end])
        last_byte = end + 1
        i = bisect_right(piece_starts, last_byte) - 1
        t = arrived(where[i][1] + last_byte - where[i][0])
        event_start = end + 2
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                if payload and payload != b"[DONE]" and classify_chunk(orjson.loads(payload)).is_token:
                    out.append(t)
    return status, out


async def run(url: str, streams: int, tokens: int, tag: str) -> list[dict]:
    loop = asyncio.get_running_loop()
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port
    protocols = []

    async def one(i: int) -> None:
        done = loop.create_future()
        proto = Stamped(request_bytes(url, f"{tag}-{i}", tokens), done)
        protocols.append((f"{tag}-{i}", proto))
        await loop.create_connection(lambda: proto, host, port)
        await asyncio.wait_for(done, 600)

    await asyncio.gather(*(one(i) for i in range(streams)))
    results = []
    for request_id, proto in protocols:  # parsed after the load, never during it
        status, arrivals = token_arrivals(proto.reads)
        results.append({"request_id": request_id, "status": status, "token_ns": arrivals, "sent_ns": proto.sent_ns})
    return results


def main() -> None:
    url, streams, tokens, tag, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    if "--cpu" in sys.argv:
        os.sched_setaffinity(0, {int(sys.argv[sys.argv.index("--cpu") + 1])})
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        results = runner.run(run(url, streams, tokens, tag))
    Path(out).write_bytes(orjson.dumps(results))


if __name__ == "__main__":
    main()
