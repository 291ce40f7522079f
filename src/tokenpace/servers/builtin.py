"""The built-in OpenAI-compatible server: an aiohttp app over the scheduling core.

Routes: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/completions``,
``POST /v1/responses`` (OpenAI Responses), ``POST /v1/messages`` (Anthropic Messages), each streamed
as SSE or whole and each only when its format is in ``api_formats`` (all by default; formats.py has
how each is read and framed), ``GET /metrics`` (vLLM names, see prom.py). What follows is said of
chat and completions; the other two formats follow it in their own events (wire_responses.py,
wire_anthropic.py), with usage always included and never per chunk.

Behaviour a client can rely on:
- It always generates exactly ``max_tokens`` (or ``max_completion_tokens``; 16 when absent) and
  finishes with ``finish_reason: "length"``, as if ``ignore_eos`` were set; ``ignore_eos`` and
  ``min_tokens`` are accepted and change nothing. Only ``n=1`` is supported.
- Chat streams begin with a role-only chunk ``delta: {"role": "assistant", "content": ""}`` (vLLM's
  form), written as soon as the request is accepted, before queueing and prefill, so a client that
  stamps TTFT on it is visibly wrong. Each later chunk carries ``tokens_per_chunk`` tokens; the last
  token chunk carries the finish reason.
- ``stream_options.include_usage`` adds a final ``choices: []`` chunk with usage;
  ``continuous_usage_stats`` (only together with ``include_usage``, as in vLLM) puts cumulative
  usage on every chunk. Token counts follow ``tokens.py``.
- ``X-Request-ID`` is read (or generated), echoed in the response header, and used as the suffix
  of the response ``id`` (``chatcmpl-<id>`` / ``cmpl-<id>``).
- Errors use OpenAI's body: ``{"error": {"message", "type", "param", "code"}}``; an unknown model
  is 404 ``NotFoundError``, a malformed body 400 ``BadRequestError``. A prompt plus ``max_tokens``
  over the context length (``max_model_len``; with the engine simulator, also what fits in its KV
  cache) is 400 ``BadRequestError`` in vLLM's own shape and words (``{"object": "error", ...}``).
  (In the send log a rejected request has only its "received" line.)
- A client that goes away frees its engine slot at once, streamed or not (the server runs with
  aiohttp's ``handler_cancellation``).
- With ``faults`` set, chosen requests misbehave on purpose: see faults.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import monotonic_ns

import orjson
from aiohttp import web

from .config import BuiltinServerConfig
from .engine import Engine, Sequence
from .faults import Fault, FaultInjector, parse_faults
from .prom import CONTENT_TYPE, RequestMetrics, ServerMetrics
from .sendlog import SendLog
from .sim_backend import SimBackend
from .timing import TimingModel
from .formats import FORMATS, ResponseFramer, ServerFormat
from .tokens import output_text_json, text_block_ids
from .wire import error_body, timings_member, vllm_error_body

_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class ServerState:
    """Everything one app instance owns; reachable as ``app[SERVER_STATE]``."""

    def __init__(self, config: BuiltinServerConfig, timing: TimingModel) -> None:
        self.config = config
        self.metrics = ServerMetrics(config.model, config.kv_capacity_tokens)
        self.engine: Engine | SimBackend = (
            SimBackend(config.sim, self.metrics) if config.sim is not None
            else Engine(timing, max_num_seqs=config.max_num_seqs, tokens_per_chunk=config.tokens_per_chunk))
        # Prompt + output of one request at most: the context length, and what the simulated KV cache holds.
        self.max_seq_tokens = config.max_model_len
        if isinstance(self.engine, SimBackend):
            self.max_seq_tokens = min(self.max_seq_tokens, self.engine.max_seq_tokens)
        self.send_log: SendLog | None = None  # opened at startup
        self.in_flight: set[asyncio.Task] = set()  # handler tasks, cancelled at shutdown
        self.faults = FaultInjector(parse_faults(config.faults), config.seed) if config.faults else None
        if self.faults:
            self.metrics.registry.register(self.faults)


SERVER_STATE = web.AppKey("tokenpace_server_state", ServerState)


class _RequestError(Exception):
    def __init__(self, status: int, error_type: str, message: str, *, vllm_shape: bool = False) -> None:
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message
        self.vllm_shape = vllm_shape  # vLLM's own body ({"object": "error", ...}), not OpenAI's


def error_response(status: int, error_type: str, message: str, request_id: str | None = None, *,
                   vllm_shape: bool = False, fmt: ServerFormat | None = None) -> web.Response:
    headers = {"X-Request-ID": request_id} if request_id else None
    if fmt is not None and fmt.name == "anthropic":  # Anthropic's own shape, whatever vLLM would say
        body = fmt.error_body(status, error_type, message)
    else:
        body = (vllm_error_body if vllm_shape else error_body)(status, error_type, message)
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


@dataclass(slots=True)
class _Params:
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool
    continuous_usage: bool
    prompt_block_ids: tuple[int, ...] | None = None  # for the engine simulator's prefix cache
    cache_breakpoint_tokens: int | None = None  # Anthropic: prompt tokens up to the last cache_control


def _parse(raw: bytes, fmt: ServerFormat, config: BuiltinServerConfig, max_seq_tokens: int) -> _Params:
    def bad(message: str) -> _RequestError:
        return _RequestError(400, "BadRequestError", message)

    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise bad(f"request body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise bad("request body must be a JSON object")
    model = body.get("model", config.model)  # optional, as in vLLM
    if model != config.model:
        raise _RequestError(404, "NotFoundError", f"The model `{model}` does not exist.")
    try:
        prompt = fmt.read(body)
    except ValueError as e:
        raise bad(str(e)) from None
    max_tokens = prompt.max_tokens
    if max_tokens is None:
        max_tokens = config.default_max_tokens
    if type(max_tokens) is not int or max_tokens < 1:
        raise bad("'max_tokens' must be an integer >= 1")
    if body.get("n", 1) != 1:
        raise bad("only n=1 is supported")
    prompt_tokens = prompt.tokens
    if prompt_tokens + max_tokens > max_seq_tokens:  # before any work on the prompt's content
        raise _RequestError(400, "BadRequestError", _too_long(max_seq_tokens, prompt_tokens, max_tokens, fmt),
                            vllm_shape=True)  # fmt: skip
    return _Params(
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        stream=bool(body.get("stream", False)),
        include_usage=prompt.include_usage,
        continuous_usage=prompt.continuous_usage,
        prompt_block_ids=(text_block_ids(prompt.text, config.sim.block_size)
                          if config.sim is not None and config.sim.prefix_caching else None),
        cache_breakpoint_tokens=prompt.cache_breakpoint_tokens,
    )


def _too_long(limit: int, prompt_tokens: int, max_tokens: int, fmt: ServerFormat) -> str:
    """vLLM's words for a request that cannot fit its context length."""
    where = fmt.prompt_word
    return (f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the {where}, {max_tokens} in the "
            f"completion). Please reduce the length of the {where} or completion.")


