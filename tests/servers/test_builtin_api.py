"""The built-in server speaks OpenAI's API the way vLLM does: streams, usage, errors, request ids."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from servers_helpers import chat_body, completion_body, fast_config, post_stream, read_events, run

from tokenpace.servers import running_server


def _token_chunks(events):
    """Chunks that carry generated text (what a client must count as tokens)."""
    chunks = [e for e in events if isinstance(e, dict) and e["choices"]]
    return [c for c in chunks if c["choices"][0].get("delta", {}).get("content") or c["choices"][0].get("text")]


def test_chat_stream_role_first_exact_tokens_usage_and_done_last():
    async def go():
        async with running_server(fast_config()) as url, aiohttp.ClientSession() as s:
            body = chat_body(max_tokens=7, content="alpha beta gamma delta", stream_options={"include_usage": True})
            return await post_stream(s, url + "/chat/completions", body, headers={"X-Request-ID": "req-42"})

    headers, events = run(go())
    assert headers["X-Request-ID"] == "req-42"
    assert events[-1] == "[DONE]"
    role = events[0]
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert role["object"] == "chat.completion.chunk"
    assert all(e["id"] == "chatcmpl-req-42" for e in events[:-1])

    tokens = _token_chunks(events)
    assert len(tokens) == 7  # one token per chunk by default
    text = "".join(c["choices"][0]["delta"]["content"] for c in tokens)
    assert len(text.split()) == 7 and text.startswith(" ")
    assert [c["choices"][0]["finish_reason"] for c in tokens] == [None] * 6 + ["length"]

    usage_chunk = events[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 4, "completion_tokens": 7, "total_tokens": 11,
                                    "prompt_tokens_details": {"cached_tokens": 0}}  # fmt: skip
    assert len(events) == 1 + 7 + 1 + 1  # role, tokens, usage, [DONE]


def test_continuous_usage_is_cumulative_on_every_chunk():
    async def go():
        async with running_server(fast_config()) as url, aiohttp.ClientSession() as s:
            options = {"include_usage": True, "continuous_usage_stats": True}
            _, events = await post_stream(s, url + "/chat/completions", chat_body(5, stream_options=options))
            return events

    events = run(go())
    chunks = events[:-1]
    assert all("usage" in c for c in chunks)
    assert [c["usage"]["completion_tokens"] for c in chunks] == [0, 1, 2, 3, 4, 5, 5]
    assert all(c["usage"]["prompt_tokens"] == 4 for c in chunks)
    assert all(c["usage"]["total_tokens"] == 4 + c["usage"]["completion_tokens"] for c in chunks)


def test_without_include_usage_no_usage_anywhere():
    async def go():
        async with running_server(fast_config()) as url, aiohttp.ClientSession() as s:
            # continuous_usage_stats alone does nothing, as in vLLM.
            body = chat_body(3, stream_options={"continuous_usage_stats": True})
            _, events = await post_stream(s, url + "/chat/completions", body)
            return events

    events = run(go())
    assert events[-1] == "[DONE]"
    assert not any("usage" in e for e in events[:-1])
    assert len(_token_chunks(events)) == 3


def test_completions_stream_has_no_role_chunk():
    async def go():
        async with running_server(fast_config()) as url, aiohttp.ClientSession() as s:
            body = completion_body(6, prompt="a b c d e", stream_options={"include_usage": True})
            return await post_stream(s, url + "/completions", body)

    headers, events = run(go())
    assert events[-1] == "[DONE]"
    chunks = events[:-2]
    assert len(chunks) == 6 and all(c["object"] == "text_completion" for c in chunks)
    assert events[0]["id"] == "cmpl-" + headers["X-Request-ID"]  # generated when absent
    assert len("".join(c["choices"][0]["text"] for c in chunks).split()) == 6
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["usage"]["prompt_tokens"] == 5 and events[-2]["usage"]["completion_tokens"] == 6


def test_tokens_per_chunk_groups_tokens():
    async def go():
        async with running_server(fast_config(tokens_per_chunk=4)) as url, aiohttp.ClientSession() as s:
            options = {"include_usage": True, "continuous_usage_stats": True}
            _, events = await post_stream(s, url + "/chat/completions", chat_body(10, stream_options=options))
            return events

    tokens = _token_chunks(run(go()))
    words = [len(c["choices"][0]["delta"]["content"].split()) for c in tokens]
    assert words == [4, 4, 2]
    assert [c["usage"]["completion_tokens"] for c in tokens] == [4, 8, 10]


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_non_streaming_response(api):
    async def go():
        async with running_server(fast_config()) as url, aiohttp.ClientSession() as s:
            path, body = ("/chat/completions", chat_body(9)) if api == "chat" else ("/completions", completion_body(9))
            async with s.post(url + path, json=body, headers={"X-Request-ID": "whole-1"}) as r:
                assert r.status == 200 and r.headers["X-Request-ID"] == "whole-1"
                return await r.json()

    data = run(go())
    choice = data["choices"][0]
    text = choice["message"]["content"] if api == "chat" else choice["text"]
    assert choice["finish_reason"] == "length" and len(text.split()) == 9
    assert data["usage"]["completion_tokens"] == 9
    assert data["usage"]["prompt_tokens"] == (4 if api == "chat" else 3)
    assert data["id"] == ("chatcmpl-" if api == "chat" else "cmpl-") + "whole-1"


def test_max_tokens_defaults_to_16_and_ignore_eos_is_accepted():
    async def go():
        async with running_server(fast_config()) as url, aiohttp.ClientSession() as s:
            body = chat_body(ignore_eos=True, min_tokens=2)
            del body["max_tokens"]
            async with s.post(url + "/chat/completions", json=body) as r:
                return await r.json()

    assert run(go())["usage"]["completion_tokens"] == 16


@pytest.mark.parametrize(
    ("path", "raw", "status", "error_type"),
    [
        ("/chat/completions", b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}', 404, "NotFoundError"),
        ("/completions", b'{"model": "nope", "prompt": "x"}', 404, "NotFoundError"),
        ("/chat/completions", b"{not json", 400, "BadRequestError"),
        ("/chat/completions", b"[1, 2]", 400, "BadRequestError"),
        ("/chat/completions", b'{"model": "tokenpace-sim"}', 400, "BadRequestError"),
        ("/completions", b'{"model": "tokenpace-sim"}', 400, "BadRequestError"),
        ("/completions", b'{"prompt": "x", "max_tokens": 0}', 400, "BadRequestError"),
        ("/completions", b'{"prompt": "x", "max_tokens": "5"}', 400, "BadRequestError"),
    ],
)  # fmt: skip
def test_errors_use_openai_error_body(path, raw, status, error_type):
    async def go():
        async with running_server(fast_config()) as url, aiohttp.ClientSession() as s:
            headers = {"Content-Type": "application/json", "X-Request-ID": "bad-1"}
            async with s.post(url + path, data=raw, headers=headers) as r:
                return r.status, r.headers.get("X-Request-ID"), await r.json()

    got_status, request_id, body = run(go())
    assert got_status == status and request_id == "bad-1"
    assert body["error"]["type"] == error_type and body["error"]["code"] == status
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def test_health_and_models():
    async def go():
        async with running_server(fast_config(model="my-model")) as url, aiohttp.ClientSession() as s:
            async with s.get(url.removesuffix("/v1") + "/health") as r:
                health = r.status
            async with s.get(url + "/models") as r:
                return health, await r.json()

    health, models = run(go())
    assert health == 200
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["my-model"] and models["data"][0]["object"] == "model"


def test_streams_can_run_concurrently_with_distinct_ids():
    async def go():
        async with running_server(fast_config()) as url, aiohttp.ClientSession() as s:

            async def one(i):
                async with s.post(url + "/completions", json=completion_body(4, stream=True),
                                  headers={"X-Request-ID": f"c{i}"}) as r:  # fmt: skip
                    return i, await read_events(r)

            return await asyncio.gather(*(one(i) for i in range(20)))

    for i, events in run(go()):
        assert events[-1] == "[DONE]" and len(events) == 5
        assert all(e["id"] == f"cmpl-c{i}" for e in events[:-1])
