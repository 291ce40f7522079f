"""`tokenpace workload reuse`: how much of a log's prompts a prefix cache could serve.

Prompts become chained block hashes (units.py; a trace's ``hash_ids`` or a record's hash chain are
used as they are), replayed in log order through two radix trees: one unbounded, whose hits are the
ceiling any cache could reach, and one an LRU cache of ``cache_units`` (evicting least recently used
blocks, a sequence's tail first, as vLLM does). A request always computes at least its last token,
as in the simulator's prefix cache. Requests are replayed one after another: blocks held by requests
running at the same time are not modelled.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import orjson

from tokenpace.advise.logs import LoggedRequest
from tokenpace.advise.radix import RadixTree
from tokenpace.advise.units import Encoder, block_hashes, raw_units
from tokenpace.workload.datasets import TRACE_BLOCK_TOKENS

_PREVIEW_REQUESTS = 100_000
_PREVIEW_CHARS = 72


class Reuse:
    def __init__(self, enc: Encoder, block_size: int, cache_units: int | None = None, *,
                 trace_path: str | None = None, default_output_tokens: int = 128) -> None:
        self.enc, self.block = enc, block_size
        self.cache_units = cache_units
        self.ceiling = RadixTree()
        self.lru = RadixTree(max(1, cache_units // block_size)) if cache_units else None
        self.requests = self.units = self.ceiling_hits = self.lru_hits = 0
        self.usage_requests = self.usage_prompt = self.usage_cached = 0
        self.usage_pred_lru = self.usage_pred_ceiling = 0
        self.other_blocks: dict[int, int] = {}  # hash-chain or trace requests at another block size
        self.given_units: dict[str, int] = {}  # requests that came as block hashes, by their unit
        self.previews: dict[int, str] = {}
        self.wheres: dict[int, str] = {}
        self._trace = open(trace_path, "wb") if trace_path else None
        self._trace_ids: dict[int, int] = {}
        self._t0: float | None = None
        self.default_output_tokens = default_output_tokens

    def feed_many(self, reqs: list[LoggedRequest]) -> None:
        self.enc.prefetch([s.text for r in reqs for s in r.segments])
        for req in reqs:
            self.feed(req)

    def feed(self, req: LoggedRequest) -> None:
        units = None
        if req.block_hashes is not None:
            keys = np.array(req.block_hashes, dtype=np.uint64)
            block = req.block_units
            total = req.prompt_tokens or len(keys) * block
            self.given_units[req.unit] = self.given_units.get(req.unit, 0) + 1
            if block != self.block:
                self.other_blocks[block] = self.other_blocks.get(block, 0) + 1
        else:
            units = raw_units(req, self.enc)
            block, total = self.block, len(units)
            keys = block_hashes(units, block, spread=self.enc.tokenizer is None)
        limit = max(0, (total - 1) // block)
        n = self.requests
        self.requests += 1
        self.units += total
        c = min(self.ceiling.match_insert(keys), limit) * block
        self.ceiling_hits += c
        lru = 0
        if self.lru is not None:
            lru = min(self.lru.match_insert(keys), limit) * block
            self.lru_hits += lru
        if n < _PREVIEW_REQUESTS and req.segments:
            self.previews[self.ceiling.clock] = req.segments[0].text[:_PREVIEW_CHARS]
            self.wheres[self.ceiling.clock] = req.where
        if req.cached_tokens is not None and req.reported_prompt_tokens:
            self.usage_requests += 1
            self.usage_prompt += req.reported_prompt_tokens
            self.usage_cached += req.cached_tokens
            self.usage_pred_lru += lru
            self.usage_pred_ceiling += c
        if self._trace is not None:
            self._write_trace(req, units, keys, block, total)

    def _write_trace(self, req: LoggedRequest, units: np.ndarray | None, keys: np.ndarray, block: int,
                     total: int) -> None:
        big = (block_hashes(units, TRACE_BLOCK_TOKENS, spread=self.enc.tokenizer is None) if units is not None
               else keys[TRACE_BLOCK_TOKENS // block - 1::TRACE_BLOCK_TOKENS // block]
               if block <= TRACE_BLOCK_TOKENS and TRACE_BLOCK_TOKENS % block == 0 else keys)
        ids = [self._trace_ids.setdefault(int(h), len(self._trace_ids)) for h in big]
        if self._t0 is None and req.timestamp is not None:
            self._t0 = req.timestamp
        ts = (req.timestamp - self._t0) * 1000 if req.timestamp is not None and self._t0 is not None \
            else float(self.requests - 1)
        self._trace.write(orjson.dumps({"timestamp": round(max(ts, 0.0), 3), "input_length": max(total, 1),
                                        "output_length": req.output_tokens or self.default_output_tokens,
                                        "hash_ids": ids}) + b"\n")

    def close(self) -> None:
        if self._trace is not None:
            self._trace.close()

    def top_prefixes(self, n: int = 10) -> list[dict[str, Any]]:
        """Shared prefixes (tree nodes reached by >= 2 requests), by the units they would save."""
        nodes = [x for x in self.ceiling.nodes() if x.requests >= 2]
        nodes.sort(key=lambda x: -(x.requests - 1) * x.depth)
        out = []
        for x in nodes[:n]:
            out.append({"prefix_units": x.depth * self.block, "requests": x.requests,
                        "units_reused": (x.requests - 1) * x.depth * self.block,
                        "first_seen": self.wheres.get(x.origin), "starts_with": self.previews.get(x.origin)})
        return out

    def shared_prefix_spec(self) -> str | None:
        """A `--shared-prefix` spec with the log's groups (first branches reached by >= 2 requests)."""
        groups = [x for x in self.ceiling.root.children.values() if x.requests >= 2]
        if not groups:
            return None
        reqs = sum(x.requests for x in groups)
        prefix = round(sum(x.depth * self.block * x.requests for x in groups) / reqs)
        return f"groups={len(groups)},prefix-tokens={max(prefix, 1)},per-group={max(1, round(reqs / len(groups)))}"

    def _given_unit(self) -> dict[str, str]:
        """When every request came as block hashes (hash chains, traces) in one unit, that unit is
        the report's, whatever --tokenizer says: the hashes were made from it."""
        if len(self.given_units) != 1 or sum(self.given_units.values()) != self.requests:
            return {}
        unit = next(iter(self.given_units))
        return {"unit": unit, "unit_source": f"the log's block hashes ({unit})"}

    def report(self) -> dict[str, Any]:
        rate = lambda hits: hits / self.units if self.units else 0.0  # noqa: E731
        out: dict[str, Any] = {
            "kind": "reuse", "unit": self.enc.unit,
            "unit_source": self.enc.tokenizer.source if self.enc.tokenizer is not None
            else "words (no --tokenizer): approximate",
            **self._given_unit(),
            "block_size": self.block, "requests": self.requests, "prompt_units": self.units,
            "ceiling": {"hit_units": self.ceiling_hits, "hit_rate": rate(self.ceiling_hits)},
            "lru": None if self.lru is None else {"cache_units": self.cache_units, "hit_units": self.lru_hits,
                                                  "hit_rate": rate(self.lru_hits)},
            "top_prefixes": self.top_prefixes(),
            "shared_prefix_spec": self.shared_prefix_spec(),
            "other_block_sizes": {str(k): v for k, v in self.other_blocks.items()},
        }
        if self.usage_requests:
            pred = self.usage_pred_lru if self.lru is not None else self.usage_pred_ceiling
            out["provider_reported"] = {
                "requests": self.usage_requests, "prompt_tokens": self.usage_prompt,
                "cached_tokens": self.usage_cached, "cached_rate": self.usage_cached / self.usage_prompt,
                "predicted_cached_units": pred, "predicted_by": "lru" if self.lru is not None else "ceiling"}
        return out


def reuse(requests: Iterable[LoggedRequest], analysis: Reuse, *, batch: int = 8) -> dict[str, Any]:
    """Requests are fed in log order, ``batch`` at a time so that their new texts are encoded in
    one pass (Encoder.prefetch); 8, as larger batches allocate arrays big enough to be mapped and
    unmapped each time (page faults cost more than the batch saves)."""
    try:
        pending: list[LoggedRequest] = []
        for req in requests:
            pending.append(req)
            if len(pending) >= batch:
                analysis.feed_many(pending)
                pending = []
        analysis.feed_many(pending)
    finally:
        analysis.close()
    return analysis.report()
