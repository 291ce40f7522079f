"""``proxy_overhead.py``'s analysis of one run: per-token delivery delays against the server's send
log, where a path's slowest tokens are, each request's way in, and ``_relay_hold.py``'s holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson


def delays_ms(results: list[dict], truth: dict) -> tuple[np.ndarray, int]:
    """Per token: arrival - send, ms; and how many requests had every token matched."""
    values, matched = [], 0
    for r in results:
        sent = truth.get(r["request_id"], [])
        if r["status"] == 200 and sent and len(sent) == len(r["token_ns"]):
            values += [(got - t) / 1e6 for got, t in zip(r["token_ns"], sent)]
            matched += 1
    return np.array(values), matched


def tail_where(results: list[dict], truth: dict, decode_ms: float) -> str:
    """Where a path's slowest 1% of tokens are: by position in their stream (first token, last
    token, the rest) and by whether other streams had just ended (their last token sent within one
    server step, ``decode_ms``, before this token's send: the moment their end work runs), against
    the same shares over all tokens. Says where a relay's tail comes from."""
    rows = []  # (delay ms, send ns, position)
    ends = []
    for r in results:
        sent = truth.get(r["request_id"], [])
        if r["status"] != 200 or not sent or len(sent) != len(r["token_ns"]):
            continue
        ends.append(sent[-1])
        last = len(sent) - 1
        for i, (got, t) in enumerate(zip(r["token_ns"], sent)):
            rows.append(((got - t) / 1e6, t, "first" if i == 0 else "last" if i == last else "middle"))
    if not rows:
        return "no tokens matched"
    ends_sorted = np.sort(np.array(ends))
    delay = np.array([d for d, _, _ in rows])
    send = np.array([t for _, t, _ in rows])
    pos = np.array([p for _, _, p in rows])
    step_ns = int(decode_ms * 1e6)
    # streams that ended within one step before this token was sent (its own end not counted)
    ended = np.searchsorted(ends_sorted, send, side="left") - np.searchsorted(ends_sorted, send - step_ns, side="left")
    after_ends = ended >= 10
    tail = delay >= np.percentile(delay, 99)

    def share(mask: np.ndarray, of: np.ndarray) -> str:
        return f"{(mask & of).sum() / max(of.sum(), 1) * 100:.0f}%"

    everyone = np.ones_like(tail)
    parts = [f"{name} {share(pos == name, tail)} (of all tokens {share(pos == name, everyone)})"
             for name in ("first", "middle", "last")]
    parts.append(f"sent within {decode_ms:g} ms after >= 10 other streams' last tokens {share(after_ends, tail)} "
                 f"(of all tokens {share(after_ends, everyone)})")
    by_position = ", ".join(f"{name} {np.percentile(delay[pos == name], 50):.2f} / "
                            f"{np.percentile(delay[pos == name], 99):.2f}" for name in ("first", "middle", "last")
                            if (pos == name).any())  # 2 tokens a stream: no middle
    return (f"delay p50 / p99 by position, ms: {by_position}; slowest 1% ({tail.sum()} tokens, >= "
            f"{np.percentile(delay, 99):.2f} ms): " + "; ".join(parts))


def hold_summary(path: Path) -> str:
    """p50 / p99 / max of a relay's holds (``_relay_hold.py``'s file), CPU time and wall time."""
    try:
        data = orjson.loads(path.read_bytes())
    except OSError:
        return "no file (the relay did not exit cleanly)"
    finally:
        path.unlink(missing_ok=True)
    parts = []
    for key, label in (("cpu_ns", "CPU"), ("wall_ns", "wall")):
        values = np.array(data[key]) / 1e6
        if not len(values):
            return "no reads"
        p50, p99, p999 = np.percentile(values, [50, 99, 99.9])
        parts.append(f"{label} p50 {p50:.3f} / p99 {p99:.3f} / p99.9 {p999:.3f} / max {values.max():.3f}")
    # Where in a round: rounds are bursts of reads apart by idle gaps; the first and last tenth of
    # each round's time hold the streams' starts and their ends.
    at, cpu = np.array(data["at_ns"]), np.array(data["cpu_ns"]) / 1e6
    part = np.empty(len(at), dtype=object)
    cuts = [0, *(np.nonzero(np.diff(at) > 500e6)[0] + 1), len(at)]
    for lo, hi in zip(cuts, cuts[1:]):
        t = (at[lo:hi] - at[lo]) / max(at[hi - 1] - at[lo], 1)
        part[lo:hi] = np.where(t < 0.1, "start", np.where(t > 0.9, "end", "middle"))
    where = ", ".join(f"{name} {np.percentile(cpu[part == name], 99):.3f}" for name in ("start", "middle", "end")
                      if (part == name).any())
    return f"{len(data['cpu_ns'])} reads; " + "; ".join(parts) + f"; CPU p99 by tenth of a round: {where}"


def request_side(results: list[dict], truth: dict, received: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per request: (client send -> the server's "received", client send -> first token's arrival), ms."""
    fwd, ttft = [], []
    for r in results:
        if r["status"] == 200 and r["token_ns"] and r["request_id"] in received:
            fwd.append((received[r["request_id"]] - r["sent_ns"]) / 1e6)
            ttft.append((r["token_ns"][0] - r["sent_ns"]) / 1e6)
    return np.array(fwd), np.array(ttft)


def itl_ms(results: list[dict]) -> np.ndarray:
    return np.array([(b - a) / 1e6 for r in results for a, b in zip(r["token_ns"], r["token_ns"][1:])])
