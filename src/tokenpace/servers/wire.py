"""The bytes the built-in server writes: OpenAI's streaming events, as vLLM formats them.

Per-chunk work is the hot path at hundreds of streams: the parts that never change within a response
are encoded once, and each token chunk only splices in its text and (optionally) its usage.
"""

from __future__ import annotations

from typing import Any

import orjson

from .tokens import output_text

DONE_EVENT = b"data: [DONE]\n\n"


def error_body(status: int, error_type: str, message: str) -> bytes:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return orjson.dumps({"error": {"message": message, "type": error_type, "param": None, "code": status}})


def vllm_error_body(status: int, error_type: str, message: str) -> bytes:
    """vLLM's own error body, the object itself: ``{"object": "error", "message", "type", "param", "code"}``."""
    return orjson.dumps({"object": "error", "message": message, "type": error_type, "param": None, "code": status})


def usage_json(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> bytes:
    return (
        b'{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}'
        % (prompt_tokens, prompt_tokens + completion_tokens, completion_tokens, cached_tokens)
    )


def timings_member(prompt_n: int, cache_n: int, prompt_ms: float, predicted_n: int, predicted_ms: float) -> bytes:
    """``,"timings":{...}``: llama.cpp's per-request timing, on the last chunk or the whole body.
    As in llama.cpp, prompt time is the prompt's processing only (not the wait for a slot)."""
    return b',"timings":' + orjson.dumps({
        "cache_n": cache_n, "prompt_n": prompt_n, "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
        "prompt_per_second": prompt_n * 1e3 / prompt_ms if prompt_ms > 0 else 0.0,
        "predicted_n": predicted_n, "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / predicted_n if predicted_n else 0.0,
        "predicted_per_second": predicted_n * 1e3 / predicted_ms if predicted_ms > 0 else 0.0,
    })


class Framer:
    """The bytes of one chat or completions response (SSE events, or the whole body); constant parts
    encoded once. Every format's framer has the same methods (see ``formats.py``)."""

    def __init__(self, api: str, response_id: str, model: str, created: int, cache_breakpoint_tokens: int | None = None) -> None:
        self.api, self.response_id, self.model, self.created = api, response_id, model, created
        obj = b"chat.completion.chunk" if api == "chat" else b"text_completion"
        self.head = b'data: {"id":%b,"object":"%b","created":%d,"model":%b' % (
            orjson.dumps(response_id), obj, created, orjson.dumps(model))  # fmt: skip
        if api == "chat":
            self.token_head = self.head + b',"choices":[{"index":0,"delta":{"content":'
            tail = b'},"logprobs":null,"finish_reason":%b}]'
        else:
            self.token_head = self.head + b',"choices":[{"index":0,"text":'
            tail = b',"logprobs":null,"finish_reason":%b,"stop_reason":null}]'
        self.token_tails = (tail % b"null", tail % b'"length"')  # indexed by `finished`

    def opening(self, seq: Any, continuous_usage: bool) -> list[bytes]:
        """Events written as soon as the request is accepted, before queueing and prefill."""
        if self.api != "chat":
            return []
        return [self.role(usage_json(seq.prompt_tokens, 0, seq.cached_tokens) if continuous_usage else None)]

    def first(self, seq: Any) -> bytes:
        """Events written with the first token, before it (none in this format)."""
        return b""

    def role(self, usage: bytes | None) -> bytes:
        choices = b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]'
        return self.head + choices + (b',"usage":' + usage if usage else b"") + b"}\n\n"

    def token(self, text_json: bytes, finished: bool, seq: Any, continuous_usage: bool, extra: bytes = b"") -> bytes:
        """A token chunk; ``text_json`` is the chunk's text already encoded as a JSON string;
        ``extra`` more top-level members (``timings_member``)."""
        usage = usage_json(seq.prompt_tokens, seq.generated_tokens, seq.cached_tokens) if continuous_usage else None
        usage_part = b',"usage":' + usage if usage else b""
        return b"".join((self.token_head, text_json, self.token_tails[finished], usage_part, extra, b"}\n\n"))

    def empty(self) -> bytes:
        """A chunk with ``choices: []`` and no usage: carries nothing (the ``empty-choices`` fault)."""
        return self.head + b',"choices":[]}\n\n'

    empty_choices = empty

    def usage(self, usage: bytes) -> bytes:
        return self.head + b',"choices":[],"usage":' + usage + b"}\n\n"

    def closing(self, seq: Any, include_usage: bool) -> list[tuple[bytes, str]]:
        """The events after the last token, each with its send-log kind ("usage", "done", "control")."""
        tail = [(self.usage(usage_json(seq.prompt_tokens, seq.generated_tokens, seq.cached_tokens)), "usage")]
        return [*(tail if include_usage else []), (DONE_EVENT, "done")]

    def error_event(self, error_type: str, message: str) -> bytes:
        """An error inside the stream, as vLLM writes one: ``data: {"error": {...}}``."""
        return b"data: " + error_body(529 if error_type == "overloaded_error" else 500, error_type, message) + b"\n\n"

    def whole(self, seq: Any, extra: bytes = b"") -> bytes:
        """The body of a non-streamed response."""
        text = output_text(0, seq.generated_tokens)
        usage = usage_json(seq.prompt_tokens, seq.generated_tokens, seq.cached_tokens)
        if self.api == "chat":
            obj, choice = b"chat.completion", {"index": 0, "message": {"role": "assistant", "content": text}}
        else:
            obj, choice = b"text_completion", {"index": 0, "text": text}
        choice.update(logprobs=None, finish_reason="length", stop_reason=None)
        return b'{"id":%b,"object":"%b","created":%d,"model":%b,"choices":[%b],"usage":%b%b}' % (
            orjson.dumps(self.response_id), obj, self.created, orjson.dumps(self.model), orjson.dumps(choice), usage,
            extra)
