"""The built-in server's ``/metrics``: vLLM's metric names and buckets, so scrapers see a vLLM.

Each server owns its own ``CollectorRegistry`` (never the global one), so several servers can live
in one process (tests) without sharing counts. Gauges are set when scraped, not on every event, and
the two metrics touched on every chunk are plain numbers rendered at scrape time (prometheus_client's
locked counters and histograms cost ~10% of the server's CPU at 512 streams).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from .engine import Engine, Sequence

# vLLM V1's buckets (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS_S = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

CONTENT_TYPE = CONTENT_TYPE_LATEST


class PerChunkMetrics:
    """``vllm:generation_tokens`` and ``vllm:inter_token_latency_seconds`` as plain numbers.

    Updated only from the event loop's thread, so no lock is needed.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.generation_tokens = 0
        self.itl_counts = [0] * (len(ITL_BUCKETS_S) + 1)  # per bucket, not cumulative; last is +Inf
        self.itl_sum_s = 0.0

    def observe_itl(self, seconds: float) -> None:
        self.itl_counts[bisect_left(ITL_BUCKETS_S, seconds)] += 1  # bucket `le` holds values <= le
        self.itl_sum_s += seconds

    def collect(self) -> Iterator[Metric]:
        tokens = CounterMetricFamily("vllm:generation_tokens", "Generated tokens.", labels=["model_name"])
        tokens.add_metric([self.model], self.generation_tokens)
        yield tokens
        itl = HistogramMetricFamily(
            "vllm:inter_token_latency_seconds", "Gap between token chunks.", labels=["model_name"]
        )
        cumulative, buckets = 0, []
        for bound, count in zip((*ITL_BUCKETS_S, float("inf")), self.itl_counts):
            cumulative += count
            buckets.append((floatToGoString(bound), cumulative))
        itl.add_metric([self.model], buckets, sum_value=self.itl_sum_s)
        yield itl


class ServerMetrics:
    """Counters and histograms of one server; label ``model_name`` as vLLM's."""

    def __init__(self, model: str, kv_capacity_tokens: int) -> None:
        self.registry = CollectorRegistry()
        self.kv_capacity_tokens = kv_capacity_tokens
        reg, labels = self.registry, ["model_name"]

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, labels, registry=reg)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, labels, registry=reg).labels(model)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=reg).labels(model)

        self.running = gauge("vllm:num_requests_running", "Requests in prefill or decode.").labels(model)
        self.waiting = gauge("vllm:num_requests_waiting", "Requests waiting for a slot.").labels(model)
        self.kv_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage, 0-1 (approximate).").labels(model)
        self.prompt_tokens = counter("vllm:prompt_tokens", "Prompt tokens processed.")
        self.per_chunk = PerChunkMetrics(model)
        reg.register(self.per_chunk)
        self.preemptions = counter("vllm:num_preemptions", "Preemptions (always 0 here).")
        self.prefix_cache_queries = counter("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.")
        self.prefix_cache_hits = counter("vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache.")
        self.request_success = Counter(
            "vllm:request_success", "Finished requests.", ["model_name", "finished_reason"], registry=reg
        ).labels(model, "length")
        self.ttft = histogram("vllm:time_to_first_token_seconds", "Arrival to first token.", TTFT_BUCKETS_S)
        self.tpot = histogram(
            "vllm:request_time_per_output_token_seconds", "Per-request TPOT.", ITL_BUCKETS_S
        )
        self.e2e = histogram("vllm:e2e_request_latency_seconds", "Arrival to last token.", REQUEST_LATENCY_BUCKETS_S)
        self.queue_time = histogram(
            "vllm:request_queue_time_seconds", "Arrival to admission.", REQUEST_LATENCY_BUCKETS_S
        )
        self.prefill_time = histogram(
            "vllm:request_prefill_time_seconds", "Admission to first token.", REQUEST_LATENCY_BUCKETS_S
        )
        self.decode_time = histogram(
            "vllm:request_decode_time_seconds", "First token to last token.", REQUEST_LATENCY_BUCKETS_S
        )

    def render(self, engine: Engine) -> bytes:
        self.running.set(engine.running)
        self.waiting.set(engine.waiting)
        self.kv_usage.set(min(1.0, engine.kv_tokens / self.kv_capacity_tokens))
        return generate_latest(self.registry)


class RequestMetrics:
    """Feeds one request's token chunks into its server's metrics, as they are sent."""

    __slots__ = ("metrics", "seq", "first_ns", "last_ns")

    def __init__(self, metrics: ServerMetrics, seq: Sequence) -> None:
        self.metrics, self.seq = metrics, seq
        self.first_ns = self.last_ns = 0

    def token_chunk(self, tokens: int, t_ns: int) -> None:
        m, seq = self.metrics, self.seq
        m.per_chunk.generation_tokens += tokens
        if self.first_ns:
            m.per_chunk.observe_itl((t_ns - self.last_ns) / 1e9)
        else:
            # Prompt tokens count once prefill is done, as in vLLM.
            self.first_ns = t_ns
            m.prompt_tokens.inc(seq.prompt_tokens)
            m.prefix_cache_queries.inc(seq.prompt_tokens)  # no prefix cache: every query misses
            m.queue_time.observe((seq.admitted_ns - seq.arrival_ns) / 1e9)
            m.ttft.observe((t_ns - seq.arrival_ns) / 1e9)
        self.last_ns = t_ns

    def finished(self) -> None:
        m, seq, first_ns, last_ns = self.metrics, self.seq, self.first_ns, self.last_ns
        m.request_success.inc()
        m.e2e.observe((last_ns - seq.arrival_ns) / 1e9)
        m.prefill_time.observe((first_ns - seq.admitted_ns) / 1e9)
        m.decode_time.observe((last_ns - first_ns) / 1e9)
        if seq.generated_tokens > 1:
            m.tpot.observe((last_ns - first_ns) / 1e9 / (seq.generated_tokens - 1))
