"""The figures of the live view, kept at a bounded cost.

Nothing here runs per chunk. ``LiveStats.add`` runs once per completed request and only queues
it; ``LiveStats.frame`` runs once per refresh (a few times a second): it takes the queued requests
into preallocated arrays (a few microseconds each), then a percentile over a fixed-size ring and a
walk over the requests in flight. Two kinds of
memory, both of fixed size whatever the run's length:

- ``Ring``: the last ``capacity`` completed requests with their completion time; percentiles "over
  the last N seconds" are those of the entries completed within N seconds (when more than
  ``capacity`` requests completed in N seconds, the newest ``capacity`` of them);
- ``LogHistogram``: every value since the start, in buckets 1 % wide, so a percentile since the
  start is exact to within 1 %.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tokenpace.metrics.latency import schedule_lag
from tokenpace.metrics.slo import LIMITED_METRICS, SLO
from tokenpace.record import RequestRecord
from tokenpace.runner.loadcheck import CPU_LIMIT, LAG_P99_LIMIT_MS

NS = 1_000_000_000
RECENT_S = 10.0  # "over the last N seconds"
RING_CAPACITY = 4096
_SERIES = ("ttft", "tpot", "lag")


class LogHistogram:
    """Counts of positive values in buckets 1 % wide from ``lo`` to ``hi`` (values outside are
    clamped to the end buckets); zero and negative values count in a bucket of their own."""

    def __init__(self, lo: float = 0.01, hi: float = 1e7, growth: float = 1.01) -> None:
        self._lo, self._log_growth = lo, math.log(growth)
        self._n_buckets = int(math.ceil(math.log(hi / lo) / self._log_growth)) + 1
        self._counts = np.zeros(self._n_buckets + 1, dtype=np.int64)  # [0]: values <= 0
        self.count = 0

    def add(self, values: np.ndarray) -> None:
        """Count every value of ``values`` (NaN: skipped)."""
        values = values[~np.isnan(values)]
        positive = values[values > 0]
        k = (np.log(np.maximum(positive, self._lo) / self._lo) / self._log_growth).astype(np.int64) + 1
        np.add.at(self._counts, np.minimum(k, self._n_buckets), 1)
        self._counts[0] += values.size - positive.size
        self.count += int(values.size)

    def quantile(self, q: float) -> float | None:
        """The value below which a fraction ``q`` of the values lie (the bucket's geometric middle)."""
        if not self.count:
            return None
        k = int(np.searchsorted(np.cumsum(self._counts), q * self.count, side="left"))
        k = min(k, self._n_buckets)
        if k == 0:
            return 0.0
        return self._lo * math.exp((k - 0.5) * self._log_growth)


class Ring:
    """The last ``capacity`` entries: a completion time and one float per named series (NaN: none)."""

    def __init__(self, names: Iterable[str], capacity: int = RING_CAPACITY) -> None:
        self.capacity = capacity
        self.t_ns = np.zeros(capacity, dtype=np.int64)
        self.values = {name: np.full(capacity, np.nan) for name in names}
        self.size = 0
        self._next = 0

    def add(self, t_ns: np.ndarray, **values: np.ndarray) -> None:
        """Entries ended at ``t_ns``, with their values per series (a series not given: NaN)."""
        n = min(t_ns.size, self.capacity)  # more than fit: the newest
        at = (self._next + np.arange(n)) % self.capacity
        self.t_ns[at] = t_ns[-n:]
        for name, column in self.values.items():
            v = values.get(name)
            column[at] = np.nan if v is None else v[-n:]
        self._next = int((self._next + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def since(self, t0_ns: int) -> np.ndarray:
        """Mask of the entries at or after ``t0_ns``."""
        return self.t_ns[: self.size] >= t0_ns

    def quantiles(self, name: str, mask: np.ndarray, qs: tuple[float, ...]) -> list[float | None]:
        column = self.values[name][: self.size][mask]
        column = column[~np.isnan(column)]
        if not column.size:
            return [None] * len(qs)
        return [float(v) for v in np.percentile(column, [100 * q for q in qs])]


@dataclass
class Frame:
    """What the live view shows at one moment; every output (rich, plain line, JSON) reads this."""

    elapsed_s: float
    target: str  # "concurrency 16", "4 req/s (poisson)"...
    total: int | None  # requests to send, warmup included; None: bounded by time
    duration_s: float | None  # the run's length when bounded by time
    remaining_s: float | None  # time left (duration runs), or the estimate at the recent rate (count runs)
    remaining_requests: int | None
    sent: int
    done: int  # requests ended (ok, error, timeout, cancelled; retried attempts not counted)
    in_flight: int
    ok: int
    errors: dict[str, int]  # failure kind (error kind, "timeout", "cancelled") -> count
    rate_rps: float | None  # achieved sending rate since the start
    rate_recent_rps: float | None  # over the last RECENT_S
    output_tokens_s: float | None  # since the start
    output_tokens_recent_s: float | None
    ttft_ms: dict[str, float | None]  # p50, p99, p50_recent, p99_recent
    tpot_ms: dict[str, float | None]
    goodput_fraction: float | None  # good / measured ended; None without an SLO
    goodput_recent_fraction: float | None
    slo: str | None
    lag_ms: dict[str, float | None]  # p99, p99_recent (first attempts' sent - scheduled)
    lag_judged: bool  # open loop: the lag counts toward validity
    cpu_util: float | None  # client CPU / wall since the start
    cpu_recent_util: float | None
    warnings: list[str]  # why the run is heading for "invalid" (loadcheck's rules)
    engine: dict[str, float | None] | None  # --scrape-metrics: waiting, running, kv_usage, prefix_cache_hit_rate
    stopping: dict[str, Any] | None = None  # after a first Ctrl-C: in_flight, grace_left_s
    step: str | None = None  # a sweep's step label
    recent_s: float = RECENT_S

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class LiveStats:
    """Accumulates completed requests; ``frame()`` gives the view's figures at a moment.

    ``sent`` and ``in_flight`` are callables read at refresh time (the load generator's counts and
    its requests in flight, whose partial token counts feed the token rate)."""

    def __init__(self, *, total: int | None, duration_s: float | None, target: str, judge_lag: bool,
                 slo: SLO | None = None, recent_s: float = RECENT_S, capacity: int = RING_CAPACITY,
                 clock_ns: Callable[[], int] = time.monotonic_ns,
                 cpu_s: Callable[[], float] = time.process_time) -> None:
        self.total, self.duration_s, self.target = total, duration_s, target
        self.judge_lag, self.slo, self.recent_s = judge_lag, slo, recent_s
        self._clock_ns, self._cpu_s = clock_ns, cpu_s
        self.start_ns: int | None = None
        self._cpu0 = 0.0
        self.ring = Ring((*_SERIES, "good"), capacity)
        self.hist = {name: LogHistogram() for name in _SERIES}
        self.done = self.ok = self.measured = self.good = 0
        self.tokens_done = 0
        self.errors: Counter[str] = Counter()
        self._samples: deque[tuple[int, int, int, float]] = deque()  # (t_ns, sent, tokens, cpu_s)
        self.sent: Callable[[], int] = lambda: self.done
        self.in_flight: Callable[[], list[RequestRecord]] = list
        self._pending: list[RequestRecord] = []  # ended since the last frame

    def start(self) -> None:
        self.start_ns = self._clock_ns()
        self._cpu0 = self._cpu_s()
        self._samples.append((self.start_ns, 0, 0, 0.0))  # rates "over the last N s" count from here

    def add(self, record: RequestRecord) -> None:
        """One request attempt ended (once per attempt, never per chunk). Only queued here: a
        closed loop ends hundreds of requests at once, and their figures are taken at the next
        frame instead, between reads rather than on the path that ends a request."""
        self._pending.append(record)

    def _take(self, records: list[RequestRecord]) -> None:
        """The queued requests into the counts, the histograms and the ring, as arrays: per request
        only the latency functions' arithmetic; the SLO is judged on the whole batch at once."""
        ended = [r for r in records if not r.retried]  # a retried attempt: its retry will count
        self.done += len(ended)
        for r in ended:
            self.tokens_done += _tokens(r)
            if r.status == "ok":
                self.ok += 1
            else:
                self.errors[r.error_kind or r.status] += 1
        measured = [r for r in ended if not r.warmup]
        if not measured:
            return
        ok = np.array([r.status == "ok" for r in measured])
        values = {name: np.array([_none_nan(metric(r)) for r in measured], dtype=np.float64)
                  for name, metric in LIMITED_METRICS.items()}
        lag = np.array([_none_nan(schedule_lag(r)) for r in measured], dtype=np.float64)
        good = None
        if self.slo is not None:
            good = self.slo.good_mask(ok, values).astype(np.float64)
            self.good += int(good.sum())
        self.measured += len(measured)
        ttft_ms = np.where(ok, values["ttft"], np.nan)  # a failed request's partial stream: none
        tpot_ms = np.where(ok, values["tpot"], np.nan)
        for name, column in (("ttft", ttft_ms), ("tpot", tpot_ms), ("lag", lag)):
            self.hist[name].add(column)
        now = self._clock_ns()
        t_ns = np.array([r.done_ns or now for r in measured], dtype=np.int64)
        self.ring.add(t_ns, ttft=ttft_ms, tpot=tpot_ms, lag=lag, good=good)

    def frame(self, *, engine: dict[str, float | None] | None = None) -> Frame:
        pending, self._pending = self._pending, []
        if pending:
            self._take(pending)
        now = self._clock_ns()
        start = now if self.start_ns is None else self.start_ns
        elapsed = max((now - start) / NS, 1e-9)
        flying = self.in_flight()
        sent = self.sent()
        tokens = self.tokens_done + sum(len(r.chunk_ns) for r in flying)
        cpu = self._cpu_s() - self._cpu0
        self._samples.append((now, sent, tokens, cpu))
        recent_ns = int(self.recent_s * NS)
        while len(self._samples) > 1 and self._samples[1][0] <= now - recent_ns:
            self._samples.popleft()
        t0, sent0, tokens0, cpu0 = self._samples[0]
        span = (now - t0) / NS
        mask = self.ring.since(now - recent_ns)
        ttft50, ttft99 = self.ring.quantiles("ttft", mask, (0.5, 0.99))
        tpot50, tpot99 = self.ring.quantiles("tpot", mask, (0.5, 0.99))
        (lag99,) = self.ring.quantiles("lag", mask, (0.99,))
        goods = self.ring.values["good"][: self.ring.size][mask]
        goods = goods[~np.isnan(goods)]
        lag_all = self.hist["lag"].quantile(0.99)
        cpu_util = cpu / elapsed
        cpu_recent = (cpu - cpu0) / span if span > 0.5 else None
        warnings = []
        if self.judge_lag and lag_all is not None and lag_all > LAG_P99_LIMIT_MS:
            warnings.append(f"schedule lag p99 {lag_all:.1f} ms > {LAG_P99_LIMIT_MS:g} ms")
        if elapsed > 1.0 and cpu_util > CPU_LIMIT:
            warnings.append(f"client CPU {cpu_util:.0%} of one core > {CPU_LIMIT:.0%}")
        remaining_requests = None if self.total is None else max(0, self.total - self.done)
        rate_recent = (sent - sent0) / span if span > 0.5 else None
        if self.duration_s is not None:
            remaining_s = max(0.0, self.duration_s - elapsed)
        else:
            done_rate = self.done / elapsed
            remaining_s = (remaining_requests / done_rate) if (remaining_requests is not None and done_rate > 0) else None
        return Frame(
            elapsed_s=elapsed, target=self.target, total=self.total, duration_s=self.duration_s,
            remaining_s=remaining_s, remaining_requests=remaining_requests, sent=sent, done=self.done,
            in_flight=len(flying), ok=self.ok, errors=dict(self.errors.most_common()),
            rate_rps=sent / elapsed, rate_recent_rps=rate_recent,
            output_tokens_s=tokens / elapsed,
            output_tokens_recent_s=(tokens - tokens0) / span if span > 0.5 else None,
            ttft_ms={"p50": self.hist["ttft"].quantile(0.5), "p99": self.hist["ttft"].quantile(0.99),
                     "p50_recent": ttft50, "p99_recent": ttft99},
            tpot_ms={"p50": self.hist["tpot"].quantile(0.5), "p99": self.hist["tpot"].quantile(0.99),
                     "p50_recent": tpot50, "p99_recent": tpot99},
            goodput_fraction=(self.good / self.measured) if self.slo is not None and self.measured else None,
            goodput_recent_fraction=float(goods.mean()) if goods.size else None,
            slo=None if self.slo is None else (self.slo.name or _slo_text(self.slo)),
            lag_ms={"p99": lag_all, "p99_recent": lag99}, lag_judged=self.judge_lag,
            cpu_util=cpu_util, cpu_recent_util=cpu_recent, warnings=warnings, engine=engine,
            recent_s=self.recent_s)


def _none_nan(value: float | None) -> float:
    return math.nan if value is None else value


def _tokens(record: RequestRecord) -> int:
    return record.output_tokens if record.output_tokens is not None else len(record.chunk_ns)


def _slo_text(slo: SLO) -> str:
    return ",".join(f"{k}={v:g}ms" for k, v in slo.limits_ms().items()) or "ok"
