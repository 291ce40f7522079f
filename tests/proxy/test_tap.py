"""The tapped relay (``proxy/tap.py``, ``--relay tap``, the default) against the awaited one
(``--relay loop``): the client gets the upstream's bytes exactly, framed so that a real HTTP client
parses them; a client that stops reading makes the proxy stop reading upstream instead of buffering;
the upstream timeout still ends a stalled stream; every call is one record."""

from __future__ import annotations

import asyncio
import socket
from contextlib import asynccontextmanager

import aiohttp
import orjson
import pytest
from aiohttp import web

from tokenpace.proxy import ProxyConfig, running_proxy
from tokenpace.proxy import tap as tap_module

TOKENS = 40


def _events(size: int) -> list[bytes]:
    """SSE events of a chat stream; the 7th carries ``size`` bytes of content (several TCP segments)."""
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    out += [{**base, "choices": [{"index": 0, "delta": {"content": ("x" * size) if i == 6 else f" t{i}"}}]}
            for i in range(TOKENS)]
    out.append({**base, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": TOKENS, "total_tokens": TOKENS + 3}})
    return [b"data: " + orjson.dumps(e) + b"\n\n" for e in out] + [b"data: [DONE]\n\n"]


@asynccontextmanager
async def upstream(handler):
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)  # a stalled handler is not waited for
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    finally:
        await runner.cleanup()


async def _event_stream(request: web.Request) -> web.StreamResponse:
    """The upstream's answer to ``request``: an event stream, prepared (headers sent)."""
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    return resp


def _body(max_tokens: int = TOKENS) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens, "stream": True}


def _records(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture
def taps(monkeypatch):
    """How many streams the proxy relayed through the tap (the fallback would make the test moot)."""
    count = [0]
    real = tap_module.Tap.__init__

    def counting(self, *args, **kwargs):
        count[0] += 1
        real(self, *args, **kwargs)

    monkeypatch.setattr(tap_module.Tap, "__init__", counting)
    return count


@pytest.mark.parametrize("relay", ["tap", "loop"])
def test_the_client_gets_the_upstreams_bytes_exactly(relay, taps, tmp_path):
    events = _events(size=100_000)

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = await _event_stream(request)
        for i, event in enumerate(events):
            await resp.write(event)
            if i % 5 == 0:
                await asyncio.sleep(0.002)  # some events alone in a read, others together
        await resp.write_eof()
        return resp

    async def scenario() -> list[bytes]:
        bodies = []
        async with upstream(stream) as up, running_proxy(ProxyConfig(
                upstream=up, port=0, relay=relay, records_path=str(tmp_path / "r.jsonl"))) as (url, _state):
            async with aiohttp.ClientSession() as session:  # aiohttp's own parser de-chunks what it gets
                for _ in range(3):
                    async with session.post(url + "/chat/completions", json=_body()) as resp:
                        assert resp.headers["Transfer-Encoding"] == "chunked"
                        bodies.append(await resp.read())
        return bodies

    bodies = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert bodies == [b"".join(events)] * 3
    records = _records(tmp_path / "r.jsonl")
    assert [(r["status"], r["output_tokens"]) for r in records] == [("ok", TOKENS)] * 3
    assert taps[0] == (3 if relay == "tap" else 0)


def test_a_client_that_stops_reading_stops_the_upstream_reads(taps, tmp_path):
    """64 MiB offered by the upstream as fast as it can; the client reads the headers, then nothing for
    a second: what the upstream managed to send meanwhile is bounded by the sockets' buffers, not the
    whole answer held in the proxy. Then the client reads on and gets every byte, in order."""
    piece = 4096
    events = [b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"content": f"{i:08d}" + "y" * piece}}]})
              + b"\n\n" for i in range(16_384)]
    total = sum(len(e) for e in events)
    sent = [0]

    async def flood(request: web.Request) -> web.StreamResponse:
        resp = await _event_stream(request)
        for event in events:
            await resp.write(event)  # aiohttp's write waits while the proxy's socket is full
            sent[0] += len(event)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def scenario() -> tuple[int, bytes]:
        async with upstream(flood) as up, running_proxy(ProxyConfig(
                upstream=up, port=0, records_path=str(tmp_path / "r.jsonl"))) as (url, _state):
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            await loop.sock_connect(sock, ("127.0.0.1", port))
            body = orjson.dumps(_body(16_384))
            await loop.sock_sendall(sock, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                    b"application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%b"
                                    % (len(body), body))
            await asyncio.sleep(1.0)  # not reading
            held = sent[0]
            raw = bytearray()
            while chunk := await loop.sock_recv(sock, 1 << 20):
                raw += chunk
            sock.close()
        return held, bytes(raw)

    held, raw = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert held < total // 2, f"the upstream sent {held:,} of {total:,} bytes to a client that read nothing"
    head, _, chunked = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    body, pos = bytearray(), 0
    while True:  # de-chunked by hand: every chunk's size line matches its bytes
        line_end = chunked.index(b"\r\n", pos)
        size = int(chunked[pos:line_end], 16)
        if size == 0:
            break
        body += chunked[line_end + 2:line_end + 2 + size]
        assert chunked[line_end + 2 + size:line_end + 4 + size] == b"\r\n"
        pos = line_end + 4 + size
    assert bytes(body) == b"".join(events) + b"data: [DONE]\n\n"
    assert taps[0] == 1
    (record,) = _records(tmp_path / "r.jsonl")
    assert record["status"] == "ok"


