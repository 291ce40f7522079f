"""A burst of new requests is sent upstream a few per turn of the proxy's event loop (the bench
client's ``LoopSlices.send_turn``), so that the streams already flowing are relayed in between; and
every request of the burst is still answered and recorded, those whose client left while they
waited for their turn included."""

from __future__ import annotations

import asyncio
import socket
from urllib.parse import urlsplit

import aiohttp

from tokenpace.proxy import ProxyConfig, running_proxy
from tokenpace.runner.sink import read_records

BODY = {"model": "tokenpace-sim", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4, "stream": True}


class TurnCounter:
    """Counts the event loop's turns: one step of its task per turn."""

    def __init__(self) -> None:
        self.turn = 0
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0)
            self.turn += 1

    def stop(self) -> None:
        self._task.cancel()


def test_a_burst_is_sent_upstream_a_few_per_turn(server_url, tmp_path):
    path = tmp_path / "live.jsonl"
    streams, per_turn = 60, 4

    async def main() -> tuple[dict[int, int], int]:
        config = ProxyConfig(upstream=server_url, port=0, records_path=str(path), starts_per_turn=per_turn)
        async with running_proxy(config) as (url, state):
            counter = TurnCounter()
            sends_by_turn: dict[int, int] = {}
            send_turn = state.sends.send_turn

            async def counted() -> None:  # the send slot each request gets, by the turn it is sent in
                await send_turn()
                sends_by_turn[counter.turn] = sends_by_turn.get(counter.turn, 0) + 1

            state.sends.send_turn = counted
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
                async def one(i: int) -> bytes:
                    async with session.post(url + "/chat/completions", json=BODY,
                                            headers={"X-Request-ID": f"b{i}"}) as resp:
                        return await resp.read()

                answers = await asyncio.gather(*(one(i) for i in range(streams)))
            counter.stop()
            assert all(a.rstrip().endswith(b"data: [DONE]") for a in answers)
            for _ in range(200):
                if state.total == streams:
                    break
                await asyncio.sleep(0.01)
            return sends_by_turn, state.total

    sends_by_turn, total = asyncio.run(main())
    assert total == streams and sum(sends_by_turn.values()) == streams
    assert max(sends_by_turn.values()) <= per_turn  # never more than a turn's slots...
    assert len(sends_by_turn) >= streams // per_turn  # ...so the burst took turns, with the loop polling between
    records = read_records(path)
    assert sorted(r.request_id for r in records) == sorted(f"b{i}" for i in range(streams))
    assert all(r.status == "ok" and r.output_tokens == 4 for r in records)


def test_clients_that_leave_while_their_request_waits_are_recorded(server_url, tmp_path):
    """One send a turn, 30 clients that send their request and hang up at once: each request has
    one record, ``ok`` or ``cancelled`` by ``client_disconnected``, and no send slot is left taken."""
    path = tmp_path / "live.jsonl"
    streams = 30

    async def main() -> int:
        config = ProxyConfig(upstream=server_url, port=0, records_path=str(path), starts_per_turn=1)
        async with running_proxy(config) as (url, state):
            parts = urlsplit(url)
            payload = (b'{"model": "tokenpace-sim", "messages": [{"role": "user", "content": "x"}], '
                       b'"max_tokens": 64, "stream": true}')
            socks = []
            for i in range(streams):
                s = socket.create_connection((parts.hostname, parts.port))
                s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: "
                          f"application/json\r\nContent-Length: {len(payload)}\r\nX-Request-ID: c{i}\r\n\r\n"
                          .encode() + payload)
                socks.append(s)
            await asyncio.sleep(0)  # the proxy reads some of them...
            for s in socks:  # ...and every client leaves
                s.close()
            for _ in range(500):
                if state.total == streams and state.in_flight == 0:
                    break
                await asyncio.sleep(0.01)
            # a later request gets its slot at once: none is left taken by the clients that left
            async with aiohttp.ClientSession() as session:
                async with session.post(url + "/chat/completions", json=BODY, headers={"X-Request-ID": "after"}) as resp:
                    assert (await resp.read()).rstrip().endswith(b"data: [DONE]")
            for _ in range(200):
                if state.total == streams + 1:
                    break
                await asyncio.sleep(0.01)
            return state.total

    assert asyncio.run(main()) == streams + 1
    records = {r.request_id: r for r in read_records(path)}
    assert sorted(records) == sorted([f"c{i}" for i in range(streams)] + ["after"])
    for i in range(streams):
        r = records[f"c{i}"]
        assert r.status == "ok" or (r.status, r.error_kind) == ("cancelled", "client_disconnected"), r
    assert records["after"].status == "ok"
