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
from bisect import bisect_left
from collections import deque
from time import monotonic_ns

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

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
        self.itl = ManyHistogram("tokenpace_itl_seconds", "Inter-token latency, one sample per token",
                                 labels, buckets.ITL_S)
        reg.register(self.itl)
        self.e2e = Histogram("tokenpace_e2e_seconds", "End-to-end latency: sent to last token (tokenpace E2E)",
                             labels, buckets=buckets.OPERATION_DURATION_S, registry=reg)
        self.tokens = Counter("tokenpace_tokens", "Tokens by type (input includes cached_input; output "
                              "includes reasoning)", (*labels, "type"), registry=reg)
        self.requests = Counter("tokenpace_requests", "Finished requests by status and error kind",
                                (*labels, "status", "error_kind"), registry=reg)
        reg.register(_GoodputCollector(self.window))

        self._children: dict[tuple[str, str], tuple] = {}  # labels() costs ~1 µs a call: look up once
        self._request_children: dict[tuple[str, str, str, str], object] = {}

    def __call__(self, record: RequestRecord) -> None:
        self.observe(record, record.model or "")

    def _for(self, api: str, model: str) -> tuple:
        children = self._children.get((api, model))
        if children is None:
            children = self._children[(api, model)] = (
                self.ttft.labels(api, model), self.tpot.labels(api, model), self.e2e.labels(api, model),
                self.itl.child((api, model)),
                tuple(self.tokens.labels(api, model, kind) for kind in ("input", "output", "cached_input", "reasoning")))
        return children

    def observe(self, record: RequestRecord, model: str = "") -> None:
        api = record.api
        key = (api, model, record.status, record.error_kind or "")
        counter = self._request_children.get(key)
        if counter is None:
            counter = self._request_children[key] = self.requests.labels(*key)
        counter.inc()
        self.window.add(record)
        ttft_child, tpot_child, e2e_child, itl_child, token_children = self._for(api, model)
        if record.status == "ok":  # latencies describe successful requests only, as in a bench summary
            for child, measure in ((ttft_child, ttft), (tpot_child, tpot), (e2e_child, e2e)):
                value_ms = measure(record)
                if value_ms is not None:
                    child.observe(value_ms / 1000)
            samples = itl_samples(record)
            if samples:
                itl_child.observe_ms(samples)
        for child, count in zip(token_children, (record.prompt_tokens, record.output_tokens,
                                                 record.cached_prompt_tokens, record.reasoning_tokens)):
            if count:
                child.inc(count)


class ManyHistogram:
    """A labelled histogram fed many samples at once (one request's ITLs): the samples are
    bucketed with one ``bisect`` each under one lock, instead of one ``Histogram.observe`` (a lock,
    a scan of the buckets, two counters) per token."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...], bounds: tuple[float, ...]) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self.bounds_ms = [b * 1000 for b in bounds]
        self.bounds = bounds
        self._children: dict[tuple[str, ...], _ManyChild] = {}
        self._lock = threading.Lock()

    def child(self, labels: tuple[str, ...]) -> _ManyChild:
        with self._lock:
            child = self._children.get(labels)
            if child is None:
                child = self._children[labels] = _ManyChild(self.bounds_ms)
            return child

    def collect(self):  # noqa: ANN201 - prometheus_client's collector protocol
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        with self._lock:
            children = list(self._children.items())
        for labels, child in children:
            counts, total_ms = child.snapshot()
            cumulative, running = [], 0
            for bound, count in zip((*map(repr, self.bounds), "+Inf"), counts):
                running += count
                cumulative.append((bound, running))
            family.add_metric(list(labels), cumulative, total_ms / 1000)
        yield family


class _ManyChild:
    __slots__ = ("_bounds_ms", "_counts", "_sum_ms", "_lock")

    def __init__(self, bounds_ms: list[float]) -> None:
        self._bounds_ms = bounds_ms
        self._counts = [0] * (len(bounds_ms) + 1)  # the last: above every bound (+Inf)
        self._sum_ms = 0.0
        self._lock = threading.Lock()

    def observe_ms(self, samples_ms: list[float]) -> None:
        bounds, counts = self._bounds_ms, self._counts
        with self._lock:
            for value in samples_ms:
                counts[bisect_left(bounds, value)] += 1  # le: a value on a bound falls in that bucket
            self._sum_ms += sum(samples_ms)

    def snapshot(self) -> tuple[list[int], float]:
        with self._lock:
            return list(self._counts), self._sum_ms


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
