"""Chat messages as the workload plans them (``[{"role", "content"}, ...]`` or one string), taken
apart for the APIs that carry the system prompt outside the messages."""

from __future__ import annotations

from typing import Any


def split_system(prompt: str | list[dict[str, Any]]) -> tuple[list[Any], list[dict[str, Any]]]:
    """(the system messages' contents, the other messages); a string is one user message."""
    if not isinstance(prompt, list):
        return [], [{"role": "user", "content": prompt}]
    system = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") in ("system", "developer")]
    rest = [m for m in prompt if not (isinstance(m, dict) and m.get("role") in ("system", "developer"))]
    return system, rest


def text_blocks(content: Any) -> list[dict[str, Any]]:
    """A message content (a string or a list of parts) as a list of text blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [dict(part) if isinstance(part, dict) else {"type": "text", "text": str(part)} for part in content]
    return [{"type": "text", "text": "" if content is None else str(content)}]
