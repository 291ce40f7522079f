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

A line longer than ``max_line_bytes`` (1 MiB by default), or one event whose data lines add up to
more, sets ``line_too_long`` and stops the parser the same way: a server that never ends a line must
not make the client hold (and search) an ever-growing buffer.
"""

from __future__ import annotations

_BOM = b"\xef\xbb\xbf"
MAX_LINE_BYTES = 1 << 20  # 1 MiB: far above any real chunk, far below what could hurt the client


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

    __slots__ = ("_tail", "_tail_bytes", "_at_start", "_skip_lf", "_data", "_data_bytes", "_event_type", "_last_id",
                 "retry_ms", "_strict", "invalid_line", "max_line_bytes", "line_too_long")  # fmt: skip

    def __init__(self, *, strict: bool = False, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._tail: list[bytes] = []  # the pieces of an unterminated line, joined once it ends
        self._tail_bytes = 0
        self._at_start = True  # a UTF-8 BOM may still have to be stripped
        self._skip_lf = False  # the previous feed ended with CR: a leading LF belongs to it
        self._data: list[str] = []  # the data lines of the event being built
        self._data_bytes = 0
        self._event_type = ""
        self._last_id = ""
        self.retry_ms: int | None = None
        self._strict = strict
        self.invalid_line: bytes | None = None  # strict mode: the first line that is not SSE framing
        self.max_line_bytes = max_line_bytes
        self.line_too_long = False  # a line (or an event's data) passed max_line_bytes: parsing stopped

    def feed(self, data: bytes) -> list[SSEEvent]:
        if self.invalid_line is not None or self.line_too_long:
            return []
        if self._skip_lf and data:
            self._skip_lf = False
            if data[0] == 0x0A:
                data = data[1:]
        if self._at_start:
            data = self._take_tail(data)  # at most two bytes of a BOM wait there
            if len(data) < 3 and _BOM.startswith(data):
                self._keep(data)  # could still become a BOM; wait for more bytes
                return []
            self._at_start = False
            if data.startswith(_BOM):
                data = data[3:]
        # Only the new bytes are searched for line ends, and an unterminated line is joined once,
        # when it ends: a long line costs time in proportion to its length, not its square.
        if data and data[-1] == 0x0A:  # the usual read: whole lines
            buffer, rest = data, b""
        else:
            end = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
            if not end:
                self._keep(data)
                return []
            buffer, rest = data[:end], data[end:]
        if self._tail:
            buffer = self._take_tail(buffer)
        if b"\r" in buffer:
            # A CR at the very end already ends its line; remember to drop the LF of a split CRLF.
            self._skip_lf = not rest and buffer[-1] == 0x0D
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        lines.pop()  # b"": the buffer ends with a line end
        events = self._process(lines)
        if rest and self.invalid_line is None and not self.line_too_long:
            self._keep(rest)
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream: treat an unterminated last line as complete and dispatch what is pending."""
        if self.invalid_line is not None or self.line_too_long:
            return []
        line = self._take_tail(b"")
        return self._process([line, b""] if line else [b""])  # the blank line the stream did not send

    def _keep(self, piece: bytes) -> None:
        if not piece:
            return
        self._tail.append(piece)
        self._tail_bytes += len(piece)
        if self._tail_bytes > self.max_line_bytes:
            self._overflow()

    def _take_tail(self, data: bytes) -> bytes:
        if not self._tail:
            return data
        self._tail.append(data)
        joined = b"".join(self._tail)
        self._tail.clear()
        self._tail_bytes = 0
        return joined

    def _overflow(self) -> None:
        self.line_too_long = True
        self._tail.clear()  # free it: nothing more is parsed
        self._tail_bytes = 0
        self._data.clear()

    def _process(self, lines: list[bytes]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        data = self._data
        limit = self.max_line_bytes
        data_bytes = self._data_bytes  # of the event being built; a local on the hot path
        for line in lines:
            if not line:
                # Blank line: dispatch. No data lines means no event, but the type still resets.
                if data:
                    events.append(SSEEvent("\n".join(data), self._event_type or "message", self._last_id))
                    data.clear()
                    data_bytes = 0
                self._event_type = ""
                continue
            # Fast path for the one line that matters on the hot path.
            if line.startswith(b"data: "):
                data.append(line[6:].decode("utf-8", "replace"))
                data_bytes += len(line)
                if data_bytes > limit:  # the line, or the event's data lines together
                    self._overflow()
                    return events
                continue
            if len(line) > limit:
                self._overflow()
                return events
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
                data_bytes += len(line)
                if data_bytes > limit:
                    self._overflow()
                    return events
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
        self._data_bytes = data_bytes
        return events
