"""What the prompt cache did, request by request: TTFT, tokens and (with token prices) cost of
cache writes, cache reads and misses, apart.

A request is a **write** when the server reported prompt tokens written to the cache (Anthropic's
``cache_creation_input_tokens`` > 0; it may also have read some), a **read** when it reported cached
prompt tokens and wrote none, a **miss** when it reported neither. Requests whose server reported no
cached count at all are left out.

Cost, with per-token prices (``--input-usd-per-mtok``, ``--output-usd-per-mtok``, USD per million
tokens) and the provider's cache multipliers, which are data (``CACHE_PRICE_MULTIPLIERS``, or
``--cache-price-multipliers``)::

    usd = (uncached x input + read x input x m_read + written x input x m_write + output x output_price) / 1e6

where ``uncached = prompt_tokens - read - written``. ``usd_without_cache`` prices every prompt
token at the input price: what the same requests would cost with no cache at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from tokenpace.metrics.latency import ttft
from tokenpace.metrics.stats import describe
from tokenpace.record import RequestRecord

# Anthropic's prompt-caching multipliers of the base input price: a 5-minute cache write costs
# 1.25x, a cache read 0.1x ("Pricing", Feature-specific pricing -> Prompt caching:
# https://platform.claude.com/docs/en/about-claude/pricing; a 1-hour write is 2x). Other providers
# price differently (OpenAI bills no writes and discounts reads by model): pass their multipliers.
CACHE_PRICE_MULTIPLIERS: dict[str, float] = {"write": 1.25, "read": 0.1}
CLASSES = ("writes", "reads", "misses")


@dataclass(frozen=True)
class TokenPrices:
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    multipliers: dict[str, float] = field(default_factory=lambda: dict(CACHE_PRICE_MULTIPLIERS))

    def __post_init__(self) -> None:
        for name, value in (("input_usd_per_mtok", self.input_usd_per_mtok),
                            ("output_usd_per_mtok", self.output_usd_per_mtok),
                            *((f"cache {k} multiplier", v) for k, v in self.multipliers.items())):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if set(self.multipliers) != {"write", "read"}:
            raise ValueError(f"cache price multipliers are write and read, not {sorted(self.multipliers)}")

    def usd(self, record: RequestRecord) -> float | None:
        """The request's cost; None without a prompt count."""
        if record.prompt_tokens is None:
            return None
        read = record.cached_prompt_tokens or 0
        written = record.cache_write_prompt_tokens or 0
        uncached = max(0, record.prompt_tokens - read - written)
        m = self.multipliers
        prompt = (uncached + read * m["read"] + written * m["write"]) * self.input_usd_per_mtok
        return (prompt + (record.output_tokens or 0) * self.output_usd_per_mtok) / 1e6

    def usd_without_cache(self, record: RequestRecord) -> float | None:
        if record.prompt_tokens is None:
            return None
        return (record.prompt_tokens * self.input_usd_per_mtok
                + (record.output_tokens or 0) * self.output_usd_per_mtok) / 1e6


def cache_class(record: RequestRecord) -> str | None:
    """"writes", "reads", "misses", or None when the server reported no cached count."""
    if record.cache_write_prompt_tokens:
        return "writes"
    if record.cached_prompt_tokens is None:
        return None
    return "reads" if record.cached_prompt_tokens > 0 else "misses"


def cache_use(ok: Sequence[RequestRecord], prices: TokenPrices | None = None) -> dict | None:
    """TTFT, tokens and cost of cache writes, reads and misses; None when no request reported a
    cache write count (only Anthropic's API does: the others have ``ttft_by_cache_ms``)."""
    if not any(r.cache_write_prompt_tokens is not None for r in ok):
        return None
    out: dict = {}
    for name in CLASSES:
        group = [r for r in ok if cache_class(r) == name]
        entry = {
            "requests": len(group),
            "ttft_ms": describe([v for r in group if (v := ttft(r)) is not None]),
            "prompt_tokens": sum(r.prompt_tokens or 0 for r in group),
            "cached_prompt_tokens": sum(r.cached_prompt_tokens or 0 for r in group),
            "cache_write_prompt_tokens": sum(r.cache_write_prompt_tokens or 0 for r in group),
            "output_tokens": sum(r.output_tokens or 0 for r in group),
        }
        if prices is not None:
            entry["usd"] = sum(usd for r in group if (usd := prices.usd(r)) is not None)
        out[name] = entry
    return out


def token_cost(ok: Sequence[RequestRecord], prices: TokenPrices) -> dict:
    """The summary's ``token_cost`` section: what the ok requests cost at per-token prices."""
    priced = [r for r in ok if r.prompt_tokens is not None]
    usd = sum(prices.usd(r) for r in priced)
    without = sum(prices.usd_without_cache(r) for r in priced)
    by_class = {name: sum(prices.usd(r) for r in priced if cache_class(r) == name) for name in CLASSES}
    return {
        "input_usd_per_mtok": prices.input_usd_per_mtok, "output_usd_per_mtok": prices.output_usd_per_mtok,
        "cache_price_multipliers": dict(prices.multipliers),
        "requests": len(priced), "usd": usd, "usd_per_request": usd / len(priced) if priced else None,
        "usd_without_cache": without, "saved_fraction": 1 - usd / without if without > 0 else None,
        "usd_by_cache": by_class,
    }
