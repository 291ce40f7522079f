"""``tokenpace proxy --gc``: with "quiet" no automatic collection runs while the proxy serves,
garbage made while a stream is in flight is collected once none is, and at the latest after
``gc_full_every_s``; "auto" (the default) leaves Python's collector on. The collector's state is restored after."""

from __future__ import annotations

import asyncio
import gc
import weakref

import aiohttp
from aiohttp import web

from tokenpace.proxy import ProxyConfig, running_proxy
from tokenpace.proxy.serve import collector

from tests.runner.garbage import Node, _collector_on, _cycles  # noqa: F401 - _collector_on: an autouse fixture


def _held_upstream(release: asyncio.Event) -> web.Application:
    """An upstream whose stream sends one chunk, then waits for ``release`` before it ends."""
    async def chat(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n')
        await release.wait()
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/v1"


async def _until(condition, checks: int = 200, every_s: float = 0.02) -> bool:
    for _ in range(checks):
        if condition():
            return True
        await asyncio.sleep(every_s)
    return condition()


def test_quiet_collects_garbage_only_once_no_stream_is_in_flight():
    async def main() -> None:
        release = asyncio.Event()
        upstream, upstream_url = await _serve(_held_upstream(release))
        config = ProxyConfig(upstream=upstream_url, port=0, gc="quiet", gc_check_s=0.01)
        try:
            async with running_proxy(config) as (url, state), collector(config, state):
                assert not gc.isenabled()
                async with aiohttp.ClientSession() as session:
                    async with session.post(url + "/chat/completions", json={"stream": True}) as resp:
                        assert await resp.content.readuntil(b"\n\n")  # the first chunk: the stream is in flight
                        assert state.in_flight == 1
                        refs = _cycles(5_000)  # garbage, far past the young generation's threshold (700)
                        await asyncio.sleep(0.2)  # 20 checks
                        assert all(r() is not None for r in refs)  # no collection while a stream is in flight
                        release.set()
                        assert (await resp.read()).endswith(b"data: [DONE]\n\n")
                assert await _until(lambda: all(r() is None for r in refs)), "not collected once quiet"
                assert not gc.isenabled()  # the proxy collects; it does not turn the collector back on
            assert gc.isenabled() and gc.get_freeze_count() == 0
        finally:
            release.set()  # a failed check above must not leave the upstream's stream hanging
            await upstream.cleanup()

    asyncio.run(main())


def test_quiet_collects_old_garbage_by_the_deadline_once_the_valve_has_opened_even_in_flight():
    async def main() -> None:
        config = ProxyConfig(upstream="http://127.0.0.1:9/v1", port=0, gc="quiet", gc_check_s=0.01,
                             gc_full_every_s=0.2)
        async with running_proxy(config) as (_url, state), collector(config, state):
            state.in_flight = 1  # never quiet
            holder = [Node() for _ in range(250_000)]  # past the valve (200,000 young objects)
            for node in holder:
                node.other = node  # a cycle each, reachable for now
            refs = [weakref.ref(node) for node in holder[::1000]]
            assert await _until(lambda: gc.get_count()[0] < 1_000), "the valve did not open"
            del holder, node  # garbage now, but old: the valve promoted it, and no quiet moment comes
            assert await _until(lambda: all(r() is None for r in refs)), "no full collection by the deadline"
            state.in_flight = 0

    asyncio.run(main())


def test_auto_leaves_pythons_collector_on():
    async def main() -> None:
        config = ProxyConfig(upstream="http://127.0.0.1:9/v1", port=0)  # the default
        async with running_proxy(config) as (_url, state), collector(config, state):
            assert gc.isenabled() and gc.get_freeze_count() > 0

    asyncio.run(main())
    gc.unfreeze()
