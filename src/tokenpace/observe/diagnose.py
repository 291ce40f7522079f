"""A diagnosis in plain words, from the scraped series: a few documented rules, each a pure
function of the run's peaks, totals and the engine-vs-client comparison (README, "Engine metrics").

The queue rules are exclusive (the first that applies wins): memory-bound, compute-bound, queue
built up (KV usage unknown), brief queueing, no queueing. The others add to them.

Brief queueing needs requests seen waiting in at least ``QUEUE_BRIEF`` (5%) of the scrapes taken
during the load, not in one scrape now and then. A request that arrives while the engine runs a
step waits in the queue until the next step admits it (one step: milliseconds, or a long prefill),
so even at concurrency 1 a scrape that lands in that moment reads 1 waiting; it does so with a
probability of about the step time over the time between arrivals, a few scrapes in a hundred (the
built-in server at concurrency 1: 1 in about 100). A burst of arrivals reads several waiting the
same way, all admitted by the next step. That is admission, not a queue: what tells a queue apart
is that it persists from scrape to scrape, so the rule counts scrapes and not the peak.
"""

from __future__ import annotations

from typing import Any

QUEUE_SUSTAINED = 0.25  # a queue "built up" when requests waited in at least this share of scrapes
QUEUE_BRIEF = 0.05  # requests seen waiting in fewer scrapes than this: admission, not a queue
KV_FULL = 0.90  # KV usage at or above this is "full"
KV_LOW = 0.70  # below this it is "low" (wording only)
PREFIX_HIT_LOW = 0.25  # prefix-cache hit rate below this is low for a workload that shares prefixes
SPEC_ACCEPT_LOW = 0.5  # draft-token acceptance below this wastes most verification work
OUTSIDE_MS = 50.0  # client TTFT above the engine's by more than this (and OUTSIDE_SHARE of it)...
OUTSIDE_SHARE = 0.25  # ...is time spent outside the engine worth naming


def diagnose(peaks: dict[str, dict[str, float]], totals: dict[str, Any], *,
             prefix_shared: bool | None = None, ttft: dict[str, Any] | None = None,
             points_in_load: int | None = None) -> list[dict[str, str]]:
    """Findings ``{"rule", "message"}``, most important first. ``prefix_shared``: whether the
    workload's prompts share prefixes (None: unknown, so the prefix rule stays silent); ``ttft``:
    the engine-vs-client TTFT comparison (``compare.engine_vs_client(...)["ttft"]``);
    ``points_in_load``: scrapes taken while the load ran (0: the gauges saw none of it)."""
    if points_in_load == 0:
        return [_finding("no_scrape_during_load", "no scrape fell inside the load (it was shorter than "
                         "the scrape interval): nothing to diagnose; use a shorter --scrape-interval")]
    findings = []
    queue = _queue_rule(peaks, totals)
    if queue:
        findings.append(queue)
    for rule in (_prefix_rule(peaks, totals, prefix_shared), _spec_rule(peaks, totals), _outside_rule(ttft)):
        if rule:
            findings.append(rule)
    return findings


def _finding(rule: str, message: str) -> dict[str, str]:
    return {"rule": rule, "message": message}