@pytest.mark.parametrize("relay", ["tap", "loop"])
def test_a_stalled_stream_ends_at_the_upstream_timeout(relay, taps, tmp_path):
    events = _events(size=10)

    async def stall(request: web.Request) -> web.StreamResponse:
        resp = await _event_stream(request)
        for event in events[:3]:
            await resp.write(event)
        await asyncio.sleep(30)  # never ends within the test: the proxy's timeout must
        return resp

    async def scenario() -> tuple[bytes, str]:
        async with upstream(stall) as up, running_proxy(ProxyConfig(
                upstream=up, port=0, relay=relay, upstream_timeout_s=0.5, records_path=str(tmp_path / "r.jsonl"))) as (url, _state):
            async with aiohttp.ClientSession() as session:
                async with session.post(url + "/chat/completions", json=_body()) as resp:
                    got = bytearray()
                    try:
                        async for data in resp.content.iter_any():
                            got += data
                    except aiohttp.ClientPayloadError as exc:  # the stream is cut, not ended
                        return bytes(got), type(exc).__name__
        return bytes(got), "ended"

    got, how = asyncio.run(asyncio.wait_for(scenario(), 20))
    assert how == "ClientPayloadError"
    assert got == b"".join(events[:3])
    (record,) = _records(tmp_path / "r.jsonl")
    assert (record["status"], record["error_kind"]) == ("timeout", "total_timeout")
    assert taps[0] == (1 if relay == "tap" else 0)


def test_an_http10_client_is_relayed_unchunked_by_the_loop(taps, tmp_path):
    """HTTP/1.0 has no chunked framing: the tap leaves such a stream to the awaited relay, whose
    aiohttp writer sends the bytes as they are, the end of the answer marked by the close."""
    events = _events(size=10)

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = await _event_stream(request)
        for event in events:
            await resp.write(event)
        await resp.write_eof()
        return resp

    async def scenario() -> bytes:
        async with upstream(stream) as up, running_proxy(ProxyConfig(
                upstream=up, port=0, records_path=str(tmp_path / "r.jsonl"))) as (url, _state):
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            body = orjson.dumps(_body())
            writer.write(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
            raw = await reader.read()  # until the proxy closes
            writer.close()
            return raw

    raw = asyncio.run(asyncio.wait_for(scenario(), 30))
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"chunked" not in head.lower()
    assert body == b"".join(events)
    assert taps[0] == 0
    (record,) = _records(tmp_path / "r.jsonl")
    assert (record["status"], record["output_tokens"]) == ("ok", TOKENS)
