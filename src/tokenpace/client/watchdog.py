"""The per-request watchdog: the TTFT, idle and total limits on one timer.

Timeouts. ``connect_timeout_s`` bounds the TCP (and TLS) connect: aiohttp's ``sock_connect``, one
timer per new connection. The other three share one watchdog timer per request, all measured from
``sent``: ``ttft_timeout_s`` until the first token; ``idle_timeout_s``, the longest silence (no
bytes at all: a keep-alive comment counts as life), which before the first token applies only when
there is no TTFT limit (that phase is the TTFT limit's); ``timeout_s`` until the end. A read only
stamps its time; the timer, when it fires, re-arms itself for the deadline that reads have pushed
back, so a stream costs no timer per chunk. On expiry the request's task is cancelled and that
cancellation becomes a ``timeout`` record (a cancellation from outside still propagates).
"""

from __future__ import annotations

import asyncio
from time import monotonic_ns
from typing import TYPE_CHECKING

from tokenpace.record import RequestRecord

from .progress import Progress

if TYPE_CHECKING:
    from .openai import OpenAIClient


class Watchdog:
    """The total, TTFT and idle limits of one request, on one timer (the module doc)."""

    __slots__ = ("_client", "_record", "_progress", "_task", "_loop", "_handle", "expired", "expired_ns")

    def __init__(self, client: OpenAIClient, record: RequestRecord, progress: Progress) -> None:
        self._client, self._record, self._progress = client, record, progress
        self._task = asyncio.current_task()
        self._loop = asyncio.get_running_loop()
        self.expired: str | None = None  # the error kind, once a limit was passed
        self.expired_ns = 0
        self._handle: asyncio.TimerHandle | None = None
        self._arm(record.sent_ns, self._due()[0])

    def _due(self) -> tuple[int, str]:
        """The earliest deadline in force now, and its kind."""
        client, record = self._client, self._record
        sent = record.sent_ns
        due, kind = sent + int(client.timeout_s * 1e9), "total_timeout"
        if record.first_token_ns is None and client.ttft_timeout_s is not None:
            at = sent + int(client.ttft_timeout_s * 1e9)
            if at <= due:
                due, kind = at, "ttft_timeout"
        elif client.idle_timeout_s is not None:
            at = self._progress.last_read_ns + int(client.idle_timeout_s * 1e9)
            if at <= due:
                due, kind = at, "idle_timeout"
        return due, kind

    def _arm(self, now: int, due: int) -> None:
        client = self._client
        if self._record.first_token_ns is None and client.ttft_timeout_s is not None and client.idle_timeout_s:
            # The first token switches the TTFT limit for the idle one, whose deadline is then at
            # least `idle` away: look again by then.
            due = min(due, now + int(client.idle_timeout_s * 1e9))
        self._handle = self._loop.call_later((due - now) / 1e9, self._fire)

    def _fire(self) -> None:
        now = monotonic_ns()
        due, kind = self._due()
        if now < due:  # reads pushed the deadline back (or the loop's timer fired early)
            self._arm(now, due)
            return
        self._handle = None
        self.expired, self.expired_ns = kind, now
        if self._task is not None:
            self._task.cancel()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def message(self) -> str:
        client = self._client
        if self.expired == "ttft_timeout":
            return f"no token within ttft_timeout_s={client.ttft_timeout_s:g}"
        if self.expired == "idle_timeout":
            return f"nothing received for idle_timeout_s={client.idle_timeout_s:g}"
        return f"no complete response within timeout_s={client.timeout_s:g}"


def other_cancellations() -> int:
    """After catching the watchdog's own cancellation: how many other cancel requests remain."""
    task = asyncio.current_task()
    uncancel = getattr(task, "uncancel", None)  # Python 3.11+; before, only ours is assumed
    return uncancel() if uncancel is not None else 0
