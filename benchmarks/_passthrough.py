"""A plain aiohttp pass-through proxy: the least a relay can do (read any, write it), nothing
parsed, nothing recorded. ``proxy_overhead.py`` runs it beside ``tokenpace proxy`` so that the
measuring proxy's own cost is visible.

    python benchmarks/_passthrough.py UPSTREAM_BASE_URL PORT [--gc quiet|auto] [--relay tap|loop]

``--gc quiet`` gives it the garbage-collection policy of ``tokenpace proxy --gc quiet``
(``runner/run_gc.quiet_gc`` with full collections when nothing is in flight);
``auto`` (the default here) leaves Python's automatic collector on, nothing frozen.
``--relay tap`` relays a stream as ``tokenpace proxy --relay tap`` does (``proxy/tap.py``: each read
written from the upstream connection's data callback, no task woken per read), nothing measured;
``loop`` (the default here): ``await readany()``, ``await write()``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import aiohttp
from aiohttp import web

DROP = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}


def main() -> None:
    upstream, port = sys.argv[1].rstrip("/"), int(sys.argv[2])
    quiet = "--gc" in sys.argv and sys.argv[sys.argv.index("--gc") + 1] == "quiet"
    tap = "--relay" in sys.argv and sys.argv[sys.argv.index("--relay") + 1] == "tap"
    if tap:
        from tokenpace.proxy.tap import tapped
    in_flight = [0]

    async def start(app: web.Application) -> None:
        app["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def collector(app: web.Application):
        if not quiet:
            yield
            return
        from tokenpace.runner.run_gc import quiet_gc

        async with quiet_gc(idle=lambda: in_flight[0] == 0, full_every_s=300.0):
            yield

    async def stop(app: web.Application) -> None:
        await app["session"].close()

    async def relay(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in DROP}
        url = upstream + request.path.removeprefix("/v1")
        in_flight[0] += 1
        try:
            async with request.app["session"].request(request.method, url, data=body, headers=headers) as up:
                resp = web.StreamResponse(status=up.status, headers={
                    k: v for k, v in up.headers.items() if k.lower() not in DROP | {"content-encoding"}})
                await resp.prepare(request)
                if tap and await tapped(request, resp, up.content, up.connection) is not None:
                    return resp
                while data := await up.content.readany():
                    await resp.write(data)
                await resp.write_eof()
                return resp
        finally:
            in_flight[0] -= 1

    app = web.Application()
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.cleanup_ctx.append(collector)
    app.router.add_route("*", "/{tail:.*}", relay)
    print(f"passthrough on http://127.0.0.1:{port}/v1", flush=True)
    try:  # the same event loop as tokenpace proxy, so that only the relays differ
        import uvloop
        loop = uvloop.new_event_loop()
    except ImportError:
        loop = None
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, handler_cancellation=True,
                loop=loop)


if __name__ == "__main__":
    main()
