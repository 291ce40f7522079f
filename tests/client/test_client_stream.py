"""The client against real loopback servers that stream hand-crafted SSE: every record field."""

from __future__ import annotations

import asyncio
from time import monotonic_ns

import orjson
from aiohttp import web

from tokenpace.client import OpenAIClient
from tokenpace.record import RequestRecord

PAUSE_S = 0.03  # between writes, so that each write's arrival is told apart from the next


def sse(obj: dict | str, newline: bytes = b"\r\n") -> bytes:
    payload = obj.encode() if isinstance(obj, str) else orjson.dumps(obj)
    return b"data: " + payload + newline + newline


def chat(delta: dict, usage: dict | None = None, finish_reason: str | None = None) -> dict:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def streaming_handler(pieces: list[bytes], seen: dict, write_ns: list[int]):
    """A handler that records the request, then writes each piece PAUSE_S apart, stamping each write."""

    async def handler(request: web.Request) -> web.StreamResponse:
        seen["body"] = await request.json()
        seen["headers"] = dict(request.headers)
        seen.setdefault("peers", []).append(request.transport.get_extra_info("peername"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in pieces:
            await asyncio.sleep(PAUSE_S)
            write_ns.append(monotonic_ns())
            await response.write(piece)
        await response.write_eof()
        return response

    return handler


def test_chat_stream_with_continuous_usage_fills_every_field(serve_app):
    split_event = sse(chat({"content": "é!"}, usage={"prompt_tokens": 12, "completion_tokens": 5}))
    cut = split_event.index("é".encode()) + 1  # inside the two-byte "é"
    pieces = [
        # Role-only chunk (usage says 0 tokens so far) and a keep-alive: neither is a token.
        sse(chat({"role": "assistant", "content": ""}, usage={"prompt_tokens": 12, "completion_tokens": 0}))
        + b": keep-alive\r\n\r\n",
        sse(chat({"content": "Hello"}, usage={"prompt_tokens": 12, "completion_tokens": 1})),
        sse(chat({"content": " world, again"}, usage={"prompt_tokens": 12, "completion_tokens": 4})),
        split_event[:cut],
        split_event[cut:],
        sse(chat({"content": ""}, usage={"prompt_tokens": 12, "completion_tokens": 5}, finish_reason="length"))
        + sse({"id": "c1", "object": "chat.completion.chunk", "choices": [],
               "usage": {"prompt_tokens": 12, "completion_tokens": 5,
                         "prompt_tokens_details": {"cached_tokens": 8},
                         "completion_tokens_details": {"reasoning_tokens": 0}}})
        + sse("[DONE]"),
    ]
    seen: dict = {}
    write_ns: list[int] = []
    record = RequestRecord(request_id="req-7", index=7, requested_output_tokens=5)

    async def scenario() -> None:
        routes = {("POST", "/v1/chat/completions"): streaming_handler(pieces, seen, write_ns)}
        async with serve_app(routes) as base_url:
            client = OpenAIClient(base_url, "m", extra_body={"temperature": 0.5})
            await client.send(record, "Say hello")
            await client.close()

    asyncio.run(scenario())

    assert seen["body"] == {
        "model": "m", "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 5,
        "ignore_eos": True, "min_tokens": 5, "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}, "temperature": 0.5,
    }
    assert seen["headers"]["X-Request-ID"] == "req-7"
    assert "Authorization" not in seen["headers"]

    assert (record.status, record.error_kind, record.error_message) == ("ok", None, None)
    assert (record.http_status, record.finish_reason) == (200, "length")
    assert record.sent_ns < write_ns[0]
    # TTFT is stamped on the first content chunk, never on the role chunk.
    assert write_ns[1] <= record.first_token_ns < write_ns[2]
    assert record.first_content_ns == record.first_token_ns
    assert record.first_reasoning_ns is None and record.first_tool_call_ns is None
    # The split event counts when its second half arrived.
    assert len(record.chunk_ns) == 3
    assert record.chunk_ns[0] == record.first_token_ns
    assert write_ns[2] <= record.chunk_ns[1] < write_ns[3]
    assert write_ns[4] <= record.chunk_ns[2] < write_ns[5]
    assert record.last_token_ns == record.chunk_ns[2]
    assert record.done_ns >= write_ns[5]
    assert record.chunk_tokens == [1, 3, 1]
    assert record.chunk_tokens_source == "chunk_usage"
    assert (record.output_tokens, record.output_tokens_source, record.output_tokens_client) == (5, "usage", 3)
    assert (record.prompt_tokens, record.prompt_tokens_source, record.cached_prompt_tokens) == (12, "usage", 8)
    assert record.reasoning_tokens == 0
    assert (record.api, record.stream) == ("chat", True)


def test_reasoning_then_content_then_tool_call_without_usage(serve_app):
    tool_delta = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                  "function": {"name": "lookup", "arguments": "{}"}}]}
    pieces = [
        sse(chat({"role": "assistant"}), b"\n"),
        sse(chat({"reasoning_content": "Thinking"}), b"\n"),
        sse(chat({"content": "Answer"}), b"\n"),
        sse(chat(tool_delta), b"\n"),
        sse(chat({}, finish_reason="tool_calls"), b"\n") + sse("[DONE]", b"\n"),
    ]
    seen: dict = {}
    write_ns: list[int] = []
    record = RequestRecord(request_id="r", index=0)

    async def scenario() -> None:
        routes = {("POST", "/v1/chat/completions"): streaming_handler(pieces, seen, write_ns)}
        async with serve_app(routes) as base_url:
            async with OpenAIClient(base_url, "m") as client:
                await client.send(record, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])

    asyncio.run(scenario())

    assert seen["body"]["messages"] == [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert "max_tokens" not in seen["body"] and "ignore_eos" not in seen["body"]  # nothing requested
    assert record.status == "ok"
    assert record.first_token_ns == record.first_reasoning_ns
    assert write_ns[1] <= record.first_reasoning_ns < write_ns[2] <= record.first_content_ns < write_ns[3]
    assert write_ns[3] <= record.first_tool_call_ns == record.last_token_ns < write_ns[4]
    assert record.finish_reason == "tool_calls"
    # No usage anywhere: one token per token-carrying chunk, counted by the client.
    assert (record.chunk_tokens, record.chunk_tokens_source) == ([1, 1, 1], "one_per_chunk")
    assert (record.output_tokens, record.output_tokens_source, record.output_tokens_client) == (3, "estimate", 3)
    assert record.prompt_tokens is None and record.prompt_tokens_source is None


def test_completions_stream_with_final_usage_is_apportioned(serve_app):
    def text(value: str, finish_reason: str | None = None) -> dict:
        return {"object": "text_completion", "choices": [{"index": 0, "text": value, "finish_reason": finish_reason}]}

    pieces = [
        sse(text("ab")), sse(text("cd")), sse(text("efghijkl", "stop")),
        sse({"object": "text_completion", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 12}})
        + sse("[DONE]"),
    ]
    seen: dict = {}
    record = RequestRecord(request_id="r", index=0, requested_output_tokens=12)

    async def scenario() -> None:
        routes = {("POST", "/v1/completions"): streaming_handler(pieces, seen, [])}
        async with serve_app(routes) as base_url:
            async with OpenAIClient(base_url, "m", api="completions", ignore_eos=False) as client:
                await client.send(record, "Once upon")

    asyncio.run(scenario())

    assert seen["body"]["prompt"] == "Once upon" and "messages" not in seen["body"]
    assert "ignore_eos" not in seen["body"] and "min_tokens" not in seen["body"]
    assert record.status == "ok" and record.api == "completions"
    # 12 tokens over 2, 2 and 8 characters.
    assert (record.chunk_tokens, record.chunk_tokens_source) == ([2, 2, 8], "apportioned")
    assert (record.output_tokens, record.output_tokens_source) == (12, "usage")
    assert (record.prompt_tokens, record.output_tokens_client, record.finish_reason) == (4, 3, "stop")


