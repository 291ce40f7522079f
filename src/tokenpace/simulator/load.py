"""How requests reach the engine: open loop (given arrival times) or closed loop (N in flight)."""

from __future__ import annotations

from collections.abc import Sequence

from tokenpace.errors import UsageError
from tokenpace.simulator.request import SimRequest


def to_ns(seconds: float) -> int:
    return round(seconds * 1e9)


class OpenLoop:
    """Every request arrives at its ``arrival_s``, whatever the engine is doing."""

    def __init__(self, requests: Sequence[SimRequest]) -> None:
        if any(r.arrival_s is None for r in requests):
            raise UsageError("open loop: every request needs arrival_s (or set concurrency)")
        self._arrivals = [(to_ns(r.arrival_s), i) for i, r in enumerate(requests)]  # type: ignore[arg-type]

    def initial(self) -> list[tuple[int, int]]:
        return self._arrivals

    def on_done(self, t_ns: int, finished: int) -> list[tuple[int, int]]:
        return []


class ClosedLoop:
    """``concurrency`` clients: each issues its next request the instant its previous one ends."""

    def __init__(self, requests: Sequence[SimRequest], concurrency: int) -> None:
        if any(r.arrival_s is not None for r in requests):
            raise UsageError("closed loop: requests must not carry arrival_s")
        self._n = len(requests)
        self._concurrency = concurrency
        self._next = 0

    def initial(self) -> list[tuple[int, int]]:
        return self.on_done(0, self._concurrency)

    def on_done(self, t_ns: int, finished: int) -> list[tuple[int, int]]:
        first, self._next = self._next, min(self._n, self._next + finished)
        return [(t_ns, i) for i in range(first, self._next)]
