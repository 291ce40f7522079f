"""Which Prometheus families each serving engine exposes, as plain data: one table per engine.

A table maps a quantity tokenpace understands (the keys of ``QUANTITIES``) to the names the engine
uses for it, newest first: engines rename metrics between versions, and the first name present
wins. Names are written as exposed, prefix and colon included (``vllm:``, ``llamacpp:``): the
Prometheus text parser keeps colons. A counter is looked up both as ``NAME_total`` (how
prometheus_client and most exporters expose it) and as the bare ``NAME``.

The engine is the one whose table finds the most quantities in a scrape (``detect_engine``).
Sources: REFERENCE section 3, and the engines' metric definitions (vLLM ``v1/metrics/loggers.py``
with the V0 names it replaced, SGLang ``metrics/collector.py``, TGI ``router``, llama.cpp
``server.cpp``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Quantity:
    kind: str  # "gauge", "counter" or "histogram"
    unit: str  # "requests", "fraction" (0-1), "tokens", "events", "seconds"
    # How label sets (several models, data-parallel engines) combine into one value: "sum" for
    # counts, "max" for a fraction (the fullest engine is the one that limits).
    combine: str = "sum"


QUANTITIES: dict[str, Quantity] = {
    "waiting": Quantity("gauge", "requests"),  # queue depth: requests not yet scheduled
    "running": Quantity("gauge", "requests"),  # requests in prefill or decode
    "kv_usage": Quantity("gauge", "fraction", "max"),  # KV-cache blocks (or tokens) in use
    "prefix_cache_hit_rate": Quantity("gauge", "fraction", "max"),  # engines that give a rate only
    "prefix_cache_queries": Quantity("counter", "tokens"),
    "prefix_cache_hits": Quantity("counter", "tokens"),
    "preemptions": Quantity("counter", "events"),
    "prompt_tokens": Quantity("counter", "tokens"),
    "generation_tokens": Quantity("counter", "tokens"),
    "spec_drafts": Quantity("counter", "events"),
    "spec_draft_tokens": Quantity("counter", "tokens"),
    "spec_accepted_tokens": Quantity("counter", "tokens"),
    "spec_acceptance_rate": Quantity("gauge", "fraction", "max"),  # engines that give a rate only
    "spec_accept_length": Quantity("gauge", "tokens", "max"),  # mean tokens per verification step
    "ttft": Quantity("histogram", "seconds"),
    "itl": Quantity("histogram", "seconds"),  # per token (or per chunk) gap
    "tpot": Quantity("histogram", "seconds"),  # per request: decode time / (output tokens - 1)
    "e2e": Quantity("histogram", "seconds"),
    "queue_time": Quantity("histogram", "seconds"),
}

ENGINE_LABELS = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI", "llamacpp": "llama.cpp"}

# engine -> quantity -> names (newest first).
ENGINE_FAMILIES: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "waiting": ("vllm:num_requests_waiting",),
        "running": ("vllm:num_requests_running",),
        "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),  # renamed in V1
        "prefix_cache_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),  # V0 gauge
        "prefix_cache_queries": ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
        "prefix_cache_hits": ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
        "preemptions": ("vllm:num_preemptions",),
        "prompt_tokens": ("vllm:prompt_tokens",),
        "generation_tokens": ("vllm:generation_tokens",),
        "spec_drafts": ("vllm:spec_decode_num_drafts",),
        "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens",),
        "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens",),
        "spec_acceptance_rate": ("vllm:spec_decode_draft_acceptance_rate",),  # V0 gauge
        "ttft": ("vllm:time_to_first_token_seconds",),
        # V0 called the per-token gap "time_per_output_token"; V1 "inter_token_latency".
        "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "tpot": ("vllm:request_time_per_output_token_seconds",),
        "e2e": ("vllm:e2e_request_latency_seconds",),
        "queue_time": ("vllm:request_queue_time_seconds",),
    },
    "sglang": {
        "waiting": ("sglang:num_queue_reqs",),
        "running": ("sglang:num_running_reqs",),
        "kv_usage": ("sglang:token_usage",),
        "prefix_cache_hit_rate": ("sglang:cache_hit_rate",),
        "spec_accept_length": ("sglang:spec_accept_length",),
        "prompt_tokens": ("sglang:prompt_tokens",),
        "generation_tokens": ("sglang:generation_tokens",),
        "ttft": ("sglang:time_to_first_token_seconds",),
        "itl": ("sglang:inter_token_latency_seconds",),
        "e2e": ("sglang:e2e_request_latency_seconds",),
    },
    "tgi": {  # no TTFT and no prefix cache (REFERENCE section 3)
        "waiting": ("tgi_queue_size",),
        "running": ("tgi_batch_current_size",),
        "tpot": ("tgi_request_mean_time_per_token_duration",),
        "e2e": ("tgi_request_duration",),
        "queue_time": ("tgi_request_queue_duration",),
    },
    "llamacpp": {  # llama-server --metrics
        "waiting": ("llamacpp:requests_deferred",),
        "running": ("llamacpp:requests_processing",),
        "kv_usage": ("llamacpp:kv_cache_usage_ratio",),  # older builds only
        "prompt_tokens": ("llamacpp:prompt_tokens",),  # excluding cached ones (see below)
        "prefix_cache_hits": ("llamacpp:prompt_tokens_cached",),  # newer builds
        "generation_tokens": ("llamacpp:tokens_predicted",),
        "spec_drafts": ("llamacpp:spec_decode_num_drafts",),
        "spec_draft_tokens": ("llamacpp:spec_decode_num_draft_tokens",),
        "spec_accepted_tokens": ("llamacpp:spec_decode_num_accepted_tokens",),
    },
}

# Engines whose prompt-token counter leaves out the tokens found in the prefix cache: there the
# prompt tokens looked up are prompt_tokens + prefix_cache_hits.
PROMPT_TOKENS_EXCLUDE_CACHED = frozenset({"llamacpp"})


def sample_names(kind: str, name: str) -> tuple[str, ...]:
    """The sample names a family of this kind shows up as in the text format."""
    if kind == "counter":
        return (name + "_total", name)
    if kind == "histogram":
        return (name + "_bucket", name + "_count", name + "_sum")
    return (name,)


def detect_engine(present: set[str] | frozenset[str]) -> str | None:
    """The engine whose table matches the most quantities among the ``present`` sample names;
    None when no table matches any."""
    best, best_hits = None, 0
    for engine, table in ENGINE_FAMILIES.items():
        hits = sum(1 for key, names in table.items()
                   if any(s in present for n in names for s in sample_names(QUANTITIES[key].kind, n)))
        if hits > best_hits:
            best, best_hits = engine, hits
    return best
