"""What every scheduling policy shares: the waiting and running queues, admission into the KV cache,
growth with preemption by recompute, and the ``Batch`` a policy hands to the engine.

Admission (``SchedulerLimits.admission``, set by an engine preset) says how much of a sequence's
KV must fit when it leaves the waiting queue, and how much is allocated then:

- ``chunk``: the blocks of the first chunk (the simulator's behaviour before engine presets);
- ``context``: the whole context must fit, blocks are allocated chunk by chunk (vLLM V1), with room
  left for the running decodes to grow during the prompt's remaining chunks;
- ``prompt``: the whole context is allocated at once (TensorRT-LLM's MAX_UTILIZATION, SGLang);
- ``prompt+output``: prompt and every output token are allocated at once, so nothing is ever
  preempted (TensorRT-LLM's GUARANTEED_NO_EVICT).

Whatever the policy, a preempted sequence is re-admitted only when its whole context fits: a prompt
that cannot grow and preempts itself would otherwise be re-admitted on its first chunk at once, and
loop (thousands of preemptions for 20,000-token prompts).

A policy only decides *which* sequences run *how many* tokens in the next step; the engine prices
the step, advances time and produces tokens. ``Batch.repeat_limit`` tells the engine how many
identical pure-decode steps the policy would schedule back to back if nothing arrived and nothing
finished, which lets the engine jump over them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tokenpace.simulator.cohort import DecodeCohort
from tokenpace.simulator.kv_cache import KVCache
from tokenpace.simulator.sequence import RUNNING, WAITING, Sequence

UNBOUNDED = 1 << 62
ADMISSIONS = ("chunk", "context", "prompt", "prompt+output")


@dataclass(slots=True)
class Batch:
    prefill: list[tuple[Sequence, int]] = field(default_factory=list)  # (sequence, tokens to compute)
    decode: list[Sequence] = field(default_factory=list)
    repeat_limit: int = 1  # identical decode steps the policy would run back to back (1: no jump)
    cohort: DecodeCohort | None = None  # set: ``decode`` is the cohort's members, their fields not written back

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
    admission: str = "chunk"  # see the module docstring
    chunked_prompts: bool = True  # False: a prompt runs whole in one step (TensorRT-LLM without chunked context)

    def __post_init__(self) -> None:
        if self.admission not in ADMISSIONS:
            raise ValueError(f"admission must be one of {', '.join(ADMISSIONS)}, not {self.admission!r}")


class Scheduler:
    """Base of the policies. Subclasses implement ``schedule``."""

    name = "base"
    supports_cohort = False  # schedules decodes through a DecodeCohort when one is given (cohort.py)
    summary = ""  # one line, for `tokenpace sim --list`

    def __init__(self, limits: SchedulerLimits, kv: KVCache) -> None:
        self.limits = limits
        self.kv = kv
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.preemptions = 0
        self.admissions = 0
        self.cohort: DecodeCohort | None = None  # set by the engine for policies with supports_cohort

    def schedule(self, step: int) -> Batch:  # pragma: no cover - interface
        raise NotImplementedError

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def finish(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.kv.free(seq)

    def cancel(self, seq: Sequence) -> None:
        """The client gave up: drop ``seq`` from whichever queue holds it and free its KV blocks."""
        if seq.state == RUNNING:
            self.running.remove(seq)
        elif seq.state == WAITING:
            self.waiting.remove(seq)
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
        when it does not fit (the admission policy decides how much must fit)."""
        kv = self.kv
        if kv.prefix_caching:
            hits, evictable_hits = kv.match_prefix(seq)
        else:  # a plain cache holds no prefix to match (``KVCache.match_prefix``)
            hits = evictable_hits = 0
        bs = kv.block_size
        start = hits * bs
        total = seq.prompt_len + seq.generated
        n = total - start if whole else min(total - start, max_tokens)
        if n <= 0 or (whole and n > max_tokens and not alone):
            return 0
        hold, allocate = self._admission_slots(seq, start + n)
        if -(-hold // bs) - hits + evictable_hits > kv.num_free:
            return 0
        self.waiting.popleft()
        kv.admit(seq, hits)
        if seq.cached_prompt_tokens is None:
            seq.cached_prompt_tokens = start
        ok = kv.grow(seq, allocate)
        assert ok
        seq.state = RUNNING
        seq.sched_step = step
        seq.admit_no = self.admissions
        self.admissions += 1
        self.running.append(seq)
        return n

    def _admission_slots(self, seq: Sequence, chunk_end: int) -> tuple[int, int]:
        """(tokens whose blocks must be free, tokens to allocate) for admitting ``seq`` now, when
        this step computes it up to ``chunk_end``."""
        mode = self.limits.admission
        if mode == "prompt+output":
            full = seq.prompt_len + seq.output_len + self.limits.decode_tokens - 1
            return full, full
        if mode == "prompt":
            return seq.num_tokens, seq.num_tokens
        if mode == "context" or seq.preemptions:
            # Room for the running sequences to grow by a decode step in each step the prompt still
            # needs, so that its next chunk finds its blocks (vLLM V1 after its preemption-loop fix).
            steps_left = -(-(seq.num_tokens - chunk_end) // self.limits.max_batched_tokens)
            growth = steps_left * len(self.running) * self.limits.decode_tokens
            return seq.num_tokens + growth, chunk_end
        return chunk_end, chunk_end

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
            if cand is not seq and cand.sched_step != step and cand.co_from < 0:  # cohort members ran
                return cand
        return seq

    def preempt(self, seq: Sequence) -> None:
        """Preemption by recompute: drop the KV, requeue at the head, recompute prompt + output."""
        running = self.running
        if running[-1] is seq:  # the usual victim, the latest admitted: no scan of a long queue
            running.pop()
        else:
            running.remove(seq)
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