def test_non_streaming_response_is_one_chunk(serve_app):
    seen: dict = {}

    async def handler(request: web.Request) -> web.Response:
        seen["body"] = await request.json()
        await asyncio.sleep(PAUSE_S)
        return web.json_response({
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 6, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 2}},
        })

    record = RequestRecord(request_id="r", index=0, requested_output_tokens=9)

    async def scenario() -> None:
        async with serve_app({("POST", "/v1/chat/completions"): handler}) as base_url:
            async with OpenAIClient(base_url, "m", stream=False) as client:
                await client.send(record, "hi")

    asyncio.run(scenario())

    assert seen["body"]["stream"] is False and "stream_options" not in seen["body"]
    assert record.status == "ok" and record.stream is False
    assert record.first_token_ns == record.first_content_ns == record.last_token_ns == record.done_ns
    assert record.done_ns - record.sent_ns >= PAUSE_S * 1e9
    assert record.chunk_ns == [record.done_ns]
    assert record.chunk_tokens == [9]
    assert (record.output_tokens, record.output_tokens_source, record.output_tokens_client) == (9, "usage", None)
    assert (record.prompt_tokens, record.cached_prompt_tokens, record.finish_reason) == (6, 2, "stop")


def test_api_key_is_sent_only_when_given_and_never_shown(serve_app):
    seen: dict = {}
    pieces = [sse(chat({"content": "x"})) + sse("[DONE]")]

    async def scenario() -> list[str | None]:
        authorizations = []
        routes = {("POST", "/v1/chat/completions"): streaming_handler(pieces, seen, [])}
        async with serve_app(routes) as base_url:
            for key in ("sk-secret-123", None):
                async with OpenAIClient(base_url, "m", api_key=key) as client:
                    await client.send(RequestRecord(request_id="r", index=0), "hi")
                    assert "sk-secret" not in repr(client)
                authorizations.append(seen["headers"].get("Authorization"))
        return authorizations

    assert asyncio.run(scenario()) == ["Bearer sk-secret-123", None]


