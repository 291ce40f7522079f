"""A plain aiohttp pass-through proxy: the least a relay can do (read any, write it), nothing
parsed, nothing recorded. ``proxy_overhead.py`` runs it beside ``tokenpace proxy`` so that the
measuring proxy's own cost is visible.

    python benchmarks/_passthrough.py UPSTREAM_BASE_URL PORT
"""

from __future__ import annotations

import sys

import aiohttp
from aiohttp import web

DROP = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}


def main() -> None:
    upstream, port = sys.argv[1].rstrip("/"), int(sys.argv[2])

    async def start(app: web.Application) -> None:
        app["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def stop(app: web.Application) -> None:
        await app["session"].close()

    async def relay(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in DROP}
        url = upstream + request.path.removeprefix("/v1")
        async with request.app["session"].request(request.method, url, data=body, headers=headers) as up:
            resp = web.StreamResponse(status=up.status, headers={
                k: v for k, v in up.headers.items() if k.lower() not in DROP | {"content-encoding"}})
            await resp.prepare(request)
            while data := await up.content.readany():
                await resp.write(data)
            await resp.write_eof()
            return resp

    app = web.Application()
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
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
