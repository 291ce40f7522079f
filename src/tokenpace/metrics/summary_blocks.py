"""``summarize`` of a long run by row blocks: the same summary, in memory that does not grow with
the number of requests.

A table read from a columnar file with its chunks on disk gives its rows as consecutive tables of
whole parts (``RecordTable.row_blocks``). Above ``summary.ROW_BLOCKS_ABOVE`` requests ``summarize`` reads
those, ``BLOCK_ROWS`` at a time, and never a whole column:

1. Without an explicit window, a first pass finds the default one (first send to last completion
   of the measured requests).
2. One pass computes every block's ``columns_of_table`` and adds up what each section counts:
   outcome counts and token sources (``block_sections``), throughput and goodput sums (the
   same sums ``throughput`` and ``goodput`` round), the window's in-flight counts. The latency
   percentiles of each per-request metric, and each goodput limit's attainment percentile, are
   selected exactly by ``order_stats.BlockDescriber`` (the pooled ITL's bucket select), the pooled
   ITL and chunk gaps by one ``chunk_scan.PooledDescriber`` fed every block's chunks.
3. Only when a describer's guess of where its ranks lie missed (latencies that drift through the
   run) a second pass reads the blocks again for the buckets it missed.

The figures equal the whole-table path's: percentiles, min, max, the p99 interval, counts and
verdicts exactly; means and standard deviations are the blocks' combined (``order_stats``), which
can differ from a one-array figure in the last digits, as can goodput's requests/s (a sum of
fractions); throughput sums are added block by block before they are rounded as ``throughput``
rounds them. Memory: a block's columns and chunks, each describer's bucket counts (8 MB) and the
samples of its kept buckets (each about 0.4% of a metric's samples: some 4 bytes a request in
all, the one part that grows with the run); nothing else per request, except TTFT by turn or
prefix group (16 bytes a grouped request) and, only for runs priced per token or reporting cache
writes, one small object per ok request (``tabular.ok_views``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from tokenpace.metrics.block_sections import Breakdowns, Counts, TokenSources, describer
from tokenpace.metrics.chunk_scan import PooledDescriber
from tokenpace.metrics.columns import Columns, columns_of_table
from tokenpace.metrics.goodput import goodput_of, goodput_sums
from tokenpace.metrics.latency import PER_REQUEST
from tokenpace.metrics.slo import SLO
from tokenpace.metrics.tabular import ok_views
from tokenpace.metrics.throughput import add_sums, throughput_of, throughput_sums
from tokenpace.metrics.token_cost import TokenPrices, token_cost
from tokenpace.metrics.window import Window, measurement_window
from tokenpace.recordtable import RecordTable

BLOCK_ROWS = 1 << 18


class _Block:
    """One row block's measured rows and their columns."""

    def __init__(self, table: RecordTable) -> None:
        self.table = table
        self.measured = table.measured
        self.rows = table.records_view(self.measured)  # the chunks stay where they are; no copy
        self.cols: Columns = columns_of_table(table, self.measured, selected=self.rows)


