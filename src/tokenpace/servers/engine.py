"""The built-in server's scheduling core: requests share one engine, in real time.

Each request is a ``Sequence``. It waits in a FIFO queue while ``max_num_seqs`` sequences are
running (that wait is the queue time), then takes a slot: it counts in ``running`` from prefill to
its last token. Its prefill lasts ``prefill_s(prompt_tokens, running)``; prefill ends with the first
chunk, then every ``decode_step_s(running)`` brings the next chunk. Each step yields
``tokens_per_chunk`` tokens at once (like speculative decoding with every draft accepted), so chunk
times do not depend on it, only how many tokens each chunk carries.

Due times are absolute monotonic targets (each one is the previous target plus a step), so sleep
overshoot and slow writes never accumulate: after a late chunk the next gap is shorter, the schedule
stays put.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from time import monotonic_ns

from .timing import TimingModel

# uvloop's timers have 1 ms resolution and fire up to 1 ms early. Sleeping again for the rest cost
# a second timer per chunk (measured at 512 streams), so up to 1 ms early counts as on time; the send
# log records the true times. asyncio's own loop never fires early.
_EARLY_OK_NS = 1_000_000


@dataclass(slots=True)
class Sequence:
    """One request inside the engine."""

    prompt_tokens: int
    max_tokens: int
    arrival_ns: int
    admitted_ns: int | None = None  # when it left the queue and started prefill
    generated_tokens: int = 0
    prompt_block_ids: tuple[int, ...] | None = None  # content ids of full prompt blocks (sim backend)
    cached_tokens: int = 0  # prompt tokens served from the prefix cache (sim backend)


class Engine:
    """Admission (FIFO, at most ``max_num_seqs`` running) and real-time token pacing."""

    def __init__(self, timing: TimingModel, *, max_num_seqs: int = 256, tokens_per_chunk: int = 1) -> None:
        if max_num_seqs < 1:
            raise ValueError("max_num_seqs must be >= 1")
        if tokens_per_chunk < 1:
            raise ValueError("tokens_per_chunk must be >= 1")
        self.timing = timing
        self.max_num_seqs = max_num_seqs
        self.tokens_per_chunk = tokens_per_chunk
        self.running = 0
        self.kv_tokens = 0  # prompt + generated tokens of running sequences
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiting)  # cancelled waiters remove themselves

    def can_admit(self) -> bool:
        return self.running < self.max_num_seqs and not self._waiting

    async def admit(self, seq: Sequence) -> None:
        """Wait for a slot (FIFO), then count ``seq`` as running."""
        if not self.can_admit():
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter  # release() hands the slot over: `running` already counts us
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._release_slot()  # the slot was handed to us just as we were cancelled
                else:
                    self._waiting.remove(waiter)
                raise
        else:
            self.running += 1
        seq.admitted_ns = monotonic_ns()
        self.kv_tokens += seq.prompt_tokens

    def release(self, seq: Sequence) -> None:
        self.kv_tokens -= seq.prompt_tokens + seq.generated_tokens
        self._release_slot()

    def _release_slot(self) -> None:
        # Hand the slot straight to the oldest waiter, so a newcomer cannot jump the queue.
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.running -= 1

    async def generate(self, seq: Sequence) -> AsyncIterator[int]:
        """Yield the token count of each chunk when it is due; queue, prefill and decode included.

        Run it under ``contextlib.aclosing`` so the slot is released when the consumer stops early.
        """
        await self.admit(seq)
        try:
            due_ns = seq.admitted_ns + int(self.timing.prefill_s(seq.prompt_tokens, self.running) * 1e9)
            while True:
                # Inlined rather than a helper coroutine: this runs once per chunk of every stream.
                while (delay_ns := due_ns - monotonic_ns()) > _EARLY_OK_NS:
                    await asyncio.sleep(delay_ns / 1e9)
                k = min(self.tokens_per_chunk, seq.max_tokens - seq.generated_tokens)
                seq.generated_tokens += k
                self.kv_tokens += k
                yield k
                if seq.generated_tokens >= seq.max_tokens:
                    return
                due_ns += int(self.timing.decode_step_s(self.running) * 1e9)
        finally:
            self.release(seq)
