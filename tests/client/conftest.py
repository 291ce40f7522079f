"""Loopback servers for the client tests, started inside each test (no network beyond 127.0.0.1)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def _serve_app(routes: dict[tuple[str, str], Handler]) -> AsyncIterator[str]:
    """An aiohttp app on 127.0.0.1, port 0. ``routes``: {(method, path): handler}. Yields base_url."""
    app = web.Application()
    for (method, path), handler in routes.items():
        app.router.add_route(method, path, handler)
    # A short shutdown timeout: a handler still waiting when the test ends must not hold it up.
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.2, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def _serve_raw(
    respond: Callable[[bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    """A raw TCP server for byte-exact misbehaviour: ``respond(request_bytes, reader, writer)`` writes
    whatever it likes (or nothing) after the request was read; the connection closes when it
    returns. Yields base_url."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length)
        try:
            await respond(head + body, reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
def serve_app():
    return _serve_app


@pytest.fixture
def serve_raw():
    return _serve_raw
