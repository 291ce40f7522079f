"""The definitions section: what each figure means and what other tools call it (the README's
"What the numbers mean" and its mapping table, kept in step with it)."""

from __future__ import annotations

DEFINITIONS: tuple[tuple[str, str], ...] = (
    ("TTFT", "first_token − sent; the first chunk carrying a generated token (a role-only, keep-alive or "
             "usage-only chunk is not a token). One sample per request."),
    ("TTFT sched", "first_token − scheduled: includes the client's schedule lag, so a load generator that "
                   "falls behind cannot hide it (coordinated omission)."),
    ("TPOT", "(last_token − first_token) / (output_tokens − 1); undefined for one token. One sample per "
             "request (request-weighted)."),
    ("ITL", "each gap between token-carrying chunks divided evenly over the tokens that chunk carries. One "
            "sample per token (token-weighted)."),
    ("chunk gap", "raw gap between consecutive token-carrying chunks."),
    ("E2E", "last_token − sent (E2E sched: last_token − scheduled)."),
    ("throughput", "output, total tokens/s and requests/s over the stated measurement window (the steady "
                   "state: from the target load reached to the end of sending); output tokens by chunk "
                   "arrival inside it, requests by the part of their tokens that arrived inside it; cached "
                   "prompt tokens reported apart."),
    ("goodput", "requests/s (and output tokens/s) of requests that were ok and met every SLO limit; errors, "
                "timeouts and cancellations are misses."),
    ("cost per 1M output tokens", "GPU $/hour × GPUs / (output tokens/s × 3600) × 1e6; also per 1M good tokens."),
    ("percentiles", "linear interpolation (numpy's default); p99 95% CI by percentile bootstrap (2,000 "
                    "resamples, fixed seed), shown from 368 samples up."),
)

PEER_COLUMNS = ("tokenpace", "vLLM bench serve, SGLang", "guidellm", "NVIDIA aiperf / genai-perf", "llmperf")
PEER_NAMES: tuple[tuple[str, ...], ...] = (
    ("TTFT", "TTFT", "TTFT", "TTFT", "TTFT"),
    ("TPOT", "TPOT", "\"ITL\"", "\"ITL\"", "—"),
    ("ITL (per token)", "—", "—", "—", "—"),
    ("chunk gap", "\"ITL\" (pooled chunk gaps)", "—", "\"ICL\"", "—"),
    ("—", "—", "\"time per output token\" = (last − start) / tokens, includes TTFT", "—", "\"ITL\", includes TTFT"),
    ("E2E", "E2EL", "request latency", "request latency", "end-to-end latency"),
)
