"""The same classification as ``chunks.classify_chunk``, read from response *objects* instead of
decoded JSON: the official ``openai`` SDK hands its caller pydantic models, and dumping each one
back to a dict would cost ~20 µs a chunk. Attribute reads give the same ``ChunkInfo`` (a test
checks both classifiers agree on the same chunks), so every stamping rule stays in ``Progress``.
"""

from __future__ import annotations

from typing import Any

from .chunks import ChunkInfo


def classify_chunk_object(obj: Any) -> ChunkInfo:
    """Classify one streamed chunk object (``ChatCompletionChunk`` or a streamed ``Completion``)."""
    return _classify(obj, "delta")


def classify_response_object(obj: Any) -> ChunkInfo:
    """Classify a whole non-streamed response object (``ChatCompletion`` or ``Completion``)."""
    return _classify(obj, "message")


def usage_dict(usage: Any) -> dict[str, Any] | None:
    """A usage object as the dict ``Progress`` reads (once per request, so a dump is affordable)."""
    if usage is None:
        return None
    if type(usage) is dict:
        return usage
    dump = getattr(usage, "model_dump", None)
    return dump() if dump is not None else None


def _classify(obj: Any, part: str) -> ChunkInfo:
    content_chars = reasoning_chars = tool_call_chars = 0
    has_tool_call = False
    finish_reason = None
    for choice in getattr(obj, "choices", None) or ():
        reason = getattr(choice, "finish_reason", None)
        if reason is not None:
            finish_reason = reason
        text = getattr(choice, "text", None)  # legacy completions
        if type(text) is str:
            content_chars += len(text)
        delta = getattr(choice, part, None)
        if delta is None:
            continue
        content = getattr(delta, "content", None)
        if type(content) is str:
            content_chars += len(content)
        # Extra fields of the SDK's models are attributes too (reasoning_content from DeepSeek, vLLM).
        reasoning = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
        if type(reasoning) is str:
            reasoning_chars += len(reasoning)
        tool_calls = getattr(delta, "tool_calls", None)
        if tool_calls:
            has_tool_call = True
            for call in tool_calls:
                function = getattr(call, "function", None)
                if function is not None:
                    for value in (getattr(function, "name", None), getattr(function, "arguments", None)):
                        if type(value) is str:
                            tool_call_chars += len(value)
    usage = getattr(obj, "usage", None)
    return ChunkInfo(content_chars, reasoning_chars, tool_call_chars, has_tool_call,
                     usage_dict(usage) if usage is not None else None, finish_reason, None)
