"""Content that changes between requests and so breaks a cached prefix: the patterns that find it,
by kind, and the fix each kind needs."""

from __future__ import annotations

import re

_MONTH = r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|Jun(?:e)?|Jul(?:y)?|Aug(?:ust)?|" \
         r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
_DAY = r"(?:Mon(?:day)?|Tue(?:s(?:day)?)?|Wed(?:nesday)?|Thu(?:rs(?:day)?)?|Fri(?:day)?|Sat(?:urday)?|Sun(?:day)?)"
_TIME = r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[AaPp]\.?[Mm]\.?)?(?:\s?(?:Z|UTC|GMT|[+-]\d{2}:?\d{2}))?"
_TIMESTAMP = "|".join([
    r"\d{4}-\d{2}-\d{2}(?:[T ]" + _TIME + r")?",  # ISO 8601 date, date-time
    r"(?:" + _DAY + r",?\s+)?\d{1,2}\s+" + _MONTH + r"\.?,?\s+\d{4}(?:\s+" + _TIME + r")?",  # 24 Nov 2026
    r"(?:" + _DAY + r",?\s+)?" + _MONTH + r"\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}(?:,?\s+(?:at\s+)?" + _TIME + r")?",
    r"\d{1,2}/\d{1,2}/\d{2,4}(?:,?\s+" + _TIME + r")?",  # 11/24/2026
    r"\d{1,2}\.\d{1,2}\.\d{4}",  # 24.11.2026
    r"\b1[5-9]\d{8}(?:\d{3})?\b",  # Unix time in seconds or milliseconds
    _TIME,
])
PATTERN = re.compile(
    r"(?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"
    r"|(?P<email>\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b)"
    r"|(?P<timestamp>(?<![\w.:/-])(?:" + _TIMESTAMP + r")(?![\w:]))"
    r"|(?P<id>\b(?:req|request|sess|session|user|usr|msg|chatcmpl|run|trace|conv|call|toolu|ticket|order|acct)"
    r"[_-][A-Za-z0-9_-]{4,}\b|\b[0-9a-fA-F]{16,}\b)"
    r"|(?:(?i:\b(?:user(?:\s?name)?|name|customer|client)\b)\s*[:=]\s*(?P<user_name>[A-Z][\w'.-]*(?:\s[A-Z][\w'.-]*)?))"
    r"|(?P<counter>(?<![\w.])\d+(?![\w.]|\.\d))"
)
KINDS = ("timestamp", "uuid", "email", "id", "user_name", "counter")

FIXES = {
    "timestamp": "move the date or time after the cache breakpoint (or into the final user message), or "
                 "round it to the day and keep it at the end of the system prompt",
    "uuid": "move the UUID out of the cached prefix: send it as metadata or after the breakpoint",
    "id": "move the request/session ID out of the cached prefix: send it as metadata or after the breakpoint",
    "email": "move per-user details (e-mail) after the breakpoint, or into the user message",
    "user_name": "move per-user details (name) after the breakpoint, or into the user message",
    "counter": "move the changing number after the breakpoint",
    "tool_order": "send tool definitions in one stable order (sorted by name)",
    "json_key_order": "serialize JSON with a stable key order (json.dumps(..., sort_keys=True))",
    "whitespace": "normalize whitespace (strip trailing spaces, one newline style) before sending",
    "formatting": "send byte-identical text for the shared part (whitespace, key order, tool order)",
    "below_minimum": "the cacheable prefix is shorter than the provider's minimum, so nothing is cached "
                     "(silently): put more stable content before the breakpoint, or drop the breakpoint",
    "too_many_breakpoints": "the provider allows at most {max} breakpoints and rejects the request: keep "
                            "one at the end of each stable part",
    "moving_breakpoint": "the breakpoint's prefix is written and never read again: put the breakpoint at "
                         "the end of the content that stays identical, not on the newest message",
    "no_breakpoint": "no cache_control breakpoint, so nothing is cached: add one at the end of the "
                     "shared prefix",
    "static_after_dynamic": "this content is identical across requests but follows content that changes: "
                            "move it before the changing content",
}


def split(text: str) -> list[tuple[str, str | None]]:
    """``text`` cut into (piece, kind) with kind None for stable text."""
    out: list[tuple[str, str | None]] = []
    pos = 0
    for m in PATTERN.finditer(text):
        kind = m.lastgroup
        start, end = m.span(kind)
        if start > pos:
            out.append((text[pos:start], None))
        out.append((text[start:end], kind))
        pos = end
    if pos < len(text):
        out.append((text[pos:], None))
    return out
