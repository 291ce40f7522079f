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


def _fields(obj: Any) -> dict[str, Any]:
    """An object's declared fields as a dict, read without ``getattr`` on names it may lack: a
    pydantic model answers a missing name through ``__getattr__`` and an exception, ~1 µs each.
    Pydantic v2 keeps declared fields in ``__dict__``; a plain dict is its own fields."""
    try:
        return obj.__dict__
    except AttributeError:
        return obj if type(obj) is dict else {}


def _extra(obj: Any, fields: dict[str, Any], name: str) -> Any:
    """A field the SDK does not declare (``reasoning_content``): pydantic keeps those apart."""
    value = fields.get(name)
    if value is None:
        extra = getattr(obj, "__pydantic_extra__", None)
        if extra:
            value = extra.get(name)
    return value


# The common chunk, one choice whose delta holds only text, has no usage and no finish reason: its
# ChunkInfo depends only on the text's length and is never changed by a reader, so it is made once
# per length and shared (no allocation per chunk).
_TEXT_ONLY: dict[int, ChunkInfo] = {}
_TEXT_ONLY_MAX = 4096


def text_chars(obj: Any) -> int:
    """The text's length when a streamed chunk is the common one (one choice whose delta holds only
    text; no usage, no finish reason, nothing else), else -1: the general path decides. It runs
    once a chunk, so the SDK's objects are read flat: pydantic v2 keeps every declared field in
    ``__dict__`` (subscripts, no ``get``) and undeclared ones (``reasoning_content``) in
    ``__pydantic_extra__``; anything else (a dict, a field missing, not one choice) takes
    ``_text_chars_of``. Pydantic's ``__getattr__`` keeps CPython 3.11 from specializing any attribute
    read on these objects (each ~25-35 ns), so there are as few as the checks allow (three
    ``__dict__``, one ``__pydantic_extra__``); the one choice is unpacked (``(choice,) =``: no ``len``
    call; a usage-only chunk's empty list raises, once a stream). ``operator.attrgetter`` reads cost
    more here (RESULTS.md, 23f)."""
    try:
        top = obj.__dict__
        if top["usage"] is not None:
            return -1
        (choice,) = top["choices"]
        fields = choice.__dict__
        delta_obj = fields["delta"]
        delta = delta_obj.__dict__
        content = delta["content"]
        if type(content) is not str or fields["finish_reason"] is not None or delta["tool_calls"] \
                or delta_obj.__pydantic_extra__:
            return -1
        return len(content)
    except (AttributeError, KeyError, TypeError, ValueError):
        return _text_chars_of(obj)


def _text_chars_of(obj: Any) -> int:
    """``text_chars`` for dicts and objects that are not the SDK's pydantic models."""
    top = obj if type(obj) is dict else getattr(obj, "__dict__", None)
    if top is None:
        return -1
    choices = top.get("choices")
    if not choices or len(choices) != 1 or top.get("usage") is not None:
        return -1
    choice = choices[0]
    fields = choice if type(choice) is dict else getattr(choice, "__dict__", None)
    if fields is None or fields.get("finish_reason") is not None or fields.get("text") is not None:
        return -1
    delta_obj = fields.get("delta")
    delta = delta_obj if type(delta_obj) is dict else getattr(delta_obj, "__dict__", None)
    if delta is None:
        return -1
    content = delta.get("content")
    if type(content) is not str or delta.get("tool_calls") or delta.get("reasoning_content") is not None \
            or delta.get("reasoning") is not None or getattr(delta_obj, "__pydantic_extra__", None):
        return -1
    return len(content)


def _text_only(obj: Any) -> ChunkInfo | None:
    """The shared ChunkInfo of the common chunk, else None."""
    chars = text_chars(obj)
    if chars < 0:
        return None
    info = _TEXT_ONLY.get(chars)
    if info is None and chars <= _TEXT_ONLY_MAX:
        info = _TEXT_ONLY[chars] = ChunkInfo(chars)
    return info


def _classify(obj: Any, part: str) -> ChunkInfo:
    if part == "delta":
        info = _text_only(obj)
        if info is not None:
            return info
    top = _fields(obj)
    content_chars = reasoning_chars = tool_call_chars = 0
    has_tool_call = False
    finish_reason = None
    for choice in top.get("choices") or ():
        fields = _fields(choice)
        reason = fields.get("finish_reason")
        if reason is not None:
            finish_reason = reason
        text = fields.get("text")  # legacy completions
        if type(text) is str:
            content_chars += len(text)
        delta_obj = fields.get(part)
        if delta_obj is None:
            continue
        delta = _fields(delta_obj)
        content = delta.get("content")
        if type(content) is str:
            content_chars += len(content)
        # Servers name it differently: DeepSeek and vLLM < 0.9 "reasoning_content", others "reasoning".
        reasoning = _extra(delta_obj, delta, "reasoning_content") or _extra(delta_obj, delta, "reasoning")
        if type(reasoning) is str:
            reasoning_chars += len(reasoning)
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            has_tool_call = True
            for call in tool_calls:
                function = _fields(call).get("function")
                if function is not None:
                    function = _fields(function)
                    for value in (function.get("name"), function.get("arguments")):
                        if type(value) is str:
                            tool_call_chars += len(value)
    usage = top.get("usage")
    return ChunkInfo(content_chars, reasoning_chars, tool_call_chars, has_tool_call,
                     usage_dict(usage) if usage is not None else None, finish_reason, None)
