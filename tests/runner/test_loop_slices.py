"""LoopSlices (records handed over a slice per loop turn, sends a few per turn) and the load
generator's exit paths with it: every request still ends as exactly one record, handed over by the
time ``run()`` returns, however the run ends."""

from __future__ import annotations

import asyncio
import time

import pytest

from tokenpace.runner.loadgen import LoadGenerator, LoadSettings
from tokenpace.runner import loop_slices
from tokenpace.runner.loop_slices import LoopSlices
from tokenpace.workload import PlannedRequest


class TurnCounter:
    """Counts the event loop's turns: a callback that schedules itself again each turn."""

    def __init__(self) -> None:
        self.turn = 0
        self._on = True
        asyncio.get_running_loop().call_soon(self._next)

    def _next(self) -> None:
        self.turn += 1
        if self._on:
            asyncio.get_running_loop().call_soon(self._next)

    def stop(self) -> None:
        self._on = False


def test_records_are_handed_over_later_in_order_and_all_by_flush():
    got: list[int] = []

    async def main() -> None:
        slices = LoopSlices(got.append, record_budget_ns=0)  # one record per turn
        for i in range(5):
            slices.record(i)
        assert got == []  # none on the caller's turn
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert got and got == list(range(len(got))) and len(got) < 5
        slices.flush()
        assert got == [0, 1, 2, 3, 4]
        slices.record(5)  # after the flush: at once
        assert got[-1] == 5

    asyncio.run(main())


def test_sends_are_spread_over_turns_in_the_order_they_asked():
    async def main() -> list[tuple[int, int]]:
        slices: LoopSlices[int] = LoopSlices(lambda _r: None, sends_per_turn=3)
        turns = TurnCounter()
        went: list[tuple[int, int]] = []

        async def sender(i: int) -> None:
            await slices.send_turn()
            went.append((i, turns.turn))

        await asyncio.gather(*(sender(i) for i in range(12)))
        turns.stop()
        return went

    went = asyncio.run(main())
    assert [i for i, _ in went] == list(range(12))  # first come, first sent
    per_turn: dict[int, int] = {}
    for _, turn in went:
        per_turn[turn] = per_turn.get(turn, 0) + 1
    assert max(per_turn.values()) <= 3
    assert len(per_turn) >= 4


def test_a_cancelled_sender_gives_its_place_up():
    async def main() -> list[int]:
        slices: LoopSlices[int] = LoopSlices(lambda _r: None, sends_per_turn=1)
        went: list[int] = []

        async def sender(i: int) -> None:
            await slices.send_turn()
            went.append(i)

        tasks = [asyncio.ensure_future(sender(i)) for i in range(4)]
        await asyncio.sleep(0)  # 0 went at once; 1, 2, 3 wait
        tasks[1].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return went

    assert asyncio.run(main()) == [0, 2, 3]


def test_a_failing_hand_over_does_not_strand_the_records_behind_it():
    got: list[int] = []
    errors: list[object] = []

    def on_record(r: int) -> None:
        if r == 1:
            raise RuntimeError("boom")
        got.append(r)

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx.get("exception")))
        slices = LoopSlices(on_record, record_budget_ns=0)
        for i in range(4):
            slices.record(i)
        for _ in range(10):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert got == [0, 2, 3]
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)


def test_sends_per_turn_below_one_is_refused():
    with pytest.raises(ValueError, match="sends_per_turn"):
        LoopSlices(lambda _r: None, sends_per_turn=0)


# -- the load generator's exit paths -----------------------------------------------------------------


def _plan(n: int):
    return iter(PlannedRequest(index=i, prompt="hi", input_tokens=1, output_tokens=1, offset_s=None)
                for i in range(n))


def _settings(total: int | None, concurrency: int, **kw) -> LoadSettings:
    return LoadSettings(concurrency=concurrency, open_loop=False, total_requests=total, end_after_s=None,
                        grace_s=0.05, **kw)


async def _quick(record, _prompt, _extra) -> None:
    record.sent_ns = time.monotonic_ns()
    await asyncio.sleep(0)
    record.status, record.done_ns = "ok", time.monotonic_ns()


async def _forever(record, _prompt, _extra) -> None:
    record.sent_ns = time.monotonic_ns()
    await asyncio.Event().wait()


def _loadgen(send, total, concurrency, records, launched, **kw) -> LoadGenerator:
    return LoadGenerator(send, _plan(total or 10_000), _settings(total, concurrency, **kw), api="completions",
                         stream=True, on_record=records.append, on_launch=launched.append)


async def _run_and_count(lg: LoadGenerator, records: list) -> int:
    await lg.run()
    return len(records)


def test_a_count_bounded_run_hands_over_every_record_once():
    records, launched = [], []

    def slow_on_record(record) -> None:  # over a turn's budget each: most are still queued at the end
        time.sleep(0.001)
        records.append(record)

    lg = LoadGenerator(_quick, _plan(64), _settings(64, 64), api="completions", stream=True,
                       on_record=slow_on_record, on_launch=launched.append)
    assert asyncio.run(_run_and_count(lg, records)) == 64  # all of them by the time run() returned
    assert sorted(r.index for r in records) == list(range(64))
    assert lg.sent_count == len(launched) == 64


