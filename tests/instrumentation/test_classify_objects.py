"""The SDK-object classifier and the bench client's JSON classifier agree on the same chunks."""

from __future__ import annotations

import openai  # noqa: F401 - skips the module without the SDK (conftest)
import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tokenpace.client.chunk_objects import classify_chunk_object, classify_response_object, text_chars
from tokenpace.client.chunks import classify_chunk, classify_response

BASE = {"id": "c", "created": 1, "model": "m"}
USAGE = {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13,
         "prompt_tokens_details": {"cached_tokens": 8}, "completion_tokens_details": {"reasoning_tokens": 2}}
CHUNKS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},  # role only: not a token
    {"choices": [{"index": 0, "delta": {"content": ""}}]},  # empty content: not a token
    {"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
    {"choices": [{"index": 0, "delta": {"reasoning_content": "think"}}]},
    {"choices": [{"index": 0, "delta": {"reasoning": "hmm"}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{\"a\""}}]}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": USAGE},
]
# Text, but not the common chunk: two choices (n=2), text with its finish reason, text with usage.
NOT_COMMON = [
    {"choices": [{"index": 0, "delta": {"content": "a"}}, {"index": 1, "delta": {"content": "bc"}}]},
    {"choices": [{"index": 0, "delta": {"content": "end"}, "finish_reason": "length"}]},
    {"choices": [{"index": 0, "delta": {"content": "Hel"}}], "usage": USAGE},
]


def _fields(info) -> tuple:
    return (info.content_chars, info.reasoning_chars, info.tool_call_chars, info.has_tool_call, info.is_token,
            info.finish_reason, info.usage and {k: info.usage[k] for k in ("prompt_tokens", "completion_tokens")})


@pytest.mark.parametrize("chunk", CHUNKS + NOT_COMMON)
def test_chat_chunk(chunk):
    obj = ChatCompletionChunk.model_validate({**BASE, "object": "chat.completion.chunk", **chunk})
    assert _fields(classify_chunk_object(obj)) == _fields(classify_chunk(chunk))


def test_whole_responses():
    chat = {**BASE, "object": "chat.completion", "usage": USAGE, "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi!", "reasoning_content": "r"}}]}
    legacy = {**BASE, "object": "text_completion", "usage": USAGE,
              "choices": [{"index": 0, "text": "abc", "finish_reason": "length", "logprobs": None}]}
    assert _fields(classify_response_object(ChatCompletion.model_validate(chat))) == _fields(classify_response(chat))
    assert _fields(classify_response_object(Completion.model_validate(legacy))) == _fields(classify_response(legacy))
    assert classify_response_object(ChatCompletion.model_validate(chat)).usage["prompt_tokens_details"]["cached_tokens"] == 8


@pytest.mark.parametrize("chunk", CHUNKS + NOT_COMMON)
def test_the_common_chunks_short_path_takes_only_text(chunk):
    """``text_chars`` (the stream wrapper's short path) answers only for a chunk that carries text and
    nothing else, with the JSON classifier's length; every other chunk goes the general way (-1)."""
    obj = ChatCompletionChunk.model_validate({**BASE, "object": "chat.completion.chunk", **chunk})
    info = classify_chunk(chunk)
    text_only = (info.reasoning_chars == info.tool_call_chars == 0 and not info.has_tool_call and info.usage is None
                 and info.finish_reason is None and len(chunk["choices"]) == 1 and "content" in chunk["choices"][0]["delta"])
    assert text_chars(obj) == (info.content_chars if text_only else -1)
    assert text_chars(chunk) == text_chars(obj)  # a dict chunk the same


def test_short_path_and_general_path_make_the_same_record():
    """A stream of every kind of chunk through the wrapper's per-chunk path (the short path for text,
    ``Progress.add`` for the rest) gives the record ``Progress.add`` alone gives."""
    from tokenpace.client.progress import Progress
    from tokenpace.record import RequestRecord

    kinds = CHUNKS[:6] + [{"choices": [{"index": 0, "delta": {"content": "lo!"}}]}] * 3 + CHUNKS[6:]
    objs = [ChatCompletionChunk.model_validate({**BASE, "object": "chat.completion.chunk", **c}) for c in kinds]
    short, general = RequestRecord(request_id="a", index=0), RequestRecord(request_id="a", index=0)
    p_short, p_general = Progress(), Progress()
    for now, (obj, chunk) in enumerate(zip(objs, kinds), start=1):
        chars = text_chars(obj)
        if chars > 0:
            p_short.add_text(short, chars, now)
        else:
            p_short.add(short, classify_chunk_object(obj), now)
        p_general.add(general, classify_chunk(chunk), now)
    assert short == general and p_short.weights == p_general.weights == [3, 5, 3, 5, 3, 3, 3]
    assert (short.first_token_ns, short.first_content_ns, short.first_reasoning_ns, short.last_token_ns) == (3, 3, 4, 9)
