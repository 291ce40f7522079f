"""The four request formats the built-in server speaks, one entry each: where it is served, how its
request body is read, how its responses and errors are framed.

| format | path | prompt | output cap | framer |
|---|---|---|---|---|
| ``chat`` | ``/v1/chat/completions`` | ``messages`` | ``max_completion_tokens`` / ``max_tokens`` | ``wire.Framer`` |
| ``completions`` | ``/v1/completions`` | ``prompt`` | ``max_tokens`` | ``wire.Framer`` |
| ``responses`` | ``/v1/responses`` | ``instructions`` + ``input`` | ``max_output_tokens`` | ``wire_responses`` |
| ``anthropic`` | ``/v1/messages`` | ``system`` + ``messages`` | ``max_tokens`` (required) | ``wire_anthropic`` |

Every framer has the same methods: ``opening`` (events written when the request is accepted),
``first`` (before the first token), ``token``, ``empty`` (an event that carries nothing),
``closing`` (after the last token, each with its send-log kind), ``error_event`` (an error inside
the stream) and ``whole`` (a non-streamed body). A prompt's text is the same words in every format,
so the simulator's prefix cache sees the same blocks whichever API carried them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from . import wire, wire_anthropic, wire_responses
from .tokens import count_completion_prompt_tokens, count_text_tokens


@dataclass(frozen=True, slots=True)
class Prompt:
    """What the server needs from a request body, whatever its format."""

    tokens: int
    text: str  # the prompt's words, for the prefix cache's block ids
    max_tokens: Any  # as sent (checked by the caller); None: not given
    include_usage: bool
    continuous_usage: bool
    cache_breakpoint_tokens: int | None = None  # Anthropic: tokens up to the last cache_control


class ResponseFramer(Protocol):
    """The bytes of one response in one format (a new framer per request)."""

    def opening(self, seq: Any, continuous_usage: bool) -> list[bytes]: ...
    def first(self, seq: Any) -> bytes: ...
    def token(self, text_json: bytes, finished: bool, seq: Any, continuous_usage: bool,
              extra: bytes = b"") -> bytes: ...
    def empty(self) -> bytes: ...
    def closing(self, seq: Any, include_usage: bool) -> list[tuple[bytes, str]]: ...
    def error_event(self, error_type: str, message: str) -> bytes: ...
    def whole(self, seq: Any, extra: bytes = b"") -> bytes: ...


@dataclass(frozen=True)
class ServerFormat:
    name: str
    path: str
    id_prefix: str  # of the response id, before the request id (``chatcmpl-``, ``resp_``, ...)
    read: Callable[[dict[str, Any]], Prompt]  # raises ValueError with the message for a 400
    framer: Callable[..., ResponseFramer]  # (api, response_id, model, created, cache_breakpoint_tokens)
    error_body: Callable[[int, str, str], bytes]
    prompt_word: str = "messages"  # in the context-length error


def content_text(content: Any) -> str:
    """A message content's text: a string, or the ``text`` of its parts (images count nothing)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def _messages_text(messages: Any, *, required: bool = True) -> list[str]:
    if not isinstance(messages, list) or (required and not messages):
        raise ValueError("'messages' must be a non-empty list")
    texts = []
    for message in messages:
        if not isinstance(message, dict):
            raise ValueError("each message must be an object")
        texts.append(content_text(message.get("content")))
    return texts


def _usage_options(body: dict[str, Any]) -> tuple[bool, bool]:
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ValueError("'stream_options' must be an object")
    include = bool(options.get("include_usage"))
    return include, include and bool(options.get("continuous_usage_stats"))


def _read_chat(body: dict[str, Any]) -> Prompt:
    text = " ".join(_messages_text(body.get("messages")))
    include, continuous = _usage_options(body)
    return Prompt(count_text_tokens(text), text, body.get("max_completion_tokens", body.get("max_tokens")),
                  include, continuous)


def _read_completions(body: dict[str, Any]) -> Prompt:
    if "prompt" not in body:
        raise ValueError("'prompt' is required")
    prompt = body["prompt"]
    tokens = count_completion_prompt_tokens(prompt)
    prompt = prompt[0] if isinstance(prompt, list) and len(prompt) == 1 else prompt
    include, continuous = _usage_options(body)
    return Prompt(tokens, prompt if isinstance(prompt, str) else "", body.get("max_tokens"), include, continuous)


def _read_responses(body: dict[str, Any]) -> Prompt:
    given = body.get("input")
    if isinstance(given, str):
        texts = [given]
    elif isinstance(given, list) and given:
        texts = _messages_text(given)
    else:
        raise ValueError("'input' must be a string or a non-empty list of messages")
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        texts.insert(0, instructions)
    text = " ".join(texts)
    return Prompt(count_text_tokens(text), text, body.get("max_output_tokens"), True, False)


def _read_anthropic(body: dict[str, Any]) -> Prompt:
    if "max_tokens" not in body:
        raise ValueError("max_tokens: Field required")
    system = body.get("system")
    blocks: list[Any] = []  # every content piece in order, to find the last breakpoint
    if isinstance(system, str):
        blocks.append(system)
    elif isinstance(system, list):
        blocks.extend(system)
    elif system is not None:
        raise ValueError("'system' must be a string or a list of text blocks")
    messages = body.get("messages")
    _messages_text(messages)  # the checks
    for message in messages:
        content = message.get("content")
        blocks.extend(content if isinstance(content, list) else [content])
    texts, breakpoint = [], None
    tokens = 0
    for block in blocks:
        text = content_text([block] if isinstance(block, dict) else block)
        texts.append(text)
        tokens += count_text_tokens(text)
        if isinstance(block, dict) and block.get("cache_control") is not None:
            breakpoint = tokens
    text = " ".join(texts)
    return Prompt(tokens, text, body.get("max_tokens"), True, False, breakpoint)


FORMATS: dict[str, ServerFormat] = {f.name: f for f in (
    ServerFormat("chat", "/v1/chat/completions", "chatcmpl-", _read_chat, wire.Framer, wire.error_body),
    ServerFormat("completions", "/v1/completions", "cmpl-", _read_completions, wire.Framer, wire.error_body,
                 prompt_word="prompt"),
    ServerFormat("responses", "/v1/responses", "resp_", _read_responses, wire_responses.ResponsesFramer,
                 wire_responses.error_body, prompt_word="input"),
    ServerFormat("anthropic", "/v1/messages", "msg_", _read_anthropic, wire_anthropic.AnthropicFramer,
                 wire_anthropic.error_body),
)}
NAMES: tuple[str, ...] = tuple(FORMATS)


def parse_api_formats(text: str) -> tuple[str, ...]:
    """``--api-formats chat,completions,...``: the formats to serve. Raises ValueError."""
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in FORMATS]
    if unknown or not names:
        raise ValueError(f"--api-formats: {'unknown ' + ', '.join(map(repr, unknown)) if unknown else 'empty'}; "
                         f"known: {','.join(NAMES)}")
    return names
