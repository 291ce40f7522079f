"""One module per streaming API the client speaks: how a request is built and how each streamed
event (or whole body) is classified into a ``ChunkInfo``.

The reader (``client/responses.py``) and the accounting (``client/progress.py``) are shared by all:
a format turns its own event shapes into the common ``ChunkInfo`` (token or not, visible content or
reasoning or tool call, usage in OpenAI's shape, finish reason, error, end of response), so the
first-token rules, token splitting and error kinds stay one implementation.

| format | path | events |
|---|---|---|
| ``chat`` | ``/chat/completions`` | ``chat.completion.chunk`` objects, ``[DONE]`` |
| ``completions`` | ``/completions`` | ``text_completion`` objects, ``[DONE]`` |
| ``responses`` | ``/responses`` | OpenAI Responses events (``response.output_text.delta`` ...) |
| ``anthropic`` | ``/messages`` | Anthropic Messages events (``message_start`` ... ``message_stop``) |
"""

from __future__ import annotations

from typing import Any, Protocol

from ..chunks import ChunkInfo
from .anthropic import AnthropicFormat
from .chat import ChatFormat, CompletionsFormat
from .responses import ResponsesFormat

CACHE_BREAKPOINTS: tuple[str, ...] = ("none", "prefix", "system")


class ApiFormat(Protocol):
    name: str
    path: str  # appended to the base URL, e.g. "/chat/completions"

    def auth_headers(self, api_key: str) -> dict[str, str]: ...

    def request_body(self, model: str, prompt: str | list[dict[str, Any]], max_tokens: int | None, *,
                     stream: bool, ignore_eos: bool, cache_breakpoint: str = "none") -> dict[str, Any]: ...

    def classify_event(self, obj: dict[str, Any]) -> ChunkInfo: ...

    def classify_whole(self, obj: dict[str, Any]) -> ChunkInfo: ...


FORMATS: dict[str, ApiFormat] = {f.name: f for f in (
    ChatFormat(), CompletionsFormat(), ResponsesFormat(), AnthropicFormat())}


def api_format(name: str) -> ApiFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"api must be one of {', '.join(FORMATS)}, not {name!r}") from None
