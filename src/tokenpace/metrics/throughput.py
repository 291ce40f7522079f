"""Throughput over the measurement window: output, input and total tokens/s and requests/s.

The counting rules are stated in ``Window.definition`` (and so in every summary): output tokens
by chunk arrival inside the window, whatever became of the request; requests and input tokens by
ok completion inside the window.
"""

from __future__ import annotations

import numpy as np

from tokenpace.metrics.chunks import ChunkTable
from tokenpace.metrics.columns import Columns
from tokenpace.metrics.window import Window


def output_tokens_in_window(table: ChunkTable, window: Window) -> int:
    """Output tokens carried by chunks that arrived inside ``window``."""
    inside = window.contains_all(table.ns) & (table.tokens > 0)
    return int(table.tokens[inside].sum())


def completed_ok(cols: Columns, window: Window) -> np.ndarray:
    """Per record: status ok and completed (``completion_ns``) inside ``window``."""
    return cols.ok & cols.has_completion & window.contains_all(cols.completion_ns)


def throughput(cols: Columns, window: Window) -> dict:
    """The summary's ``throughput`` section."""
    completed = completed_ok(cols, window)
    output_tokens = output_tokens_in_window(cols.chunks, window)
    prompt = cols.prompt_tokens[completed]
    cached = cols.cached_prompt_tokens[completed]
    input_tokens = int(prompt.sum())
    cached_tokens = int(cached.sum())
    # Per request, so that a record claiming more cached than prompt tokens cannot go negative.
    uncached_tokens = int(np.maximum(prompt - cached, 0).sum())
    requests = int(completed.sum())
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
