"""The client's timeouts: the connect limit, one watchdog timer per request (not one per chunk), a
cancellation from outside staying a cancellation, and the Retry-After header."""

from __future__ import annotations

import asyncio
import socket
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from tokenpace.client import OpenAIClient
from tokenpace.client import watchdog as watchdog_module
from tokenpace.client.retry_after import retry_after_s
from tokenpace.record import RequestRecord
from tokenpace.servers import BuiltinServerConfig, running_server

FAST = dict(prefill_base_s=0.002, prefill_per_token_s=0.0, decode_base_s=0.005, decode_per_running_s=0.0,
            jitter_frac=0.0)  # fmt: skip


def test_connect_timeout_on_a_listener_that_never_accepts():
    # A backlog of 0, already full: the kernel drops further SYNs, so connecting hangs (loopback only).
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        for filler in fillers:
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
        record = RequestRecord(request_id="r", index=0)

        async def scenario() -> None:
            async with OpenAIClient(f"http://127.0.0.1:{port}/v1", "m", connect_timeout_s=0.3) as client:
                await client.send(record, "hi")

        try:
            asyncio.run(scenario())
        finally:
            for filler in fillers:
                filler.close()
    assert (record.status, record.error_kind, record.http_status) == ("timeout", "connect_timeout", None)
    assert (record.done_ns - record.sent_ns) / 1e9 >= 0.3  # (how soon after is the machine's speed)
    assert record.error_message == "no connection within connect_timeout_s=0.3"


def test_a_stream_costs_one_timer_not_one_per_chunk(monkeypatch):
    arms = []
    original = watchdog_module.Watchdog._arm

    def counting_arm(self, now, due):
        arms.append(now)
        original(self, now, due)

    monkeypatch.setattr(watchdog_module.Watchdog, "_arm", counting_arm)
    record = RequestRecord(request_id="r", index=0, requested_output_tokens=60)

    async def scenario() -> None:
        async with running_server(BuiltinServerConfig(**FAST)) as url:
            async with OpenAIClient(url, "tokenpace-sim", connect_timeout_s=1, ttft_timeout_s=1,
                                    idle_timeout_s=0.2, timeout_s=5) as client:  # fmt: skip
                await client.send(record, "hi")

    asyncio.run(scenario())
    assert (record.status, len(record.chunk_ns)) == ("ok", 60)  # 60 chunks in about 0.3 s
    # Armed at send, then re-armed only when it fires (at most once per idle period).
    stream_s = (record.done_ns - record.sent_ns) / 1e9
    assert len(arms) <= 2 + stream_s / 0.2 and len(arms) < 10, (len(arms), stream_s)


def test_a_cancellation_from_outside_is_still_a_cancellation():
    record = RequestRecord(request_id="r", index=0, requested_output_tokens=1000)

    async def scenario() -> None:
        async with running_server(BuiltinServerConfig(**FAST)) as url:
            async with OpenAIClient(url, "tokenpace-sim", ttft_timeout_s=5, idle_timeout_s=5) as client:
                task = asyncio.create_task(client.send(record, "hi"))
                while len(record.chunk_ns) < 3:
                    await asyncio.sleep(0.005)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

    asyncio.run(scenario())
    assert (record.status, record.error_kind) == ("cancelled", None)
    assert len(record.chunk_ns) >= 3 and record.done_ns >= record.last_token_ns


def test_a_timeout_does_not_leave_the_task_cancelled():
    async def scenario() -> tuple[RequestRecord, int]:
        record = RequestRecord(request_id="r", index=0, requested_output_tokens=4)
        async with running_server(BuiltinServerConfig(faults="stall-first=at:1:2s", **FAST)) as url:
            async with OpenAIClient(url, "tokenpace-sim", ttft_timeout_s=0.1) as client:
                await client.send(record, "hi")
                await asyncio.sleep(0.01)  # would raise CancelledError if a cancel were still pending
        task = asyncio.current_task()
        return record, task.cancelling() if hasattr(task, "cancelling") else 0  # Python 3.11+

    record, cancelling = asyncio.run(scenario())
    assert (record.status, record.error_kind, cancelling) == ("timeout", "ttft_timeout", 0)


@pytest.mark.parametrize("name", ["timeout_s", "connect_timeout_s", "ttft_timeout_s", "idle_timeout_s"])
@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), "5"])
def test_invalid_limits_are_rejected(name, value):
    with pytest.raises(ValueError, match=name):
        OpenAIClient("http://127.0.0.1:1/v1", "m", **{name: value})


def test_retry_after_forms():
    assert retry_after_s({"Retry-After": "2"}) == 2.0
    assert retry_after_s({"Retry-After": "0.5"}) == 0.5
    assert retry_after_s({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25  # OpenAI's, more precise
    assert retry_after_s({}) is None
    assert retry_after_s({"Retry-After": "soon"}) is None
    assert retry_after_s({"Retry-After": "-3"}) is None
    in_30_s = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 <= retry_after_s({"Retry-After": in_30_s}) <= 31
    an_hour_ago = format_datetime(datetime.now(timezone.utc) - timedelta(hours=1), usegmt=True)
    assert retry_after_s({"Retry-After": an_hour_ago}) == 0.0
