"""The sections of the summary that read more than latencies (counts, token sources, breakdowns,
the default window), computed on a ``RecordTable``'s arrays: the same numbers as the per-record
functions of ``summary`` and ``breakdowns`` give for the same records (a property test holds them
to it). Loops run over distinct values (statuses, error kinds, turns), never over requests.
"""

from __future__ import annotations

import numpy as np

from types import SimpleNamespace

from tokenpace.metrics.columns import Columns
from tokenpace.metrics.stats import describe
from tokenpace.metrics.token_cost import TokenPrices, cache_use
from tokenpace.metrics.window import Window, measurement_window
from tokenpace.record import STATUSES
from tokenpace.recordtable import NULL, RecordTable, Text

_SERVER_SOURCES = ("usage", "chunk_usage")
_MESSAGE_CHARS = 200


def window_of(cols: Columns, window: tuple[int, int] | Window | None) -> Window:
    """``measurement_window`` of the measured records in ``cols``."""
    if isinstance(window, Window) and (window.start_ns is None or window.end_ns is None):
        window = None  # no bounds: the default window, as measurement_window reads it
    if window is not None:
        return measurement_window([], window)  # an explicit window does not read the records
    starts = cols.sent_ns[cols.sent_ns >= 0]
    ends = cols.completion_ns[cols.has_completion]
    if not starts.size or not ends.size:
        return Window(None, None)
    start = int(starts.min())
    return Window(start, max(int(ends.max()), start))


def counts_of(table: RecordTable, measured: np.ndarray) -> dict:
    """``summary.counts`` of the records in ``table``; ``measured``: ``RecordTable.measured``."""
    status = table.texts["status"]
    m_status = status.codes[measured]
    known = {s: int((m_status == status.code_of(s)).sum()) for s in STATUSES}
    unknown = int(measured.sum()) - sum(known.values())
    known["error"] += unknown  # a status this version does not know counts as an error
    ok_code = status.code_of("ok")
    failed = measured & (status.codes != ok_code)
    retried = table.bools["retried"] & ~table.bools["warmup"]
    warmup = table.bools["warmup"]
    return {
        "sent": int(measured.sum()),
        **known,
        "warmup_excluded": int(warmup.sum()),
        "not_sent": int((~warmup & ~table.has("sent_ns")).sum()),
        "errors_by_kind": _tally_kinds(table, failed, str_status=True),
        "retried_attempts": int(retried.sum()),
        "retried_by_kind": _tally_kinds(table, retried, str_status=False),
        "first_error_by_kind": _first_messages(table, retried, failed),
    }


def _kinds(table: RecordTable, rows: np.ndarray, *, str_status: bool) -> list[object]:
    """``error_kind or status`` of each row (``str(status)`` when ``str_status``)."""
    kind, status = table.texts["error_kind"], table.texts["status"]
    if not rows.size:
        return []
    pairs = np.stack([kind.codes[rows], status.codes[rows]], axis=1)
    unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
    names = []
    for k, s in unique.tolist():
        value = kind.vocab[k] if k >= 0 else None
        if not value:
            value = status.vocab[s] if s >= 0 else None
            value = str(value) if str_status else value
        names.append(value)
    return [names[i] for i in np.asarray(inverse).reshape(-1).tolist()]


def _tally_kinds(table: RecordTable, mask: np.ndarray, *, str_status: bool) -> dict:
    out: dict = {}
    for name in _kinds(table, np.flatnonzero(mask), str_status=str_status):
        out[name] = out.get(name, 0) + 1
    return dict(sorted(out.items()))


def _first_messages(table: RecordTable, retried: np.ndarray, failed: np.ndarray) -> dict[str, str]:
    """The first message of each kind, by (index, attempt), retried attempts listed first."""
    message = table.texts["error_message"]
    has_message = np.array([bool(v) for v in message.vocab] + [False], dtype=bool)[message.codes]
    rows = np.concatenate([np.flatnonzero(retried & has_message), np.flatnonzero(failed & has_message)])
    order = rows[np.lexsort((table.ints["attempt"][rows], table.ints["index"][rows]))]
    first: dict[str, str] = {}
    kinds = _kinds(table, order, str_status=True)
    for row, kind in zip(order.tolist(), kinds):
        if kind not in first:
            first[kind] = message.vocab[message.codes[row]][:_MESSAGE_CHARS]
    return dict(sorted(first.items()))


