"""The engine timeline: one row per batch the scheduler forms (a row may cover k identical steps)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TimelineRow:
    t_ns: int  # when the batch started
    steps: int  # identical engine steps this row covers
    step_ms: float  # duration of its first step
    waiting: int  # queue depth after scheduling
    running: int  # sequences holding KV after scheduling
    kv_usage: float  # fraction of KV blocks held by running sequences
    prefix_cache_hit_rate: float  # cumulative hit tokens / query tokens
    batch_tokens: int  # tokens computed per step
    decode_seqs: int
    prefill_tokens: int
    preempted: int  # preemptions while forming this batch
    preemptions: int  # cumulative

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
