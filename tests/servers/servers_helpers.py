"""Helpers for the built-in server's tests: each test runs a real server on loopback.

(A uniquely named module rather than conftest.py, so test files can import it by name.)
"""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from tokenpace.servers import BuiltinServerConfig

# Fast and exact: no jitter, small steps, so tests take milliseconds and timings are predictable.
FAST = dict(prefill_base_s=0.002, prefill_per_token_s=0.0, decode_base_s=0.002, decode_per_running_s=0.0,
            jitter_frac=0.0)  # fmt: skip


def fast_config(**overrides) -> BuiltinServerConfig:
    return BuiltinServerConfig(**{**FAST, **overrides})


def run(coro):
    return asyncio.run(coro)


def chat_body(max_tokens=5, content="one two three four", **extra) -> dict:
    return {"model": "tokenpace-sim", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            **extra}  # fmt: skip


def completion_body(max_tokens=5, prompt="one two three", **extra) -> dict:
    return {"model": "tokenpace-sim", "prompt": prompt, "max_tokens": max_tokens, **extra}


async def read_events(response: aiohttp.ClientResponse) -> list:
    """The SSE ``data:`` payloads of a stream, decoded (``[DONE]`` kept as the string)."""
    events = []
    async for line in response.content:
        line = line.strip()
        if line.startswith(b"data: "):
            payload = line[6:]
            events.append(payload.decode() if payload == b"[DONE]" else orjson.loads(payload))
        elif line:
            raise AssertionError(f"unexpected SSE line {line!r}")
    return events


async def post_stream(session, url, body, headers=None):
    """(response headers, events) of a streamed request."""
    async with session.post(url, json={**body, "stream": True}, headers=headers) as response:
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"].startswith("text/event-stream")
        return response.headers, await read_events(response)
