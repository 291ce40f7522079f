"""The event loop: a heap ordered by (time, event kind, creation order). It knows nothing of policy."""

from __future__ import annotations

import heapq
from itertools import count
from typing import Any

from tokenpace.simulator.events import Event


class EventLoop:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, Event]] = []
        self._seq = count()
        self.now_ns = 0
        self.handled = 0

    def push(self, event: Event) -> None:
        if event.t_ns < self.now_ns:
            raise ValueError(f"{event!r} is in the past (now {self.now_ns} ns)")
        heapq.heappush(self._heap, (event.t_ns, event.ORDER, next(self._seq), event))

    def peek_ns(self) -> int | None:
        """Time of the next pending event, None when there is none."""
        return self._heap[0][0] if self._heap else None

    def run(self, world: Any) -> None:
        heap, pop, push, order = self._heap, heapq.heappop, heapq.heappush, self._seq
        while heap:
            t, _, _, event = pop(heap)
            self.now_ns = t
            self.handled += 1
            for new in event.handle(world):  # ``push``, inline: once per event
                if new.t_ns < t:
                    raise ValueError(f"{new!r} is in the past (now {t} ns)")
                push(heap, (new.t_ns, new.ORDER, next(order), new))
