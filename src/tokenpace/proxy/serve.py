"""Running the proxy: inside the caller's event loop (tests, benchmarks), or until a signal."""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from tokenpace.runner.run_gc import quiet_gc

from .accept import PacedAcceptSite
from .app import ProxyState, create_app, proxy_state
from .config import ProxyConfig


@asynccontextmanager
async def running_proxy(config: ProxyConfig) -> AsyncIterator[tuple[str, ProxyState]]:
    """Serve in the running loop; yields (base URL ``http://HOST:PORT/v1``, the proxy's state)."""
    app = create_app(config)
    # handler_cancellation: a client that leaves cancels its handler, which closes the upstream request.
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0, handler_cancellation=True)
    await runner.setup()
    try:
        site = (PacedAcceptSite(runner, config.host, config.port, config.accepts_per_turn) if config.accepts_per_turn > 0
                else web.TCPSite(runner, config.host, config.port))
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}/v1", proxy_state(app)
    finally:
        await runner.cleanup()


async def serve_until_stopped(config: ProxyConfig, *, announce: Callable[[str], Any] = print,
                              watch: Callable[[ProxyState, asyncio.Event], Any] | None = None) -> int:
    """Serve until SIGINT or SIGTERM; returns 0."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with running_proxy(config) as (url, state), collector(config, state):
        announce(f"tokenpace proxy on {url} -> {config.upstream}; metrics on {url[:-3]}/metrics")
        if watch is not None:
            await watch(state, stop)
        else:
            await stop.wait()
    return 0


@asynccontextmanager
async def collector(config: ProxyConfig, state: ProxyState) -> AsyncIterator[None]:
    """The garbage collector while the proxy serves (``config.gc``). Either way what exists at the
    start is frozen, so that collections scan only what requests allocate (as the built-in server).
    "quiet": automatic collection off; full collections when no request is in flight and at the
    latest every ``gc_full_every_s``; a young one if objects pile up meanwhile (``quiet_gc``)."""
    if config.gc != "quiet":
        gc.freeze()
        yield
        return
    async with quiet_gc(idle=lambda: state.in_flight == 0, full_every_s=config.gc_full_every_s,
                        check_s=config.gc_check_s):
        yield


def run_proxy(config: ProxyConfig, *, announce: Callable[[str], Any] = print,
              watch: Callable[[ProxyState, asyncio.Event], Any] | None = None, use_uvloop: bool = True) -> int:
    """The proxy as the whole process (``tokenpace proxy``), on uvloop when it is installed."""
    main = serve_until_stopped(config, announce=announce, watch=watch)
    factory = _uvloop_factory() if use_uvloop else None
    if factory is None or sys.version_info < (3, 11):
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
