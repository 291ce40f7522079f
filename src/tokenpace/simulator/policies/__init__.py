"""Scheduling policies, by name. Each decides which sequences run how many tokens in the next step."""

from __future__ import annotations

from tokenpace.errors import UsageError
from tokenpace.simulator.kv_cache import KVCache
from tokenpace.simulator.policies.base import Batch, Scheduler, SchedulerLimits
from tokenpace.simulator.policies.chunked_prefill import ChunkedPrefill
from tokenpace.simulator.policies.decode_first import DecodeFirst
from tokenpace.simulator.policies.prefill_first import PrefillFirst
from tokenpace.simulator.policies.static import StaticBatching

POLICIES: dict[str, type[Scheduler]] = {
    "static": StaticBatching,
    "prefill-first": PrefillFirst,
    "decode-first": DecodeFirst,
    "chunked-prefill": ChunkedPrefill,
}

__all__ = ["POLICIES", "Batch", "Scheduler", "SchedulerLimits", "make_scheduler"]


def make_scheduler(policy: str, limits: SchedulerLimits, kv: KVCache) -> Scheduler:
    try:
        cls = POLICIES[policy.strip().lower().replace("_", "-")]
    except KeyError:
        raise UsageError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}") from None
    return cls(limits, kv)
