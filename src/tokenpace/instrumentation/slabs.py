"""``Progress`` for the instrumented stream: the common chunk's stamps written into slabs made once.

A Python list reallocates as it grows: at about 28 of a 1,000-chunk stream's appends to each of the
record's two per-token lists (``chunk_ns``, the text lengths), and those calls cost more than the
others. ``SlabProgress.add_text`` (the stream wrapper's text-only chunk) writes a chunk's arrival
time and text length into two lists made with all their slots (``FIRST_SLAB`` at the second text
chunk, then ``SLAB``), and moves them into the record's lists a whole slab at a time and before
anything reads or appends to those: a chunk of any other kind (``add``), the end of the response
and the record's finish (``CallRecorder.done``/``finish`` call ``spill``). The record is the one
``Progress`` gives (tests/instrumentation/test_slabs.py). Memory: 16 KiB per call in flight past
its 65th text chunk, freed with the call.
"""

from __future__ import annotations

from tokenpace.client.chunks import ChunkInfo
from tokenpace.client.progress import Progress
from tokenpace.record import RequestRecord

FIRST_SLAB = 64  # a short stream's slabs stay small (made at its second text chunk)...
SLAB = 1024  # ...a longer one's are made once more, this long: one chunk in SLAB moves a full slab


class SlabProgress(Progress):
    __slots__ = ("_ns", "_chars", "_n", "_room")

    def __init__(self, streaming: bool = True) -> None:
        super().__init__(streaming=streaming)
        self._ns: list[int] = []  # arrival times of the text chunks not yet in the record...
        self._chars: list[int] = []  # ...and their text lengths
        self._n = 0  # how many of the slabs' slots hold them
        self._room = 0  # the slabs' length (0: not made yet)

    def add_text(self, record: RequestRecord, chars: int, now_ns: int) -> None:
        """``Progress.add_text``: the stamp and the length go into the slabs; the record's lists and
        ``last_token_ns`` are brought up to date by ``spill``. Slabs are made only once the record
        has its first content (the first text is stamped by ``add``), so a chunk that finds room in
        them needs no other check."""
        i = self._n
        if i < self._room:
            self._ns[i] = now_ns
            self._chars[i] = chars
            self._n = i + 1
            return
        if record.first_content_ns is None:
            self.add(record, ChunkInfo(chars), now_ns)
            return
        self.spill(record)  # the slabs are full, or not made yet
        if self._room < SLAB:
            self._room = FIRST_SLAB if self._room == 0 else SLAB
            self._ns, self._chars = [0] * self._room, [0] * self._room
        self._ns[0] = now_ns
        self._chars[0] = chars
        self._n = 1

    def add(self, record: RequestRecord, info: ChunkInfo, now_ns: int) -> None:
        if self._n:
            self.spill(record)  # the chunks before this one go first
        super().add(record, info, now_ns)

    def tokens_so_far(self) -> int:
        if self.usage_marks:
            return super().tokens_so_far()
        return len(self.weights) + self._n

    def spill(self, record: RequestRecord) -> None:
        """Move what the slabs hold into the record's lists, in order; the slabs are then empty."""
        n = self._n
        if not n:
            return
        ns, chars = self._ns, self._chars
        if n == len(ns):
            record.chunk_ns += ns
            self.weights += chars
        else:
            record.chunk_ns += ns[:n]
            self.weights += chars[:n]
        record.last_token_ns = ns[n - 1]
        self._n = 0
