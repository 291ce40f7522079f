"""The proxy's end work behind the relay: every piece runs once, in order, yielding to other tasks
between slices; nothing handed over is lost at shutdown; and through the proxy, many streams that
end together each leave one whole record and nothing queued."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from tokenpace.proxy import ProxyConfig, running_proxy
from tokenpace.proxy.finisher import Finisher
from tokenpace.runner.sink import read_records


def test_work_before_start_and_after_close_runs_at_once():
    finisher, done = Finisher(), []
    finisher.defer(lambda: done.append("before"))
    assert done == ["before"] and finisher.queued == 0

    async def main() -> None:
        finisher.start()
        await finisher.close()
        finisher.defer(lambda: done.append("after"))

    asyncio.run(main())
    assert done == ["before", "after"] and finisher.done == 2


def test_slices_yield_to_the_relay_and_keep_order():
    """With a slice of 0 ns (and no share of long turns) each slice is one piece of work: another task
    that is ready runs between any two pieces, as a relay's read would."""
    finisher, log = Finisher(slice_ns=0, share=0), []

    async def relay() -> None:
        for i in range(5):
            log.append(f"read{i}")
            await asyncio.sleep(0)

    async def main() -> None:
        finisher.start()
        for i in range(5):
            finisher.defer(lambda i=i: log.append(f"end{i}"))
        await relay()
        await asyncio.sleep(0.01)
        await finisher.close()

    asyncio.run(main())
    ends = [x for x in log if x.startswith("end")]
    assert ends == [f"end{i}" for i in range(5)]
    positions = [log.index(f"end{i}") for i in range(5)]
    assert all(b - a > 1 for a, b in zip(positions, positions[1:])), log  # a read between each two


def test_close_runs_what_is_queued_and_a_failure_stops_nothing():
    finisher, done = Finisher(), []
    errors: list = []

    def bad() -> None:
        raise ValueError("boom")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx["exception"]))
        finisher.start()
        finisher.defer(lambda: done.append(1))
        finisher.defer(bad)
        finisher.defer(lambda: done.append(2))
        await finisher.close()  # before the background task had a turn

    asyncio.run(main())
    assert done == [1, 2] and finisher.failed == 1 and finisher.done == 3
    assert [str(e) for e in errors] == ["boom"]


@pytest.mark.parametrize("streams", [60])
def test_streams_ending_together_each_leave_one_record(server_url, tmp_path, streams):
    path = tmp_path / "live.jsonl"
    body = {"model": "tokenpace-sim", "messages": [{"role": "user", "content": "x"}], "max_tokens": 8,
            "stream": True, "stream_options": {"include_usage": True}}

    async def main() -> tuple[int, int]:
        async with running_proxy(ProxyConfig(upstream=server_url, port=0, records_path=str(path))) as (url, state):
            async with aiohttp.ClientSession() as session:
                async def one(i: int) -> bytes:
                    async with session.post(url + "/chat/completions", json=body,
                                            headers={"X-Request-ID": f"r{i}"}) as resp:
                        return await resp.read()

                answers = await asyncio.gather(*(one(i) for i in range(streams)))
            assert all(a.rstrip().endswith(b"data: [DONE]") for a in answers)
            for _ in range(200):  # the end work finishes behind the relay, soon after
                if state.total == streams:
                    break
                await asyncio.sleep(0.01)
            return state.total, state.finisher.queued

    total, queued = asyncio.run(main())
    assert (total, queued) == (streams, 0)  # nothing of a request kept once its record is written
    records = read_records(path)
    assert sorted(r.request_id for r in records) == sorted(f"r{i}" for i in range(streams))
    assert all(r.status == "ok" and r.output_tokens == 8 and len(r.chunk_ns) == 8 for r in records)


def test_records_handed_over_at_shutdown_are_written(server_url, tmp_path):
    """The proxy stops the moment the client has its answers: the records still queued behind the
    relay are written before the sink closes."""
    path = tmp_path / "live.jsonl"
    body = {"model": "tokenpace-sim", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4, "stream": True}

    async def main() -> None:
        async with running_proxy(ProxyConfig(upstream=server_url, port=0, records_path=str(path))) as (url, _state):
            async with aiohttp.ClientSession() as session:
                async def one(i: int) -> None:
                    async with session.post(url + "/chat/completions", json=body,
                                            headers={"X-Request-ID": f"s{i}"}) as resp:
                        await resp.read()

                await asyncio.gather(*(one(i) for i in range(20)))

    asyncio.run(main())
    records = read_records(path)
    assert sorted(r.request_id for r in records) == sorted(f"s{i}" for i in range(20))
    assert all(r.status == "ok" and r.output_tokens == 4 for r in records)


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.parametrize("share", [0.25, 0.0])
def test_long_turns_give_the_finisher_a_share_so_a_backlog_cannot_grow_for_ever(share):
    """A loop whose every turn is long (a relay busy 20 ms a turn): with a fixed slice alone the
    finisher ran one piece a turn, so a queue fed faster than that grew without bound; with a share
    of the turn it runs several pieces in a turn."""
    finisher, log = Finisher(slice_ns=0, share=share), []

    async def relay() -> None:
        for _ in range(8):
            _busy(0.02)
            log.append("turn")
            await asyncio.sleep(0)

    async def main() -> None:
        finisher.start()
        for _ in range(40):
            finisher.defer(lambda: (_busy(0.0002), log.append("end")))
        await relay()
        await finisher.close()

    asyncio.run(main())
    runs, count = [], 0  # pieces run between two relay turns
    for entry in log:
        if entry == "turn":
            runs.append(count)
            count = 0
        else:
            count += 1
    if share:
        assert max(runs[1:]) >= 5, runs  # a 5 ms budget after a 20 ms turn: many 0.2 ms pieces
    else:
        assert max(runs) <= 1, runs  # the control: one piece a turn
