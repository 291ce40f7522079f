"""An incremental Server-Sent-Events parser (WHATWG "Interpreting an event stream").

It sits on the client's hot path: one ``feed`` per network read, hundreds of streams at once. So it
works on bytes, splits lines with ``bytes.split`` (never a per-byte Python loop), and decodes only
the values it keeps. Line terminators (CR, LF, CRLF) are ASCII and never occur inside a UTF-8
multi-byte sequence, so decoding whole lines is safe even when a character was split across reads.

One deliberate departure from the spec: the spec discards an event that the stream cut off before
its blank line; ``close()`` dispatches it instead, so that the last chunk of a server that forgets
the final blank line (or is cut off right after a complete ``data:`` line) is still counted.

``strict=True`` (what the client uses) treats a line with an unknown field name (``dta: {``,
``garbage``) as broken framing instead of ignoring it as the spec says: OpenAI-style streams only
use ``data``, ``event``, ``id``, ``retry`` and comments. The first such line is kept in
``invalid_line``; events before it are returned, nothing after it.
"""

from __future__ import annotations

_BOM = b"\xef\xbb\xbf"


class SSEEvent:
    """One dispatched event. ``event`` defaults to "message"; ``id`` is the last event ID seen."""

    __slots__ = ("data", "event", "id")

    def __init__(self, data: str, event: str = "message", id: str = "") -> None:  # noqa: A002
        self.data = data
        self.event = event
        self.id = id

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SSEEvent):
            return NotImplemented
        return (self.data, self.event, self.id) == (other.data, other.event, other.id)

    def __repr__(self) -> str:
        return f"SSEEvent(data={self.data!r}, event={self.event!r}, id={self.id!r})"


class SSEParser:
    """Feed it bytes as they arrive; it returns the events completed by each feed.

    ``retry_ms`` holds the last valid ``retry:`` field (the client does not reconnect, but the
    value is kept for completeness).
    """

    __slots__ = ("_buffer", "_at_start", "_skip_lf", "_data", "_event_type", "_last_id", "retry_ms", "_strict",
                 "invalid_line")  # fmt: skip

    def __init__(self, *, strict: bool = False) -> None:
        self._buffer = b""  # bytes of an incomplete line
        self._at_start = True  # a UTF-8 BOM may still have to be stripped
        self._skip_lf = False  # the previous feed ended with CR: a leading LF belongs to it
        self._data: list[str] = []  # the data lines of the event being built
        self._event_type = ""
        self._last_id = ""
        self.retry_ms: int | None = None
        self._strict = strict
        self.invalid_line: bytes | None = None  # strict mode: the first line that is not SSE framing

    def feed(self, data: bytes) -> list[SSEEvent]:
        if self.invalid_line is not None:
            return []
        if self._skip_lf and data:
            self._skip_lf = False
            if data[0] == 0x0A:
                data = data[1:]
        buffer = self._buffer + data if self._buffer else data
        if self._at_start:
            if len(buffer) < 3 and _BOM.startswith(buffer):
                self._buffer = buffer  # could still become a BOM; wait for more bytes
                return []
            self._at_start = False
            if buffer.startswith(_BOM):
                buffer = buffer[3:]
        if b"\r" in buffer:
            # A CR at the very end already ends its line; remember to drop the LF of a split CRLF.
            self._skip_lf = buffer[-1] == 0x0D
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        self._buffer = lines.pop()  # the unterminated tail (b"" when the read ended a line)
        if not lines:
            return []
        return self._process(lines)

    def close(self) -> list[SSEEvent]:
        """End of stream: treat an unterminated last line as complete and dispatch what is pending."""
        if self.invalid_line is not None:
            return []
        lines = [self._buffer] if self._buffer else []
        self._buffer = b""
        lines.append(b"")  # the blank line the stream did not send
        return self._process(lines)

    def _process(self, lines: list[bytes]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        data = self._data
        for line in lines:
            if not line:
                # Blank line: dispatch. No data lines means no event, but the type still resets.
                if data:
                    events.append(SSEEvent("\n".join(data), self._event_type or "message", self._last_id))
                    data.clear()
                self._event_type = ""
                continue
            # Fast path for the one line that matters on the hot path.
            if line.startswith(b"data: "):
                data.append(line[6:].decode("utf-8", "replace"))
                continue
            colon = line.find(b":")
            if colon == 0:
                continue  # a comment, e.g. a keep-alive
            if colon < 0:
                name, value = line, b""
            else:
                name = line[:colon]
                value = line[colon + 2 :] if line[colon + 1 : colon + 2] == b" " else line[colon + 1 :]
            if name == b"data":
                data.append(value.decode("utf-8", "replace"))
            elif name == b"event":
                self._event_type = value.decode("utf-8", "replace")
            elif name == b"id":
                if b"\x00" not in value:
                    self._last_id = value.decode("utf-8", "replace")
            elif name == b"retry":
                if value and value.isdigit() and len(value) <= 18:  # int() refuses > 4300 digits
                    self.retry_ms = int(value)
            elif self._strict:
                self.invalid_line = line
                return events
            # Any other field name is ignored, as the spec says.
        return events