def test_connection_is_reused_after_done(serve_app):
    seen: dict = {}
    pieces = [sse(chat({"content": "x"})) + sse("[DONE]")]

    async def scenario() -> list[RequestRecord]:
        routes = {("POST", "/v1/chat/completions"): streaming_handler(pieces, seen, [])}
        records = [RequestRecord(request_id=f"r{i}", index=i) for i in range(3)]
        async with serve_app(routes) as base_url:
            async with OpenAIClient(base_url, "m", max_connections=4) as client:
                for record in records:
                    await client.send(record, "hi")
        return records

    records = asyncio.run(scenario())
    assert [record.status for record in records] == ["ok", "ok", "ok"]
    assert len(set(seen["peers"])) == 1  # one keep-alive connection served all three


def test_list_models(serve_app):
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "llama", "object": "model"}, {"id": "qwen"}]})

    async def scenario() -> list[str]:
        async with serve_app({("GET", "/v1/models"): models}) as base_url:
            async with OpenAIClient(base_url + "/", "m") as client:
                return await client.list_models()

    assert asyncio.run(scenario()) == ["llama", "qwen"]


def test_request_body_for_a_dry_run():
    client = OpenAIClient("http://127.0.0.1:1/v1", "m", extra_body={"max_tokens": 3, "stream_options": None})
    body = client.request_body(RequestRecord(request_id="r", index=0, requested_output_tokens=50), "p")
    # extra_body is merged last, so it can override anything.
    assert body == {"model": "m", "messages": [{"role": "user", "content": "p"}], "max_tokens": 3,
                    "ignore_eos": True, "min_tokens": 50, "stream": True, "stream_options": None}


def test_server_that_ignores_stream_true_is_read_as_one_chunk(serve_app):
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"choices": [{"message": {"content": "whole"}, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 1, "completion_tokens": 2}})

    record = RequestRecord(request_id="r", index=0)

    async def scenario() -> None:
        async with serve_app({("POST", "/v1/chat/completions"): handler}) as base_url:
            async with OpenAIClient(base_url, "m") as client:
                await client.send(record, "hi")

    asyncio.run(scenario())
    assert (record.status, record.chunk_tokens, record.output_tokens) == ("ok", [2], 2)
    assert record.first_token_ns == record.done_ns
