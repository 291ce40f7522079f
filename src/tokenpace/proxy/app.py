"""The proxy's aiohttp application: generation routes measured, ``/metrics`` served, every other
path (``/v1/models`` among them) passed through unmeasured."""

from __future__ import annotations

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Gauge, Histogram, generate_latest

from tokenpace.instrumentation import PrometheusExporter, RotatingRecordSink
from tokenpace.instrumentation import buckets
from tokenpace.metrics.slo import parse_slo
from tokenpace.record import RequestRecord
from tokenpace.runner.loop_slices import LoopSlices

from .config import ProxyConfig
from .finisher import Finisher
from .relay import GENERATION_PATHS, Timing, forward_headers, relay_generation, response_headers

_STATE = web.AppKey("tokenpace_proxy", object)


class ProxyState:
    """What the proxy keeps between requests: counters and exports, never a request's data."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        url = aiohttp.client.URL(config.upstream.rstrip("/"))
        self.upstream = url
        self.exporter = PrometheusExporter(parse_slo(config.slo) if config.slo else None, window_s=config.window_s)
        registry = self.exporter.registry
        self.added = Histogram("tokenpace_proxy_added_seconds", "The proxy's own latency per request: held "
                               "before sending upstream, plus held between the upstream's headers and the "
                               "client's first bytes", buckets=buckets.PROXY_ADDED_S, registry=registry)
        self.in_flight_gauge = Gauge("tokenpace_proxy_in_flight", "Generation requests in flight", registry=registry)
        self.sink = (RotatingRecordSink(config.records_path, max_bytes=config.records_max_bytes,
                                        backups=config.records_backups) if config.records_path else None)
        self.hasher = None
        if config.hash_salt is not None:
            from tokenpace.advise.hashchain import PromptHasher

            self.hasher = PromptHasher(config.hash_salt, block=config.hash_block, tokenizer=config.tokenizer)
        self.finisher = Finisher()  # each request's end work, behind the relay
        # A burst of new requests sent upstream a few per turn of the loop, as the bench client sends
        # its own (LoopSlices.send_turn), so that the streams already flowing are relayed in between:
        # started all in one turn, 200 requests held every other stream's next read for ~20 ms.
        # Records are finished by the finisher, not by these slices.
        self.sends = (LoopSlices(_no_records, sends_per_turn=config.starts_per_turn)
                      if config.starts_per_turn > 0 else None)
        self.session: aiohttp.ClientSession | None = None
        self.total = 0
        self.in_flight = 0
        self._index = 0

    def upstream_url(self, path: str) -> str:
        """``/v1/chat/completions`` -> the upstream's base URL + ``/chat/completions``."""
        rest = path[3:] if path.startswith("/v1/") else path
        return str(self.upstream) + (rest if rest.startswith("/") else "/" + rest)

    def record_done(self, record: RequestRecord, timing: Timing) -> None:
        record.index = self._index
        self._index += 1
        self.total += 1
        if self.sink is not None:
            self.sink.write(record)
        self.exporter(record)
        if timing.added_ns:
            self.added.observe(timing.added_ns / 1e9)


def _no_records(_record: object) -> None:
    raise AssertionError("the proxy's records go through its finisher")


def create_app(config: ProxyConfig) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    state = ProxyState(config)
    app[_STATE] = state

    async def on_startup(_app: web.Application) -> None:
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
        state.session = aiohttp.ClientSession(connector=connector, auto_decompress=True,
                                              timeout=aiohttp.ClientTimeout(total=config.upstream_timeout_s),
                                              skip_auto_headers=("User-Agent",))
        state.finisher.start()

    async def on_cleanup(_app: web.Application) -> None:
        await state.finisher.close()  # every record queued is written before the sink closes
        if state.session is not None:
            await state.session.close()
        if state.sink is not None:
            state.sink.close()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    app.router.add_get("/metrics", _metrics)
    app.router.add_route("*", "/{tail:.*}", _route)
    return app


def proxy_state(app: web.Application) -> ProxyState:
    return app[_STATE]  # type: ignore[return-value]


async def _metrics(request: web.Request) -> web.Response:
    state = proxy_state(request.app)
    return web.Response(body=generate_latest(state.exporter.registry),
                        headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _route(request: web.Request) -> web.StreamResponse:
    state = proxy_state(request.app)
    assert state.session is not None
    path = request.path
    api = GENERATION_PATHS.get(path[4:] if path.startswith("/v1/") else path.lstrip("/"))
    url = state.upstream_url(path)
    if request.query_string:
        url += "?" + request.query_string
    if api is not None and request.method == "POST":
        state.in_flight += 1
        state.in_flight_gauge.inc()
        try:
            return await relay_generation(request, state.session, url, api, state.record_done, state.hasher,
                                          state.finisher.defer,
                                          state.sends.send_turn if state.sends is not None else None,
                                          tap=state.config.relay == "tap")
        finally:
            state.in_flight -= 1
            state.in_flight_gauge.dec()
    return await _pass_through(request, state.session, url)


async def _pass_through(request: web.Request, session: aiohttp.ClientSession, url: str) -> web.StreamResponse:
    body = await request.read()
    try:
        async with session.request(request.method, url, data=body or None,
                                   headers=forward_headers(request.headers)) as upstream:
            payload = await upstream.read()
            return web.Response(status=upstream.status, reason=upstream.reason, body=payload,
                                headers=response_headers(upstream.headers))
    except aiohttp.ClientError as exc:
        return web.json_response({"error": {"message": f"tokenpace proxy: {exc}", "type": "proxy_error"}},
                                 status=502)


