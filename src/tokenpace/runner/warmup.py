"""The warmup and load-length rules, written once for bench (the load generator) and sim.

- A request is warmup when it is one of the first ``warmup_requests`` or was scheduled less than
  ``warmup_s`` after the run's start; warmup requests are sent and recorded, never measured.
- A ``--duration`` run issues requests for ``warmup_s + ramp_s + duration_s`` after its start.
"""

from __future__ import annotations

from tokenpace.config import BenchConfig

NS = 1_000_000_000


def is_warmup(index: int, since_start_ns: int, warmup_requests: int, warmup_s: float) -> bool:
    """Request ``index``, scheduled ``since_start_ns`` after the run's start, is warmup."""
    return index < warmup_requests or (warmup_s > 0 and since_start_ns < warmup_s * NS)


def issuing_s(config: BenchConfig) -> float | None:
    """How long a run issues requests (None: until its count is sent)."""
    return None if config.duration_s is None else config.warmup_s + config.ramp_s + config.duration_s
