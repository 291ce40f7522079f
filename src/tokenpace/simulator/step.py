"""One engine iteration as the performance model sees it, and the interface that prices it.

The engine builds a ``StepBatch`` for every step it runs and asks a ``StepPredictor`` for its
duration. The roofline model is the default; a fitted or profiled model only has to implement
``step_s``. Nothing here knows about scheduling.

Between the events that change a batch (an admission, a prompt chunk, a finish, a preemption, a
timeout), a batch of pure decodes runs unchanged, each context one token longer per step, and the
engine advances such a run of steps as one event. It prices the run with ``decode_run_s``: a
predictor may offer a vectorised ``decode_run_s(batch, steps)`` method (the roofline and the kernel
predictor do), which must return, float for float, what ``step_s`` gives for each step; any other
predictor is asked step by step.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class ShiftedContexts(Sequence[int]):
    """Decode contexts given as ``base`` (a tuple) each plus ``shift``, with their ``total`` known:
    the decode cohort hands the predictor its members' contexts this way (cohort.py), so a step
    costs no per-sequence work for a predictor that needs only their count and sum
    (``context_total``). Any other reads them as the sequence of ints they are."""

    __slots__ = ("base", "shift", "total")

    def __init__(self, base: tuple[int, ...], shift: int, total: int) -> None:
        self.base, self.shift, self.total = base, shift, total

    def __len__(self) -> int:
        return len(self.base)

    def __iter__(self) -> Iterator[int]:
        return map(self.shift.__add__, self.base)

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        if isinstance(i, slice):
            return tuple(self)[i]
        return self.base[i] + self.shift

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


def context_total(contexts: Sequence[int]) -> int:
    """The tokens in the KV cache over all decoding sequences (a ``ShiftedContexts`` knows it)."""
    return contexts.total if type(contexts) is ShiftedContexts else sum(contexts)


@dataclass(frozen=True, slots=True)
class StepBatch:
    """The work of one forward pass.

    ``prefill``: one ``(new_tokens, context_tokens)`` pair per prompt chunk: the tokens computed in this
    step, and the tokens already in the KV cache before them (cached prefix or earlier chunks).
    ``decode_context``: for each decoding sequence, its tokens already in the KV cache (a tuple, or
    a ``ShiftedContexts``: sum them with ``context_total``).
    ``decode_tokens_per_seq``: tokens each decoding sequence computes: 1, or 1 + γ when the target
    model verifies γ draft tokens (speculative decoding).
    """

    prefill: tuple[tuple[int, int], ...] = ()
    decode_context: tuple[int, ...] | ShiftedContexts = ()
    decode_tokens_per_seq: int = 1

    @property
    def num_decode(self) -> int:
        return len(self.decode_context)

    @property
    def prefill_tokens(self) -> int:
        return sum(n for n, _ in self.prefill)

    @property
    def num_tokens(self) -> int:
        """Tokens computed in this step (what the token budget counts)."""
        return self.prefill_tokens + self.num_decode * self.decode_tokens_per_seq


@runtime_checkable
class StepPredictor(Protocol):
    """Prices one engine step: a batch in, seconds out. Must be a pure function of the batch."""

    def step_s(self, batch: StepBatch) -> float: ...


def decode_steps(batch: StepBatch, steps: int) -> list[StepBatch]:
    """The ``steps`` pure decode steps that start with ``batch``: in step i every context has grown by
    i × ``decode_tokens_per_seq`` tokens (every token of every step kept)."""
    g = batch.decode_tokens_per_seq
    return [StepBatch(decode_context=tuple([c + i * g for c in batch.decode_context]), decode_tokens_per_seq=g)
            for i in range(steps)]


def decode_run_s(predictor: StepPredictor, batch: StepBatch, steps: int) -> Sequence[float]:
    """Seconds of each of the ``steps`` pure decode steps that start with ``batch`` (no prompt
    chunks; see ``decode_steps``): the predictor's own ``decode_run_s`` where it has one (the same
    floats as ``step_s``, computed for all steps at once), else ``step_s`` step by step."""
    if batch.prefill:
        raise ValueError("a run of decode steps has no prompt chunks")
    run = getattr(predictor, "decode_run_s", None)
    if run is not None:
        return run(batch, steps)
    return [predictor.step_s(b) for b in decode_steps(batch, steps)]
