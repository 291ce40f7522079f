"""``proxy_overhead.py --probe``'s analysis: a relay's garbage collections, its event loop's long
turns and its bursts of reads (``_relay_probe.py``'s file), and which of them the path's slowest
tokens were delivered across."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

BURST_GAP_NS = 200_000  # reads closer than this belong to one burst (one server step's tokens)
LONG_TURN_NS = 2_000_000  # a tick gap this long (1 ms ticker): a turn of ~1 ms or more


def token_windows(results: list[dict], truth: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per matched token: (server send ns, client arrival ns)."""
    sends, arrivals = [], []
    for r in results:
        sent = truth.get(r["request_id"], [])
        if r["status"] == 200 and sent and len(sent) == len(r["token_ns"]):
            sends += sent
            arrivals += r["token_ns"]
    return np.array(sends, dtype=np.int64), np.array(arrivals, dtype=np.int64)


def _overlaps(lo: np.ndarray, hi: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each window [lo, hi]: does any interval [starts, ends] (sorted by start, not overlapping
    each other) overlap it."""
    if not len(starts):
        return np.zeros(len(lo), dtype=bool)
    i = np.searchsorted(starts, hi, side="right") - 1  # the last interval starting before the window ends
    ok = i >= 0
    out = np.zeros(len(lo), dtype=bool)
    out[ok] = ends[i[ok]] >= lo[ok]
    return out


def probe_summary(path: Path, results: list[dict], truth: dict) -> list[str]:
    try:
        data = orjson.loads(path.read_bytes())
    except OSError:
        return ["no probe file (the relay did not exit cleanly)"]
    finally:
        path.unlink(missing_ok=True)
    send, arrive = token_windows(results, truth)
    if not len(send):
        return ["no tokens matched"]
    lines = []
    t0, t1 = int(send.min()), int(arrive.max())  # the load's span; the rest is start-up and idle
    gcs = np.array([g for g in data["gc"] if t0 <= g[0] <= t1] or np.zeros((0, 4)), dtype=np.int64)
    by_gen = []
    for gen in (0, 1, 2):
        g = gcs[gcs[:, 2] == gen] if len(gcs) else gcs
        if len(g):
            ms = g[:, 1] / 1e6
            by_gen.append(f"gen{gen} {len(g)} (p50 {np.percentile(ms, 50):.2f} / max {ms.max():.2f} ms, "
                          f"freed {int(g[:, 3].sum())})")
        else:
            by_gen.append(f"gen{gen} 0")
    span_s = (t1 - t0) / 1e9
    total_ms = gcs[:, 1].sum() / 1e6 if len(gcs) else 0.0
    lines.append(f"garbage collections during the load ({span_s:.1f} s, thresholds {data.get('gc_threshold')}): "
                 + ", ".join(by_gen) + f"; {total_ms:.1f} ms in all")
    all_ticks = np.array(data["ticks"], dtype=np.int64)
    keep = (all_ticks >= t0) & (all_ticks <= t1)
    ticks, tick_cpu = all_ticks[keep], np.array(data["tick_cpu"], dtype=np.int64)[keep]
    long_start = long_end = off_start = off_end = np.zeros(0, dtype=np.int64)
    if len(ticks) > 1:
        gaps = np.diff(ticks)
        lag = np.maximum(gaps - 1_000_000, 0) / 1e6
        long = gaps > LONG_TURN_NS
        off = long & (np.diff(tick_cpu) < gaps / 2)  # less than half the gap on the CPU: not running
        p50, p99, p999 = np.percentile(lag, [50, 99, 99.9])
        lines.append(f"event loop lag (1 ms ticker, {len(gaps)} ticks; gap beyond 1 ms): p50 {p50:.2f}"
                     f" / p99 {p99:.2f} / p99.9 {p999:.2f} / max {lag.max():.2f} ms;"
                     f" gaps > 2 ms {int(long.sum())} (of which the relay was on the CPU less than half the gap: "
                     f"{int(off.sum())}), > 3 ms {int((gaps > 3e6).sum())}, > 5 ms {int((gaps > 5e6).sum())}")
        long_start, long_end = ticks[:-1][long], ticks[1:][long]
        off_start, off_end = ticks[:-1][off], ticks[1:][off]
    reads = np.array([t for t in data["reads"] if t0 <= t <= t1], dtype=np.int64)
    burst_of = np.zeros(0, dtype=np.int64)
    sizes = np.zeros(0, dtype=np.int64)
    if len(reads) > 1:
        cut = np.diff(reads) > BURST_GAP_NS
        burst_of = np.concatenate([[0], np.cumsum(cut)])
        sizes = np.bincount(burst_of)
        inside = np.diff(reads)[~cut] / 1e3
        lengths = np.array([reads[burst_of == b][-1] - reads[burst_of == b][0] for b in
                            np.nonzero(sizes >= np.percentile(sizes, 99))[0]]) / 1e6
        lines.append(f"bursts of reads (gap < {BURST_GAP_NS / 1e3:.0f} µs): {len(sizes)}; reads per burst p50 "
                     f"{np.percentile(sizes, 50):.0f} / p99 {np.percentile(sizes, 99):.0f} / max {sizes.max()}; "
                     f"time between reads in a burst p50 {np.percentile(inside, 50):.1f} / p99 "
                     f"{np.percentile(inside, 99):.1f} / max {inside.max():.0f} µs; the p99-size bursts last "
                     f"{np.median(lengths):.2f} ms (median)")
    delay = (arrive - send) / 1e6
    tail = delay >= np.percentile(delay, 99)
    order = np.argsort(gcs[:, 0]) if len(gcs) else np.zeros(0, dtype=np.int64)
    none = np.zeros(len(send), dtype=bool)
    in_gc = _overlaps(send, arrive, gcs[order, 0], gcs[order, 0] + gcs[order, 1]) if len(gcs) else none
    full = gcs[gcs[:, 2] == 2] if len(gcs) else gcs
    in_full = _overlaps(send, arrive, full[:, 0], full[:, 0] + full[:, 1]) if len(full) else none
    in_long = _overlaps(send, arrive, long_start, long_end)
    in_off = _overlaps(send, arrive, off_start, off_end)

    def share(mask: np.ndarray) -> str:
        return f"{mask[tail].mean() * 100:.0f}% (of all tokens {mask.mean() * 100:.1f}%)"

    parts = [f"across a collection {share(in_gc)}", f"across a full (gen2) one {share(in_full)}",
             f"across a tick gap > {LONG_TURN_NS / 1e6:.0f} ms {share(in_long)}",
             f"across one in which the relay was mostly off the CPU {share(in_off)}"]
    if len(reads) > 1:
        at = np.clip(np.searchsorted(reads, arrive, side="right") - 1, 0, len(reads) - 1)  # the read before arrival
        burst = sizes[burst_of[at]]
        parts.append(f"size of the burst its read was in: median {np.median(burst[tail]):.0f} (all tokens "
                     f"{np.median(burst):.0f}), p90 {np.percentile(burst[tail], 90):.0f} "
                     f"({np.percentile(burst, 90):.0f})")
    lines.append(f"its slowest 1% of tokens ({int(tail.sum())}, >= {np.percentile(delay, 99):.2f} ms), delivered "
                 + "; ".join(parts))
    return lines
