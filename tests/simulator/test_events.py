"""Simultaneous events follow one documented order: step end, then arrivals, then scheduling."""

from __future__ import annotations

from tokenpace.simulator import SimConfig, SimRequest, build_predictor, simulate
from tokenpace.simulator.events import Arrival, Event, Schedule, StepEnd
from tokenpace.simulator.loop import EventLoop
from tokenpace.simulator.step import StepBatch


class Probe:
    """Stands in for the world: records which events ran, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []


def probe(kind: type[Event], label: str) -> Event:
    class P(kind):  # type: ignore[valid-type, misc]
        __slots__ = ()

        def __init__(self, t_ns: int) -> None:
            Event.__init__(self, t_ns)

        def handle(self, world):  # noqa: ANN001
            world.seen.append(label)
            return ()

    return P


def test_loop_runs_step_end_then_arrivals_then_schedule_then_fifo():
    loop, world = EventLoop(), Probe()
    # Pushed in the "wrong" order on purpose, all at t = 100 ns, plus one earlier event.
    for kind, label in [(Schedule, "schedule"), (Arrival, "arrival-1"), (StepEnd, "step-end"),
                        (Arrival, "arrival-2"), (Schedule, "schedule-2")]:
        loop.push(probe(kind, label)(100))
    loop.push(probe(Schedule, "earlier")(50))
    loop.run(world)
    assert world.seen == ["earlier", "step-end", "arrival-1", "arrival-2", "schedule", "schedule-2"]


def test_request_arriving_as_a_step_ends_joins_the_next_batch():
    cfg = SimConfig(timeline=True)
    first_step = build_predictor(cfg).step_s(StepBatch(prefill=((1000, 0),)))
    t_end = round(first_step * 1e9)
    reqs = [SimRequest(1000, 50, arrival_s=0.0), SimRequest(1000, 50, arrival_s=t_end / 1e9)]
    res = simulate(cfg, reqs)
    a, b = res.records
    assert a.first_token_ns == t_end == b.sent_ns
    # The batch formed at t_end holds A's first decode and B's whole prompt.
    row = next(r for r in res.timeline if r.t_ns == t_end)
    assert (row.decode_seqs, row.prefill_tokens) == (1, 1000)


def test_request_arriving_mid_step_waits_for_the_step_to_end():
    cfg = SimConfig()
    first_step = build_predictor(cfg).step_s(StepBatch(prefill=((1000, 0),)))
    t_end = round(first_step * 1e9)
    reqs = [SimRequest(1000, 50, arrival_s=0.0), SimRequest(1000, 50, arrival_s=(t_end - 1000) / 1e9)]
    res = simulate(cfg, reqs)
    assert res.timeline[1].t_ns == t_end and res.timeline[1].prefill_tokens == 1000


def test_closed_loop_replacement_is_issued_when_its_predecessor_ends():
    res = simulate(SimConfig(concurrency=1), [SimRequest(100, 10), SimRequest(100, 10)])
    a, b = res.records
    assert b.sent_ns == a.done_ns
    assert b.first_token_ns > b.sent_ns
