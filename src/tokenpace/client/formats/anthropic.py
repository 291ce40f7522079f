"""The Anthropic Messages API (``POST /v1/messages``), streamed.

Events (each SSE event's ``data`` has a ``type``; the ``event:`` line repeats it):

- ``message_start``: ``message.usage`` with the prompt's counts. Anthropic splits the prompt in
  three, none included in another: ``input_tokens`` (after the last cache breakpoint, uncached),
  ``cache_read_input_tokens`` (read from the cache) and ``cache_creation_input_tokens`` (written to
  it). The record's ``prompt_tokens`` is their sum, ``cached_prompt_tokens`` the reads and
  ``cache_write_prompt_tokens`` the writes (both included in ``prompt_tokens``, OpenAI's convention).
  Not a token.
- ``content_block_start``: a ``text`` block (its ``text`` is usually empty: then not a token), a
  ``thinking`` block, or a ``tool_use`` block, whose ``name`` is generated: a tool-call token.
- ``content_block_delta``: ``text_delta`` (visible content), ``thinking_delta`` (reasoning: a token
  for TTFT, not content for TTFC), ``input_json_delta`` (tool-call arguments; an empty
  ``partial_json`` is not a token), ``signature_delta`` (not generated text: not a token).
- ``content_block_stop``, ``ping``: nothing.
- ``message_delta``: ``delta.stop_reason`` (mapped to OpenAI's names: ``max_tokens`` -> ``length``,
  ``end_turn``/``stop_sequence`` -> ``stop``, ``tool_use`` -> ``tool_calls``, ``refusal`` ->
  ``content_filter``, others kept) and ``usage.output_tokens`` (cumulative).
- ``message_stop``: the end of the response (what ``[DONE]`` is to chat).
- ``error``: ``{"type": "error", "error": {"type": "overloaded_error", ...}}``: error kind
  ``overloaded`` for ``overloaded_error``, else ``stream_error``.
"""

from __future__ import annotations

from typing import Any

from ..chunks import ChunkInfo
from .messages import split_system, text_blocks

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096  # the API requires max_tokens; used when the workload names none
STOP_REASONS = {"max_tokens": "length", "end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
                "refusal": "content_filter"}
_CACHE_CONTROL = {"type": "ephemeral"}


class AnthropicFormat:
    name = "anthropic"
    path = "/messages"

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}

    def request_body(self, model: str, prompt: str | list[dict[str, Any]], max_tokens: int | None, *,
                     stream: bool, ignore_eos: bool, cache_breakpoint: str = "none") -> dict[str, Any]:
        system, messages = split_system(prompt)
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens or DEFAULT_MAX_TOKENS}
        system_blocks = [block for content in system for block in text_blocks(content)]
        messages = [{"role": m.get("role", "user"), "content": m.get("content")} for m in messages]
        if cache_breakpoint != "none":
            _mark(system_blocks, messages, cache_breakpoint)
        if system_blocks:
            body["system"] = system_blocks
        body["messages"] = messages
        if max_tokens is not None and ignore_eos:  # vLLM and SGLang take it; a hosted API refuses it
            body["ignore_eos"] = True
            body["min_tokens"] = max_tokens
        body["stream"] = stream
        return body

    def classify_event(self, obj: dict[str, Any]) -> ChunkInfo:
        kind = obj.get("type")
        if kind == "content_block_delta":
            delta = obj.get("delta")
            if type(delta) is not dict:
                return ChunkInfo()
            dtype = delta.get("type")
            if dtype == "text_delta":
                return ChunkInfo(content_chars=_chars(delta.get("text")))
            if dtype == "thinking_delta":
                return ChunkInfo(reasoning_chars=_chars(delta.get("thinking")))
            if dtype == "input_json_delta":
                n = _chars(delta.get("partial_json"))
                return ChunkInfo(tool_call_chars=n, has_tool_call=n > 0)
            return ChunkInfo()  # signature_delta and anything new: not generated text
        if kind == "content_block_start":
            return _block(obj.get("content_block"))
        if kind == "message_start":
            message = obj.get("message")
            usage = message.get("usage") if type(message) is dict else None
            return ChunkInfo(usage=_prompt_usage(usage))
        if kind == "message_delta":
            delta = obj.get("delta")
            reason = delta.get("stop_reason") if type(delta) is dict else None
            return ChunkInfo(usage=_delta_usage(obj.get("usage")),
                             finish_reason=STOP_REASONS.get(reason, reason) if type(reason) is str else None)
        if kind == "message_stop":
            return ChunkInfo(done=True)
        if kind == "error":
            return ChunkInfo(error=obj.get("error") or obj)
        return ChunkInfo()  # ping, content_block_stop, and event types added later

    def classify_whole(self, obj: dict[str, Any]) -> ChunkInfo:
        if obj.get("type") == "error" or "error" in obj:
            return ChunkInfo(error=obj.get("error") or obj)
        content = reasoning = tools = 0
        has_tool = False
        for block in obj.get("content") or ():
            info = _block(block)
            content += info.content_chars
            reasoning += info.reasoning_chars
            tools += info.tool_call_chars
            has_tool = has_tool or info.has_tool_call
        usage = obj.get("usage")
        merged = {**(_prompt_usage(usage) or {}), **(_delta_usage(usage) or {})}
        reason = obj.get("stop_reason")
        return ChunkInfo(content, reasoning, tools, has_tool, merged or None,
                         STOP_REASONS.get(reason, reason) if type(reason) is str else None)


