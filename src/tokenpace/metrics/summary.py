"""``summarize``: the whole summary of a run, a pure function of its records (docs/CONTRACTS.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from tokenpace.metrics.breakdowns import breakdowns
from tokenpace.metrics.chunk_scan import TableChunks
from tokenpace.metrics.columns import columns, columns_of_table
from tokenpace.metrics.cost import cost
from tokenpace.metrics.goodput import goodput
from tokenpace.metrics.latency import pooled_itl_and_chunk_gaps_ms
from tokenpace.metrics.ratings import ratings
from tokenpace.metrics.slo import SLO, parse_slo
from tokenpace.metrics.stats import copy_stats, describe
from tokenpace.metrics.tabular import breakdowns_of, counts_of, ok_views, token_sources_of, window_of
from tokenpace.metrics.throughput import completed_ok, throughput
from tokenpace.metrics.token_cost import TokenPrices, token_cost
from tokenpace.metrics.window import Window, measurement_window
from tokenpace.record import STATUSES, RequestRecord
from tokenpace.recordtable import RecordTable

# Requests above which a table that gives row blocks (a columnar file) is summarized by them
# (``summary_blocks``: the same figures, bounded memory).
ROW_BLOCKS_ABOVE = 1 << 20


def by_row_blocks(table: RecordTable) -> bool:
    """Is ``table`` read by row blocks (a long run's columnar file) rather than whole columns?
    What ``summarize``, the steady-state window and the load report all ask."""
    return table.row_blocks is not None and len(table) > ROW_BLOCKS_ABOVE

# The order of the latency_ms section (and of reports that follow it).
LATENCY_NAMES = ("ttft", "ttft_from_scheduled", "ttfc", "tpot", "itl", "chunk_gap", "e2e",
                 "e2e_from_scheduled", "schedule_lag")
_SERVER_SOURCES = frozenset({"usage", "chunk_usage"})


def summary_path(path: str) -> list[str]:
    """The keys of ``path`` inside a summary (a latency name stands for latency_ms.NAME)."""
    head, _, rest = path.partition(".")
    if head in LATENCY_NAMES:
        return ["latency_ms", head, rest] if rest else ["latency_ms", head]
    return path.split(".")


def figure_value(summary: dict[str, Any], path: str) -> float | None:
    """The number at ``path`` in a summary, or None when the run has none there."""
    node: Any = summary
    for key in summary_path(path):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        return None
    return float(node)


def summarize(records: Iterable[RequestRecord] | RecordTable, *, slo: SLO | str | None = None,
              gpu_hour_usd: float | None = None, gpus: int = 1,
              window: tuple[int, int] | Window | None = None,
              token_prices: TokenPrices | None = None) -> dict:
    """The JSON-ready summary of a run (shape in docs/CONTRACTS.md).

    Only measured records count (not warmup, actually sent). Latency statistics come from ``ok``
    records only: a failed request's partial timings describe the failure, not the service.
    Throughput and goodput count over the measurement window (``window``, or the default of
    ``tokenpace.metrics.window``); goodput counts errors, timeouts and cancellations as misses.
    ``slo`` may be an ``SLO`` or text for ``parse_slo``. Cost needs ``gpu_hour_usd``; the per-token
    cost (``token_cost``, split by cache use) needs ``token_prices``.
    Same records in the same order give the same summary. ``records`` may be a ``RecordTable``
    (the columnar records file): the same summary, computed on whole arrays (the cache-use split and
    the per-token cost, which only runs with cache-write counts or token prices have, from a small
    view of the ok rows); above ``ROW_BLOCKS_ABOVE`` requests of a columnar file, by row blocks
    (``summary_blocks``).
    """
    if isinstance(slo, str):
        slo = parse_slo(slo)
    if isinstance(records, RecordTable):
        table = records
        if by_row_blocks(table):
            # A long run from its columnar file: by row blocks, in memory that does not grow with it.
            from tokenpace.metrics.summary_blocks import summarize_blocks

            return summarize_blocks(table, slo=slo, gpu_hour_usd=gpu_hour_usd, gpus=gpus, window=window,
                                    token_prices=token_prices)
        measured_mask = table.measured
        measured_table = table.records_view(measured_mask)  # the chunks stay where they are; no copy
        cols = columns_of_table(table, measured_mask, selected=measured_table)
        span = window_of(cols, window)
        return _sections(cols, span, slo, gpu_hour_usd, gpus, counts=counts_of(table, measured_mask),
                         tokens=lambda: token_sources_of(measured_table),
                         breakdowns=lambda: breakdowns_of(measured_table, cols, token_prices),
                         token_prices=token_prices, priced=lambda: ok_views(measured_table))
    records = list(records)
    measured = [r for r in records if r.measured]
    span = measurement_window(measured, window)
    cols = columns(measured)
    return _sections(cols, span, slo, gpu_hour_usd, gpus, counts=counts(records, measured),
                     tokens=lambda: token_sources(measured),
                     breakdowns=lambda: breakdowns(measured, token_prices), token_prices=token_prices,
                     priced=lambda: [r for r in measured if r.status == "ok"])


def _sections(cols, span: Window, slo: SLO | None, gpu_hour_usd: float | None, gpus: int, *,
              counts: dict, tokens, breakdowns, token_prices: TokenPrices | None = None, priced=None) -> dict:
    # Each array handed to describe is a fresh one (owned): reordered in place, never copied.
    latency = {name: describe(values[cols.ok], owned=True) for name, values in cols.values_ms.items()}
    if isinstance(cols.chunks, TableChunks):  # block by block; described without holding them when many
        latency["itl"], latency["chunk_gap"] = cols.chunks.pooled_stats(cols.ok & cols.stream, window=span)
    else:
        itl, gaps = pooled_itl_and_chunk_gaps_ms(cols.chunks, cols.ok & cols.stream, window=span)
        same = gaps is itl
        latency["itl"] = describe(itl, owned=True)
        # With one token per chunk the two samples are identical: skip the second pass.
        latency["chunk_gap"] = copy_stats(latency["itl"]) if same else describe(gaps, owned=True)
        del itl, gaps
    latency = {name: latency[name] for name in LATENCY_NAMES}

    rates = throughput(cols, span)
    good = goodput(cols, slo, span) if slo is not None else None
    return document(counts, {**span.to_dict(), **inside(cols, span)}, latency, rates, good, gpu_hour_usd, gpus,
                    tokens(), breakdowns(),
                    token_cost(priced(), token_prices) if token_prices is not None else None)


def document(counts: dict, window: dict, latency: dict, rates: dict, good: dict | None, gpu_hour_usd: float | None,
             gpus: int, tokens: dict, breakdowns: dict, priced: dict | None) -> dict:
    """The summary's sections in their order (docs/CONTRACTS.md); ``priced``: the per-token cost,
    present only for a run priced per token. One shape for the whole-table and the row-block path."""
    return {
        "counts": counts,
        "window": window,
        "latency_ms": latency,
        "ratings": ratings(latency),
        "throughput": rates,
        "goodput": good,
        "cost": None if gpu_hour_usd is None else cost(
            gpu_hour_usd, gpus, rates["output_tokens_s"],
            good["output_tokens_s"] if good is not None else None),
        "tokens": tokens,
        "breakdowns": breakdowns,
        **({"token_cost": priced} if priced is not None else {}),
    }


def inside(cols, span: Window) -> dict:
    """How many measured requests fell inside the window: sent in it, completed ok in it, and in
    flight when it began and when it ended. Sent and completed count different requests: those in
    flight at its start (sent during a ramp, or a closed loop's first C - 1) complete inside it
    without having been sent inside it, so completions can outnumber sends. Every request is
    accounted for: in flight at the start + sent inside = ended inside (ok or not) + in flight at the end."""
    sent = cols.sent_ns >= 0
    if span.start_ns is None or span.end_ns is None:
        at_start = at_end = np.zeros(sent.shape, dtype=bool)
    else:
        open_ = ~cols.has_completion
        at_start = sent & (cols.sent_ns < span.start_ns) & (open_ | (cols.completion_ns >= span.start_ns))
        at_end = sent & (cols.sent_ns <= span.end_ns) & (open_ | (cols.completion_ns > span.end_ns))
    return {"requests_sent": int(span.contains_all(cols.sent_ns).sum()),
            "requests_completed": int(completed_ok(cols, span).sum()),
            "requests_in_flight_at_start": int(at_start.sum()),
            "requests_in_flight_at_end": int(at_end.sum())}


def judge_goodput(records: Iterable[RequestRecord], slo: SLO | str,
                  window: tuple[int, int] | Window | None = None) -> dict:
    """The summary's ``goodput`` section alone (the same numbers ``summarize`` gives for this SLO):
    cheap enough to judge one run against several SLOs."""
    return judge_goodputs(records, [slo], window)[0]


def judge_goodputs(records: Iterable[RequestRecord], slos: Sequence[SLO | str],
                   window: tuple[int, int] | Window | None = None) -> list[dict]:
    """``judge_goodput`` for several SLOs, the records' columns made once."""
    measured = [r for r in records if r.measured]
    cols, span = columns(measured), measurement_window(measured, window)
    return [goodput(cols, parse_slo(slo) if isinstance(slo, str) else slo, span) for slo in slos]


_MESSAGE_CHARS = 200  # of each first error message kept in the summary


def counts(records: Sequence[RequestRecord], measured: Sequence[RequestRecord]) -> dict:
    """Outcome counts; ``sent == ok + error + timeout + cancelled`` over measured records.

    ``errors_by_kind`` covers every measured record that is not ok, keyed by ``error_kind`` (its
    status when it has none). ``not_sent`` counts non-warmup records that were never sent. A
    status this version does not know is counted as an error. Requests count once, by their final
    attempt; ``retried_attempts`` counts the earlier attempts that failed and were retried, and
    ``retried_by_kind`` why. ``first_error_by_kind``: the first message of each kind (by request
    index, retried attempts included), so that a reader sees what the server said without the JSONL.
    """
    statuses = Counter(r.status if r.status in STATUSES else "error" for r in measured)
    by_kind = Counter(r.error_kind or str(r.status) for r in measured if r.status != "ok")
    retried = [r for r in records if r.retried and not r.warmup]
    return {
        "sent": len(measured),
        **{status: statuses.get(status, 0) for status in STATUSES},
        "warmup_excluded": sum(1 for r in records if r.warmup),
        "not_sent": sum(1 for r in records if not r.warmup and r.sent_ns is None),
        "errors_by_kind": dict(sorted(by_kind.items())),
        "retried_attempts": len(retried),
        "retried_by_kind": dict(sorted(Counter(r.error_kind or r.status for r in retried).items())),
        "first_error_by_kind": _first_messages([*retried, *(r for r in measured if r.status != "ok")]),
    }


def _first_messages(failed: Sequence[RequestRecord]) -> dict[str, str]:
    first: dict[str, str] = {}
    for r in sorted(failed, key=lambda r: (r.index, r.attempt)):
        kind = r.error_kind or str(r.status)
        if r.error_message and kind not in first:
            first[kind] = r.error_message[:_MESSAGE_CHARS]
    return dict(sorted(first.items()))


def token_sources(measured: Sequence[RequestRecord]) -> dict:
    """Where each token count came from, and how the server's output counts compare with the
    client's on the records that have both (server = ``usage`` or ``chunk_usage`` source)."""
    compared = [r for r in measured
                if r.output_tokens_source in _SERVER_SOURCES and r.output_tokens is not None
                and r.output_tokens_client is not None]
    return {
        "prompt_sources": _tally(r.prompt_tokens_source for r in measured),
        "output_sources": _tally(r.output_tokens_source for r in measured),
        "chunk_token_sources": _tally(r.chunk_tokens_source for r in measured),
        "mismatch": {
            "requests_compared": len(compared),
            "requests_mismatched": sum(1 for r in compared
                                       if r.output_tokens != r.output_tokens_client),
            "server_total": sum(r.output_tokens for r in compared),
            "client_total": sum(r.output_tokens_client for r in compared),
        },
        "input_mismatch": _input_mismatch(measured),
    }


def _input_mismatch(measured: Sequence[RequestRecord]) -> dict:
    """The server's prompt count against the length the client asked for (exact with a tokenizer,
    approximate without; a chat template adds the server's own tokens either way)."""
    both = [(r.prompt_tokens, r.requested_input_tokens) for r in measured
            if r.prompt_tokens_source in _SERVER_SOURCES and r.prompt_tokens is not None
            and r.requested_input_tokens is not None]
    diffs = [server - client for server, client in both]
    return {
        "requests_compared": len(both),
        "requests_mismatched": sum(1 for d in diffs if d != 0),
        "server_total": sum(server for server, _ in both),
        "client_total": sum(client for _, client in both),
        "mean_server_minus_client": (sum(diffs) / len(diffs)) if diffs else None,
    }


def _tally(sources: Iterable[str | None]) -> dict[str, int]:
    """Counts per source; an unknown source is tallied as "unknown"."""
    return dict(sorted(Counter(source or "unknown" for source in sources).items()))
