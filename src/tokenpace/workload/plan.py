"""The request plan: what to send, in what order, and (open loop) when.

A plan is a lazy, seeded stream of PlannedRequest, so duration-bounded runs need no upper bound and
the same seed always gives the same prompts, lengths and arrival offsets (each from its own random
stream, so changing the rate does not change the prompts).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tokenpace.workload.arrivals import arrival_offsets
from tokenpace.workload.lengths import LengthSpec
from tokenpace.workload.prompts import synthetic_prompt


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    index: int
    prompt: str
    input_tokens: int  # requested (approximate without a tokenizer)
    output_tokens: int  # sent as max_tokens
    offset_s: float | None  # open loop: intended send time from the run's start; None: closed loop


@dataclass(frozen=True)
class WorkloadSpec:
    input_tokens: LengthSpec
    output_tokens: LengthSpec
    seed: int = 0
    rate: float | None = None  # None: closed loop
    arrival: str = "poisson"
    burstiness: float = 1.0


def plan_requests(spec: WorkloadSpec, *, block: int = 256) -> Iterator[PlannedRequest]:
    """Yield planned requests forever; the runner stops by count or time."""
    lengths_rng, prompts_rng, arrivals_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(spec.seed).spawn(3))
    offsets = (arrival_offsets(spec.rate, spec.arrival, arrivals_rng, burstiness=spec.burstiness)
               if spec.rate else None)
    index = 0
    while True:
        ins = spec.input_tokens.sample(lengths_rng, block)
        outs = spec.output_tokens.sample(lengths_rng, block)
        for n_in, n_out in zip(ins.tolist(), outs.tolist()):
            yield PlannedRequest(
                index=index,
                prompt=synthetic_prompt(prompts_rng, n_in),
                input_tokens=n_in,
                output_tokens=n_out,
                offset_s=next(offsets) if offsets is not None else None,
            )
            index += 1
