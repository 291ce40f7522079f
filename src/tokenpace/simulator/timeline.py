"""The engine timeline: one row per batch the scheduler forms (a row may cover k identical steps)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from operator import attrgetter, mul
from typing import Any


@dataclass(slots=True)  # not frozen: the engine makes one per batch, and a frozen __init__ costs 4x
class TimelineRow:
    t_ns: int  # when the batch started
    steps: int  # identical engine steps this row covers
    step_ms: float  # duration of its first step
    span_ms: float  # duration of all its steps
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


def timeline_stats(rows: Sequence[TimelineRow], end_ns: int) -> dict[str, Any]:
    """What the engine did over a run, from its timeline. Means over time weight each row by how long
    its steps ran (``span_ms``); per-step means weight it by its step count. Within a row of jumped
    decode steps the batch is constant; KV usage is read at the row's first step."""
    spans = [r.span_ms for r in rows]
    busy_ms = sum(spans)
    steps = sum([r.steps for r in rows])

    def over_time(value: str) -> float | None:  # (map: a run has a row per batch, 10,000s of them)
        return sum(map(mul, map(attrgetter(value), rows), spans)) / busy_ms if busy_ms else None

    return {
        "batches": len(rows),
        "steps": steps,
        "busy_fraction": min(1.0, busy_ms * 1e6 / end_ns) if end_ns else None,
        "mean_step_ms": busy_ms / steps if steps else None,
        "mean_running_seqs": over_time("running"),
        "mean_decode_batch": over_time("decode_seqs"),
        "mean_waiting": over_time("waiting"),
        "max_waiting": max((r.waiting for r in rows), default=0),
        "mean_tokens_per_step": sum(r.batch_tokens * r.steps for r in rows) / steps if steps else None,
        "mean_kv_usage": over_time("kv_usage"),
        "peak_kv_usage": max((r.kv_usage for r in rows), default=0.0),
    }
