"""Helpers for the client's tests: byte-exact responses from a raw TCP server on loopback.

(A uniquely named module rather than conftest.py, so test files can import it by name.)
"""

from __future__ import annotations

import asyncio

import orjson

from tokenpace.client import OpenAIClient
from tokenpace.record import RequestRecord

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
END = b"0\r\n\r\n"  # the last chunk of a chunked body


def http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def token(text: str, completion_tokens: int | None = None) -> bytes:
    chunk: dict = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}
    if completion_tokens is not None:
        chunk["usage"] = {"prompt_tokens": 3, "completion_tokens": completion_tokens}
    return http_chunk(b"data: " + orjson.dumps(chunk) + b"\n\n")


def send_to_raw(serve_raw, writes: list[bytes], timeout_s: float = 10.0, hang: bool = False,
                **record_fields) -> RequestRecord:
    """Serve ``writes`` byte-exact, then close the connection (or, with ``hang``, keep it open until
    the client closes it), and send one request to it (a record with ``record_fields``)."""

    async def respond(request: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for data in writes:
            writer.write(data)
            await writer.drain()
            await asyncio.sleep(0.01)
        if hang:
            await reader.read()  # returns at EOF: the client gave up

    record = RequestRecord(request_id="r", index=0, **record_fields)

    async def scenario() -> None:
        async with serve_raw(respond) as base_url:
            async with OpenAIClient(base_url, "m", timeout_s=timeout_s) as client:
                await client.send(record, "hi")

    asyncio.run(scenario())
    return record
