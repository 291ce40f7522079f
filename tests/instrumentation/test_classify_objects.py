"""The SDK-object classifier and the bench client's JSON classifier agree on the same chunks."""

from __future__ import annotations

import openai  # noqa: F401 - skips the module without the SDK (conftest)
import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tokenpace.client.chunk_objects import classify_chunk_object, classify_response_object
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


def _fields(info) -> tuple:
    return (info.content_chars, info.reasoning_chars, info.tool_call_chars, info.has_tool_call, info.is_token,
            info.finish_reason, info.usage and {k: info.usage[k] for k in ("prompt_tokens", "completion_tokens")})


@pytest.mark.parametrize("chunk", CHUNKS)
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
