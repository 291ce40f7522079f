"""What a workload looks like before it is sent: lengths, arrivals and prefix sharing (pure functions).

Prefix sharing is what an ideal prefix cache could reuse, requests taken in sending order: request
i reuses the longest prefix of its prompt that an earlier request's prompt also started with. It
is counted over token ids with a tokenizer, else over words, on the prompt as one text (chat
messages as `role: content` blocks). `distinct_prefixes` counts the different reused prefixes of at
least 16 units (vLLM's default KV block); a reused prefix that extends another by less than 16 units
counts with it, so the first token or word that two random suffixes happen to share does not make a
new prefix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenpace.workload.datasets import messages_text
from tokenpace.workload.plan import PlannedRequest
from tokenpace.workload.prompts import PromptMaker

BLOCK = 16


def length_stats(values: list[int] | np.ndarray, bins: int = 10) -> dict[str, Any]:
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return {"count": 0}
    lo, hi = float(a.min()), float(a.max())
    edges = np.linspace(lo, hi, bins + 1) if hi > lo else np.array([lo, lo + 1])
    counts, edges = np.histogram(a, bins=edges)
    return {"count": int(a.size), "mean": float(a.mean()), "std": float(a.std()), "min": lo,
            "p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "p99": float(np.percentile(a, 99)), "max": hi, "total": float(a.sum()),
            "histogram": [{"lo": float(edges[i]), "hi": float(edges[i + 1]), "count": int(c)}
                          for i, c in enumerate(counts)]}


def arrival_stats(offsets_s: list[float]) -> dict[str, Any] | None:
    """Rate over the span, inter-arrival gaps and their CV (1 for Poisson), peak 1-second count."""
    if len(offsets_s) < 2:
        return None
    t = np.sort(np.asarray(offsets_s, dtype=float))
    gaps = np.diff(t)
    span = float(t[-1] - t[0])
    per_second = np.bincount(((t - t[0]) // 1.0).astype(np.int64)) if span > 0 else np.array([t.size])
    mean_gap = float(gaps.mean())
    return {"requests": int(t.size), "span_s": span, "mean_rate_rps": (t.size - 1) / span if span > 0 else None,
            "gap_ms": {"mean": mean_gap * 1e3, "p50": float(np.percentile(gaps, 50)) * 1e3,
                       "p99": float(np.percentile(gaps, 99)) * 1e3, "max": float(gaps.max()) * 1e3},
            "gap_cv": float(gaps.std() / mean_gap) if mean_gap > 0 else None,
            "peak_requests_in_1s": int(per_second.max())}


def prefix_sharing(prompts: list[Any], maker: PromptMaker) -> dict[str, Any]:
    """Share of prompt units an ideal prefix cache reuses, and the distinct reused prefixes."""
    seen: set[int] = set()  # chained hashes of every prefix sent so far
    reused: dict[int, tuple[int, ...]] = {}  # reused prefix → the hashes of its last BLOCK-1 shorter prefixes
    total = reusable = 0
    for prompt in prompts:
        units = maker.units(messages_text(prompt))
        h, hit, hashes = 0, 0, []
        for u in units:
            h = hash((h, u))
            hashes.append(h)
        for i, x in enumerate(hashes):
            if x not in seen:
                break
            hit = i + 1
        if hit >= BLOCK:
            reused.setdefault(hashes[hit - 1], tuple(hashes[hit - BLOCK:hit - 1]))
        total += len(units)
        reusable += hit
        seen.update(hashes)
    # A reused prefix that merely extends a shorter reused one by a few units is the same prefix.
    distinct = sum(1 for shorter in reused.values() if not any(x in reused for x in shorter))
    return {"unit": "tokens" if maker.exact else "words", "prompt_units": total,
            "reusable_units": reusable, "reusable_fraction": reusable / total if total else 0.0,
            "distinct_prefixes": distinct}


def inspect_plan(items: list[PlannedRequest], maker: PromptMaker) -> dict[str, Any]:
    offsets = [p.offset_s for p in items if p.offset_s is not None]
    return {
        "requests": len(items),
        "input_tokens": length_stats([p.input_tokens for p in items]),
        "output_tokens": length_stats([p.output_tokens for p in items]),
        "input_length_source": maker.source,
        "arrivals": arrival_stats(offsets) if len(offsets) == len(items) else None,
        "prefix_sharing": prefix_sharing([p.prompt for p in items], maker),
        "prefix_groups": len({p.prefix_group for p in items if p.prefix_group is not None}),
    }
