"""Speculative decoding: how many tokens a verification step yields, and what the drafts cost.

A draft model proposes γ tokens; the target verifies them in one multi-token step (1 + γ tokens per
sequence) and keeps the accepted prefix plus one token of its own. With per-token acceptance α the
tokens per step are min(G, γ + 1), G ~ Geometric(1 − α), whose mean is (1 − α^(γ+1)) / (1 − α).
The drafts cost γ · c target decode steps (c: draft/target step-time ratio), so the speedup at low
load is (1 − α^(γ+1)) / ((1 − α)(γc + 1)).

Two ways to turn this into per-step token counts (``SpecDecodeConfig.acceptance``):
- "expected" (default): every sequence yields the mean, spread deterministically over steps
  (step i yields floor((i+1)·E) − floor(i·E) tokens), so runs are reproducible without randomness
  and chunk sizes look like a real server's;
- "sampled": each sequence draws its own counts from a generator seeded by (seed, request index),
  so a run is reproducible from its seed and independent of the order the engine visits sequences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from tokenpace.simulator.step import StepBatch, StepPredictor


@dataclass(frozen=True, slots=True)
class SpecDecodeConfig:
    num_draft_tokens: int = 4  # γ
    acceptance_rate: float = 0.7  # α, per draft token
    draft_cost: float = 0.1  # c: one draft step / one target decode step
    acceptance: Literal["expected", "sampled"] = "expected"

    def __post_init__(self) -> None:
        if self.num_draft_tokens < 1:
            raise ValueError("num_draft_tokens must be >= 1")
        if not 0.0 <= self.acceptance_rate <= 1.0:
            raise ValueError("acceptance_rate must lie in [0, 1]")
        if self.draft_cost < 0:
            raise ValueError("draft_cost must be >= 0")
        if self.acceptance not in ("expected", "sampled"):
            raise ValueError("acceptance must be 'expected' or 'sampled'")

    @property
    def expected_tokens_per_step(self) -> float:
        a, g = self.acceptance_rate, self.num_draft_tokens
        return float(g + 1) if a >= 1.0 else (1.0 - a ** (g + 1)) / (1.0 - a)

    @property
    def low_load_speedup(self) -> float:
        return self.expected_tokens_per_step / (self.num_draft_tokens * self.draft_cost + 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"num_draft_tokens": self.num_draft_tokens, "acceptance_rate": self.acceptance_rate,
                "draft_cost": self.draft_cost, "acceptance": self.acceptance}


def token_plan(spec: SpecDecodeConfig, steps: int, seed: int, index: int) -> list[int]:
    """Cumulative tokens yielded after 1, 2, …, ``steps`` decode steps of one sequence."""
    i = np.arange(1, steps + 1, dtype=np.float64)
    if spec.acceptance == "expected":
        cum = np.floor(i * spec.expected_tokens_per_step + 1e-9).astype(np.int64)
        return cum.tolist()
    rng = np.random.Generator(np.random.PCG64([seed, index]))
    if spec.acceptance_rate >= 1.0:
        per_step = np.full(steps, spec.num_draft_tokens + 1, dtype=np.int64)
    else:
        per_step = np.minimum(rng.geometric(1.0 - spec.acceptance_rate, steps), spec.num_draft_tokens + 1)
    return np.cumsum(per_step).tolist()


def spec_step_s(predictor: StepPredictor, batch: StepBatch, spec: SpecDecodeConfig) -> float:
    """A verification step plus the γ draft steps that precede it (c × a target decode step each)."""
    t = predictor.step_s(batch)
    if batch.decode_context and spec.draft_cost > 0:
        plain = StepBatch(decode_context=batch.decode_context, decode_tokens_per_seq=1)
        t += spec.num_draft_tokens * spec.draft_cost * predictor.step_s(plain)
    return t
