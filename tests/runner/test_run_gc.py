"""quiet_gc: no automatic collection inside a run, the collector's state restored on every exit path,
and the safety valve that still frees reference cycles when a run makes many."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref

import pytest

from tokenpace.runner.loadgen import LoadGenerator, LoadSettings
from tokenpace.runner.run_gc import quiet_gc
from tokenpace.workload import PlannedRequest

from .garbage import _collector_on, _cycles  # noqa: F401 - _collector_on: an autouse fixture


def test_no_automatic_collection_inside_and_state_restored_after():
    async def main() -> list[weakref.ref]:
        async with quiet_gc(valve_objects=10**9):
            assert not gc.isenabled()
            refs = _cycles(20_000)  # far past the young generation's threshold (700)
            _cycles(20_000)
            await asyncio.sleep(0)
            assert all(r() is not None for r in refs)  # no collection ran
        assert gc.isenabled()
        assert gc.get_freeze_count() == 0
        return refs

    refs = asyncio.run(main())
    gc.collect()
    assert all(r() is None for r in refs)


def test_the_valve_collects_when_a_run_makes_many_cycles():
    async def main() -> None:
        async with quiet_gc(valve_objects=5_000, check_s=0.01):
            refs = _cycles(10_000)
            for _ in range(50):
                await asyncio.sleep(0.01)
                if all(r() is None for r in refs):
                    break
            assert all(r() is None for r in refs)
            assert not gc.isenabled()  # the valve collects; it does not turn the collector back on

    asyncio.run(main())


def test_state_restored_when_the_block_raises_and_a_disabled_collector_stays_off():
    async def fails() -> None:
        async with quiet_gc():
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        asyncio.run(fails())
    assert gc.isenabled() and gc.get_freeze_count() == 0

    async def quiet() -> None:
        async with quiet_gc():
            pass

    gc.disable()
    asyncio.run(quiet())
    assert not gc.isenabled()  # the caller's choice, kept


def test_a_load_generator_runs_without_automatic_collection_and_restores_it():
    states: list[bool] = []

    async def send(record, _prompt, _extra) -> None:
        record.sent_ns = time.monotonic_ns()
        states.append(gc.isenabled())
        await asyncio.sleep(0)
        record.status, record.done_ns = "ok", time.monotonic_ns()

    plan = iter(PlannedRequest(index=i, prompt="hi", input_tokens=1, output_tokens=1, offset_s=None)
                for i in range(20))
    settings = LoadSettings(concurrency=4, open_loop=False, total_requests=20, end_after_s=None)
    records: list = []
    lg = LoadGenerator(send, plan, settings, api="completions", stream=True, on_record=records.append)
    asyncio.run(lg.run())
    assert len(records) == 20 and states == [False] * 20
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_no_deadline_collection_while_the_valve_has_not_opened():
    """A load that never pauses and never opens the valve makes no old garbage: the deadline does not
    collect it (such a collection walks every object in flight), and a quiet moment does."""
    quiet = [False]

    async def main() -> list[weakref.ref]:
        async with quiet_gc(valve_objects=10**9, check_s=0.01, full_every_s=0.01, idle=lambda: quiet[0]):
            refs = _cycles(5_000)
            for _ in range(20):  # 20 checks, each past the deadline
                await asyncio.sleep(0.01)
            assert all(r() is not None for r in refs)
            quiet[0] = True
            for _ in range(200):
                await asyncio.sleep(0.01)
                if all(r() is None for r in refs):
                    break
            assert all(r() is None for r in refs)
        return refs

    asyncio.run(main())
