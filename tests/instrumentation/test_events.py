"""The lowest level: an async iterator of SSE events, from the bench client's own parser, observed."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

import tokenpace
from tokenpace.client.sse import SSEParser


async def _events(url: str, max_tokens: int):
    body = {"model": "tokenpace-sim", "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens,
            "stream": True, "stream_options": {"include_usage": True}}
    parser = SSEParser()
    async with aiohttp.ClientSession() as session, session.post(f"{url}/chat/completions", json=body) as resp:
        async for data in resp.content.iter_any():
            for event in parser.feed(data):
                yield event


def test_events_pass_unchanged_and_make_one_record(server_url):
    records: list = []

    async def scenario() -> list:
        seen = [e.data async for e in tokenpace.observe_events(_events(server_url, 5), records=records)]
        # closed early: the generator's close is the exit path
        stream = tokenpace.observe_events(_events(server_url, 50), records=records)
        async for _event in stream:
            break
        await stream.aclose()
        return seen

    seen = asyncio.run(scenario())
    assert seen[-1] == "[DONE]" and orjson.loads(seen[-2])["usage"]["completion_tokens"] == 5
    assert [(r.status, r.error_kind, r.output_tokens) for r in records][0] == ("ok", None, 5)
    assert (records[1].status, records[1].error_kind) == ("cancelled", "closed_early")
    assert len(records) == 2
