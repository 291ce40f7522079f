"""The bytes of the Anthropic Messages API (``POST /v1/messages``), as Anthropic streams them.

A stream: ``message_start`` (the prompt's usage), ``content_block_start`` (an empty text block) and
a ``ping``, written together just before the first token, when the prefix cache's answer is known;
one ``content_block_delta`` (``text_delta``) per token chunk; then ``content_block_stop``,
``message_delta`` (``stop_reason: "max_tokens"`` and the whole usage, cumulative, as Anthropic's
documentation says of it) and ``message_stop``.

Usage splits the prompt in three, none included in another: ``cache_read_input_tokens`` (what the
simulator's prefix cache served: it caches every full block on its own, as vLLM's automatic prefix
caching does, so a hit is reported with or without a breakpoint), ``cache_creation_input_tokens``
(the tokens up to the request's last ``cache_control`` breakpoint that were not read: zero without a
breakpoint) and ``input_tokens`` (the rest).
"""

from __future__ import annotations

from typing import Any

import orjson

from .tokens import output_text

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                529: "overloaded_error"}


def error_body(status: int, error_type: str, message: str) -> bytes:
    """Anthropic's error body: ``{"type": "error", "error": {"type", "message"}}``; the type follows
    the status (Anthropic's names), whatever OpenAI-style name the server used."""
    kind = error_type if error_type.endswith("_error") else _ERROR_TYPES.get(status, "api_error")
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})


def _event(name: bytes, obj: bytes) -> bytes:
    return b"event: %b\ndata: %b\n\n" % (name, obj)


class AnthropicFramer:
    def __init__(self, api: str, response_id: str, model: str, created: int,
                 cache_breakpoint_tokens: int | None = None) -> None:
        self.api, self.response_id, self.model = api, response_id, model
        self.breakpoint = cache_breakpoint_tokens
        self.delta_head = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":'

    def usage(self, seq: Any, output_tokens: int) -> dict[str, int]:
        read = seq.cached_tokens
        write = max(0, min(self.breakpoint, seq.prompt_tokens) - read) if self.breakpoint else 0
        return {"input_tokens": seq.prompt_tokens - read - write, "cache_creation_input_tokens": write,
                "cache_read_input_tokens": read, "output_tokens": output_tokens}

    def opening(self, seq: Any, continuous_usage: bool) -> list[bytes]:
        return []

    def first(self, seq: Any) -> bytes:
        message = {"id": self.response_id, "type": "message", "role": "assistant", "model": self.model,
                   "content": [], "stop_reason": None, "stop_sequence": None, "usage": self.usage(seq, 0)}
        return b"".join((
            _event(b"message_start", orjson.dumps({"type": "message_start", "message": message})),
            _event(b"content_block_start",
                   b'{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'),
            _event(b"ping", b'{"type":"ping"}')))

    def token(self, text_json: bytes, finished: bool, seq: Any, continuous_usage: bool, extra: bytes = b"") -> bytes:
        return b"".join((self.delta_head, text_json, b"}}\n\n"))

    def empty(self) -> bytes:
        """A ping: an event that carries nothing (the ``empty-choices`` fault)."""
        return _event(b"ping", b'{"type":"ping"}')

    def closing(self, seq: Any, include_usage: bool) -> list[tuple[bytes, str]]:
        delta: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": None}}
        if include_usage:
            delta["usage"] = self.usage(seq, seq.generated_tokens)
        return [(_event(b"content_block_stop", b'{"type":"content_block_stop","index":0}'), "control"),
                (_event(b"message_delta", orjson.dumps(delta)), "usage"),
                (_event(b"message_stop", b'{"type":"message_stop"}'), "done")]

    def error_event(self, error_type: str, message: str) -> bytes:
        return _event(b"error", orjson.dumps({"type": "error", "error": {"type": error_type, "message": message}}))

    def whole(self, seq: Any, extra: bytes = b"") -> bytes:
        return orjson.dumps({
            "id": self.response_id, "type": "message", "role": "assistant", "model": self.model,
            "content": [{"type": "text", "text": output_text(0, seq.generated_tokens)}],
            "stop_reason": "max_tokens", "stop_sequence": None, "usage": self.usage(seq, seq.generated_tokens)})
