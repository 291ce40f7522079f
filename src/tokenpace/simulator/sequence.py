"""One request's life inside the engine: tokens to compute, KV blocks held, tokens produced.

The engine uses vLLM V1's unified view: a sequence has ``num_tokens`` (prompt + generated) and
``num_computed`` (those whose KV is in the cache). Each step computes some of the difference; when a
step reaches ``num_tokens`` the model samples the next token. A prompt is therefore just a
difference larger than one, a decode step a difference of one, and recompute after preemption is a
prompt of prompt + generated tokens.
"""

from __future__ import annotations

from tokenpace.chunk_runs import ChunkRuns
from tokenpace.simulator.request import SimRequest

WAITING, RUNNING, DONE, CANCELLED = 0, 1, 2, 3


class Sequence:
    __slots__ = (
        "index", "request", "prompt_len", "output_len", "arrival_ns", "state",
        "generated", "num_computed", "num_blocks", "blocks", "block_hashes", "num_registered",
        "cached_prompt_tokens", "first_token_ns", "chunk_ns", "chunk_tokens",
        "decode_steps", "plan", "preemptions", "sched_step", "admit_no", "co_from", "slot", "lead_ns",
    )

    def __init__(self, index: int, request: SimRequest, arrival_ns: int) -> None:
        self.index = index
        self.request = request
        self.prompt_len = request.prompt_tokens
        self.output_len = request.output_tokens
        self.arrival_ns = arrival_ns
        self.state = WAITING
        self.generated = 0
        self.num_computed = 0
        self.num_blocks = 0  # KV blocks held
        self.blocks: list[int] = []  # their ids (prefix caching only)
        self.block_hashes: list[int] | None = None  # chained hashes of full prompt blocks, lazily
        self.num_registered = 0  # leading prompt blocks published to the prefix cache
        self.cached_prompt_tokens: int | None = None  # prefix-cache hit at first admission
        self.first_token_ns: int | None = None
        self.chunk_ns: list[int] | ChunkRuns = []  # its chunks' times (ChunkRuns: runs of the engine's steps)
        self.chunk_tokens: list[int] | None = None  # tokens per chunk, kept only when not all 1
        self.decode_steps = 0  # decode steps taken (the cursor into a speculative-decoding plan)
        self.plan: list[int] | None = None  # spec decoding: tokens produced after i+1 decode steps
        self.preemptions = 0
        self.sched_step = -1  # last step index this sequence was scheduled in
        self.admit_no = -1  # admissions into the running queue before this one's last (its running order)
        self.co_from = -1  # in a decode cohort: the step its fields are up to date before (cohort.py); else -1
        self.slot = -1  # the engine's slot, where it streams a step's sequences in slot order (stream_slots.py)
        self.lead_ns = 0  # finished: how long before its step's end it was streamed (stream_slots.py)

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.generated

    @property
    def to_compute(self) -> int:
        return self.prompt_len + self.generated - self.num_computed

    @property
    def is_decoding(self) -> bool:
        return self.generated > 0 and self.prompt_len + self.generated - self.num_computed == 1

    @property
    def remaining_output(self) -> int:
        return self.output_len - self.generated

    def tokens_after(self, steps: int) -> int:
        """Output tokens the next ``steps`` decode steps produce (capped at what is left)."""
        if self.plan is None:
            made = steps
        else:
            base = self.plan[self.decode_steps - 1] if self.decode_steps else 0
            made = self.plan[self.decode_steps + steps - 1] - base
        return min(made, self.output_len - self.generated)

    def steps_to_finish(self) -> int:
        """Decode steps until the last output token."""
        left = self.output_len - self.generated
        if self.plan is None:
            return left
        base = self.plan[self.decode_steps - 1] if self.decode_steps else 0
        lo, hi = self.decode_steps, len(self.plan) - 1  # plan[i] - base >= left for some i <= hi
        while lo < hi:
            mid = (lo + hi) // 2
            if self.plan[mid] - base >= left:
                hi = mid
            else:
                lo = mid + 1
        return lo - self.decode_steps + 1
