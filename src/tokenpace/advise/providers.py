"""Prompt-cache rules per provider, as data (data/providers.json, each fact with its source) that a
user extends with a file of the same shape (``--providers FILE``).

``cached_tokens(n)`` is how many of a prefix of ``n`` tokens a provider would serve from its cache:
nothing below the minimum, then whole steps (OpenAI 128 tokens, vLLM a KV block, SGLang a token).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tokenpace.errors import UsageError

_BUILTIN = Path(__file__).with_name("data") / "providers.json"


@dataclass(frozen=True)
class Provider:
    id: str
    min_cacheable_tokens: int
    step_tokens: int
    max_breakpoints: int | None
    cache_read_multiplier: float | None
    cache_write_multiplier: float | None
    input_usd_per_mtok: float | None = None  # the model's input price, when known
    model: str | None = None
    routing_prefix_tokens: int | None = None
    sources: tuple[str, ...] = field(default=())

    def cached_tokens(self, prefix_tokens: int) -> int:
        if prefix_tokens < max(self.min_cacheable_tokens, 1):
            return 0
        return prefix_tokens // self.step_tokens * self.step_tokens

    def usd_saved(self, tokens_read: int) -> float | None:
        """Dollars saved when ``tokens_read`` prompt tokens are read from the cache instead of being
        billed in full; None without a price."""
        if self.input_usd_per_mtok is None or self.cache_read_multiplier is None:
            return None
        return tokens_read * self.input_usd_per_mtok * (1 - self.cache_read_multiplier) / 1e6

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "model": self.model, "min_cacheable_tokens": self.min_cacheable_tokens,
                "step_tokens": self.step_tokens, "max_breakpoints": self.max_breakpoints,
                "cache_read_multiplier": self.cache_read_multiplier,
                "cache_write_multiplier": self.cache_write_multiplier,
                "input_usd_per_mtok": self.input_usd_per_mtok, "sources": list(self.sources)}


def _entries(path: str | Path, flag: str) -> list[dict[str, Any]]:
    try:
        data = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{flag}: {path} is not valid JSON: {exc}") from None
    items = data.get("providers") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(isinstance(e, dict) and isinstance(e.get("id"), str)
                                              for e in items):
        raise UsageError(f"{flag}: {path} needs {{\"providers\": [{{\"id\": ..., ...}}]}}")
    return items


def provider_entries(extra: str | Path | None = None) -> dict[str, dict[str, Any]]:
    table = {e["id"]: e for e in _entries(_BUILTIN, "providers")}
    if extra is not None:
        for e in _entries(extra, "--providers"):
            base = dict(table.get(e["id"], {}))
            models = {**base.get("models", {}), **e.get("models", {})}
            table[e["id"]] = {**base, **e, "models": models}
    return table


def get_provider(name: str, model: str | None = None, *, extra: str | Path | None = None,
                 block_size: int | None = None, input_price: float | None = None,
                 read_multiplier: float | None = None) -> Provider:
    """The rules of provider ``name`` for ``model`` (the longest model name that prefixes it)."""
    table = provider_entries(extra)
    if name not in table:
        raise UsageError(f"--provider: unknown provider {name!r} (known: {', '.join(sorted(table))})")
    e = table[name]
    m: dict[str, Any] = {}
    if model:
        names = [k for k in e.get("models", {}) if model.startswith(k)]
        if names:
            m = e["models"][max(names, key=len)]
    get = lambda key: m.get(key, e.get(key))  # noqa: E731
    try:
        return Provider(
            id=name, model=model, min_cacheable_tokens=int(get("min_cacheable_tokens") or 0),
            step_tokens=int(block_size or get("step_tokens") or 1),
            max_breakpoints=get("max_breakpoints"),
            cache_read_multiplier=read_multiplier if read_multiplier is not None
            else get("cache_read_multiplier"),
            cache_write_multiplier=get("cache_write_multiplier"),
            input_usd_per_mtok=input_price if input_price is not None else get("input_usd_per_mtok"),
            routing_prefix_tokens=get("routing_prefix_tokens"), sources=tuple(e.get("sources", ())))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--providers: provider {name!r} has an ill-typed field: {exc}") from None
