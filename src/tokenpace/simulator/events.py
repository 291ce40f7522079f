"""Events: small objects whose handler returns the events they cause.

Simultaneous events run in one documented order (``ORDER``, then creation order):

1. ``StepEnd``: a step's tokens are delivered, finished sequences free their KV cache and, in a
   closed loop, their clients issue the next requests (in a conversation, the session's next turn
   is due a think time later);
2. ``Timeout``: a client's limit passes: the engine cancels the request and frees its KV cache
   (tokens delivered at that very instant count, as the client read them first);
3. ``Arrival``: a request reaches the engine's waiting queue (or, under an open loop's cap on
   requests in flight, waits for a slot and arrives again when one frees);
4. ``Schedule``: the scheduler forms the next batch (after a step during which requests arrived,
   the engine's join window later, if it has one: ``Engine.schedule_ns``).

So a request arriving at the very instant a step ends joins the batch formed at that instant, and the
KV freed by a sequence finishing then is available to it. Events of the same kind and time run in the
order they were created (FIFO), which keeps runs deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from tokenpace.simulator.engine import Step
    from tokenpace.simulator.world import World


class Event:
    __slots__ = ("t_ns",)
    ORDER: ClassVar[int]

    def __init__(self, t_ns: int) -> None:
        self.t_ns = t_ns

    def handle(self, world: World) -> Iterable[Event]:  # pragma: no cover - interface
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(t_ns={self.t_ns})"


def _issue(world: World, t_ns: int, finished: list[int], leads_ns: list[int] | tuple = ()) -> list[Event]:
    """``finished``: the indices of the requests that just ended (a session's next turn follows);
    ``leads_ns``: how long before ``t_ns`` each was streamed (``Sequence.lead_ns``)."""
    return [Arrival(t, i) for t, i in world.load.on_done(t_ns, len(finished), finished, leads_ns)]


def _maybe_schedule(world: World, t_ns: int, out: list[Event], after_step: bool = False) -> list[Event]:
    """``out`` with a scheduling pass where the engine is idle: at ``t_ns``, or after a step, when the
    engine forms its next batch (``Engine.schedule_ns``: a join window after a step with arrivals)."""
    if world.engine.claim_schedule():
        out.append(Schedule(world.engine.schedule_ns(t_ns) if after_step else t_ns))
    return out


class StepEnd(Event):
    __slots__ = ("step",)
    ORDER = 0

    def __init__(self, t_ns: int, step: Step) -> None:
        super().__init__(t_ns)
        self.step = step

    def handle(self, world: World) -> Iterable[Event]:
        if self.step.end_ns > self.t_ns:  # arrivals' host work moved the step's end (engine.arrival_s)
            return (StepEnd(self.step.end_ns, self.step),)
        done = world.engine.finish_step(self.step)
        for seq in done:
            world.complete(seq)
        leads = [seq.lead_ns for seq in done]  # (all 0 unless the engine streams in slots: stream_slots.py)
        return _maybe_schedule(world, self.t_ns, _issue(world, self.t_ns, [seq.index for seq in done], leads),
                               after_step=True)


class Timeout(Event):
    __slots__ = ("index", "kind")
    ORDER = 1

    def __init__(self, t_ns: int, index: int, kind: str) -> None:
        super().__init__(t_ns)
        self.index = index
        self.kind = kind  # "total_timeout" or "ttft_timeout"

    def handle(self, world: World) -> Iterable[Event]:
        seq = world.live(self.index)
        if seq is None or (self.kind == "ttft_timeout" and seq.first_token_ns is not None):
            return ()  # it ended, or its first token came in time
        world.engine.cancel(seq, self.t_ns)
        world.time_out(seq, self.t_ns, self.kind)
        return _maybe_schedule(world, self.t_ns, _issue(world, self.t_ns, [self.index]))


class Arrival(Event):
    __slots__ = ("index",)
    ORDER = 2

    def __init__(self, t_ns: int, index: int) -> None:
        super().__init__(t_ns)
        self.index = index

    def handle(self, world: World) -> Iterable[Event]:
        if not world.load.admit(self.index, self.t_ns):
            return ()  # an open loop's cap is full: the load issues it again when a slot frees
        seq = world.new_sequence(self.index, self.t_ns)
        if world.engine.arrive(seq):
            return _maybe_schedule(world, self.t_ns, world.timeouts(seq))
        world.reject(seq, self.t_ns)
        return _maybe_schedule(world, self.t_ns, _issue(world, self.t_ns, [self.index]))


class Schedule(Event):
    __slots__ = ()
    ORDER = 3

    def handle(self, world: World) -> Iterable[Event]:
        step = world.engine.start_step(self.t_ns, world.loop.peek_ns())
        return (StepEnd(step.end_ns, step),) if step is not None else ()
