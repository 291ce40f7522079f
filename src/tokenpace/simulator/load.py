"""How requests reach the engine: open loop (given arrival times), closed loop (N in flight), or
conversations (each session's next turn a think time after its previous turn ended).

All mirror ``tokenpace bench``'s load generator, in virtual time: a closed loop's client issues its
next request the instant its previous one ends; an open loop issues each request at its
``arrival_s``, and with ``max_in_flight`` a request that finds the cap full waits for a slot (its
``scheduled`` time stays the planned one, ``sent`` is when it got the slot). ``stop_ns``: no request
is issued at or after it (a time-bounded run); one still waiting for a slot then is never sent.
Conversations: every session's turn 1 arrives at its ``arrival_s`` and turn k+1 at the end of turn
k plus turn k+1's ``think_time_s``; ``max_requests`` bounds how many turns are sent in all (the
turn that would exceed it is not sent, nor any later turn of its session), and records are numbered
in the order they were sent, as bench numbers a conversation run's requests.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence

from tokenpace.errors import UsageError
from tokenpace.simulator.request import SimRequest


def to_ns(seconds: float) -> int:
    return round(seconds * 1e9)


class Requests:
    """Requests by index. From an iterator they are drawn on first use, so a time-bounded run needs
    no count (the iterator may be endless)."""

    def __init__(self, items: Iterable[SimRequest]) -> None:
        self._items: list[SimRequest] = list(items) if isinstance(items, Sequence) else []
        self._more: Iterator[SimRequest] | None = None if isinstance(items, Sequence) else iter(items)

    @property
    def bounded(self) -> bool:
        return self._more is None

    def has(self, index: int) -> bool:
        while self._more is not None and index >= len(self._items):
            nxt = next(self._more, None)
            if nxt is None:
                self._more = None
            else:
                self._items.append(nxt)
        return index < len(self._items)

    def __getitem__(self, index: int) -> SimRequest:
        return self._items[index]

    def __len__(self) -> int:  # drawn so far
        return len(self._items)


class OpenLoop:
    """Every request arrives at its ``arrival_s``, whatever the engine is doing (up to the cap)."""

    def __init__(self, requests: Requests, max_in_flight: int | None = None,
                 stop_ns: int | None = None) -> None:
        if not requests.bounded and stop_ns is None:
            raise UsageError("open loop: an endless request stream needs a stop time")
        arrivals: list[tuple[int, int]] = []
        i = 0
        while requests.has(i):
            arrival_s = requests[i].arrival_s
            if arrival_s is None:
                raise UsageError("open loop: every request needs arrival_s (or set concurrency)")
            t = to_ns(arrival_s)
            if stop_ns is not None and t >= stop_ns:
                if not requests.bounded:
                    break  # arrivals of a stream come in order: nothing later can be issued
            else:
                arrivals.append((t, i))
            i += 1
        self._arrivals = arrivals
        self._cap = max_in_flight
        self._stop_ns = stop_ns
        self._in_flight = 0
        self._queued: deque[int] = deque()  # arrived, waiting for a slot under the cap
        self._granted: set[int] = set()  # released from the queue; their Arrival is admitted
        self.planned = len(arrivals)

    def initial(self) -> list[tuple[int, int]]:
        return self._arrivals

    def admit(self, index: int, t_ns: int) -> bool:
        """True when the request may be sent now; otherwise it waits for a slot."""
        if self._cap is None:
            return True
        if index in self._granted:
            self._granted.discard(index)
            return True
        if self._in_flight < self._cap:
            self._in_flight += 1
            return True
        self._queued.append(index)
        return False

    def on_done(self, t_ns: int, finished: int, finished_indices: Iterable[int] = (),
                leads_ns: Sequence[int] = ()) -> list[tuple[int, int]]:
        if self._cap is None:
            return []
        self._in_flight -= finished
        out = []
        while self._queued and self._in_flight < self._cap:
            if self._stop_ns is not None and t_ns >= self._stop_ns:
                self._queued.clear()  # never sent, as in bench: no record
                break
            index = self._queued.popleft()
            self._in_flight += 1
            self._granted.add(index)
            out.append((t_ns, index))
        return out


class ClosedLoop:
    """``concurrency`` clients: each issues its next request ``turnaround_ns`` after its previous
    one ends (0: the same instant, so it joins the step that begins then; a real client takes a
    millisecond or so, and the engine's next step has begun without it). A tuple of turnarounds
    (a measured spread): the k-th request issued after an end waits ``turnaround_ns[k * 7 % n]``
    (7 is prime, so with n not a multiple of 7 every value comes in turn, neighbours apart).
    ``first_gap_ns``: the first wave goes out one request after another this far apart, as a real
    client sends it (client k starts at k × max(first_gap, ramp / C))."""

    def __init__(self, requests: Requests, concurrency: int, stop_ns: int | None = None,
                 turnaround_ns: int | tuple[int, ...] = 0, ramp_ns: int = 0, first_gap_ns: int = 0) -> None:
        if not requests.bounded and stop_ns is None:
            raise UsageError("closed loop: an endless request stream needs a stop time")
        if requests.bounded and any(requests[i].arrival_s is not None for i in range(len(requests))):
            raise UsageError("closed loop: requests must not carry arrival_s")
        self._requests = requests
        self._concurrency = concurrency
        self._stop_ns = stop_ns
        self._turnaround_ns = turnaround_ns
        self._ramp_ns = ramp_ns
        self._first_gap_ns = first_gap_ns
        self._next = 0
        self._reissued = 0  # requests issued after an end so far

    @property
    def planned(self) -> int:
        return self._next

    def initial(self) -> list[tuple[int, int]]:
        if not self._ramp_ns and not self._first_gap_ns:
            return self._issue(0, self._concurrency)
        # a ramp: client k starts at k * ramp / C (tokenpace.workload.ramp); sends one by one: k * gap
        out = []
        for k in range(self._concurrency):
            out += self._issue(max(round(k * self._ramp_ns / self._concurrency), k * self._first_gap_ns), 1)
        return out

    def admit(self, index: int, t_ns: int) -> bool:
        return True

    def on_done(self, t_ns: int, finished: int, finished_indices: Iterable[int] = (),
                leads_ns: Sequence[int] = ()) -> list[tuple[int, int]]:
        """``leads_ns``: how much sooner each finished request's client may send and still be in time
        for the next batch (an engine that streams a step's sequences one after another,
        ``Sequence.lead_ns``): its turnaround is shortened by it, and a send that would then come
        before ``t_ns`` comes at ``t_ns``, in time."""
        spread = self._turnaround_ns
        if not isinstance(spread, tuple) and not any(leads_ns):  # (all 0 unless the engine streams in slots)
            return self._issue(t_ns + spread, finished)
        out = []
        for j in range(finished):
            if isinstance(spread, tuple):
                k, self._reissued = self._reissued, self._reissued + 1
                wait = spread[k * 7 % len(spread)]
            else:
                wait = spread
            if j < len(leads_ns):
                wait = max(0, wait - leads_ns[j])
            out += self._issue(t_ns + wait, 1)
        return out

    def _issue(self, t_ns: int, finished: int) -> list[tuple[int, int]]:
        if self._stop_ns is not None and t_ns >= self._stop_ns:
            return []
        out = []
        for _ in range(finished):
            if not self._requests.has(self._next):
                break
            if self._requests[self._next].arrival_s is not None:
                raise UsageError("closed loop: requests must not carry arrival_s")
            out.append((t_ns, self._next))
            self._next += 1
        return out


class SessionLoop:
    """Multi-turn sessions (``SimRequest.session``): turn 1 at its ``arrival_s``, turn k+1
    ``think_time_s`` after turn k ended. The requests are bounded (every turn of every session);
    each session's turns come in turn order. ``on_done`` needs the indices of the requests that
    ended (``finished_indices``)."""

    numbers_by_send = True  # records are numbered in send order (bench's index for conversations)

    def __init__(self, requests: Requests, stop_ns: int | None = None,
                 max_requests: int | None = None) -> None:
        if not requests.bounded:
            raise UsageError("conversations: the sessions' turns must be given as a sequence")
        self._next_turn: dict[int, int] = {}  # request index -> the same session's next turn's index
        last: dict[int, tuple[int, int]] = {}  # session -> (turn, index) of its latest turn so far
        arrivals: list[tuple[int, int]] = []
        for i in range(len(requests)):
            req = requests[i]
            if req.session is None:
                raise UsageError("conversations: every request needs session and turn")
            prev = last.get(req.session)
            expected = 1 if prev is None else prev[0] + 1
            if req.turn != expected:
                raise UsageError(f"conversations: session {req.session} has turn {req.turn} where "
                                 f"turn {expected} was due (give each session's turns in order)")
            if prev is None:
                t = to_ns(req.arrival_s)  # type: ignore[arg-type]
                if stop_ns is None or t < stop_ns:
                    arrivals.append((t, i))
            else:
                self._next_turn[prev[1]] = i
            last[req.session] = (req.turn, i)
        arrivals.sort()
        self._requests = requests
        self._arrivals = arrivals
        self._stop_ns = stop_ns
        self._max = max_requests
        self.sent = 0
        self.planned = len(arrivals)  # turns issued (turn 1s before the stop, then follow-ups)

    def initial(self) -> list[tuple[int, int]]:
        return self._arrivals

    def admit(self, index: int, t_ns: int) -> bool:
        """False when the count is reached: the turn is never sent, and its session ends."""
        if self._max is not None and self.sent >= self._max:
            return False
        self.sent += 1
        return True

    def on_done(self, t_ns: int, finished: int, finished_indices: Iterable[int] = (),
                leads_ns: Sequence[int] = ()) -> list[tuple[int, int]]:
        out = []
        for i in finished_indices:
            nxt = self._next_turn.get(i)
            if nxt is None:
                continue
            t = t_ns + to_ns(self._requests[nxt].think_time_s)
            if self._stop_ns is not None and t >= self._stop_ns:
                continue  # the run ends before the session's next turn is due
            if self._max is not None and self.sent >= self._max:
                continue  # bench's session ends at its wake-up; nothing more is sent either way
            self.planned += 1
            out.append((t, nxt))
        return out
