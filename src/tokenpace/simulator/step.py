"""One engine iteration as the performance model sees it, and the interface that prices it.

The engine builds a ``StepBatch`` for every step it runs and asks a ``StepPredictor`` for its
duration. The roofline model is the default; a fitted or profiled model only has to implement
``step_s``. Nothing here knows about scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class StepBatch:
    """The work of one forward pass.

    ``prefill``: one ``(new_tokens, context_tokens)`` pair per prompt chunk: the tokens computed in this
    step, and the tokens already in the KV cache before them (cached prefix or earlier chunks).
    ``decode_context``: for each decoding sequence, its tokens already in the KV cache.
    ``decode_tokens_per_seq``: tokens each decoding sequence computes: 1, or 1 + γ when the target
    model verifies γ draft tokens (speculative decoding).
    """

    prefill: tuple[tuple[int, int], ...] = ()
    decode_context: tuple[int, ...] = ()
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