def _block(block: Any) -> ChunkInfo:
    """A content block as it starts (streamed) or whole (a non-streamed body)."""
    if type(block) is not dict:
        return ChunkInfo()
    btype = block.get("type")
    if btype == "text":
        return ChunkInfo(content_chars=_chars(block.get("text")))
    if btype == "thinking":
        return ChunkInfo(reasoning_chars=_chars(block.get("thinking")))
    if btype == "redacted_thinking":
        return ChunkInfo(reasoning_chars=_chars(block.get("data")))
    if btype in ("tool_use", "server_tool_use"):
        n = _chars(block.get("name"))
        tool_input = block.get("input")
        if type(tool_input) is dict and tool_input:  # a whole body: the arguments are there
            n += len(str(tool_input))
        return ChunkInfo(tool_call_chars=n, has_tool_call=True)
    return ChunkInfo()


def _chars(value: Any) -> int:
    return len(value) if type(value) is str else 0


def _int(usage: dict[str, Any], key: str) -> int | None:
    value = usage.get(key)
    return value if type(value) is int else None


def _prompt_usage(usage: Any) -> dict[str, Any] | None:
    """Anthropic's three prompt counts in OpenAI's shape (reads and writes included in the total)."""
    if type(usage) is not dict:
        return None
    uncached = _int(usage, "input_tokens")
    if uncached is None:
        return None
    read = _int(usage, "cache_read_input_tokens") or 0
    write = _int(usage, "cache_creation_input_tokens") or 0
    return {"prompt_tokens": uncached + read + write,
            "prompt_tokens_details": {"cached_tokens": read, "cache_write_tokens": write}}


def _delta_usage(usage: Any) -> dict[str, Any] | None:
    if type(usage) is not dict:
        return None
    out: dict[str, Any] = _prompt_usage(usage) or {}  # newer servers repeat the prompt counts here
    output = _int(usage, "output_tokens")
    if output is not None:
        out["completion_tokens"] = output
    return out or None


def _mark(system: list[dict[str, Any]], messages: list[dict[str, Any]], where: str) -> None:
    """Put ``cache_control`` on the last block of the system prompt (``system``) or of the shared
    prefix (``prefix``: everything before the last message, the system prompt included)."""
    target: dict[str, Any] | None = system[-1] if system else None
    if where == "prefix" and len(messages) > 1:
        before = messages[-2]
        before["content"] = text_blocks(before["content"])
        target = before["content"][-1] if before["content"] else target
    if target is not None:
        target["cache_control"] = dict(_CACHE_CONTROL)