def _queue_rule(peaks: dict[str, dict[str, float]], totals: dict[str, Any]) -> dict[str, str] | None:
    waiting, kv = peaks.get("waiting"), peaks.get("kv_usage")
    preemptions = totals.get("preemptions") or 0
    kv_peak = None if kv is None else kv["max"]
    sustained = waiting is not None and waiting["queued_fraction"] >= QUEUE_SUSTAINED
    if preemptions > 0 or (sustained and kv_peak is not None and kv_peak >= KV_FULL):
        what = [f"KV cache {'full' if kv_peak is not None and kv_peak >= KV_FULL else 'under pressure'}"
                + (f" (peak {_pct(kv_peak)})" if kv_peak is not None else "")]
        if preemptions:
            what.append(f"{preemptions:g} preemptions")
        if sustained:
            what.append(f"requests queued (peak {waiting['max']:g} waiting)")
        return _finding("memory_bound", " and ".join(what) + ": memory-bound; quantize the weights or the "
                        "KV cache (fp8), shorten contexts, lower max-num-seqs, or add GPUs")
    if waiting is None:
        return None
    queued = f"peak {waiting['max']:g} waiting, in {_share(waiting['queued_fraction'])} of the scrapes"
    if sustained and kv_peak is not None:
        level = "low" if kv_peak < KV_LOW else "below full"
        return _finding("compute_bound", f"queue built up ({queued}) while KV usage stayed {level} (peak "
                        f"{_pct(kv_peak)}): compute-bound or capped by the batch limit, not by memory; "
                        "add batching capacity (max-num-seqs, max-num-batched-tokens) or replicas")
    if sustained:
        return _finding("queue_built_up", f"queue built up ({queued}); the engine does not expose KV "
                        "usage, so whether memory or compute limits it is unknown; add capacity "
                        "(batch size or slots, e.g. llama.cpp --parallel) or replicas")
    if waiting["queued_fraction"] >= QUEUE_BRIEF:
        return _finding("brief_queueing", f"brief queueing ({queued}): the load is near the engine's capacity")
    running = peaks.get("running")
    seen = [f"peak {running['max']:g} running"] if running else []
    if waiting["max"] >= 1:
        seen.append(f"requests waited for admission to the next step in {_share(waiting['queued_fraction'])} "
                    f"of the scrapes, peak {waiting['max']:g}")
    return _finding("no_queueing", "no queueing: the engine kept up" + (f" ({'; '.join(seen)})" if seen else ""))


def _share(fraction: float) -> str:
    return "under 1%" if 0 < fraction < 0.005 else f"{fraction:.0%}"


def _pct(fraction: float) -> str:
    return f"{fraction:.1%}" if fraction < 0.1 else f"{fraction:.0%}"


def _prefix_rule(peaks: dict[str, dict[str, float]], totals: dict[str, Any],
                 prefix_shared: bool | None) -> dict[str, str] | None:
    if not prefix_shared:
        return None
    rate = totals.get("prefix_cache_hit_rate")
    if rate is None and "prefix_cache_hit_rate" in peaks:  # engines that expose only a rate
        rate = peaks["prefix_cache_hit_rate"]["mean"]
    if rate is None or rate >= PREFIX_HIT_LOW:
        return None
    return _finding("low_prefix_hit_rate", f"prefix-cache hit rate low ({rate:.0%}) although the prompts "
                    "share prefixes: is prefix caching on (vLLM --enable-prefix-caching), and does the "
                    "shared part come first, with no timestamp or id before it?")


def _spec_rule(peaks: dict[str, dict[str, float]], totals: dict[str, Any]) -> dict[str, str] | None:
    rate = totals.get("spec_acceptance_rate")
    if rate is None and "spec_acceptance_rate" in peaks:
        rate = peaks["spec_acceptance_rate"]["mean"]
    if rate is None or rate >= SPEC_ACCEPT_LOW:
        return None
    return _finding("low_spec_acceptance", f"speculative decoding accepted only {rate:.0%} of draft tokens: "
                    "a better-matched draft or fewer draft tokens would waste less verification work")


def _outside_rule(ttft: dict[str, Any] | None) -> dict[str, str] | None:
    if not ttft or ttft.get("mean_diff_ms") is None:
        return None
    diff, client_mean = ttft["mean_diff_ms"], ttft["client"]["mean"]
    if diff <= OUTSIDE_MS or diff <= OUTSIDE_SHARE * client_mean:
        return None
    return _finding("time_outside_engine", f"the client waited {diff:.0f} ms longer for the first token "
                    f"than the engine reports (mean {client_mean:.0f} ms against {ttft['engine']['mean']:.0f} "
                    "ms): time outside the engine (network, HTTP server, tokenization, a proxy or gateway)")