def summarize_blocks(table: RecordTable, *, slo: SLO | None, gpu_hour_usd: float | None, gpus: int,
                     window: tuple[int, int] | Window | None, token_prices: TokenPrices | None,
                     block_rows: int = BLOCK_ROWS) -> dict:
    """``summarize(table, ...)`` by ``table.row_blocks(block_rows)`` (module docstring)."""
    from tokenpace.metrics.summary import LATENCY_NAMES, document, inside

    def blocks() -> Iterator[_Block]:
        if not len(table):  # no part: the (empty) table itself, so that every section has its zeros
            yield _Block(table)
            return
        for block in table.row_blocks(block_rows):
            yield _Block(block)

    span = _window(table, window, block_rows)
    limits = tuple(slo.limits_ms()) if slo is not None else ()
    latency = {name: describer((slo.attainment,) if name in limits else ()) for name in PER_REQUEST}
    pooled = PooledDescriber()
    counts, tokens, breakdowns = Counts(), TokenSources(), Breakdowns()
    rates = good = None
    in_window: dict | None = None
    priced: list = []
    for block in blocks():
        cols = block.cols
        for name, d in latency.items():
            d.count(_finite(cols.values_ms[name][cols.ok]))
        cols.chunks.scan(window=span, itl_mask=cols.ok & cols.stream, described=pooled)
        counts.add(block.table, block.measured)
        tokens.add(block.rows)
        breakdowns.add(block.rows, cols)
        rates = add_sums(rates, throughput_sums(cols, span))
        in_window = add_sums(in_window, inside(cols, span))
        if slo is not None:
            good = add_sums(good, goodput_sums(cols, slo, span))
        if token_prices is not None:
            priced += ok_views(block.rows)

    # The second pass, only for the describers whose guess missed.
    missed = {name: d for name, d in latency.items() if d.settle() is not None}
    missed_breakdowns = {name: d for name, d in breakdowns.describers.items() if d.settle() is not None}
    if missed or missed_breakdowns:
        for block in blocks():
            cols = block.cols
            for name, d in missed.items():
                d.collect(_finite(cols.values_ms[name][cols.ok]))
            if missed_breakdowns:
                samples = breakdowns.samples(block.rows, cols)
                for name, d in missed_breakdowns.items():
                    d.collect(samples[name])
    itl, gaps = pooled.finish(_gap_blocks(blocks))

    stats = {name: d.result() for name, d in latency.items()}
    stats["itl"], stats["chunk_gap"] = itl, gaps
    stats = {name: stats[name] for name in LATENCY_NAMES}
    rates = throughput_of(rates or _NO_RATES, span)
    goodput = None
    if slo is not None:
        values = {metric: latency[metric].quantile(slo.attainment) for metric in limits}
        goodput = goodput_of(good or _NO_GOOD, slo, span, values)
    views = (lambda: priced) if token_prices is not None else (
        lambda: [view for block in blocks() for view in ok_views(block.rows)])
    return document(counts.result(), {**span.to_dict(), **(in_window or _NO_INSIDE)}, stats, rates, goodput,
                    gpu_hour_usd, gpus, tokens.result(), breakdowns.result(views, token_prices),
                    token_cost(priced, token_prices) if token_prices is not None else None)


_NO_RATES = {"output_tokens": 0, "input_tokens": 0.0, "cached_prompt_tokens": 0.0, "uncached_tokens": 0.0,
             "requests": 0.0}
_NO_GOOD = {"measured": 0, "good_requests": 0, "good_tokens": 0, "progress": 0.0}
_NO_INSIDE = {"requests_sent": 0, "requests_completed": 0, "requests_in_flight_at_start": 0,
              "requests_in_flight_at_end": 0}


def _finite(values: np.ndarray) -> np.ndarray:
    return values[~np.isnan(values)]


def _gap_blocks(blocks: Callable[[], Iterator[_Block]]):
    """Every row block's chunk blocks of its ok streamed rows, in order (a pooled describer's
    second pass)."""
    for block in blocks():
        cols = block.cols
        yield from cols.chunks.gap_blocks(cols.ok & cols.stream)


def _window(table: RecordTable, window: tuple[int, int] | Window | None, block_rows: int) -> Window:
    """``tabular.window_of`` over row blocks: an explicit window as it is, else the first send to
    the last completion of the measured requests (a pass that reads three columns of each block)."""
    if isinstance(window, Window) and (window.start_ns is None or window.end_ns is None):
        window = None
    if window is not None:
        return measurement_window([], window)
    start = end = None
    for block in table.row_blocks(block_rows):
        measured, ints, has = block.measured, block.ints, block.has
        sent = np.where(has("sent_ns"), ints["sent_ns"], -1)[measured]
        sent = sent[sent >= 0]
        completion = np.where(has("done_ns"), ints["done_ns"],
                              np.where(has("last_token_ns"), ints["last_token_ns"], ints["sent_ns"]))
        has_completion = has("done_ns") | has("last_token_ns") | has("sent_ns")
        ends = completion[measured & has_completion]
        if sent.size:
            start = int(sent.min()) if start is None else min(start, int(sent.min()))
        if ends.size:
            end = int(ends.max()) if end is None else max(end, int(ends.max()))
    if start is None or end is None:
        return Window(None, None)
    return Window(start, max(end, start))
