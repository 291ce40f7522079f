"""How long the built-in server's engine takes: the one interface the scheduling core asks.

The scheduler (``engine.py``) owns this interface and knows nothing of how the seconds are found, so
a better performance model (the engine simulator) plugs in without touching scheduling.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@runtime_checkable
class TimingModel(Protocol):
    """Seconds the engine spends on one request's prefill and on one decode step.

    ``running`` is the number of requests in prefill or decode at that moment, the asking request
    included (so a request alone on the server asks with ``running=1``).
    """

    def prefill_s(self, prompt_tokens: int, running: int) -> float: ...

    def decode_step_s(self, running: int) -> float: ...


@dataclass
class ParametricTiming:
    """A small linear model ("parametric"); defaults look like a small model on one GPU.

    prefill = prefill_base_s + prefill_per_token_s * prompt_tokens
    decode step = decode_base_s + decode_per_running_s * running
    Each value is multiplied by a factor drawn uniformly from [1 - jitter_frac, 1 + jitter_frac]
    with a seeded generator, so a run's timings are reproducible for the same arrival order.
    """

    prefill_base_s: float = 0.005
    prefill_per_token_s: float = 0.00005
    decode_base_s: float = 0.010
    decode_per_running_s: float = 0.0001
    jitter_frac: float = 0.05
    seed: int | None = 0
    _rng: random.Random = field(init=False, repr=False, compare=False)

    name = "parametric"

    def __post_init__(self) -> None:
        for name in ("prefill_base_s", "prefill_per_token_s", "decode_base_s", "decode_per_running_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if not 0 <= self.jitter_frac < 1:
            raise ValueError("jitter_frac must be in [0, 1)")
        self._rng = random.Random(self.seed)

    def _jitter(self) -> float:
        if not self.jitter_frac:
            return 1.0
        return 1.0 + self.jitter_frac * (2.0 * self._rng.random() - 1.0)

    def prefill_s(self, prompt_tokens: int, running: int) -> float:
        return (self.prefill_base_s + self.prefill_per_token_s * prompt_tokens) * self._jitter()

    def decode_step_s(self, running: int) -> float:
        return (self.decode_base_s + self.decode_per_running_s * running) * self._jitter()
