"""The engine's own latencies against the client's, per run and per request.

Per run: the engine's histograms over the run (``histograms.describe_ms``) against the client's
samples of the same requests. The engine counts every request it served between the first and
the last scrape, warmup included, so the client side takes every ``ok`` record of the run,
warmup included. An engine stamps TTFT from the request's arrival in the engine to the first
token leaving the scheduler, so client minus engine is roughly the time outside the engine:
network, the HTTP server, tokenization and detokenization. The engine's percentiles are read from
buckets and are approximate; its mean (sum / count) is exact, so the mean difference is the
better estimate of that overhead.

Per request, when the server returns its own timing with the response (llama.cpp's ``timings``,
kept in ``RequestRecord.server_timing``): client TTFT minus the server's prompt time. In
llama.cpp ``prompt_ms`` is the prompt's processing alone, so the difference also holds the wait
for a free slot.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tokenpace.metrics import describe, e2e, itl_samples, tpot, ttft
from tokenpace.record import RequestRecord

_KEYS = ("count", "mean", "p50", "p90", "p99")


def engine_vs_client(engine_ms: dict[str, dict[str, Any] | None],
                     records: Iterable[RequestRecord]) -> dict[str, Any]:
    """{"ttft", "itl", "tpot", "e2e": {engine, client, mean_diff_ms, p50_diff_ms} for each the
    engine reports, "per_request": ... | None}."""
    ok = [r for r in records if r.status == "ok" and r.sent_ns is not None and not r.retried]
    client = {
        "ttft": lambda: [v for r in ok if (v := ttft(r)) is not None],
        "itl": lambda: [v for r in ok for v in itl_samples(r)],
        "tpot": lambda: [v for r in ok if (v := tpot(r)) is not None],
        "e2e": lambda: [v for r in ok if (v := e2e(r)) is not None],
    }
    out: dict[str, Any] = {}
    for name, samples in client.items():
        engine = engine_ms.get(name)
        if engine is None:
            continue
        mine = _brief(describe(samples()))
        out[name] = {
            "engine": engine, "client": mine,
            "mean_diff_ms": None if mine is None else mine["mean"] - engine["mean"],
            "p50_diff_ms": None if mine is None or engine.get("p50") is None else mine["p50"] - engine["p50"],
        }
    out["per_request"] = per_request(ok)
    return out


def per_request(records: list[RequestRecord]) -> dict[str, Any] | None:
    """Client TTFT minus the server's prompt time, request by request; None without timings."""
    pairs = [(t, r.server_timing) for r in records
             if r.server_timing and isinstance(r.server_timing.get("prompt_ms"), (int, float))
             and (t := ttft(r)) is not None]
    if not pairs:
        return None
    decode = []  # client TPOT minus the server's: predicted_ms over the gaps between its tokens
    for r in records:
        s = r.server_timing or {}
        n, ms, client_tpot = s.get("predicted_n"), s.get("predicted_ms"), tpot(r)
        if isinstance(n, (int, float)) and n > 1 and isinstance(ms, (int, float)) and client_tpot is not None:
            decode.append(client_tpot - ms / (n - 1))
    return {
        "requests": len(pairs),
        "source": "server timings (llama.cpp's `timings`)",
        "client_ttft_ms": _brief(describe([t for t, _ in pairs])),
        "server_prompt_ms": _brief(describe([s["prompt_ms"] for _, s in pairs])),
        "ttft_minus_prompt_ms": _brief(describe([t - s["prompt_ms"] for t, s in pairs])),
        "tpot_minus_server_ms": _brief(describe(decode)),
    }


def _brief(stats: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if stats is None else {k: stats[k] for k in (*_KEYS, "min", "max")}
