"""The Anthropic Messages and OpenAI Responses streams against loopback servers that write
hand-crafted events: which event is the first token, the first content, the usage, every failure."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiohttp import web

from tokenpace.client import OpenAIClient
from tokenpace.record import RequestRecord

from test_client_stream import streaming_handler


def event(obj: dict) -> bytes:
    """One SSE event as both APIs write it: ``event: <type>`` then its data."""
    return b"event: " + obj["type"].encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


# ---- Anthropic Messages ------------------------------------------------------------------------

def message_start(input_tokens=10, read=0, write=0) -> dict:
    return {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": None, "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": write,
                                       "cache_read_input_tokens": read, "output_tokens": 1}}}


def block_start(index: int, block: dict) -> dict:
    return {"type": "content_block_start", "index": index, "content_block": block}


def block_delta(index: int, delta: dict) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def message_delta(output_tokens: int, stop_reason: str = "max_tokens") -> dict:
    return {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens}}


PING = {"type": "ping"}
STOP = {"type": "message_stop"}


def run(serve_app, pieces: list[bytes], *, api: str, path: str, prompt=None, status: int = 200, **client_args):
    seen: dict = {}
    write_ns: list[int] = []
    record = RequestRecord(request_id="r", index=0, requested_output_tokens=client_args.pop("max_tokens", None))
    handler = streaming_handler(pieces, seen, write_ns)
    if status != 200:
        async def handler(request: web.Request) -> web.Response:  # noqa: F811 - an error answer instead
            seen["body"] = await request.json()
            return web.Response(status=status, body=pieces[0], content_type="application/json")

    async def scenario() -> None:
        async with serve_app({("POST", path): handler}) as base_url:
            async with OpenAIClient(base_url, "m", api=api, **client_args) as client:
                await client.send(record, prompt if prompt is not None else "hi")

    asyncio.run(scenario())
    return record, seen, write_ns


def test_anthropic_thinking_then_text_then_tool_use_with_cache_usage(serve_app):
    pieces = [
        event(message_start(input_tokens=10, read=2048, write=100)) + event(PING),
        event(block_start(0, {"type": "thinking", "thinking": ""})),
        event(block_delta(0, {"type": "thinking_delta", "thinking": "Let me think"})),
        event(block_delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAh"}))
        + event({"type": "content_block_stop", "index": 0}) + event(block_start(1, {"type": "text", "text": ""})),
        event(block_delta(1, {"type": "text_delta", "text": "Hello"})),
        event({"type": "content_block_stop", "index": 1})
        + event(block_start(2, {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}})),
        event(block_delta(2, {"type": "input_json_delta", "partial_json": ""}))
        + event(block_delta(2, {"type": "input_json_delta", "partial_json": '{"q": 1}'})),
        event(message_delta(7, "tool_use")) + event(STOP),
    ]
    record, seen, w = run(serve_app, pieces, api="anthropic", path="/v1/messages", api_key="sk-ant-secret",
                          prompt=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert seen["headers"]["x-api-key"] == "sk-ant-secret"
    assert seen["headers"]["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in seen["headers"]
    assert seen["body"] == {"model": "m", "max_tokens": 4096, "system": [{"type": "text", "text": "be brief"}],
                            "messages": [{"role": "user", "content": "hi"}], "stream": True}
    assert (record.status, record.error_kind, record.api) == ("ok", None, "anthropic")
    # message_start, ping and the empty thinking block start are control: the thinking delta is the
    # first token, the text delta the first content, the tool_use block start the first tool call.
    assert w[2] <= record.first_token_ns < w[3]
    assert record.first_reasoning_ns == record.first_token_ns
    assert w[4] <= record.first_content_ns < w[5]
    assert w[5] <= record.first_tool_call_ns < w[6]
    assert len(record.chunk_ns) == 4  # thinking, text, tool_use start, non-empty input JSON
    assert (record.prompt_tokens, record.cached_prompt_tokens, record.cache_write_prompt_tokens) == (2158, 2048, 100)
    assert (record.output_tokens, record.output_tokens_source) == (7, "usage")
    assert sum(record.chunk_tokens) == 7 and record.chunk_tokens_source == "apportioned"
    assert record.finish_reason == "tool_calls"
    assert w[7] <= record.done_ns


def test_anthropic_tool_use_first_is_the_first_token_and_no_content(serve_app):
    pieces = [
        event(message_start()),
        event(block_start(0, {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}})),
        event(block_delta(0, {"type": "input_json_delta", "partial_json": "{}"})),
        event(message_delta(3, "tool_use")) + event(STOP),
    ]
    record, _, w = run(serve_app, pieces, api="anthropic", path="/v1/messages")
    assert record.status == "ok"
    assert w[1] <= record.first_token_ns < w[2] and record.first_tool_call_ns == record.first_token_ns
    assert record.first_content_ns is None and record.first_reasoning_ns is None


def test_anthropic_overloaded_error_mid_stream_keeps_the_tokens(serve_app):
    pieces = [
        event(message_start()) + event(block_start(0, {"type": "text", "text": ""})),
        event(block_delta(0, {"type": "text_delta", "text": "Hel"})),
        event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]
    record, _, w = run(serve_app, pieces, api="anthropic", path="/v1/messages", max_tokens=50)
    assert (record.status, record.error_kind, record.error_message) == ("error", "overloaded", "Overloaded")
    assert len(record.chunk_ns) == 1 and w[1] <= record.first_token_ns < w[2]
    assert record.prompt_tokens == 10  # from message_start, before the failure


def test_anthropic_other_error_event_is_a_stream_error(serve_app):
    pieces = [event(message_start()),
              event({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})]
    record, _, _ = run(serve_app, pieces, api="anthropic", path="/v1/messages")
    assert (record.status, record.error_kind) == ("error", "stream_error")


def test_anthropic_http_529_is_its_own_error_kind_with_the_message(serve_app):
    body = orjson.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    record, _, _ = run(serve_app, [body], api="anthropic", path="/v1/messages", status=529)
    assert (record.status, record.error_kind, record.http_status, record.error_message) == \
        ("error", "http_529", 529, "Overloaded")


def test_anthropic_control_events_only_then_stop_is_an_empty_response(serve_app):
    pieces = [event(message_start()) + event(PING), event(message_delta(0)) + event(STOP)]
    record, _, _ = run(serve_app, pieces, api="anthropic", path="/v1/messages")
    assert (record.status, record.error_kind) == ("error", "empty_response")


def test_anthropic_stream_cut_before_message_stop_is_incomplete(serve_app):
    pieces = [event(message_start()) + event(block_start(0, {"type": "text", "text": ""})),
              event(block_delta(0, {"type": "text_delta", "text": "a b"}))]
    record, _, _ = run(serve_app, pieces, api="anthropic", path="/v1/messages", max_tokens=20)
    assert (record.status, record.error_kind) == ("error", "incomplete")


def test_anthropic_usage_that_cannot_be_true_is_ignored_and_said(serve_app):
    pieces = [event(message_start(input_tokens=-5, read=3)) + event(block_start(0, {"type": "text", "text": ""})),
              event(block_delta(0, {"type": "text_delta", "text": "a"})), event(message_delta(1)) + event(STOP)]
    record, _, _ = run(serve_app, pieces, api="anthropic", path="/v1/messages", max_tokens=1)
    assert record.status == "ok"
    assert record.cached_prompt_tokens is None and "impossible usage" in record.error_message


@pytest.mark.parametrize("breakpoint, system, last_user", [
    ("none", [{"type": "text", "text": "P"}], "q2"),
    ("system", [{"type": "text", "text": "P", "cache_control": {"type": "ephemeral"}}], "q2"),
])
def test_anthropic_cache_breakpoint_on_the_system_prompt(breakpoint, system, last_user):
    client = OpenAIClient("http://127.0.0.1:9/v1", "m", api="anthropic", ignore_eos=False,
                          cache_breakpoint=breakpoint)
    body = client.request_body(RequestRecord("r", 0, requested_output_tokens=8),
                               [{"role": "system", "content": "P"}, {"role": "user", "content": "q2"}])
    assert body == {"model": "m", "max_tokens": 8, "system": system,
                    "messages": [{"role": "user", "content": last_user}], "stream": True}


def test_anthropic_prefix_breakpoint_ends_the_shared_prefix():
    conversation = [{"role": "system", "content": "P"}, {"role": "user", "content": "q1"},
                    {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]
    client = OpenAIClient("http://127.0.0.1:9/v1", "m", api="anthropic", cache_breakpoint="prefix")
    body = client.request_body(RequestRecord("r", 0), conversation)
    # The history before the new turn is the prefix: its last block carries the breakpoint.
    assert body["messages"][1]["content"] == [{"type": "text", "text": "a1", "cache_control": {"type": "ephemeral"}}]
    assert body["system"] == [{"type": "text", "text": "P"}]
    assert body["messages"][2] == {"role": "user", "content": "q2"}
    # A shared-prefix prompt (system prefix + one user suffix): the system prompt is the prefix.
    body = client.request_body(RequestRecord("r", 0), conversation[:1] + conversation[3:])
    assert body["system"] == [{"type": "text", "text": "P", "cache_control": {"type": "ephemeral"}}]


def test_anthropic_non_streamed_body(serve_app):
    body = orjson.dumps({"id": "m1", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                         "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Hi there"}],
                         "usage": {"input_tokens": 4, "cache_read_input_tokens": 16,
                                   "cache_creation_input_tokens": 0, "output_tokens": 9}})

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    record = RequestRecord("r", 0)

    async def scenario() -> None:
        async with serve_app({("POST", "/v1/messages"): handler}) as base_url:
            async with OpenAIClient(base_url, "m", api="anthropic", stream=False) as client:
                await client.send(record, "hi")

    asyncio.run(scenario())
    assert (record.status, record.finish_reason, record.output_tokens) == ("ok", "stop", 9)
    assert (record.prompt_tokens, record.cached_prompt_tokens, record.cache_write_prompt_tokens) == (20, 16, 0)
    assert record.first_content_ns == record.first_token_ns == record.first_reasoning_ns


# ---- OpenAI Responses --------------------------------------------------------------------------

def created(kind: str = "response.created") -> dict:
    return {"type": kind, "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress"}}


def completed(output_tokens: int, cached: int = 0, kind: str = "response.completed", status: str = "completed") -> dict:
    return {"type": kind, "response": {
        "id": "resp_1", "status": status, "incomplete_details": {"reason": "max_output_tokens"},
        "usage": {"input_tokens": 600, "input_tokens_details": {"cached_tokens": cached},
                  "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 2},
                  "total_tokens": 600 + output_tokens}}}


def test_responses_reasoning_then_text_then_function_call_with_cached_usage(serve_app):
    pieces = [
        event(created()) + event(created("response.in_progress")),
        event({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        event({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "delta": "Plan"}),
        event({"type": "response.output_item.added", "output_index": 1,
               "item": {"type": "message", "id": "m_1", "content": []}})
        + event({"type": "response.content_part.added", "item_id": "m_1",
                 "part": {"type": "output_text", "text": ""}}),
        event({"type": "response.output_text.delta", "item_id": "m_1", "delta": "Hi"}),
        event({"type": "response.output_text.delta", "item_id": "m_1", "delta": " there"}),
        event({"type": "response.output_item.added", "output_index": 2,
               "item": {"type": "function_call", "name": "lookup", "arguments": ""}}),
        event({"type": "response.function_call_arguments.delta", "delta": '{"q":1}'}),
        event({"type": "response.output_text.done", "text": "Hi there"}) + event(completed(9, cached=512)),
    ]
    record, seen, w = run(serve_app, pieces, api="responses", path="/v1/responses", api_key="sk-x", max_tokens=9,
                          ignore_eos=False)
    assert seen["headers"]["Authorization"] == "Bearer sk-x"
    assert seen["body"] == {"model": "m", "input": "hi", "max_output_tokens": 9, "stream": True}
    assert (record.status, record.error_kind, record.api) == ("ok", None, "responses")
    assert w[2] <= record.first_token_ns < w[3] and record.first_reasoning_ns == record.first_token_ns
    assert w[4] <= record.first_content_ns < w[5]
    assert w[6] <= record.first_tool_call_ns < w[7]
    assert len(record.chunk_ns) == 5
    assert (record.prompt_tokens, record.cached_prompt_tokens, record.cache_write_prompt_tokens) == (600, 512, None)
    assert (record.output_tokens, record.reasoning_tokens, record.finish_reason) == (9, 2, "stop")
    assert sum(record.chunk_tokens) == 9


def test_responses_incomplete_for_max_output_tokens_is_length(serve_app):
    pieces = [event(created()), event({"type": "response.output_text.delta", "delta": "a"}),
              event(completed(1, kind="response.incomplete", status="incomplete"))]
    record, _, _ = run(serve_app, pieces, api="responses", path="/v1/responses", max_tokens=1)
    assert (record.status, record.finish_reason, record.output_tokens) == ("ok", "length", 1)


@pytest.mark.parametrize("failure, kind", [
    ({"type": "error", "code": "server_error", "message": "boom"}, "stream_error"),
    ({"type": "error", "code": "overloaded_error", "message": "Overloaded"}, "overloaded"),
    ({"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error",
                                                                              "message": "boom"}}}, "stream_error"),
])
def test_responses_error_events(failure, kind, serve_app):
    pieces = [event(created()), event({"type": "response.output_text.delta", "delta": "a"}), event(failure)]
    record, _, _ = run(serve_app, pieces, api="responses", path="/v1/responses")
    assert (record.status, record.error_kind, len(record.chunk_ns)) == ("error", kind, 1)
    assert record.error_message in ("boom", "Overloaded")


def test_responses_created_then_completed_without_output_is_an_empty_response(serve_app):
    record, _, _ = run(serve_app, [event(created()), event(completed(0))], api="responses", path="/v1/responses")
    assert (record.status, record.error_kind) == ("error", "empty_response")
