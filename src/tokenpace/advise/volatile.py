"""Content that changes between requests and so breaks a cached prefix: the patterns that find it,
by kind, and the fix each kind needs."""

from __future__ import annotations

import re

import numpy as np

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
    "moving_breakpoint": "the request shares a prefix with an earlier one but reads no earlier breakpoint's "
                         "prefix: put a breakpoint at the end of the content that stays identical",
    "no_breakpoint": "no cache_control breakpoint, so nothing is cached: add one at the end of the "
                     "shared prefix",
    "static_after_dynamic": "this content is identical across requests but follows content that changes: "
                            "move it before the changing content",
}


# Every match holds a digit or an "@", or starts with a label followed by "_", "-", ":" or "="
# (or is a hex ID of 16+ letters a-f without a digit: about 1 random ID in 7 million, not looked
# for): the full pattern is tried only near these, as a scan of the whole text with it costs ~0.5 µs
# a character while one character-class scan costs a few ns: ~15 ns with `re`, ~1.5 ns as a numpy
# table look-up over the bytes of an ASCII text (a text with other characters, whose digits may be
# other than 0-9, is scanned with `re`).
_HITS = re.compile(r"[\d@_:=-]")
_DIRECT, _LABEL = 1, 2  # a digit or "@" starts a match; "_-:=" may end a label
_BYTE_KIND = np.zeros(256, np.uint8)
_BYTE_KIND[[ord(c) for c in "0123456789@"]] = _DIRECT
_BYTE_KIND[[ord(c) for c in "_-:="]] = _LABEL
_ID_LABELS = frozenset(("req", "request", "sess", "session", "user", "usr", "msg", "chatcmpl", "run",
                        "trace", "conv", "call", "toolu", "ticket", "order", "acct"))
_NAME_LABELS = frozenset(("user", "username", "name", "customer", "client"))


def _triggers(text: str) -> list[int]:
    if len(text) > 256 and text.isascii():  # (below that, numpy's call overhead outweighs the scan)
        b = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
        kind = _BYTE_KIND.take(b.astype(np.intp))
        hits = kind.nonzero()[0]
        if not len(hits):
            return []
        direct = kind.take(hits) == _DIRECT
        out, labels = hits[direct].tolist(), hits[~direct].tolist()
    else:
        out, labels = [], []
        for m in _HITS.finditer(text):
            i = m.start()
            c = text[i]
            (out if c.isdigit() or c == "@" else labels).append(i)
    for i in labels:
        c = text[i]
        j = i
        if c in ":=":
            while j > 0 and text[j - 1].isspace():
                j -= 1
        k = j
        while k > 0 and text[k - 1].isalpha():
            k -= 1
        word = text[k:j].lower()
        if word in (_ID_LABELS if c in "_-" else _NAME_LABELS):
            out.append(k)
    out.sort()
    return out


_BACK = 64  # a match starts at most this many characters before its first trigger
_WINDOW = 224  # each search looks this far past its trigger
_LONGEST = 96  # a match is shorter than this (an ID may be longer: then it is searched again whole)


def matches(text: str):
    """``PATTERN.finditer(text)``, searching only near triggers: each stretch of text is searched at
    most about once, and text far from any trigger never."""
    n, pos, clear, pending = len(text), 0, 0, None
    triggers = _triggers(text)
    if len(triggers) * 24 > n:  # dense: one scan of the whole text is cheaper
        yield from PATTERN.finditer(text)
        return
    for start in triggers:
        while start >= pos:
            if pending is not None:
                if pending.start() > start:
                    break  # the next match lies past this trigger
                yield pending
                pos, pending = pending.end(), None
                continue
            lo = max(pos, clear, start - _BACK)
            if lo > start:
                break
            end = min(n, start + _WINDOW)
            m = PATTERN.search(text, lo, end)
            if m is not None and end < n and m.end() > end - _LONGEST:  # maybe cut short by the window
                m = PATTERN.search(text, m.start())
            if m is None:
                clear = n if end == n else max(clear, end - _LONGEST)
                break
            if m.start() > start:
                pending, clear = m, m.start()
                break
            yield m
            pos = m.end()


def split(text: str) -> list[tuple[str, str | None]]:
    """``text`` cut into (piece, kind) with kind None for stable text."""
    out: list[tuple[str, str | None]] = []
    pos = 0
    for m in matches(text):
        kind = m.lastgroup
        start, end = m.span(kind)
        if start > pos:
            out.append((text[pos:start], None))
        out.append((text[start:end], kind))
        pos = end
    if pos < len(text):
        out.append((text[pos:], None))
    return out
