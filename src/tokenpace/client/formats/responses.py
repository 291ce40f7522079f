"""The OpenAI Responses API (``POST /v1/responses``), streamed; OpenAI, vLLM and SGLang serve it.

Events (``data`` carries ``type``; the ``event:`` line repeats it):

- ``response.created``, ``response.in_progress``, ``response.content_part.added``, ``*.done``:
  control events, not tokens.
- ``response.output_item.added`` with a ``function_call`` item: its ``name`` is generated, a
  tool-call token (as Anthropic's ``tool_use`` block start and chat's first ``tool_calls`` delta).
- ``response.output_text.delta`` and ``response.refusal.delta``: visible content.
- ``response.reasoning_text.delta`` and ``response.reasoning_summary_text.delta``: reasoning (a
  token for TTFT, not content for TTFC).
- ``response.function_call_arguments.delta``: tool-call arguments.
- ``response.completed`` / ``response.incomplete``: the end of the response, with
  ``response.usage``: ``input_tokens`` (cached included), ``input_tokens_details.cached_tokens``,
  ``output_tokens``, ``output_tokens_details.reasoning_tokens``. Finish reason ``stop``, or
  ``length`` when incomplete for ``max_output_tokens`` (another reason is kept as it is).
- ``response.failed`` (its ``response.error``) and ``error``: error kind ``stream_error``.
"""

from __future__ import annotations

from typing import Any

from ..chunks import ChunkInfo

_CONTENT = frozenset(("response.output_text.delta", "response.refusal.delta"))
_REASONING = frozenset(("response.reasoning_text.delta", "response.reasoning_summary_text.delta"))


class ResponsesFormat:
    name = "responses"
    path = "/responses"

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def request_body(self, model: str, prompt: str | list[dict[str, Any]], max_tokens: int | None, *,
                     stream: bool, ignore_eos: bool, cache_breakpoint: str = "none") -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "input": prompt}
        if max_tokens is not None:
            body["max_output_tokens"] = max_tokens
            if ignore_eos:  # as for chat: servers that honour it generate exactly max_output_tokens
                body["ignore_eos"] = True
                body["min_tokens"] = max_tokens
        body["stream"] = stream
        return body

    def classify_event(self, obj: dict[str, Any]) -> ChunkInfo:
        kind = obj.get("type")
        if kind in _CONTENT:
            return ChunkInfo(content_chars=_chars(obj.get("delta")))
        if kind in _REASONING:
            return ChunkInfo(reasoning_chars=_chars(obj.get("delta")))
        if kind == "response.function_call_arguments.delta":
            n = _chars(obj.get("delta"))
            return ChunkInfo(tool_call_chars=n, has_tool_call=n > 0)
        if kind == "response.output_item.added":
            item = obj.get("item")
            if type(item) is dict and item.get("type") == "function_call":
                return ChunkInfo(tool_call_chars=_chars(item.get("name")) + _chars(item.get("arguments")),
                                 has_tool_call=True)
            return ChunkInfo()
        if kind in ("response.completed", "response.incomplete"):
            response = obj.get("response")
            response = response if type(response) is dict else {}
            return ChunkInfo(usage=_usage(response.get("usage")), finish_reason=_finish(response), done=True)
        if kind == "response.failed":
            response = obj.get("response")
            error = response.get("error") if type(response) is dict else None
            return ChunkInfo(error=error or "response.failed")
        if kind == "error":
            return ChunkInfo(error=obj.get("error") or obj)
        return ChunkInfo()

    def classify_whole(self, obj: dict[str, Any]) -> ChunkInfo:
        if obj.get("error") is not None:
            return ChunkInfo(error=obj["error"])
        content = reasoning = tools = 0
        has_tool = False
        for item in obj.get("output") or ():
            if type(item) is not dict:
                continue
            itype = item.get("type")
            if itype == "message":
                for part in item.get("content") or ():
                    if type(part) is dict:
                        content += _chars(part.get("text")) + _chars(part.get("refusal"))
            elif itype == "reasoning":
                for part in (item.get("content") or []) + (item.get("summary") or []):
                    if type(part) is dict:
                        reasoning += _chars(part.get("text"))
            elif itype == "function_call":
                has_tool = True
                tools += _chars(item.get("name")) + _chars(item.get("arguments"))
        return ChunkInfo(content, reasoning, tools, has_tool, _usage(obj.get("usage")), _finish(obj))


def _chars(value: Any) -> int:
    return len(value) if type(value) is str else 0


def _finish(response: dict[str, Any]) -> str | None:
    status = response.get("status")
    if status == "completed":
        return "stop"
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if type(details) is dict else None
        return "length" if reason in (None, "max_output_tokens") else str(reason)
    return None


def _usage(usage: Any) -> dict[str, Any] | None:
    """Responses usage in chat's shape (``input_tokens`` already includes the cached ones)."""
    if type(usage) is not dict:
        return None
    out: dict[str, Any] = {}
    if "input_tokens" in usage:
        out["prompt_tokens"] = usage["input_tokens"]
        details = usage.get("input_tokens_details")
        if type(details) is dict and "cached_tokens" in details:
            out["prompt_tokens_details"] = {"cached_tokens": details["cached_tokens"]}
    if "output_tokens" in usage:
        out["completion_tokens"] = usage["output_tokens"]
        details = usage.get("output_tokens_details")
        if type(details) is dict and "reasoning_tokens" in details:
            out["completion_tokens_details"] = {"reasoning_tokens": details["reasoning_tokens"]}
    return out or None
