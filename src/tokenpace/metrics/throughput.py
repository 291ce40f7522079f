"""Throughput over the measurement window: output, input and total tokens/s and requests/s.

The counting rules are stated in ``Window.definition`` (and so in every summary): output tokens
by chunk arrival inside the window, whatever became of the request; requests (and their input
tokens) by progress inside the window: an ok request counts as the fraction of its output tokens
that arrived inside the window (one without output tokens counts whole when it completed inside).

Why progress and not completions: a window that cuts off the ramp-up and the drain starts with
requests in flight and ends with others in flight. Counting only completions misses the first
latency's worth of the window (nothing completes yet) and makes requests/s of a steady-state
window fall short whenever a request takes a sizeable part of it (at saturation, 14 s requests in a
28 s window count as half the true rate). Counted by progress, a steady run gives the same rate
over any window, and over the default window (every request's tokens inside) it is the
completion count.
"""

from __future__ import annotations

import numpy as np

from tokenpace.metrics.chunk_scan import TableChunks
from tokenpace.metrics.chunks import ChunkTable
from tokenpace.metrics.columns import Columns
from tokenpace.metrics.window import Window


def output_tokens_in_window(table: ChunkTable, window: Window) -> int:
    """Output tokens carried by chunks that arrived inside ``window``."""
    inside = window.contains_all(table.ns) & (table.tokens > 0)
    return int(table.tokens[inside].sum())


def window_output_tokens(cols: Columns, window: Window, mask: np.ndarray | None = None) -> int:
    """``output_tokens_in_window`` of the records' chunks (of those set in ``mask`` when given)."""
    if isinstance(cols.chunks, TableChunks):  # per-record sums from one pass over the chunk blocks
        carried = cols.chunks.window_tokens(window)[2]
        return int(carried.sum() if mask is None else carried[mask].sum())
    return output_tokens_in_window(cols.chunks if mask is None else cols.chunks.rows_of(mask), window)


def completed_ok(cols: Columns, window: Window) -> np.ndarray:
    """Per record: status ok and completed (``completion_ns``) inside ``window``."""
    return cols.ok & cols.has_completion & window.contains_all(cols.completion_ns)


def progress_in_window(cols: Columns, window: Window, mask: np.ndarray | None = None) -> np.ndarray:
    """Per record, the part of it done inside ``window`` (module docstring): its output tokens
    that arrived inside over all its output tokens; for an ok record without output tokens, 1
    when it completed inside. 0 for records that are not ok (or not in ``mask``)."""
    total, done = _tokens_per_record(cols, window)
    with np.errstate(divide="ignore", invalid="ignore"):
        part = np.where(total > 0, done / np.where(total > 0, total, 1), 0.0)
    whole = completed_ok(cols, window) & (total <= 0)
    part = np.where(whole, 1.0, part)
    keep = cols.ok if mask is None else cols.ok & mask
    return np.where(keep, part, 0.0)


def _tokens_per_record(cols: Columns, window: Window) -> tuple[np.ndarray, np.ndarray]:
    """Per record: its output tokens, and those that arrived inside ``window`` (float64). Counted
    once per (columns, window): throughput and goodput both read them."""
    key = (window.start_ns, window.end_ns)
    cached = cols.cache.get(("tokens", key))
    if cached is None and isinstance(cols.chunks, TableChunks):
        cached = cols.cache[("tokens", key)] = cols.chunks.window_tokens(window)[:2]
    if cached is None:
        n, table = len(cols), cols.chunks
        inside = window.contains_all(table.ns)
        if (table.tokens == 1).all():  # one token per chunk: counts, without a float copy of them
            total = np.bincount(table.record, minlength=n).astype(np.float64)
            done = np.bincount(table.record[inside], minlength=n).astype(np.float64)
        else:
            total = np.bincount(table.record, weights=table.tokens, minlength=n)
            done = np.bincount(table.record[inside], weights=table.tokens[inside], minlength=n)
        cached = cols.cache[("tokens", key)] = (total, done)
    return cached


def throughput(cols: Columns, window: Window) -> dict:
    """The summary's ``throughput`` section."""
    return throughput_of(throughput_sums(cols, window), window)


def throughput_sums(cols: Columns, window: Window) -> dict:
    """What ``throughput`` counts, before it is rounded: sums a summary by row blocks adds up
    (``add_sums``) and hands to ``throughput_of``."""
    part = progress_in_window(cols, window)
    prompt, cached = cols.prompt_tokens, cols.cached_prompt_tokens
    return {"output_tokens": window_output_tokens(cols, window),
            "input_tokens": float(part @ prompt), "cached_prompt_tokens": float(part @ cached),
            # Per request, so that a record claiming more cached than prompt tokens cannot go negative.
            "uncached_tokens": float(part @ np.maximum(prompt - cached, 0)),
            "requests": float(part.sum())}


def add_sums(total: dict | None, more: dict) -> dict:
    """Two blocks' ``throughput_sums`` added (in block order)."""
    return dict(more) if total is None else {k: total[k] + more[k] for k in total}


def throughput_of(sums: dict, window: Window) -> dict:
    """The ``throughput`` section from its ``throughput_sums``."""
    output_tokens = sums["output_tokens"]
    input_tokens = _whole(sums["input_tokens"])
    cached_tokens = _whole(sums["cached_prompt_tokens"])
    uncached_tokens = _whole(sums["uncached_tokens"])
    requests = _whole(sums["requests"], 3)
    return {
        "output_tokens_s": window.rate(output_tokens),
        "input_tokens_s": window.rate(input_tokens),
        "total_tokens_s": window.rate(input_tokens + output_tokens),
        "requests_s": window.rate(requests),
        "cached_prompt_tokens_s": window.rate(cached_tokens),
        "uncached_input_tokens_s": window.rate(uncached_tokens),
        "output_tokens": output_tokens,
        "input_tokens": input_tokens,
        "cached_prompt_tokens": cached_tokens,
        "requests": requests,
    }


def _whole(value: float, digits: int = 0) -> int | float:
    """A weighted count, rounded: tokens to whole ones, requests to 3 decimals (exact when every
    request is wholly inside the window)."""
    rounded = round(float(value), digits)
    return int(rounded) if digits == 0 or rounded == int(rounded) else rounded
