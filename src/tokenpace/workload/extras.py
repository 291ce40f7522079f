"""Requests that ask for reasoning or for tool calls: extra body fields and a prompt that invites them.

- `--reasoning-effort low|medium|high` sends `reasoning_effort` (OpenAI's field; vLLM and SGLang
  pass it to reasoning models' chat templates).
- `--tools N` attaches N synthetic function definitions (`tools`, `tool_choice: "auto"`) and adds
  a sentence to the user message asking for a call, so the model answers with a tool-call delta.
  The definitions count as prompt tokens on the server; the client's input length does not
  include them (the server's count is recorded beside it).
"""

from __future__ import annotations

from typing import Any

REASONING_EFFORTS: tuple[str, ...] = ("low", "medium", "high")
_TOPICS = ("weather", "inventory", "calendar", "flight", "invoice", "recipe", "route", "stock")


def tool_definitions(n: int) -> list[dict[str, Any]]:
    """N distinct function tools, the same for every request (so they cache as a prefix)."""
    tools = []
    for i in range(n):
        topic = _TOPICS[i % len(_TOPICS)]
        tools.append({"type": "function", "function": {
            "name": f"lookup_{topic}_{i}",
            "description": f"Look up {topic} records matching a query and return them as JSON.",
            "parameters": {"type": "object", "required": ["query"], "properties": {
                "query": {"type": "string", "description": f"what to look up in the {topic} records"},
                "limit": {"type": "integer", "description": "most records to return"}}}}})
    return tools


def tool_invitation(index: int, n: int) -> str:
    """The sentence that asks for a call to one of the N tools (a different one per request)."""
    topic = _TOPICS[(index % n) % len(_TOPICS)]
    return f"Call the function lookup_{topic}_{index % n} with a query about the text above."


def extra_body(*, reasoning_effort: str | None, tools: int, api: str = "chat") -> dict[str, Any] | None:
    body: dict[str, Any] = {}
    if reasoning_effort:  # the Responses API nests it
        body.update({"reasoning": {"effort": reasoning_effort}} if api == "responses"
                    else {"reasoning_effort": reasoning_effort})
    if tools:
        body["tools"] = tool_definitions(tools)
        body["tool_choice"] = "auto"
    return body or None


def with_invitation(prompt: str | list[dict[str, Any]], sentence: str) -> str | list[dict[str, Any]]:
    """The prompt with `sentence` appended to its last user message (history stays first)."""
    if isinstance(prompt, str):
        return f"{prompt}\n\n{sentence}"
    messages = [dict(m) for m in prompt]
    for m in reversed(messages):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            m["content"] = f"{m['content']}\n\n{sentence}"
            return messages
    return [*messages, {"role": "user", "content": sentence}]
