"""Chunk classification: which chunks carry tokens, and what usage and errors they hold."""

from __future__ import annotations

from tokenpace.client.chunks import classify_chunk, classify_response, error_message


def chat_chunk(delta: dict, finish_reason=None, usage=None) -> dict:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def test_role_only_first_chunk_is_not_a_token():
    info = classify_chunk(chat_chunk({"role": "assistant", "content": ""}))
    assert not info.is_token
    assert info.content_chars == 0


def test_empty_and_null_content_are_not_tokens():
    assert not classify_chunk(chat_chunk({"content": ""})).is_token
    assert not classify_chunk(chat_chunk({"content": None})).is_token
    assert not classify_chunk(chat_chunk({})).is_token


def test_visible_content_is_a_token_even_if_only_whitespace():
    info = classify_chunk(chat_chunk({"content": "Hello"}))
    assert (info.is_token, info.content_chars, info.reasoning_chars) == (True, 5, 0)
    assert classify_chunk(chat_chunk({"content": " "})).is_token


def test_reasoning_first_under_either_field_name():
    info = classify_chunk(chat_chunk({"role": "assistant", "content": None, "reasoning_content": "Let me"}))
    assert (info.is_token, info.content_chars, info.reasoning_chars) == (True, 0, 6)
    info = classify_chunk(chat_chunk({"reasoning": "think"}))
    assert (info.is_token, info.reasoning_chars) == (True, 5)


def test_tool_call_delta_is_a_token_and_weighs_its_text():
    delta = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                             "function": {"name": "get_weather", "arguments": '{"ci'}}]}
    info = classify_chunk(chat_chunk(delta))
    assert (info.is_token, info.has_tool_call, info.content_chars) == (True, True, 0)
    assert info.tool_call_chars == 15  # "get_weather" (11) + '{"ci' (4)
    assert not classify_chunk(chat_chunk({"tool_calls": []})).is_token


def test_usage_only_final_chunk():
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}}
    info = classify_chunk(chunk)
    assert not info.is_token
    assert info.usage == {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
    assert info.finish_reason is None


def test_vllm_continuous_usage_on_a_token_chunk():
    info = classify_chunk(chat_chunk({"content": "ab"}, usage={"prompt_tokens": 3, "completion_tokens": 2}))
    assert info.is_token
    assert info.usage["completion_tokens"] == 2


def test_null_usage_is_no_usage():
    assert classify_chunk(chat_chunk({"content": "x"}, usage=None) | {"usage": None}).usage is None


def test_finish_reason_on_an_empty_chunk():
    info = classify_chunk(chat_chunk({}, finish_reason="length"))
    assert (info.is_token, info.finish_reason) == (False, "length")


def test_legacy_completions_text():
    chunk = {"object": "text_completion", "choices": [{"index": 0, "text": "foo bar", "finish_reason": None}]}
    info = classify_chunk(chunk)
    assert (info.is_token, info.content_chars) == (True, 7)
    assert not classify_chunk({"object": "text_completion", "choices": [{"text": ""}]}).is_token


def test_error_objects_in_the_stream():
    info = classify_chunk({"error": {"message": "overloaded", "type": "server_error", "code": 503}})
    assert info.error == {"message": "overloaded", "type": "server_error", "code": 503}
    assert error_message(info.error) == "overloaded"
    vllm_style = {"object": "error", "message": "bad request", "type": "BadRequestError", "code": 400}
    assert error_message(classify_chunk(vllm_style).error) == "bad request"


def test_malformed_shapes_do_not_raise():
    for chunk in ({}, {"choices": None}, {"choices": ["x", None]}, {"choices": [{"delta": "x"}]},
                  {"choices": [{"delta": {"tool_calls": ["x"]}}]}):
        classify_chunk(chunk)


def test_non_streaming_chat_response():
    body = {"object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Hi there", "reasoning_content": "hmm"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 9}}
    info = classify_response(body)
    assert (info.is_token, info.content_chars, info.reasoning_chars) == (True, 8, 3)
    assert (info.finish_reason, info.usage["completion_tokens"]) == ("stop", 9)


def test_non_streaming_completions_response():
    body = {"object": "text_completion", "choices": [{"text": "abc", "finish_reason": "length"}]}
    assert classify_response(body).content_chars == 3
