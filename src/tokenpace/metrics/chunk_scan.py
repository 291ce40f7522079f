"""The chunks of a ``RecordTable`` read block by block: everything the summary needs from them in one
pass, without a table of every chunk in memory.

What the summary reads from the chunks is small beside the chunks themselves: per record, its
chunk tokens in all and those inside the measurement window; and the pooled ITL and chunk-gap
samples. ``TableChunks`` computes them over ``RecordTable.chunk_blocks`` (256K chunks at a time, in
memory or from the columnar parts on disk; the blocks in two threads, ``block_map``), so a run of
10^8 chunks needs a few per-record arrays, never the chunk table (12 bytes per chunk) or a
per-chunk record index. The pooled samples of up to ``HELD_SAMPLES`` chunks are written straight
into one array (8 bytes each) and described; above, ``pooled_stats`` describes them block by block
(``order_stats``: exact percentiles, in one pass unless its guess of where they lie missed) without holding them. Definitions are those of
``metrics.chunks`` and ``metrics.latency`` (gaps between consecutive token-carrying chunks of one
record; a chunk of k tokens gives k ITL samples of gap / k): the same numbers, in the same order,
as ``ChunkTable`` gives for the same records (a property test holds them to it).
"""

from __future__ import annotations

import copy

import numpy as np

from tokenpace.metrics.block_map import ordered_map
from tokenpace.metrics.chunks import ChunkTable
from tokenpace.metrics.order_stats import BlockDescriber, share
from tokenpace.metrics.stats import copy_stats, describe
from tokenpace.metrics.window import Window
from tokenpace.recordtable import RecordTable

_NS_PER_MS = 1e6
# Above this many chunks the summary describes pooled samples block by block (``pooled_stats``).
HELD_SAMPLES = 1 << 22


