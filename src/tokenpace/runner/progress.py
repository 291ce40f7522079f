"""Live progress: request counts and running p50/p99 TTFT.

Rendered from the event loop at a low, fixed rate (never from a background thread), so that
drawing the bar cannot hold the GIL while chunks arrive and distort their timestamps.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from tokenpace.record import RequestRecord

REFRESH_S = 0.5


class LiveProgress:
    def __init__(self, total: int | None, *, enabled: bool = True, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.counts: Counter[str] = Counter()
        self._ttft_ms: list[float] = []
        self._progress = Progress(
            TextColumn("[bold]bench"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
            console=self.console, auto_refresh=False, transient=True)
        self._task = self._progress.add_task("bench", total=total, detail="")
        self._refresher: asyncio.Task | None = None

    def add(self, record: RequestRecord) -> None:
        self.counts[record.status] += 1
        if record.status == "ok" and record.first_token_ns and record.sent_ns and not record.warmup:
            self._ttft_ms.append((record.first_token_ns - record.sent_ns) / 1e6)

    def detail(self) -> str:
        c = self.counts
        text = f"ok {c['ok']}  err {c['error']}  timeout {c['timeout']}  cancelled {c['cancelled']}"
        if self._ttft_ms:
            p50, p99 = np.percentile(self._ttft_ms[-5000:], [50, 99])
            text += f"  TTFT p50 {p50:.0f} ms  p99 {p99:.0f} ms"
        return text

    async def _refresh_forever(self) -> None:
        while True:
            self._progress.update(self._task, completed=sum(self.counts.values()), detail=self.detail())
            self._progress.refresh()
            await asyncio.sleep(REFRESH_S)

    def __enter__(self) -> LiveProgress:
        if self.enabled:
            self._progress.start()
            self._refresher = asyncio.ensure_future(self._refresh_forever())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
        if self.enabled:
            self._progress.stop()
        sys.stderr.flush()
