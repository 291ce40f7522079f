"""Each API's event stream read from bytes split anywhere: the same tokens, stamped with the read
that completed each event, whatever the splits (every single boundary, and many random ones)."""

from __future__ import annotations

import bisect

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenpace.client.formats import api_format
from tokenpace.client.progress import Progress, finish_record
from tokenpace.client.responses import apply_events
from tokenpace.client.sse import SSEParser
from tokenpace.record import RequestRecord

CONTROL, TOKEN, CONTENT = 0, 1, 2  # what an event is, for the expected stamps


def ev(obj: dict, what: int = CONTROL, named: bool = True) -> tuple[bytes, int]:
    head = b"event: " + obj["type"].encode() + b"\n" if named and "type" in obj else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n", what


def anthropic_stream(text: str) -> list[tuple[bytes, int]]:
    return [
        ev({"type": "message_start", "message": {"usage": {"input_tokens": 5, "cache_read_input_tokens": 32,
                                                           "cache_creation_input_tokens": 3, "output_tokens": 1}}}),
        ev({"type": "ping"}),
        ev({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ev({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}}, TOKEN),
        ev({"type": "content_block_stop", "index": 0}),
        ev({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ev({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": text}}, CONTENT),
        ev({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "ü"}}, CONTENT),
        ev({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "name": "f"}}, TOKEN),
        ev({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
           TOKEN),
        ev({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        ev({"type": "message_stop"}),
    ]


def responses_stream(text: str) -> list[tuple[bytes, int]]:
    return [
        ev({"type": "response.created", "response": {"status": "in_progress"}}),
        ev({"type": "response.in_progress", "response": {"status": "in_progress"}}),
        ev({"type": "response.reasoning_text.delta", "delta": "hm"}, TOKEN),
        ev({"type": "response.content_part.added", "part": {"type": "output_text", "text": ""}}),
        ev({"type": "response.output_text.delta", "delta": text}, CONTENT),
        ev({"type": "response.output_text.delta", "delta": "ü"}, CONTENT),
        ev({"type": "response.function_call_arguments.delta", "delta": "{}"}, TOKEN),
        ev({"type": "response.output_text.done", "text": text}),
        ev({"type": "response.completed", "response": {
            "status": "completed", "usage": {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 32},
                                             "output_tokens": 9}}}),
    ]


def chat_stream(text: str) -> list[tuple[bytes, int]]:
    def chunk(delta: dict, **more) -> dict:
        return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}], **more}
    return [
        ev(chunk({"role": "assistant", "content": ""}), named=False),
        ev(chunk({"reasoning_content": "hm"}), TOKEN, named=False),
        ev(chunk({"content": text}), CONTENT, named=False),
        ev(chunk({"content": "ü"}), CONTENT, named=False),
        ev(chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]}), TOKEN, named=False),
        ev({"object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 32}}},
           named=False),
        (b"data: [DONE]\n\n", CONTROL),
    ]


def completions_stream(text: str) -> list[tuple[bytes, int]]:
    def chunk(piece: str, **more) -> dict:
        return {"object": "text_completion", "choices": [{"index": 0, "text": piece, "finish_reason": None}], **more}
    usage = {"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 32}}
    return [
        ev(chunk(text, usage={**usage, "completion_tokens": 4}), CONTENT, named=False),
        ev(chunk("", usage={**usage, "completion_tokens": 4}), named=False),  # an empty text: not a token
        ev(chunk("ü", usage={**usage, "completion_tokens": 9}), CONTENT, named=False),
        ev({"object": "text_completion", "choices": [], "usage": {**usage, "completion_tokens": 9}}, named=False),
        (b"data: [DONE]\n\n", CONTROL),
    ]


STREAMS = {"anthropic": anthropic_stream, "responses": responses_stream, "chat": chat_stream,
           "completions": completions_stream}
EXPECTED = {  # (prompt, cached, cache writes, output tokens)
    "anthropic": (40, 32, 3, 9), "responses": (40, 32, None, 9), "chat": (40, 32, None, 9),
    "completions": (40, 32, None, 9)}


def read(api: str, pieces: list[bytes]) -> RequestRecord:
    """Feed the pieces as reads stamped 1, 2, 3, ...; then the end of the stream."""
    record, progress, parser = RequestRecord("r", 0), Progress(), SSEParser(strict=True)
    fmt = api_format(api)
    for stamp, piece in enumerate(pieces, 1):
        if not progress.saw_done:
            assert not apply_events(parser.feed(piece), stamp, record, progress, fmt)
    assert progress.saw_done  # the API's own end event was seen
    finish_record(record, progress)
    return record


def check(api: str, events: list[tuple[bytes, int]], cuts: list[int]) -> None:
    stream = b"".join(data for data, _ in events)
    bounds = [0, *cuts, len(stream)]
    pieces = [stream[a:b] for a, b in zip(bounds, bounds[1:])]
    ends, at = [], 0
    for data, _ in events:
        at += len(data)
        ends.append(at)

    def stamp(end: int) -> int:  # the read that brought an event's last byte
        return bisect.bisect_left(bounds[1:], end) + 1

    token_stamps = [stamp(end) for end, (_, what) in zip(ends, events) if what != CONTROL]
    content_stamps = [stamp(end) for end, (_, what) in zip(ends, events) if what == CONTENT]
    record = read(api, pieces)
    assert record.status == "ok", record.error_message
    assert record.chunk_ns == token_stamps
    assert record.first_token_ns == token_stamps[0] and record.first_content_ns == content_stamps[0]
    assert (record.prompt_tokens, record.cached_prompt_tokens, record.cache_write_prompt_tokens,
            record.output_tokens) == EXPECTED[api]
    assert sum(record.chunk_tokens) == EXPECTED[api][3]


@pytest.mark.parametrize("api", STREAMS)
def test_every_single_boundary(api):
    events = STREAMS[api]("Hello, wörld")
    length = sum(len(data) for data, _ in events)
    for cut in range(length + 1):
        check(api, events, [cut])


@settings(max_examples=120, deadline=None)
@given(api=st.sampled_from(sorted(STREAMS)), text=st.text(min_size=1, max_size=12).filter(str.strip),
       data=st.data())
def test_any_splits(api, text, data):
    events = STREAMS[api](text)
    length = sum(len(d) for d, _ in events)
    cuts = sorted(data.draw(st.lists(st.integers(0, length), max_size=12)))
    check(api, events, cuts)