def token_sources_of(measured: RecordTable) -> dict:
    """``summary.token_sources`` of a table of measured records."""
    t, has = measured.texts, measured.has
    out_server = _is_any(t["output_tokens_source"], _SERVER_SOURCES)
    compared = out_server & has("output_tokens") & has("output_tokens_client")
    server, client = measured.ints["output_tokens"][compared], measured.ints["output_tokens_client"][compared]
    both = _is_any(t["prompt_tokens_source"], _SERVER_SOURCES) & has("prompt_tokens") & has("requested_input_tokens")
    diffs = measured.ints["prompt_tokens"][both] - measured.ints["requested_input_tokens"][both]
    return {
        "prompt_sources": _tally(t["prompt_tokens_source"]),
        "output_sources": _tally(t["output_tokens_source"]),
        "chunk_token_sources": _tally(t["chunk_tokens_source"]),
        "mismatch": {
            "requests_compared": int(compared.sum()),
            "requests_mismatched": int((server != client).sum()),
            "server_total": int(server.sum()),
            "client_total": int(client.sum()),
        },
        "input_mismatch": {
            "requests_compared": int(both.sum()),
            "requests_mismatched": int((diffs != 0).sum()),
            "server_total": int(measured.ints["prompt_tokens"][both].sum()),
            "client_total": int(measured.ints["requested_input_tokens"][both].sum()),
            "mean_server_minus_client": (int(diffs.sum()) / diffs.size) if diffs.size else None,
        },
    }


def _is_any(text: Text, values: tuple[str, ...]) -> np.ndarray:
    return np.isin(text.codes, [text.code_of(v) for v in values])


def _tally(text: Text) -> dict[str, int]:
    """Counts per value; None or empty is tallied as "unknown"."""
    counts = np.bincount(text.codes + 1, minlength=len(text.vocab) + 1)
    out: dict[str, int] = {}
    for value, n in zip([None, *text.vocab], counts.tolist()):
        if n:
            key = value or "unknown"
            out[key] = out.get(key, 0) + n
    return dict(sorted(out.items()))


def ok_views(measured: RecordTable) -> list[SimpleNamespace]:
    """The ok rows as light objects with the fields the cache-use split and token prices read
    (token counts, sent and first-token stamps): only runs that report cache writes or are priced
    per token need them, one small object per ok request."""
    ok = measured.status_is("ok")
    names = ("prompt_tokens", "cached_prompt_tokens", "cache_write_prompt_tokens", "output_tokens",
             "sent_ns", "first_token_ns")
    columns = [[None if v == NULL else v for v in measured.ints[name][ok].tolist()] for name in names]
    return [SimpleNamespace(status="ok", **dict(zip(names, row))) for row in zip(*columns)]


def breakdowns_of(measured: RecordTable, cols: Columns, prices: TokenPrices | None = None) -> dict:
    """``breakdowns.breakdowns`` of a table of measured records (``cols``: its columns)."""
    ok = measured.status_is("ok")
    ttft = cols.values_ms["ttft"]
    has_ttft = ok & ~np.isnan(ttft)
    ints, has = measured.ints, measured.has
    out: dict = {}
    known = ok & has("cached_prompt_tokens")
    if known.any():
        cached = ints["cached_prompt_tokens"]
        hits, misses = ttft[known & (cached > 0) & has_ttft], ttft[known & (cached == 0) & has_ttft]
        out["ttft_by_cache_ms"] = {"hits": describe(hits), "misses": describe(misses),
                                   "hit_requests": int(hits.size), "miss_requests": int(misses.size),
                                   "cached_prompt_tokens": int(cached[known].sum())}
    if (ok & measured.has("cache_write_prompt_tokens")).any():  # only Anthropic's API reports writes
        use = cache_use(ok_views(measured), prices)
        if use is not None:
            out["cache_use"] = use
    for key, name in (("turn", "ttft_by_turn_ms"), ("prefix_group", "ttft_by_prefix_group_ms")):
        groups = _ttft_by(ints[key], ttft, has_ttft & has(key))
        if groups:
            out[name] = groups
    tool = ok & has("first_tool_call_ns") & has("sent_ns")
    if tool.any():
        out["time_to_first_tool_call_ms"] = describe((ints["first_tool_call_ns"][tool] - ints["sent_ns"][tool]) / 1e6)
        out["tool_call_requests"] = int(tool.sum())
    reasoning = ok & has("reasoning_tokens") & (ints["reasoning_tokens"] != 0)
    if reasoning.any():
        out["reasoning_tokens"] = {"requests": int(reasoning.sum()),
                                   "total": int(ints["reasoning_tokens"][reasoning].sum())}
    return out


def _ttft_by(keys: np.ndarray, ttft: np.ndarray, mask: np.ndarray) -> dict[str, dict]:
    keys, values = keys[mask], ttft[mask]
    order = np.argsort(keys, kind="stable")  # record order within a group
    keys, values = keys[order], values[order]
    unique, starts = np.unique(keys, return_index=True)
    bounds = [*starts.tolist(), keys.size]
    return {str(k): describe(values[bounds[i]:bounds[i + 1]]) for i, k in enumerate(unique.tolist())}


__all__ = ["NULL", "breakdowns_of", "counts_of", "token_sources_of", "window_of"]
