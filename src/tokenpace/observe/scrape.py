"""The poller: scrapes an engine's ``/metrics`` during a run, bounded by the run.

``EngineWatch`` is an async context manager around the load: on entry one preflight scrape (the
baseline of every counter and histogram; its failure is one warning line, never an error), then
a scrape every ``interval_s`` on absolute ticks (a slow scrape skips ticks rather than pile them
up); on exit the poller stops and one final scrape closes the run's histograms. A scrape that
fails is counted by kind and the run goes on. Each scrape waits at most ``timeout_s``: the
interval, between 1 and 5 seconds, so the final scrape never holds up the end of a run for long.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from time import monotonic_ns

import aiohttp

from tokenpace.config import DEFAULT_SCRAPE_INTERVAL_S as DEFAULT_INTERVAL_S

from .families import ENGINE_LABELS, detect_engine
from .snapshot import Selector, Snapshot, all_sample_names, select_lines


def metrics_url_for(base_url: str) -> str:
    """The target's /metrics: its base URL without the trailing ``/v1``, plus ``/metrics``."""
    return base_url.rstrip("/").removesuffix("/v1") + "/metrics"


class ScrapeFailed(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class ScrapeCounts:
    ok: int = 0
    failed: int = 0
    failed_by_kind: dict[str, int] = field(default_factory=dict)
    last_error: str | None = None

    def fail(self, exc: ScrapeFailed) -> None:
        self.failed += 1
        self.failed_by_kind[exc.kind] = self.failed_by_kind.get(exc.kind, 0) + 1
        self.last_error = str(exc)


async def fetch(session: aiohttp.ClientSession, url: str, timeout_s: float) -> tuple[int, str]:
    """GET the exposition: (monotonic ns halfway through the request, text). Raises ScrapeFailed."""
    sent = monotonic_ns()
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                raise ScrapeFailed(f"http_{resp.status}", f"{url} answered HTTP {resp.status}")
            text = await resp.text(errors="replace")
    except asyncio.TimeoutError:
        raise ScrapeFailed("timeout", f"{url} did not answer within {timeout_s:g} s") from None
    except aiohttp.ClientConnectorError as exc:
        raise ScrapeFailed("connect", f"cannot connect to {url} ({exc.os_error or exc})") from None
    except aiohttp.ClientError as exc:
        raise ScrapeFailed("http_error", f"{url}: {type(exc).__name__}: {exc}") from None
    return (sent + monotonic_ns()) // 2, text


class EngineWatch:
    """Scrapes ``url`` around and during a run; see the module docstring."""

    def __init__(self, url: str, interval_s: float = DEFAULT_INTERVAL_S, *,
                 warn: Callable[[str], None] | None = None) -> None:
        self.url, self.interval_s = url, interval_s
        self.timeout_s = min(5.0, max(1.0, interval_s))
        self.warn = warn or (lambda message: None)
        self.counts = ScrapeCounts()
        self.engine: str | None = None
        self.preflight_error: str | None = None
        self.snapshots: list[Snapshot] = []  # gauges and counters of every good scrape
        self.baseline: Snapshot | None = None  # the first good scrape, with its histograms
        self.final: Snapshot | None = None  # the last good scrape, with its histograms
        self._selector: Selector | None = None
        self._last_kept = ""  # the latest good exposition, table lines only (for `final`)
        self._last_t_ns = 0
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task | None = None
        self._unrecognised = False  # Prometheus text, but no engine we know: stop polling

    async def __aenter__(self) -> EngineWatch:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1))
        if not await self._scrape():
            self.preflight_error = self.counts.last_error
            self.warn(f"engine metrics: {self.counts.last_error}; the run goes on without them"
                      + ("" if self._unrecognised else " until they answer"))
        if not self._unrecognised:
            self._task = asyncio.get_running_loop().create_task(self._poll())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            if not self._unrecognised and exc_info[0] is None:
                await self._scrape()
            if self._last_kept and self._selector is not None:
                self.final = self._selector.parse(self._last_kept, self._last_t_ns, histograms=True)
        finally:
            assert self._session is not None
            await self._session.close()

    @property
    def engine_label(self) -> str | None:
        return ENGINE_LABELS.get(self.engine or "")

    async def _poll(self) -> None:
        start, k = time.monotonic(), 1
        while not self._unrecognised:
            delay = start + k * self.interval_s - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await self._scrape()
            k = max(k + 1, int((time.monotonic() - start) / self.interval_s) + 1)

    async def _scrape(self) -> bool:
        """One scrape; False (and counted) when it failed."""
        assert self._session is not None
        try:
            t_ns, text = await fetch(self._session, self.url, self.timeout_s)
            if self._selector is None:
                await self._detect(text)
            assert self._selector is not None
            kept = select_lines(text, self._selector.everything)
            first = self.baseline is None
            if first:  # with its histograms: tens of ms for a vLLM, so off the event loop
                snapshot = await asyncio.to_thread(self._selector.parse, kept, t_ns, histograms=True)
            else:
                snapshot = self._selector.parse(select_lines(kept, self._selector.scalars), t_ns,
                                                histograms=False)
        except ScrapeFailed as exc:
            self.counts.fail(exc)
            return False
        except ValueError as exc:  # prometheus_client's parser: not the text format
            self.counts.fail(ScrapeFailed("not_prometheus", f"{self.url} is not Prometheus text ({exc})"))
            return False
        if first:
            self.baseline = snapshot
        self.snapshots.append(snapshot)
        self._last_kept, self._last_t_ns = kept, t_ns
        self.counts.ok += 1
        return True

    async def _detect(self, text: str) -> None:
        # A full parse is slow; before the load it costs nothing, during it a thread keeps it off
        # the event loop that reads the streams.
        names = await asyncio.to_thread(all_sample_names, text)
        engine = detect_engine(names)
        if engine is None:
            self._unrecognised = True
            raise ScrapeFailed("no_engine_metrics", f"{self.url} shows none of vLLM's, SGLang's, TGI's or "
                                                    "llama.cpp's metrics")
        self.engine, self._selector = engine, Selector(engine)
