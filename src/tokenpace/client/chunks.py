"""Pure classification of OpenAI-style response objects: what did this chunk carry?

Streaming chunks are ``chat.completion.chunk`` (text in ``choices[].delta``) or legacy
``text_completion`` (text in ``choices[].text``). A chunk "is a token" when it carries generated
output: visible content, reasoning, or a tool-call delta. A role-only first chunk, an empty-string
content, or the usage-only final chunk (``choices: []``) is not, which is why TTFT is never stamped
on them (REFERENCE section 1).
"""

from __future__ import annotations

from typing import Any


class ChunkInfo:
    """What one chunk (or one whole non-streaming response) carried."""

    __slots__ = (
        "content_chars",
        "reasoning_chars",
        "tool_call_chars",
        "has_tool_call",
        "is_token",
        "usage",
        "finish_reason",
        "error",
        "done",
    )

    def __init__(
        self,
        content_chars: int = 0,
        reasoning_chars: int = 0,
        tool_call_chars: int = 0,
        has_tool_call: bool = False,
        usage: dict[str, Any] | None = None,
        finish_reason: str | None = None,
        error: Any = None,
        done: bool = False,
    ) -> None:
        self.content_chars = content_chars  # visible text length
        self.reasoning_chars = reasoning_chars  # reasoning_content / reasoning length
        self.tool_call_chars = tool_call_chars  # tool-call name + arguments length (a weight)
        self.has_tool_call = has_tool_call
        self.is_token = content_chars > 0 or reasoning_chars > 0 or has_tool_call
        self.usage = usage
        self.finish_reason = finish_reason
        self.error = error  # the error object the server put in the stream, if any
        # The API's own end-of-response event (Anthropic ``message_stop``, Responses
        # ``response.completed``): what ``[DONE]`` is for chat and completions.
        self.done = done

    @property
    def text_chars(self) -> int:
        """The chunk's weight when a token total is split over chunks."""
        return self.content_chars + self.reasoning_chars + self.tool_call_chars


def classify_chunk(obj: dict[str, Any]) -> ChunkInfo:
    """Classify one decoded streaming JSON object (chat or completions)."""
    return _classify(obj, "delta")


def classify_response(obj: dict[str, Any]) -> ChunkInfo:
    """Classify a whole non-streaming response body (chat ``message`` or completions ``text``)."""
    return _classify(obj, "message")


def _classify(obj: dict[str, Any], part: str) -> ChunkInfo:
    # Locals and one constructor call: this runs once per chunk on the client's hot path.
    error = obj.get("error")
    if error is None and obj.get("object") == "error":  # vLLM's older shape: the object is the error
        error = obj
    usage = obj.get("usage")
    if type(usage) is not dict:
        usage = None
    content_chars = reasoning_chars = tool_call_chars = 0
    has_tool_call = False
    finish_reason = None
    choices = obj.get("choices")
    for choice in choices if type(choices) is list else ():
        if type(choice) is not dict:
            continue
        reason = choice.get("finish_reason")
        if reason is not None:
            finish_reason = reason
        text = choice.get("text")  # legacy completions
        if type(text) is str:
            content_chars += len(text)
        delta = choice.get(part)
        if type(delta) is not dict:
            continue
        content = delta.get("content")
        if type(content) is str:
            content_chars += len(content)
        # Servers name it differently: DeepSeek and vLLM < 0.9 "reasoning_content", others "reasoning".
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if type(reasoning) is str:
            reasoning_chars += len(reasoning)
        tool_calls = delta.get("tool_calls")
        if tool_calls and type(tool_calls) is list:
            has_tool_call = True
            tool_call_chars += _tool_call_chars(tool_calls)
    return ChunkInfo(
        content_chars, reasoning_chars, tool_call_chars, has_tool_call, usage, finish_reason, error
    )


def _tool_call_chars(tool_calls: list[Any]) -> int:
    # The function name is generated text too, so it weighs like the arguments.
    chars = 0
    for call in tool_calls:
        function = call.get("function") if type(call) is dict else None
        if type(function) is dict:
            for key in ("name", "arguments"):
                value = function.get(key)
                if type(value) is str:
                    chars += len(value)
    return chars


def stream_error_kind(error: Any) -> str:
    """The ``error_kind`` of an error inside a stream: ``overloaded`` for Anthropic's
    ``overloaded_error`` (its HTTP 529 in mid-stream form), else ``stream_error``."""
    if type(error) is dict:
        inner = error.get("error")
        if type(inner) is dict and inner is not error:
            return stream_error_kind(inner)
        if error.get("type") == "overloaded_error" or error.get("code") == "overloaded_error":
            return "overloaded"
    return "stream_error"


def error_message(error: Any) -> str:
    """A one-line message from an error object (``{"message": ...}``, a string, or anything else)."""
    if type(error) is dict:
        inner = error.get("error")
        if inner is not None and inner is not error:
            return error_message(inner)
        for key in ("message", "detail", "msg"):
            value = error.get(key)
            if value is not None:
                return value if type(value) is str else str(value)
    return error if type(error) is str else str(error)
