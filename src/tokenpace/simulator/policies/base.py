"""What every scheduling policy shares: the waiting and running queues, admission into the KV cache,
growth with preemption by recompute, and the ``Batch`` a policy hands to the engine.

A policy only decides *which* sequences run *how many* tokens in the next step; the engine prices
the step, advances time and produces tokens. ``Batch.repeat_limit`` tells the engine how many
identical pure-decode steps the policy would schedule back to back if nothing arrived and nothing
finished, which lets the engine jump over them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tokenpace.simulator.kv_cache import KVCache
from tokenpace.simulator.sequence import RUNNING, WAITING, Sequence

UNBOUNDED = 1 << 62


@dataclass(slots=True)
class Batch:
    prefill: list[tuple[Sequence, int]] = field(default_factory=list)  # (sequence, tokens to compute)
    decode: list[Sequence] = field(default_factory=list)
    repeat_limit: int = 1  # identical decode steps the policy would run back to back (1: no jump)

    def __bool__(self) -> bool:
        return bool(self.prefill or self.decode)


@dataclass(frozen=True, slots=True)
class SchedulerLimits:
    max_num_seqs: int = 256
    max_batched_tokens: int = 8192
    decode_tokens: int = 1  # tokens a decoding sequence computes per step: 1, or 1 + γ
    # decode-first only (TGI's router): admit waiting prompts when they number at least
    # waiting_served_ratio × running, or when they have waited max_waiting_steps decode steps.
    waiting_served_ratio: float = 0.3
    max_waiting_steps: int = 20


class Scheduler:
    """Base of the policies. Subclasses implement ``schedule``."""

    name = "base"
    summary = ""  # one line, for `tokenpace sim --list`

    def __init__(self, limits: SchedulerLimits, kv: KVCache) -> None:
        self.limits = limits
        self.kv = kv
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.preemptions = 0

    def schedule(self, step: int) -> Batch:  # pragma: no cover - interface
        raise NotImplementedError

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def finish(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.kv.free(seq)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # -- admission ------------------------------------------------------------------------------

    def try_admit(self, seq: Sequence, max_tokens: int, step: int, whole: bool = False,
                  alone: bool = False) -> int:
        """Move the head of the waiting queue into running, computing up to ``max_tokens`` of it now.
        ``whole``: all of it or nothing (``alone``: even beyond ``max_tokens``, so that a prompt
        longer than the budget runs by itself rather than never). Returns the tokens scheduled, 0
        when it does not fit."""
        hits, evictable_hits = self.kv.match_prefix(seq)
        start = hits * self.kv.block_size
        n = seq.num_tokens - start if whole else min(seq.num_tokens - start, max_tokens)
        if n <= 0 or (whole and n > max_tokens and not alone):
            return 0
        need = -(-(start + n) // self.kv.block_size) - hits
        if need + evictable_hits > self.kv.num_free:
            return 0
        self.waiting.popleft()
        self.kv.admit(seq, hits)
        if seq.cached_prompt_tokens is None:
            seq.cached_prompt_tokens = start
        ok = self.kv.grow(seq, start + n)
        assert ok
        seq.state = RUNNING
        seq.sched_step = step
        self.running.append(seq)
        return n

    # -- growth and preemption -------------------------------------------------------------------

    def reserve(self, seq: Sequence, slots: int, step: int) -> bool:
        """Make room for ``seq`` to hold ``slots`` tokens, preempting the most recently admitted
        sequences not yet scheduled in this step (or ``seq`` itself, last). False if ``seq`` was
        preempted."""
        while not self.kv.grow(seq, slots):
            victim = self._victim(seq, step)
            self.preempt(victim)
            if victim is seq:
                return False
        seq.sched_step = step
        return True

    def _victim(self, seq: Sequence, step: int) -> Sequence:
        for cand in reversed(self.running):
            if cand is not seq and cand.sched_step != step:
                return cand
        return seq

    def preempt(self, seq: Sequence) -> None:
        """Preemption by recompute: drop the KV, requeue at the head, recompute prompt + output."""
        self.running.remove(seq)
        self.kv.free(seq)
        seq.num_computed = 0
        seq.state = WAITING
        seq.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(seq)

    def decode_all(self, batch: Batch, step: int) -> None:
        """Schedule one decode step for every running sequence, preempting when the cache is full."""
        g = self.limits.decode_tokens
        for seq in list(self.running):
            if seq.state != RUNNING:
                continue  # preempted earlier in this loop
            if self.reserve(seq, seq.num_computed + g, step):
                batch.decode.append(seq)

    def admit_whole_prompts(self, batch: Batch, step: int) -> None:
        """FCFS: admit waiting prompts whole while sequences, token budget and KV allow (a prompt
        longer than the budget runs alone rather than never)."""
        budget = self.limits.max_batched_tokens
        while self.waiting and len(self.running) < self.limits.max_num_seqs:
            n = self.try_admit(self.waiting[0], budget, step, whole=True, alone=not batch.prefill)
            if n == 0:
                break
            batch.prefill.append((self.running[-1], n))
            budget -= n
            if budget <= 0:
                break