def test_a_stopped_run_accounts_for_every_request_sent():
    records, launched = [], []

    def on_record(record) -> None:  # a Ctrl-C once 100 requests have ended
        records.append(record)
        if len(records) == 100:
            lg.stop()

    lg = LoadGenerator(_quick, _plan(10_000), _settings(None, 16), api="completions", stream=True,
                       on_record=on_record, on_launch=launched.append)
    handed_over = asyncio.run(_run_and_count(lg, records))
    assert lg.interrupted
    assert lg.sent_count == len(launched) == len(records) == handed_over >= 100
    assert sorted(r.index for r in records) == sorted(r.index for r in launched)


def test_cancelled_requests_are_records_when_run_returns():
    records, launched = [], []

    async def main() -> LoadGenerator:
        lg = _loadgen(_forever, 40, 8, records, launched)
        task = asyncio.ensure_future(lg.run())
        while len(launched) < 8:
            await asyncio.sleep(0.01)
        lg.cancel_now()
        await task
        assert len(records) == 8  # by the time run() returned
        return lg

    lg = asyncio.run(main())
    assert len(records) == len(launched) == lg.sent_count == 8
    assert {r.status for r in records} == {"cancelled"}


def test_a_run_cancelled_from_outside_still_hands_over_its_records():
    records, launched = [], []

    async def main() -> None:
        lg = _loadgen(_forever, 40, 8, records, launched, end_grace_s=30.0)
        task = asyncio.ensure_future(lg.run())
        while len(launched) < 8:
            await asyncio.sleep(0.01)
        lg.stop()
        await asyncio.sleep(0)
        task.cancel()  # the run is cancelled in its drain: the records must still come out
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(records) == 8  # by the time the cancelled run() ended

    asyncio.run(main())
    assert len(records) == len(launched) == 8


def test_a_deferred_finish_runs_in_the_hand_over_and_a_failing_one_keeps_the_record():
    """A send that returns a finisher (the client's send_deferred): the sink sees each record only
    after its finisher ran, and a finisher that raises still leaves a (client_bug) record."""
    records, launched = [], []
    finished_before_sink = []

    async def deferred(record, _prompt, _extra):
        record.sent_ns = time.monotonic_ns()
        await asyncio.sleep(0)
        record.status, record.done_ns = "ok", time.monotonic_ns()

        def finish() -> None:
            if record.index == 3:
                raise ValueError("token split failed")
            record.output_tokens = 7

        return finish

    def sink(record) -> None:
        finished_before_sink.append(record.output_tokens)
        records.append(record)

    lg = LoadGenerator(deferred, _plan(20), _settings(20, 4), api="completions", stream=True,
                       on_record=sink, on_launch=launched.append)
    asyncio.run(lg.run())
    assert sorted(r.index for r in records) == list(range(20))
    by_index = {r.index: r for r in records}
    assert by_index[3].status == "error" and by_index[3].error_kind == "client_bug"
    assert "token split failed" in by_index[3].error_message
    assert all(by_index[i].output_tokens == 7 and by_index[i].status == "ok" for i in range(20) if i != 3)
    assert finished_before_sink.count(7) == 19


class FakeClock:
    """Stands in for loop_slices.perf_counter_ns: time moves only when the test says."""

    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns


def test_records_wait_while_requests_wait_for_a_send_slot():
    events: list[tuple[str, int]] = []

    async def main() -> None:
        slices: LoopSlices[int] = LoopSlices(lambda r: events.append(("record", r)), sends_per_turn=1)

        async def sender(i: int) -> None:
            await slices.send_turn()
            events.append(("send", i))

        senders = [asyncio.ensure_future(sender(i)) for i in range(5)]
        await asyncio.sleep(0)  # sender 0 went at once, 1-4 wait for a slot
        for i in range(3):  # a wave's end: records queued behind sends
            slices.record(i)
        await asyncio.gather(*senders)
        for _ in range(10):
            await asyncio.sleep(0)
        slices.flush()

    asyncio.run(main())
    kinds = [kind for kind, _ in events]
    assert sorted(events) == [("record", 0), ("record", 1), ("record", 2)] + [("send", i) for i in range(5)]
    assert kinds.index("record") > max(i for i, kind in enumerate(kinds) if kind == "send")


def test_a_record_that_waited_too_long_goes_while_requests_still_wait_to_send(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(loop_slices, "perf_counter_ns", clock)
    events: list[tuple[str, int]] = []

    async def main() -> None:
        slices: LoopSlices[int] = LoopSlices(lambda r: events.append(("record", r)), sends_per_turn=1,
                                            record_max_wait_ns=1_000_000)

        async def sender(i: int) -> None:
            await slices.send_turn()
            events.append(("send", i))

        senders = [asyncio.ensure_future(sender(i)) for i in range(6)]
        await asyncio.sleep(0)
        slices.record(0)
        clock.ns += 1_000_000  # record 0 has now waited record_max_wait_ns
        await asyncio.gather(*senders)
        slices.flush()

    asyncio.run(main())
    kinds = [kind for kind, _ in events]
    assert sorted(events) == [("record", 0)] + [("send", i) for i in range(6)]
    assert kinds.index("record") < max(i for i, kind in enumerate(kinds) if kind == "send")
