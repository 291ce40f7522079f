"""Running the built-in server: inside the caller's event loop, or as the whole process."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from .builtin import create_app
from .config import BuiltinServerConfig
from .timing import TimingModel

PARENT_POLL_S = 0.5


@asynccontextmanager
async def running_server(
    config: BuiltinServerConfig | None = None, *, timing: TimingModel | None = None
) -> AsyncIterator[str]:
    """Serve in the running event loop; yields the base URL ``http://HOST:PORT/v1``.

    On exit, in-flight streams are cancelled and the send log is flushed and closed.
    """
    config = config or BuiltinServerConfig()
    # shutdown_timeout only bounds what our own shutdown hook has not already cancelled.
    # handler_cancellation: a client that leaves cancels its handler, which frees its engine slot
    # (a non-streamed response writes nothing until the end, so it would never notice otherwise).
    runner = web.AppRunner(create_app(config, timing=timing), access_log=None, shutdown_timeout=1.0,
                           handler_cancellation=True)
    await runner.setup()
    try:
        site = web.TCPSite(runner, config.host, config.port)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}/v1"
    finally:
        await runner.cleanup()


async def serve_until_stopped(
    config: BuiltinServerConfig,
    *,
    announce: Callable[[str], Any] = print,
    parent_pid: int | None = None,
    freeze_gc: bool = False,
) -> int:
    """Serve until SIGINT or SIGTERM (or until ``parent_pid`` is no longer our parent); returns 0.

    ``freeze_gc`` (for a process of its own): move everything alive at startup out of the cyclic
    garbage collector's reach, so its full collections scan only what requests allocate. Without it
    one full collection stalled every stream for 25-60 ms at 512 streams.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    watcher = loop.create_task(_watch_parent(parent_pid, stop)) if parent_pid else None
    try:
        async with running_server(config) as url:
            if freeze_gc:
                gc.collect()
                gc.freeze()
            announce(url)
            await stop.wait()
    finally:
        if watcher:
            watcher.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return 0


async def _watch_parent(parent_pid: int, stop: asyncio.Event) -> None:
    # A launcher killed without stopping us must not leave a server running forever.
    while os.getppid() == parent_pid:
        await asyncio.sleep(PARENT_POLL_S)
    stop.set()


def serve_forever(
    config: BuiltinServerConfig | None = None,
    *,
    use_uvloop: bool = True,
    announce: Callable[[str], Any] | None = None,
    parent_pid: int | None = None,
) -> int:
    """Run the server as the whole process (``tokenpace serve``): prints the base URL on one line of
    stdout, serves until SIGINT/SIGTERM, shuts down cleanly and returns the exit code (0)."""
    config = config or BuiltinServerConfig()
    if announce is None:
        announce = lambda url: print(url, flush=True)  # noqa: E731
    main = serve_until_stopped(config, announce=announce, parent_pid=parent_pid, freeze_gc=True)
    loop_factory = _uvloop_factory() if use_uvloop else None
    if loop_factory is None:
        return asyncio.run(main)
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(main)
    loop = loop_factory()  # Python 3.10: no Runner
    try:
        return loop.run_until_complete(main)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