async def _stream(
    request: web.Request, state: ServerState, seq: Sequence, p: _Params, framer: ResponseFramer, request_id: str,
    fault: Fault | None,
) -> web.StreamResponse:
    log = state.send_log
    resp = web.StreamResponse(headers={**_SSE_HEADERS, "X-Request-ID": request_id})
    if fault is not None:
        resp.content_type = fault.content_type(resp.content_type)
    await resp.prepare(request)
    chunk = 0
    try:
        for data in framer.opening(seq, p.continuous_usage):  # chat's role chunk, Responses' created
            t_ns = monotonic_ns()
            await resp.write(data)
            if log:
                log.add(request_id, chunk, 0, "role", t_ns)
            chunk += 1
        if fault is not None:
            await fault.at_tokens(0, request, resp, framer)
        observed = RequestMetrics(state.metrics, seq)
        timings = state.config.timings
        first = True
        async with contextlib.aclosing(state.engine.generate(seq)) as steps:
            async for k in steps:
                if first:  # control events whose content is known only now (the prefix cache's hits)
                    first = False
                    if data := framer.first(seq):
                        t_ns = monotonic_ns()
                        await resp.write(data)
                        if log:
                            log.add(request_id, chunk, 0, "control", t_ns)
                        chunk += 1
                done_tokens = seq.generated_tokens
                last = done_tokens >= seq.max_tokens
                data = framer.token(output_text_json(done_tokens - k, k), last, seq, p.continuous_usage,
                                    _timings(seq, observed.first_ns) if timings and last else b"")
                kind = "token"
                if fault is not None:
                    data, k, kind = fault.token_chunk(data, k, framer)
                t_ns = monotonic_ns()
                await resp.write(data)
                if log:
                    log.add(request_id, chunk, k, kind, t_ns)
                chunk += 1
                observed.token_chunk(k, t_ns)
                if fault is not None:
                    await fault.at_tokens(done_tokens, request, resp, framer)
        observed.finished()
        for data, kind in framer.closing(seq, p.include_usage):
            if fault is not None and fault.skips(kind):
                continue
            t_ns = monotonic_ns()
            await resp.write(data)
            if log:
                log.add(request_id, chunk, 0, kind, t_ns)
            chunk += 1
        await resp.write_eof()
    except ConnectionError:
        pass  # the client went away; aclosing() already gave the engine slot back
    return resp