def _segment_sums(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per segment ``[offsets[i], offsets[i+1])`` the sum of ``values`` (int64), by one cumsum."""
    total = np.zeros(values.size + 1, dtype=np.int64)
    np.cumsum(values, dtype=np.int64, out=total[1:])
    return total[offsets[1:]] - total[offsets[:-1]]


def _offsets(counts: np.ndarray) -> np.ndarray:
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


class TableChunks:
    """The chunks of the rows ``rows`` (a bool mask over ``table``'s rows) of ``table``, plus, for the
    rows set in ``one`` (a mask over the selected rows), one chunk at ``one_ns`` carrying
    ``one_tokens`` (``chunks.record_chunks``: a record with no chunk list but a last token and an
    output count). Results are per selected row, in order, and cached per window."""

    def __init__(self, table: RecordTable, rows: np.ndarray, one: np.ndarray, one_ns: np.ndarray,
                 one_tokens: np.ndarray):
        self.table, self.rows = table, rows
        self.one, self.one_ns, self.one_tokens = one, one_ns, one_tokens
        self._sums: dict = {}
        self._token_sum: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.one.size)

    def token_sum(self) -> np.ndarray:
        """Per selected row, the sum of its chunk list's tokens (int64; 0 without chunks)."""
        if self._token_sum is None:
            self.scan()
        return self._token_sum

    def window_tokens(self, window: Window) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per selected row (float64): its tokens, those of chunks inside ``window``, and those of
        token-carrying (tokens > 0) chunks inside ``window``."""
        key = (window.start_ns, window.end_ns)
        if key not in self._sums:
            self.scan(window=window)
        return self._sums[key]

    def pooled(self, record_mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``latency.pooled_itl_and_chunk_gaps_ms`` of the selected rows set in ``record_mask``."""
        return self.scan(itl_mask=np.ones(len(self), bool) if record_mask is None else record_mask)

    def histogram(self, origin_ns: int, edges_s: np.ndarray) -> np.ndarray:
        """Output tokens of the selected rows' chunks per time bin of the even ``edges_s`` (seconds
        from ``origin_ns``; ``np.histogram``'s bins: half-open, the last one closed), block by block."""
        bins = max(edges_s.size - 1, 0)
        out = np.zeros(bins)
        if not bins:
            return out
        width_ns, last_ns = float(edges_s[1] - edges_s[0]) * 1e9, float(edges_s[-1]) * 1e9

        def slot_of(ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            since = ns - origin_ns
            return (np.minimum((since / width_ns).astype(np.int64), bins - 1),
                    (since >= 0) & (since <= last_ns))

        def add(ns: np.ndarray, tokens: np.ndarray | None) -> None:
            slot, valid = slot_of(ns)
            weights = None if tokens is None else tokens[valid]
            out[:] += np.bincount(slot[valid], weights=weights, minlength=bins)[:bins]

        for row, counts, ns, tokens in self.table.chunk_blocks():
            rows = self.rows[row:row + counts.size]
            if not rows.all():
                keep = np.repeat(rows, counts)
                ns, tokens, counts = ns[keep], tokens[keep], counts[rows]
            if not ns.size:
                continue
            # A record's chunks mostly fall in one bin (a bin is 1/60 of the run): such a record adds
            # its tokens to that bin at once, judged by its earliest and latest chunk (the slot is
            # monotone in the time); only the chunks of records that straddle a bin edge are binned
            # one by one.
            offsets = _offsets(counts)
            chunked = counts > 0
            starts = offsets[:-1][chunked]
            (low, low_valid), (high, high_valid) = (slot_of(np.minimum.reduceat(ns, starts)),
                                                    slot_of(np.maximum.reduceat(ns, starts)))
            whole = low_valid & high_valid & (low == high)
            one_token = bool((tokens == 1).all())
            sums = counts[chunked] if one_token else _segment_sums(tokens, offsets)[chunked]
            out[:] += np.bincount(low[whole], weights=sums[whole], minlength=bins)[:bins]
            if not whole.all():
                straddle = np.zeros(counts.size, dtype=bool)
                straddle[np.flatnonzero(chunked)[~whole]] = True
                keep = np.repeat(straddle, counts)
                add(ns[keep], None if one_token else tokens[keep])
        if self.one.any():
            add(self.one_ns[self.one], self.one_tokens[self.one])
        return out

    def chunk_table(self, subset: np.ndarray | None = None) -> ChunkTable:
        """Every chunk of the selected rows (of those set in ``subset``, a mask over them, when
        given) in one ``ChunkTable``: small tables (tests) or a few rows of a large one (reports).
        Only those rows' chunks are read."""
        rows, one, one_ns, one_tokens = self.rows, self.one, self.one_ns, self.one_tokens
        if subset is not None:
            rows = np.zeros_like(self.rows)
            rows[np.flatnonzero(self.rows)[subset]] = True
            one = one[subset]
            if one.any():
                one_ns, one_tokens = one_ns[subset], one_tokens[subset]
        table = self.table.take(rows)
        if not one.any():  # every chunk is a real one: the table's own arrays
            record = np.repeat(np.arange(len(table), dtype=np.int64), table.chunk_count)
            return ChunkTable(record, table.chunk_ns, table.chunk_tokens.astype(np.int64))
        real = table.chunk_count > 0
        rows = table.chunk_count + one
        n = len(table)
        record = np.repeat(np.arange(n, dtype=np.int64), rows)
        from_real = np.repeat(real, rows)
        ns = np.empty(record.size, dtype=np.int64)
        tokens = np.empty(record.size, dtype=np.int64)
        ns[from_real], tokens[from_real] = table.chunk_ns, table.chunk_tokens
        ns[~from_real], tokens[~from_real] = one_ns[one], one_tokens[one]
        return ChunkTable(record, ns, tokens)

    def pooled_stats(self, record_mask: np.ndarray, window: Window | None = None
                     ) -> tuple[dict | None, dict | None]:
        """``stats.describe`` of ``pooled(record_mask)``'s ITL and chunk gaps (and the token sums of
        ``window`` in the same pass). Up to ``HELD_SAMPLES`` chunks the samples are held and
        described; above, ``order_stats`` describes them block by block (in the same pass; a second
        only when its guess missed), so the summary's memory does not grow with the run (8 bytes a
        token otherwise)."""
        full = np.zeros(len(self.table), dtype=bool)
        full[self.rows] = record_mask
        if int(self.table.chunk_count[full].sum()) <= HELD_SAMPLES:
            itl, gaps = self.scan(window=window, itl_mask=record_mask)
            same = gaps is itl
            itl_stats = describe(itl, owned=True)
            return itl_stats, copy_stats(itl_stats) if same else describe(gaps, owned=True)
        described = self.scan(window=window, itl_mask=record_mask, described=True)
        return described.finish(self._gap_blocks(full))

    def gap_blocks(self, record_mask: np.ndarray):
        """``_gap_blocks`` of the selected rows set in ``record_mask``: a summary by row blocks
        reads them again, block after block, when a pooled describer's guess missed."""
        full = np.zeros(len(self.table), dtype=bool)
        full[self.rows] = record_mask
        return self._gap_blocks(full)

    def _gap_blocks(self, full: np.ndarray):
        """The blocks with a row set in ``full``: (those rows, counts, stamps, tokens), in order."""
        for row, counts, ns, tokens in self.table.chunk_blocks():
            keep = full[row:row + counts.size]
            if keep.any():
                yield keep, counts, ns, tokens

    def scan(self, *, window: Window | None = None, itl_mask: np.ndarray | None = None,
             described: bool | PooledDescriber = False):
        """One pass over the chunk blocks: the token sums (and those of ``window``), and the pooled
        samples of the rows in ``itl_mask`` when given (returned; ``described``: described
        in the same pass instead, a ``PooledDescriber`` to ``finish``: a new one, or the one given,
        which a summary by row blocks hands every block's table in turn)."""
        table, rows = self.table, self.rows
        n_all = len(table)
        total = np.zeros(n_all, dtype=np.int64)
        done = np.zeros(n_all, dtype=np.int64) if window is not None else None
        carried = np.zeros(n_all, dtype=np.int64) if window is not None else None
        pooled = None
        if itl_mask is not None:
            full = np.zeros(n_all, dtype=bool)
            full[rows] = itl_mask
            pooled = (described if isinstance(described, PooledDescriber) else PooledDescriber() if described
                      else _Pooled(int(table.chunk_count[full].sum())))
        bounds = (None if window is None or window.start_ns is None or window.end_ns is None
                  else (window.start_ns, window.end_ns))

        def block(item):
            """One block's share: its rows' sums (written in place: blocks own disjoint rows), and
            what it gives the pooled samples (folded in block order below)."""
            row, counts, ns, tokens = item
            offsets = _offsets(counts)
            end = row + counts.size
            one_token = bool((tokens == 1).all())
            total[row:end] = counts if one_token else _segment_sums(tokens, offsets)
            if window is not None:
                # The usual case: a block wholly inside the window or wholly out, seen from its ends.
                low, high = (int(ns.min()), int(ns.max())) if ns.size else (0, -1)
                all_in = bounds is not None and ns.size > 0 and bounds[0] <= low and high <= bounds[1]
                if all_in or bounds is None or not ns.size or high < bounds[0] or low > bounds[1]:
                    done[row:end] = total[row:end] if all_in else 0
                    carried[row:end] = (total[row:end] if one_token else
                                        _segment_sums(np.maximum(tokens, 0), offsets)) if all_in else 0
                else:
                    inside = window.contains_all(ns)
                    if one_token:
                        done[row:end] = carried[row:end] = _segment_sums(inside, offsets)
                    else:
                        done[row:end] = _segment_sums(np.where(inside, tokens, 0), offsets)
                        carried[row:end] = _segment_sums(np.where(inside & (tokens > 0), tokens, 0), offsets)
            if pooled is None or not full[row:end].any():
                return None
            found = _block_gaps(full[row:end], counts, offsets, ns, tokens, one_token)
            return found if found is None or not described else pooled.share(*found)

        for part in ordered_map(block, table.chunk_blocks()):
            if part is not None:
                pooled.fold(part)
        self._token_sum = total[rows]
        if window is not None:
            inside_one = self.one & window.contains_all(self.one_ns)
            totals = np.where(self.one, self.one_tokens, self._token_sum).astype(np.float64)
            in_window = np.where(inside_one, self.one_tokens, done[rows]).astype(np.float64)
            carrying = np.where(inside_one, np.maximum(self.one_tokens, 0), carried[rows]).astype(np.float64)
            self._sums[(window.start_ns, window.end_ns)] = (totals, in_window, carrying)
        return pooled if described or pooled is None else pooled.result()


class _Pooled:
    """The pooled ITL and chunk-gap samples (ms), block by block, written into one array sized
    for every chunk of the rows asked for (pages never written are never touched)."""

    def __init__(self, chunks: int):
        self.gaps = np.empty(max(chunks, 0), dtype=np.float64)
        self.size = 0
        self.itl_parts: list[np.ndarray] | None = None  # only once a chunk carries more than one token

    def fold(self, found: tuple[np.ndarray, np.ndarray | None]) -> None:
        """A block's gaps and later-chunk tokens (``_block_gaps``), in block order."""
        gaps_ns, later = found
        at = self.size
        self.size += gaps_ns.size
        gaps = self.gaps[at:self.size]
        np.divide(gaps_ns, _NS_PER_MS, out=gaps)
        if later is not None and self.itl_parts is None:
            self.itl_parts = [self.gaps[:at]]  # every earlier sample was one token's
        if self.itl_parts is not None:
            self.itl_parts.append(gaps if later is None else _itl_ms(gaps_ns, later))

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        gaps = self.gaps[:self.size]
        if self.itl_parts is None:
            return gaps, gaps
        return np.concatenate(self.itl_parts), gaps


def _block_gaps(keep_rows: np.ndarray, counts: np.ndarray, offsets: np.ndarray, ns: np.ndarray,
                tokens: np.ndarray, one_token: bool) -> tuple[np.ndarray, np.ndarray | None] | None:
    """The gaps (int64 ns) between consecutive token-carrying chunks of the rows of one block set
    in ``keep_rows``, and the tokens of each gap's later chunk (None when each carries one); None
    when the block has no gap."""
    carrying = tokens > 0
    if not carrying.all():  # gaps run between token-carrying chunks only
        ns, tokens = ns[carrying], tokens[carrying]
        counts = _segment_sums(carrying, offsets)
        offsets = _offsets(counts)
    if ns.size < 2:
        return None
    keep = np.repeat(keep_rows, counts)[1:]  # the later chunk of each gap is of a row asked for
    starts = offsets[1:-1]
    starts = starts[(starts > 0) & (starts < ns.size)]
    keep[starts - 1] = False  # and not the first chunk of its row
    gaps_ns = np.diff(ns)[keep]
    later = None if one_token else tokens[1:][keep]
    return gaps_ns, None if later is None or (later == 1).all() else later


def _itl_ms(gaps_ns: np.ndarray, later: np.ndarray) -> np.ndarray:
    """One ITL sample per token of each gap's later chunk: the gap divided evenly over them."""
    return np.repeat(gaps_ns / later / _NS_PER_MS, later)


class PooledDescriber:
    """The pooled ITL and chunk-gap samples described (``order_stats.BlockDescriber``) instead of
    held, in the scan's one pass; a second pass over the same blocks (``TableChunks._gap_blocks``)
    only when a describer's guess of the buckets to keep missed. The chunk gaps get their own
    describer only from the first block whose ITL differs from them (a chunk of several tokens);
    until then the two were the same samples, and the describer is copied at that point."""

    def __init__(self) -> None:
        self.itl = BlockDescriber()
        self.gaps: BlockDescriber | None = None

    def share(self, gaps_ns: np.ndarray, later: np.ndarray | None):
        """A block's share (``_block_gaps``' output; in any thread): the ITL samples', and the chunk
        gaps' when they differ (None otherwise). Before the gaps have a describer of their own, their
        share carries the samples themselves (``fold`` picks them)."""
        gaps = gaps_ns / _NS_PER_MS
        if later is None:
            return self.itl.share(gaps), None
        own = self.gaps
        return self.itl.share(_itl_ms(gaps_ns, later)), (own.share(gaps) if own is not None
                                                         else share(gaps))

    def fold(self, shares) -> None:
        itl, gaps = shares
        if gaps is not None and self.gaps is None:
            self.gaps = copy.deepcopy(self.itl)  # every earlier block's gaps were its ITL samples
        self.itl.fold(itl)
        if self.gaps is not None:
            self.gaps.fold(itl if gaps is None else gaps)

    def finish(self, blocks) -> tuple[dict | None, dict | None]:
        """The results, after a second pass over ``blocks`` (``TableChunks._gap_blocks``: the blocks
        of the scan) for the describers whose guess missed."""
        itl_missed = self.itl.settle() is not None
        gaps_missed = self.gaps is not None and self.gaps.settle() is not None
        if itl_missed or gaps_missed:
            def picks(item):
                keep, counts, ns, tokens = item
                found = _block_gaps(keep, counts, _offsets(counts), ns, tokens, bool((tokens == 1).all()))
                if found is None:
                    return None, None
                gaps_ns, later = found
                gaps = gaps_ns / _NS_PER_MS
                itl = gaps if later is None else _itl_ms(gaps_ns, later)
                return (self.itl.pick(itl) if itl_missed else None), (self.gaps.pick(gaps) if gaps_missed else None)

            for itl, gaps in ordered_map(picks, blocks):
                self.itl.add_pick(itl)
                if gaps_missed:
                    self.gaps.add_pick(gaps)
        itl = self.itl.result()
        return itl, (self.gaps.result() if self.gaps is not None else copy_stats(itl))
