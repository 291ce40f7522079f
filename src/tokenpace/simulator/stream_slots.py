"""Slots, and how early in a step each finished sequence is streamed (``RooflineParams.stream_interval_s``).

llama-server samples and streams a step's sequences one slot after another, on the core that runs
the model, and forms its next batch after the last (``server_context::update_slots``: a loop over
``slots`` in id order). A sequence streamed k-th of n therefore ends (n − k) stream intervals
before the engine is ready for its next batch, and its closed-loop client's next request can still
join that batch. A new request takes the free slot used least recently (``get_available_slot``
without a prompt-cache match; with as many clients as slots, the one its client's last request
freed).

``StreamSlots.finish`` runs at each step's end: it gives the step's new sequences their slots,
sets each finished sequence's ``lead_ns`` and frees their slots. The lead is how long its client
has to get a request in: its sequence was streamed (n − k) intervals before the last, and the engine
takes in what reaches it up to ``join_ns`` after the last stream (negative: before it). Only for
batches whose sequences are listed (the engine runs no decode cohort with slots)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence as Seq

from tokenpace.simulator.sequence import Sequence


class StreamSlots:
    def __init__(self, interval_ns: int, join_ns: int = 0) -> None:
        self.interval_ns, self.join_ns = interval_ns, join_ns
        self._free: list[int] = []  # free slots, the one used least recently first
        self._next = 0  # the next slot never used

    def finish(self, members: Iterable[Sequence], done: Seq[Sequence]) -> None:
        """``members``: the step's sequences (prompts and decodes); ``done``: those that finished."""
        slots = []
        for seq in members:
            if seq.slot < 0:
                if self._free:
                    seq.slot = self._free.pop(0)
                else:
                    seq.slot, self._next = self._next, self._next + 1
            slots.append(seq.slot)
        if not done:
            return
        slots.sort()
        last = len(slots) - 1
        for seq in done:
            seq.lead_ns = max(0, (last - bisect_left(slots, seq.slot)) * self.interval_ns + self.join_ns)
        for seq in done:
            self.release(seq)

    def release(self, seq: Sequence) -> None:
        """Free ``seq``'s slot (it finished or was cancelled), as the one used most recently."""
        if seq.slot >= 0:
            self._free.append(seq.slot)
            seq.slot = -1
