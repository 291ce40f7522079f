"""The summary's sections that count (counts, token sources, breakdowns) added up over row blocks
of a run (``summary_blocks``): each block's figures from ``tabular``'s functions, combined so that
the whole equals what those functions give for the whole run.

- Counts and tallies add up; each kind's first error message is the one with the least key
  (request index, attempt, retried before failed, row), the order ``tabular`` sorts by.
- Token sources add up; the mean server-minus-client prompt count is the difference of the
  totals over the compared requests (integers, so exact).
- Breakdowns: the TTFT of cache hits and misses and the time to the first tool call are
  described block by block (``order_stats.BlockDescriber``: exact percentiles, the mean and the
  standard deviation combined from the blocks'); counts and token totals add up. TTFT by turn
  and by prefix group keep each grouped request's key and TTFT (16 bytes a request; the groups are
  as many as the run has) and are described at the end as ``tabular`` does. The cache-use split
  (runs that report cache writes) reads the ok requests again at the end (``views``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tokenpace.metrics.columns import Columns
from tokenpace.metrics.order_stats import BlockDescriber
from tokenpace.metrics.tabular import _MESSAGE_CHARS, _kinds, _ttft_by, counts_of, token_sources_of
from tokenpace.metrics.token_cost import TokenPrices, cache_use
from tokenpace.recordtable import RecordTable

WARM = 1 << 18  # samples a per-request describer holds before it guesses its buckets (2 MB)


def describer(quantiles: tuple[float, ...] = ()) -> BlockDescriber:
    return BlockDescriber(WARM, quantiles)


class Counts:
    """``summary.counts`` over row blocks."""

    def __init__(self) -> None:
        self.sums: dict | None = None
        self.first: dict = {}  # kind -> (key, message)
        self.row = 0

    def add(self, table: RecordTable, measured: np.ndarray) -> None:
        block = counts_of(table, measured)
        first = _first_keyed(table, self.row, measured)
        self.row += len(table)
        for kind, (key, message) in first.items():
            if kind not in self.first or key < self.first[kind][0]:
                self.first[kind] = (key, message)
        if self.sums is None:
            self.sums = block
            return
        for name, value in block.items():
            if name in ("errors_by_kind", "retried_by_kind"):
                self.sums[name] = _add_tallies(self.sums[name], value)
            elif name != "first_error_by_kind":
                self.sums[name] += value

    def result(self) -> dict:
        out = dict(self.sums)
        out["first_error_by_kind"] = dict(sorted((k, m) for k, (_, m) in self.first.items()))
        return out


def _first_keyed(table: RecordTable, first_row: int, measured: np.ndarray) -> dict:
    """Per kind, the first error message of the block and its key (index, attempt, 0 for a retried
    attempt or 1 for a failed request, row in the run): ``tabular._first_messages``' order."""
    status, message = table.texts["status"], table.texts["error_message"]
    failed = measured & (status.codes != status.code_of("ok"))
    retried = table.bools["retried"] & ~table.bools["warmup"]
    has_message = np.array([bool(v) for v in message.vocab] + [False], dtype=bool)[message.codes]
    out: dict = {}
    for group, mask in ((0, retried & has_message), (1, failed & has_message)):
        rows = np.flatnonzero(mask)
        index, attempt = table.ints["index"][rows].tolist(), table.ints["attempt"][rows].tolist()
        for i, row, kind in zip(range(rows.size), rows.tolist(), _kinds(table, rows, str_status=True)):
            key = (index[i], attempt[i], group, first_row + row)
            if kind not in out or key < out[kind][0]:
                out[kind] = (key, message.vocab[message.codes[row]][:_MESSAGE_CHARS])
    return out


def _add_tallies(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))


class TokenSources:
    """``summary.token_sources`` over row blocks."""

    def __init__(self) -> None:
        self.sums: dict | None = None

    def add(self, measured: RecordTable) -> None:
        block = token_sources_of(measured)
        if self.sums is None:
            self.sums = block
            return
        for name in ("prompt_sources", "output_sources", "chunk_token_sources"):
            self.sums[name] = _add_tallies(self.sums[name], block[name])
        for name in ("mismatch", "input_mismatch"):
            for k in ("requests_compared", "requests_mismatched", "server_total", "client_total"):
                self.sums[name][k] += block[name][k]

    def result(self) -> dict:
        out = self.sums
        both = out["input_mismatch"]
        compared = both["requests_compared"]
        both["mean_server_minus_client"] = ((both["server_total"] - both["client_total"]) / compared
                                            if compared else None)
        return out


