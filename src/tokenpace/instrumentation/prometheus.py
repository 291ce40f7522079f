"""Prometheus export of finished records (``prometheus_client``): latency histograms, token and
request counters, and goodput under an SLO over a sliding window.

| metric | type | labels |
|---|---|---|
| ``tokenpace_ttft_seconds`` / ``_tpot_`` / ``_itl_`` / ``_e2e_`` | histogram | api, model |
| ``tokenpace_tokens_total`` | counter | api, model, type (input, output, cached_input, reasoning) |
| ``tokenpace_requests_total`` | counter | api, model, status, error_kind ("" when none) |
| ``tokenpace_goodput_ratio`` | gauge | (none): good / finished requests, last ``window_s`` |
| ``tokenpace_goodput_requests_per_second`` | gauge | good requests per second, last ``window_s`` |
| ``tokenpace_window_requests`` | gauge | finished requests in the last ``window_s`` |

Latencies are observed for ok requests only (as a bench summary counts them); tokens for all.
ITL is observed once per token (the token-weighted samples of ``metrics.latency.itl_samples``).
No prompt or completion text is ever exported: a record holds none.
"""

from __future__ import annotations

import threading
from collections import deque
from time import monotonic_ns

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from tokenpace.metrics.latency import e2e, itl_samples, tpot, ttft
from tokenpace.metrics.slo import SLO
from tokenpace.record import RequestRecord

from . import buckets

DEFAULT_WINDOW_S = 60.0


class GoodputWindow:
    """Finished requests of the last ``window_s`` seconds, and how many of them met the SLO."""

    def __init__(self, slo: SLO | None, window_s: float = DEFAULT_WINDOW_S) -> None:
        self.slo = slo
        self.window_s = window_s
        # (finished at, good, TTFT ms, TPOT ms): a few numbers per request, never the record itself
        self._events: deque[tuple[int, bool, float | None, float | None]] = deque()
        self._lock = threading.Lock()

    def add(self, record: RequestRecord, now_ns: int | None = None) -> None:
        good = record.status == "ok" and (self.slo is None or self.slo.is_good(record))
        entry = (monotonic_ns() if now_ns is None else now_ns, good, ttft(record), tpot(record))
        with self._lock:
            self._events.append(entry)
            self._prune(now_ns)

    def _prune(self, now_ns: int | None) -> None:
        horizon = (monotonic_ns() if now_ns is None else now_ns) - int(self.window_s * 1e9)
        events = self._events
        while events and events[0][0] < horizon:
            events.popleft()

    def latencies_ms(self, now_ns: int | None = None) -> tuple[list[float], list[float]]:
        """The TTFTs and TPOTs of the window's requests, ms (for a live view's percentiles)."""
        with self._lock:
            self._prune(now_ns)
            events = list(self._events)
        return ([t for _, _, t, _ in events if t is not None], [t for _, _, _, t in events if t is not None])

    def counts(self, now_ns: int | None = None) -> tuple[int, int]:
        """(finished, good) in the window."""
        with self._lock:
            self._prune(now_ns)
            return len(self._events), sum(1 for event in self._events if event[1])


class PrometheusExporter:
    """An observer of finished records (``exporter(record)``) that feeds its own metrics.

    ``registry``: where the metrics are registered (a fresh ``CollectorRegistry`` by default;
    pass ``prometheus_client.REGISTRY`` to serve them with ``start_http_server``)."""

    def __init__(self, slo: SLO | None = None, *, registry: CollectorRegistry | None = None,
                 window_s: float = DEFAULT_WINDOW_S) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.window = GoodputWindow(slo, window_s)
        labels = ("api", "model")
        reg = self.registry
        self.ttft = Histogram("tokenpace_ttft_seconds", "Time to first token (first token-carrying chunk)",
                              labels, buckets=buckets.TIME_TO_FIRST_CHUNK_S, registry=reg)
        self.tpot = Histogram("tokenpace_tpot_seconds", "Time per output token after the first, per request",
                              labels, buckets=buckets.ITL_S, registry=reg)
        self.itl = Histogram("tokenpace_itl_seconds", "Inter-token latency, one sample per token",
                             labels, buckets=buckets.ITL_S, registry=reg)
        self.e2e = Histogram("tokenpace_e2e_seconds", "End-to-end latency: sent to last token (tokenpace E2E)",
                             labels, buckets=buckets.OPERATION_DURATION_S, registry=reg)
        self.tokens = Counter("tokenpace_tokens", "Tokens by type (input includes cached_input; output "
                              "includes reasoning)", (*labels, "type"), registry=reg)
        self.requests = Counter("tokenpace_requests", "Finished requests by status and error kind",
                                (*labels, "status", "error_kind"), registry=reg)
        reg.register(_GoodputCollector(self.window))

    def __call__(self, record: RequestRecord) -> None:
        self.observe(record, getattr(record, "model", None) or "")

    def observe(self, record: RequestRecord, model: str = "") -> None:
        api = record.api
        self.requests.labels(api, model, record.status, record.error_kind or "").inc()
        self.window.add(record)
        if record.status != "ok":  # latencies describe successful requests only, as in a bench summary
            return self._count_tokens(record, api, model)
        for histogram, measure in ((self.ttft, ttft), (self.tpot, tpot), (self.e2e, e2e)):
            value_ms = measure(record)
            if value_ms is not None:
                histogram.labels(api, model).observe(value_ms / 1000)
        samples = itl_samples(record)
        if samples:
            child = self.itl.labels(api, model)
            for sample_ms in samples:
                child.observe(sample_ms / 1000)
        self._count_tokens(record, api, model)

    def _count_tokens(self, record: RequestRecord, api: str, model: str) -> None:
        for kind, count in (("input", record.prompt_tokens), ("output", record.output_tokens),
                            ("cached_input", record.cached_prompt_tokens), ("reasoning", record.reasoning_tokens)):
            if count:
                self.tokens.labels(api, model, kind).inc(count)


class _GoodputCollector:
    def __init__(self, window: GoodputWindow) -> None:
        self._window = window

    def collect(self):  # noqa: ANN201 - prometheus_client's collector protocol
        finished, good = self._window.counts()
        window_s = self._window.window_s
        yield GaugeMetricFamily("tokenpace_window_requests",
                                f"Requests finished in the last {window_s:g} s", value=finished)
        yield GaugeMetricFamily("tokenpace_goodput_ratio", f"Share of the last {window_s:g} s's finished "
                                "requests that were ok and met the SLO (NaN with none)",
                                value=good / finished if finished else float("nan"))
        yield GaugeMetricFamily("tokenpace_goodput_requests_per_second",
                                f"Requests per second that met the SLO, over the last {window_s:g} s",
                                value=good / window_s)
