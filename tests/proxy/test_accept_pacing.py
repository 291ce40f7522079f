"""``--accepts-per-turn``: a burst of new connections is accepted a few per turn of the proxy's event
loop (``proxy/accept.py``), and every connection of the burst is still served, through the proxy
and recorded."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import pytest
from aiohttp import web

from tokenpace.proxy import ProxyConfig, running_proxy
from tokenpace.proxy.accept import PacedAcceptSite
from tokenpace.runner.sink import read_records

from .test_start_pacing import BODY, TurnCounter


class CountingSocket:
    """The listening socket, its accepts counted by the loop turn they happen in."""

    def __init__(self, sock: socket.socket, counter: TurnCounter, by_turn: dict[int, int]) -> None:
        self._sock, self._counter, self._by_turn = sock, counter, by_turn

    def accept(self):
        conn = self._sock.accept()
        self._by_turn[self._counter.turn] = self._by_turn.get(self._counter.turn, 0) + 1
        return conn

    def __getattr__(self, name: str):
        return getattr(self._sock, name)


def test_a_burst_of_connections_is_accepted_a_few_per_turn():
    clients, per_turn = 40, 3

    async def main() -> tuple[dict[int, int], list[bytes]]:
        app = web.Application()

        async def hello(_request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app.router.add_get("/", hello)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            site = PacedAcceptSite(runner, "127.0.0.1", 0, per_turn)
            await site.start()
            port = runner.addresses[0][1]
            counter, by_turn = TurnCounter(), {}
            listener = site._server
            listener._sock = CountingSocket(listener._sock, counter, by_turn)
            # Every client connects and sends before the loop runs again: the kernel completes the
            # handshakes, so the whole burst waits in the listening socket's queue at once.
            socks = []
            for _ in range(clients):
                s = socket.create_connection(("127.0.0.1", port))
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                s.setblocking(False)
                socks.append(s)
            loop = asyncio.get_running_loop()

            async def answer(s: socket.socket) -> bytes:
                data = b""
                while chunk := await loop.sock_recv(s, 4096):
                    data += chunk
                s.close()
                return data

            answers = await asyncio.wait_for(asyncio.gather(*(answer(s) for s in socks)), 30)
            counter.stop()
            return by_turn, answers
        finally:
            await runner.cleanup()

    by_turn, answers = asyncio.run(main())
    assert all(a.startswith(b"HTTP/1.1 200") and a.endswith(b"ok") for a in answers)
    assert sum(by_turn.values()) == clients
    assert max(by_turn.values()) <= per_turn  # never more than a turn's accepts...
    assert len(by_turn) >= clients // per_turn  # ...so the burst took turns


def test_a_site_needs_one_accept_a_turn():
    async def main() -> None:
        runner = web.AppRunner(web.Application())
        await runner.setup()
        try:
            with pytest.raises(ValueError):
                PacedAcceptSite(runner, "127.0.0.1", 0, 0)
        finally:
            await runner.cleanup()

    asyncio.run(main())


def test_the_proxy_with_paced_accepts_serves_and_records_a_burst(server_url, tmp_path):
    """30 streams, each on a new connection, at once through a proxy accepting 2 a turn: every one
    answered in full and recorded once."""
    path = tmp_path / "live.jsonl"
    streams = 30

    async def main() -> list[bytes]:
        config = ProxyConfig(upstream=server_url, port=0, records_path=str(path), accepts_per_turn=2)
        async with running_proxy(config) as (url, state):
            connector = aiohttp.TCPConnector(limit=0, force_close=True)  # a new connection per request
            async with aiohttp.ClientSession(connector=connector) as session:
                async def one(i: int) -> bytes:
                    async with session.post(url + "/chat/completions", json=BODY,
                                            headers={"X-Request-ID": f"a{i}"}) as resp:
                        return await resp.read()

                answers = await asyncio.gather(*(one(i) for i in range(streams)))
            for _ in range(200):
                if state.total == streams:
                    break
                await asyncio.sleep(0.01)
            return answers

    answers = asyncio.run(main())
    assert all(a.rstrip().endswith(b"data: [DONE]") for a in answers)
    records = read_records(path)
    assert sorted(r.request_id for r in records) == sorted(f"a{i}" for i in range(streams))
    assert all(r.status == "ok" and r.output_tokens == 4 for r in records)
