"""A listening site that accepts at most N connections per turn of the event loop.

The event loop's own accept takes every connection waiting in one turn (uvloop: until the socket
has no more; asyncio: up to ``backlog``), and their requests are read and parsed in the next: a
burst of 200 new connections is one long turn in which no stream already flowing is relayed.
``PacedAcceptSite`` listens itself (a reader on the listening socket) and accepts at most
``per_turn`` connections each time the loop finds it readable; the socket stays readable while
connections wait, so the rest are taken in the following turns, with the other streams' reads
between. Each accepted socket is handed to aiohttp's own protocol factory
(``loop.connect_accepted_socket``), so what happens after the accept is unchanged. The listen
backlog is large (``BACKLOG``) so that a burst waits in the kernel's queue instead of being refused.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from aiohttp import web

BACKLOG = 1024  # the kernel caps it at net.core.somaxconn


class _Listener:
    """The listening socket and its reader; what aiohttp reads of a server (``sockets``, ``close``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, factory: Any, per_turn: int) -> None:
        self.sockets = [sock]
        self._loop, self._sock, self._factory, self._per_turn = loop, sock, factory, per_turn
        self._tasks: set[asyncio.Task[Any]] = set()  # connections being handed to the factory
        loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(self._per_turn):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return  # nothing more waits
            except OSError:
                return  # out of file descriptors, a connection reset before its accept: the reader tries again
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = self._loop.create_task(self._connect(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _connect(self, conn: socket.socket) -> None:
        try:
            await self._loop.connect_accepted_socket(self._factory, conn)
        except OSError:
            conn.close()  # the client left before its transport was made

    def close(self) -> None:
        if self._sock.fileno() >= 0:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()


class PacedAcceptSite(web.BaseSite):
    """``web.TCPSite`` with the accepts of a burst spread over turns: ``per_turn`` a turn (>= 1)."""

    __slots__ = ("_host", "_port", "_per_turn")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, per_turn: int) -> None:
        super().__init__(runner, backlog=BACKLOG)
        if per_turn < 1:
            raise ValueError("per_turn must be >= 1")
        self._host, self._port, self._per_turn = host, port, per_turn

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, self._port))
            sock.listen(self._backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._port = sock.getsockname()[1]
        server = self._runner.server
        assert server is not None
        self._server = _Listener(asyncio.get_running_loop(), sock, server, self._per_turn)  # type: ignore[assignment]
