"""TTFT split by what the workload varied: prefix-cache hits against misses (and, where the API
reports cache writes, writes, reads and misses with their tokens and cost: token_cost.py), conversation turn,
shared-prefix group; and the time to the first tool-call delta. Present only when the records
carry what the split needs (so a plain run's summary has none of these).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from tokenpace.metrics.latency import ttft
from tokenpace.metrics.stats import describe
from tokenpace.metrics.token_cost import TokenPrices, cache_use
from tokenpace.record import RequestRecord


def breakdowns(measured: Sequence[RequestRecord], prices: TokenPrices | None = None) -> dict:
    ok = [r for r in measured if r.status == "ok"]
    out: dict = {}
    cache = cache_split(ok)
    if cache is not None:
        out["ttft_by_cache_ms"] = cache
    use = cache_use(ok, prices)
    if use is not None:
        out["cache_use"] = use
    by_turn = _ttft_by(ok, lambda r: r.turn)
    if by_turn:
        out["ttft_by_turn_ms"] = by_turn
    by_group = _ttft_by(ok, lambda r: r.prefix_group)
    if by_group:
        out["ttft_by_prefix_group_ms"] = by_group
    tool = [(r.first_tool_call_ns - r.sent_ns) / 1e6 for r in ok
            if r.first_tool_call_ns is not None and r.sent_ns is not None]
    if tool:
        out["time_to_first_tool_call_ms"] = describe(tool)
        out["tool_call_requests"] = len(tool)
    reasoning = [r.reasoning_tokens for r in ok if r.reasoning_tokens]
    if reasoning:
        out["reasoning_tokens"] = {"requests": len(reasoning), "total": int(sum(reasoning))}
    return out


def cache_split(ok: Sequence[RequestRecord]) -> dict | None:
    """TTFT of requests the server reported any cached prompt tokens for (hits) against those it
    reported none for (misses); None when the server reported no cached counts at all."""
    known = [r for r in ok if r.cached_prompt_tokens is not None]
    if not known:
        return None
    hits = [v for r in known if r.cached_prompt_tokens > 0 and (v := ttft(r)) is not None]
    misses = [v for r in known if r.cached_prompt_tokens == 0 and (v := ttft(r)) is not None]
    return {"hits": describe(hits), "misses": describe(misses), "hit_requests": len(hits),
            "miss_requests": len(misses),
            "cached_prompt_tokens": int(sum(r.cached_prompt_tokens for r in known))}


def _ttft_by(ok: Sequence[RequestRecord], key) -> dict[str, dict]:
    groups: dict[int, list[float]] = defaultdict(list)
    for r in ok:
        k, v = key(r), ttft(r)
        if k is not None and v is not None:
            groups[k].append(v)
    return {str(k): describe(v) for k, v in sorted(groups.items())}
