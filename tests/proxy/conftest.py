"""The proxy on loopback, in a thread of its own (so that a synchronous SDK can call it), in front
of real built-in server processes."""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager

import pytest

from tokenpace.proxy import ProxyConfig, running_proxy


@contextmanager
def proxy_thread(config: ProxyConfig):
    """Yields (proxy base URL, its state); stops it on exit."""
    ready: dict = {}
    started = threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def main() -> None:
        async with running_proxy(config) as (url, state):
            ready["url"], ready["state"] = url, state
            started.set()
            await stop.wait()

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    assert started.wait(10), "the proxy did not start"
    try:
        yield ready["url"], ready["state"]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


@pytest.fixture
def make_proxy():
    return proxy_thread


@contextmanager
def app_thread(app):
    """An aiohttp app on 127.0.0.1 in a thread of its own; yields its base URL (``.../v1``)."""
    from aiohttp import web

    ready: dict = {}
    started = threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ready["url"] = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
        started.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield ready["url"]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


@pytest.fixture
def serve_app_thread():
    return app_thread