async def _respond_whole(
    request: web.Request, state: ServerState, seq: Sequence, framer: ResponseFramer, request_id: str
) -> web.StreamResponse:
    observed = RequestMetrics(state.metrics, seq)  # engine-side times: nothing is sent until the end
    async with contextlib.aclosing(state.engine.generate(seq)) as steps:
        async for k in steps:
            observed.token_chunk(k, monotonic_ns())
    observed.finished()
    body = framer.whole(seq, _timings(seq, observed.first_ns) if state.config.timings else b"")
    resp = web.StreamResponse(headers={"Content-Type": "application/json", "X-Request-ID": request_id})
    resp.content_length = len(body)
    with contextlib.suppress(ConnectionError):
        await resp.prepare(request)
        t_ns = monotonic_ns()
        await resp.write(body)
        if state.send_log:
            state.send_log.add(request_id, 0, seq.generated_tokens, "token", t_ns)
        await resp.write_eof()
    return resp


def _timings(seq: Sequence, first_ns: int) -> bytes:
    """llama.cpp's ``timings`` for a request whose last token is due now (``--timings``)."""
    now = monotonic_ns()
    first = first_ns or now  # the first token is the last one
    admitted = seq.admitted_ns or seq.arrival_ns
    return timings_member(seq.prompt_tokens - seq.cached_tokens, seq.cached_tokens, (first - admitted) / 1e6,
                          seq.generated_tokens, (now - first) / 1e6)


async def _generate(request: web.Request, fmt: ServerFormat) -> web.StreamResponse:
    received_ns = monotonic_ns()
    state = request.app[SERVER_STATE]
    number = state.faults.number_request() if state.faults else 0  # before any await: arrival order
    request_id = request.headers.get("X-Request-ID") or uuid.uuid4().hex
    if state.send_log:
        state.send_log.add(request_id, None, 0, "received", received_ns)
    try:
        raw = await request.read()
    except ConnectionError:  # the client went away mid-body: nobody to answer
        return web.Response(status=499)
    try:
        p = _parse(raw, fmt, state.config, state.max_seq_tokens)
    except _RequestError as e:
        return error_response(e.status, e.error_type, e.message, request_id, vllm_shape=e.vllm_shape, fmt=fmt)
    fault = state.faults.select(number, p, request_id, state.send_log) if state.faults else None
    response_id = fmt.id_prefix + request_id
    created = int(time.time())  # wall clock only for OpenAI's `created` field
    framer = fmt.framer(fmt.name, response_id, state.config.model, created, p.cache_breakpoint_tokens)
    seq = Sequence(prompt_tokens=p.prompt_tokens, max_tokens=p.max_tokens, arrival_ns=received_ns,
                   prompt_block_ids=p.prompt_block_ids)
    task = asyncio.current_task()
    state.in_flight.add(task)
    try:
        if fault is not None and (early := await fault.before_headers(request, request_id, fmt)) is not None:
            return early  # an injected HTTP error or reset
        if p.stream:
            return await _stream(request, state, seq, p, framer, request_id, fault)
        return await _respond_whole(request, state, seq, framer, request_id)
    finally:
        state.in_flight.discard(task)


def _handler(fmt: ServerFormat) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await _generate(request, fmt)
    return handle


async def _health(request: web.Request) -> web.Response:
    return web.Response()


async def _models(request: web.Request) -> web.Response:
    model = request.app[SERVER_STATE].config.model
    card = {"id": model, "object": "model", "created": int(time.time()), "owned_by": "tokenpace", "root": model}
    return web.Response(body=orjson.dumps({"object": "list", "data": [card]}), content_type="application/json")


async def _metrics(request: web.Request) -> web.Response:
    state = request.app[SERVER_STATE]
    return web.Response(body=state.metrics.render(state.engine), headers={"Content-Type": CONTENT_TYPE})


async def _on_startup(app: web.Application) -> None:
    state = app[SERVER_STATE]
    if state.config.send_log_path:
        state.send_log = SendLog(state.config.send_log_path, state.config.send_log_flush_s)
        state.send_log.start()


async def _on_shutdown(app: web.Application) -> None:
    # Streams may run for minutes: cancel them rather than wait (aiohttp would wait).
    tasks = list(app[SERVER_STATE].in_flight)
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=2.0)


async def _on_cleanup(app: web.Application) -> None:
    state = app[SERVER_STATE]
    if state.send_log:
        await state.send_log.close()


def create_app(config: BuiltinServerConfig | None = None, *, timing: TimingModel | None = None) -> web.Application:
    """The server as an aiohttp app; ``timing`` overrides the model named in ``config``."""
    config = config or BuiltinServerConfig()
    app = web.Application(client_max_size=64 * 1024 * 1024)  # long prompts: aiohttp's default is 1 MiB
    app[SERVER_STATE] = ServerState(config, timing or config.make_timing())
    app.add_routes([
        web.get("/health", _health),
        web.get("/v1/models", _models),
        *(web.post(FORMATS[name].path, _handler(FORMATS[name])) for name in config.api_formats),
        web.get("/metrics", _metrics),
    ])  # fmt: skip
    app.on_startup.append(_on_startup)
    app.on_shutdown.append(_on_shutdown)
    app.on_cleanup.append(_on_cleanup)
    return app
