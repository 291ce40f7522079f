"""Per-request work done in slices between the event loop's socket reads.

A chunk is stamped when the task reading it resumes, and that task waits behind everything already
queued on the loop; the bytes themselves wait in the socket until the loop next polls. When many
requests end at once (a closed loop with equal lengths ends a whole wave in one server step), their
per-request work used to run back to back: finishing N records (the JSONL line, the columnar
append, the live statistics: ~40 µs each) and sending N requests (aiohttp's request path: ~70 µs
each). At 256 streams that is 25-40 ms in which no chunk is stamped, and the next wave's first
tokens arrive in it.

``LoopSlices`` spreads that work over the loop's turns, so each turn does a bounded slice of it and
then polls the sockets again:

- ``send_turn()``: a request waits for a send slot; at most ``sends_per_turn`` go out per turn, in
  the order they asked. A request that finds a free slot goes at once (no suspension). The load
  generator asks for one before a closed-loop worker's next request and a conversation's next turn
  (not their first: at the start nothing is in flight, and spreading the connection set-up only
  made the first wave's stamps later); the open loop already sends one request per turn.
- ``record(r)``: an ended request's record is queued and handed to ``on_record`` later, in the
  order they ended, a slice per turn (at least one record, then until ``record_budget_ns`` of work).
  A successor request is therefore sent before its predecessor's record is written. The load
  generator's ``on_record`` also completes the record's token counts there (the client's
  ``send_deferred``): ~24 µs a 64-chunk stream that no longer runs on the turn that read its end.
- Records give way to sends: while requests wait for a send slot (or were let go to send on the
  next turn), no record is handed over; a wave's end queues both, and its successors' sends then
  go out first, two per turn, with only the socket reads between them. A record that has waited
  ``record_max_wait_ns`` (1 s) is handed over regardless, so a long queue of sends cannot hold
  the records back for longer. (Records paced to a tenth of the loop's time instead, spread over
  the ~0.3 s after a wave's end, met the next wave's first tokens and tripled the TTFT error's
  p50 at 512 streams: RESULTS 22f.)
- ``flush()``: every queued record handed over now (the run's end, on every exit path); after it,
  ``record`` hands records over at once.

One tick callback per turn runs while there is work queued, none when there is not.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from time import perf_counter_ns
from typing import Generic, TypeVar

T = TypeVar("T")

SENDS_PER_TURN = 2  # ~60 µs each; 4 a turn gave a 1.6x higher 512-stream TTFT p99 (RESULTS 22f)
RECORD_BUDGET_NS = 200_000  # records finished per turn: at least one, then until 0.2 ms is spent
RECORD_MAX_WAIT_NS = 1_000_000_000  # a record older than this goes in the next turn's slice, whatever


class LoopSlices(Generic[T]):
    def __init__(self, on_record: Callable[[T], None], *, sends_per_turn: int = SENDS_PER_TURN,
                 record_budget_ns: int = RECORD_BUDGET_NS, record_max_wait_ns: int = RECORD_MAX_WAIT_NS) -> None:
        if sends_per_turn < 1:
            raise ValueError(f"sends_per_turn must be >= 1, not {sends_per_turn}")
        self._on_record = on_record
        self._sends_per_turn = sends_per_turn
        self._budget_ns = record_budget_ns
        self._max_wait_ns = record_max_wait_ns
        self._records: deque[tuple[int, T]] = deque()  # (queued at, perf_counter_ns; record)
        self._senders: deque[asyncio.Future[None]] = deque()
        self._sent_this_turn = 0
        self._ticking = False
        self._closed = False

    async def send_turn(self) -> None:
        """Return when this request may be sent: at once while this turn has a free slot."""
        if not self._senders and self._sent_this_turn < self._sends_per_turn:
            self._sent_this_turn += 1
            self._tick_soon()
            return
        waiter = asyncio.get_running_loop().create_future()
        self._senders.append(waiter)
        self._tick_soon()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter in self._senders:  # cancelled before its turn: give the place up
                self._senders.remove(waiter)
            raise

    def record(self, record: T) -> None:
        if self._closed:
            self._on_record(record)
            return
        self._records.append((perf_counter_ns(), record))
        self._tick_soon()

    def flush(self) -> None:
        """Hand every queued record over now; from here on, records are handed over at once."""
        self._closed = True
        while self._records:
            self._on_record(self._records.popleft()[1])

    def _tick_soon(self) -> None:
        if not self._ticking:
            self._ticking = True
            asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        """Once per loop turn while work is queued: release the next senders, then (unless requests
        are sending) finish a slice of records."""
        self._ticking = False
        released = 0
        while self._senders and released < self._sends_per_turn:
            waiter = self._senders.popleft()
            if not waiter.done():
                waiter.set_result(None)
                released += 1
        # The released requests send in the next turn; count them there against the same limit.
        self._sent_this_turn = released
        try:
            records = self._records
            if records and (not (self._senders or released)
                            or perf_counter_ns() - records[0][0] >= self._max_wait_ns):
                start = perf_counter_ns()
                on_record = self._on_record
                on_record(records.popleft()[1])
                while records and perf_counter_ns() - start < self._budget_ns:
                    on_record(records.popleft()[1])
        finally:  # a failing on_record must not strand the records and senders behind it
            if self._senders or self._records or released:
                self._tick_soon()
