"""Open-loop arrival schedules: offsets in seconds from the start of the run, seeded.

- constant: one request every 1/rate seconds;
- poisson: exponential gaps with mean 1/rate;
- gamma: gamma gaps with shape = burstiness and mean 1/rate (burstiness 1 is Poisson; below 1 is
  burstier, above 1 smoother), as vLLM's `--burstiness`.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def arrival_offsets(rate: float, arrival: str, rng: np.random.Generator, *,
                    burstiness: float = 1.0, block: int = 1024) -> Iterator[float]:
    """Yield arrival offsets (s), forever; the caller stops by count or duration."""
    mean_gap = 1.0 / rate
    t = 0.0
    while True:
        if arrival == "constant":
            gaps = np.full(block, mean_gap)
        elif arrival == "poisson":
            gaps = rng.exponential(mean_gap, size=block)
        elif arrival == "gamma":
            gaps = rng.gamma(burstiness, mean_gap / burstiness, size=block)
        else:
            raise ValueError(f"unknown arrival process {arrival!r}")
        # The first request goes at t=0; each later one after a gap.
        for gap in gaps:
            yield t
            t += float(gap)