class Breakdowns:
    """``tabular.breakdowns_of`` over row blocks (module docstring). Its describers (``describers``)
    are counted by ``add``; when one's guess missed, the summary reads the blocks again and gives
    each block's ``samples`` to it."""

    def __init__(self) -> None:
        self.describers = {"hits": describer(), "misses": describer(), "tool": describer()}
        self.known = self.writes = False
        self.hit_n = self.miss_n = self.cached = self.tool_n = self.reasoning_n = self.reasoning_total = 0
        self.groups: dict[str, tuple[list, list]] = {"turn": ([], []), "prefix_group": ([], [])}

    @staticmethod
    def samples(measured: RecordTable, cols: Columns) -> dict[str, np.ndarray]:
        """The block's TTFT of cache hits and of misses, and its times to the first tool call (ms)."""
        ok = measured.status_is("ok")
        ttft = cols.values_ms["ttft"]
        has_ttft = ok & ~np.isnan(ttft)
        ints, has = measured.ints, measured.has
        known = ok & has("cached_prompt_tokens")
        cached = ints["cached_prompt_tokens"]
        tool = ok & has("first_tool_call_ns") & has("sent_ns")
        return {"hits": ttft[known & (cached > 0) & has_ttft], "misses": ttft[known & (cached == 0) & has_ttft],
                "tool": (ints["first_tool_call_ns"][tool] - ints["sent_ns"][tool]) / 1e6}

    def add(self, measured: RecordTable, cols: Columns) -> None:
        ok = measured.status_is("ok")
        ttft = cols.values_ms["ttft"]
        has_ttft = ok & ~np.isnan(ttft)
        ints, has = measured.ints, measured.has
        samples = self.samples(measured, cols)
        for name, values in samples.items():
            self.describers[name].count(values)
        known = ok & has("cached_prompt_tokens")
        if known.any():
            self.known = True
            self.hit_n += int(samples["hits"].size)
            self.miss_n += int(samples["misses"].size)
            self.cached += int(ints["cached_prompt_tokens"][known].sum())
        self.writes |= bool((ok & has("cache_write_prompt_tokens")).any())
        for key, (keys, values) in self.groups.items():
            mask = has_ttft & has(key)
            if mask.any():
                keys.append(ints[key][mask])
                values.append(ttft[mask])
        self.tool_n += int(samples["tool"].size)
        reasoning = ok & has("reasoning_tokens") & (ints["reasoning_tokens"] != 0)
        self.reasoning_n += int(reasoning.sum())
        self.reasoning_total += int(ints["reasoning_tokens"][reasoning].sum())

    def result(self, views: Callable[[], list], prices: TokenPrices | None) -> dict:
        """After the describers settled (and collected, when one missed). ``views``: every block's
        ``tabular.ok_views``, read only when a request reported cache writes."""
        out: dict = {}
        d = self.describers
        if self.known:
            out["ttft_by_cache_ms"] = {"hits": d["hits"].result(), "misses": d["misses"].result(),
                                       "hit_requests": self.hit_n, "miss_requests": self.miss_n,
                                       "cached_prompt_tokens": self.cached}
        if self.writes:  # only Anthropic's API reports writes
            use = cache_use(views(), prices)
            if use is not None:
                out["cache_use"] = use
        for key, name in (("turn", "ttft_by_turn_ms"), ("prefix_group", "ttft_by_prefix_group_ms")):
            keys, values = self.groups[key]
            if keys:
                k, v = np.concatenate(keys), np.concatenate(values)
                groups = _ttft_by(k, v, np.ones(k.size, dtype=bool))
                if groups:
                    out[name] = groups
        if self.tool_n:
            out["time_to_first_tool_call_ms"] = d["tool"].result()
            out["tool_call_requests"] = self.tool_n
        if self.reasoning_n:
            out["reasoning_tokens"] = {"requests": self.reasoning_n, "total": self.reasoning_total}
        return out
