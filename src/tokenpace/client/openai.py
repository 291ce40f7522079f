"""The OpenAI-compatible client: send one request, stamp every chunk, fill the record.

The client only stamps ``time.monotonic_ns()``; every duration is computed later by pure functions
in ``tokenpace.metrics``. A failed request is a record with a status and an error kind, never an
exception (STYLE habit 5). Stamps are taken as soon as a read returns, once per read: every event
parsed from that read shares its stamp, because that is when its bytes reached us.

Timeouts (client/watchdog.py): ``connect_timeout_s`` bounds the TCP (and TLS) connect; the TTFT,
idle and total limits share one watchdog timer per request, measured from ``sent``.

Outcome of a failed request: ``status`` and ``error_kind``, with ``done_ns`` when the failure was
seen and everything that arrived before it kept.

| status | error_kind | when |
|---|---|---|
| error | ``http_<status>`` | HTTP status >= 400 (``retry_after_s`` from ``retry-after-ms`` or ``Retry-After``) |
| error | ``connect`` | the connection was refused or could not be made |
| timeout | ``connect_timeout`` | no connection within ``connect_timeout_s`` |
| error | ``reset_before_headers`` / ``reset_mid_stream`` | the connection closed or was reset before / after the headers |
| error | ``wrong_content_type`` | a streamed request answered 200 with neither ``text/event-stream`` nor JSON |
| error | ``malformed_sse`` | a line that is not SSE framing (an unknown field, e.g. ``dta: {``) |
| error | ``line_too_long`` | an SSE line (or one event's data) over 1 MiB (``sse.MAX_LINE_BYTES``) |
| error | ``invalid_json`` | a ``data:`` line that is not a JSON object |
| error | ``stream_error`` | an error object inside the stream (Anthropic ``error``, Responses ``error`` / ``response.failed``) |
| error | ``overloaded`` | Anthropic's ``overloaded_error`` inside the stream (its HTTP 529 is ``http_529``) |
| error | ``empty_response`` | the stream ended (``[DONE]``, the API's end event, or EOF) with no token |
| error | ``incomplete`` | EOF, no ``[DONE]`` (nor ``message_stop`` / ``response.completed``), no finish reason, short of ``max_tokens`` with ``ignore_eos`` |
| error | ``bad_framing`` | a response that breaks HTTP/1.1 framing (bytes past ``Content-Length`` in one read) |
| error | ``bad_encoding`` | a body that does not decode as its ``Content-Encoding`` (e.g. bad gzip) |
| error | ``malformed_response`` / ``response_error`` | a non-streamed body that is not JSON / is an error |
| timeout | ``ttft_timeout`` / ``idle_timeout`` / ``total_timeout`` | the watchdog's limits, above |
| error | ``client_error`` / ``client_exception`` | anything else aiohttp or the client raised |

A stream without ``[DONE]`` that brought tokens is ``ok`` unless it is ``incomplete`` (above);
without usage, ``output_tokens`` is the client's count (source "estimate"). ``data: [DONE]`` may
carry trailing whitespace. Usage that cannot be true (a negative count, more cached prompt tokens
than prompt tokens) is ignored: the client's count stands in (source "estimate") and
``error_message`` of the ``ok`` record says what was ignored.

Stale kept-alive connections (client/reuse.py): a request that finds a *reused* connection closed
before any response byte is sent again on another connection.
"""

from __future__ import annotations

import asyncio
import errno
import math
from collections.abc import Callable
from functools import partial
from time import monotonic_ns
from typing import Any

import aiohttp
import orjson
from aiohttp.http_exceptions import ContentEncodingError, HttpProcessingError

from tokenpace._version import __version__
from tokenpace.errors import TargetError
from tokenpace.record import RequestRecord
from tokenpace.redact import redact, strip_url_credentials, url_has_credentials

from .formats import CACHE_BREAKPOINTS, api_format
from .progress import Progress, finish_outcome, finish_record, finish_tokens, one_line, truncate
from .responses import read_error_message, read_stream, read_whole
from .retry_after import retry_after_s
from .reuse import Attempt, reuse_trace
from .watchdog import Watchdog, other_cancellations

_LIST_MODELS_TIMEOUT_S = 30.0  # a preflight request should fail fast, whatever the run's timeout


class OpenAIClient:
    """Sends requests to a streaming LLM endpoint in one of the formats of ``client/formats``
    (``chat``, ``completions``, ``responses``, ``anthropic``; named for the first two, which came first).

    ``base_url`` includes the API prefix, e.g. ``http://127.0.0.1:8000/v1``. ``max_connections``
    should be at least the run's concurrency; None means no limit, because a request waiting for a
    pooled connection after ``sent_ns`` was stamped would be charged that wait as latency. One client
    belongs to one event loop (its aiohttp session is created on first use).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api: str = "chat",
        stream: bool = True,
        api_key: str | None = None,
        ignore_eos: bool = True,
        extra_body: dict[str, Any] | None = None,
        timeout_s: float = 600.0,
        max_connections: int | None = None,
        connect_timeout_s: float | None = None,
        ttft_timeout_s: float | None = None,
        idle_timeout_s: float | None = None,
        cache_breakpoint: str = "none",
    ) -> None:
        self.format = api_format(api)  # ValueError for an API it does not speak
        if cache_breakpoint not in CACHE_BREAKPOINTS:
            raise ValueError(f"cache_breakpoint must be one of {', '.join(CACHE_BREAKPOINTS)}, not {cache_breakpoint!r}")
        if url_has_credentials(base_url):  # see BenchConfig.validate: refused, never printed
            raise ValueError(f"base_url {strip_url_credentials(base_url)}: a user name or password in the URL "
                             "is not supported")
        for name, value in (("timeout_s", timeout_s), ("connect_timeout_s", connect_timeout_s),
                            ("ttft_timeout_s", ttft_timeout_s), ("idle_timeout_s", idle_timeout_s)):
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, not {value!r}")  # fmt: skip
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api = api
        self.stream = stream
        self.ignore_eos = ignore_eos
        self.extra_body = dict(extra_body or {})
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.ttft_timeout_s = ttft_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.max_connections = max_connections
        self.cache_breakpoint = cache_breakpoint  # Anthropic cache_control placement (formats/anthropic.py)
        self._url = self.base_url + self.format.path
        self._headers = {"Content-Type": "application/json", "User-Agent": f"tokenpace/{__version__}"}
        self._secrets = (api_key,) if api_key else ()  # masked in every server text we keep
        if api_key:
            self._headers.update(self.format.auth_headers(api_key))
        # aiohttp bounds only the connect; the per-request watchdog does the rest (module doc).
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:  # never shows the API key
        keyed = bool(self._secrets)
        return (
            f"OpenAIClient(base_url={self.base_url!r}, model={self.model!r}, api={self.api!r}, "
            f"stream={self.stream}, api_key={'***' if keyed else None})"
        )

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.max_connections or 0, limit_per_host=0)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers,
                                                  trace_configs=[reuse_trace()])
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def request_body(self, record: RequestRecord, prompt: str | list[dict[str, Any]],
                     extra_body: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON body for ``record``: public so that a dry run can show what would be sent."""
        body = self.format.request_body(self.model, prompt, record.requested_output_tokens, stream=self.stream,
                                        ignore_eos=self.ignore_eos, cache_breakpoint=self.cache_breakpoint)
        if extra_body:  # this request's own fields (the workload's), then the user's --extra-body
            body.update(extra_body)
        body.update(self.extra_body)
        return body

    async def send(self, record: RequestRecord, prompt: str | list[dict[str, Any]],
                   extra_body: dict[str, Any] | None = None) -> None:
        """Send one request and fill ``record`` in place. Never raises for a failed request.

        If the task is cancelled, the record is finished with status "cancelled" (partial tokens
        kept) before ``CancelledError`` propagates. A request that passes one of the client's limits
        ends with status "timeout" and returns normally (the watchdog's cancellation is absorbed).
        """
        (await self.send_deferred(record, prompt, extra_body))()

    async def send_deferred(self, record: RequestRecord, prompt: str | list[dict[str, Any]],
                            extra_body: dict[str, Any] | None = None) -> Callable[[], None]:
        """``send``, but the record's token accounting is left to the function it returns.

        On return the record has every stamp and its outcome (status, error kind and message,
        ``done_ns``); calling the returned function (once) fills the token counts and their sources
        (``progress.finish_tokens``). The load generator calls it in the slice that hands the record
        to the sink, so that a wave of streams ending together does not count its tokens on the
        turns that stamp the next wave's chunks. A cancelled request is finished whole before
        ``CancelledError`` propagates, as with ``send``.
        """
        record.api = self.api
        record.stream = self.stream
        data = orjson.dumps(self.request_body(record, prompt, extra_body))
        headers = {"X-Request-ID": record.request_id}
        expected = record.requested_output_tokens if self.ignore_eos else None
        progress = Progress(streaming=self.stream, expected_tokens=expected, secrets=self._secrets)
        session = self._get_session()
        record.sent_ns = progress.last_read_ns = monotonic_ns()
        watchdog = Watchdog(self, record, progress)
        try:
            async with await self._post(session, data, headers) as resp:
                progress.response_seen = True
                progress.last_read_ns = now = monotonic_ns()
                record.http_status = resp.status
                content_type = resp.content_type
                if resp.status >= 400:
                    record.retry_after_s = retry_after_s(resp.headers)
                    message = await read_error_message(resp)
                    progress.fail("error", f"http_{resp.status}", message, monotonic_ns())
                elif self.stream and content_type == "text/event-stream":
                    await read_stream(resp, record, progress, self.format)
                elif not self.stream or content_type.endswith("json"):  # or a server that ignored "stream"
                    progress.streaming = False  # one whole body: no per-chunk client count
                    await read_whole(resp, record, progress, self.format)
                else:
                    message = f"a streamed request got Content-Type {content_type!r}, not text/event-stream"
                    progress.fail("error", "wrong_content_type", message, now)
        except asyncio.CancelledError:
            watchdog.stop()
            if watchdog.expired is not None:
                progress.fail("timeout", watchdog.expired, watchdog.message(), watchdog.expired_ns)
            if watchdog.expired is None or other_cancellations():
                progress.fail("cancelled", None, None, monotonic_ns())  # no-op after [DONE] or a failure
                finish_record(record, progress)
                raise
        except aiohttp.ServerTimeoutError as exc:  # before ClientError; only sock_connect is set
            limit = self.connect_timeout_s
            message = f"no connection within connect_timeout_s={limit:g}" if limit else one_line(exc)
            progress.fail("timeout", "connect_timeout", message, monotonic_ns())
        except aiohttp.ClientConnectorError as exc:
            progress.fail("error", "connect", one_line(exc), monotonic_ns())
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            kind = "reset_mid_stream" if progress.response_seen else "reset_before_headers"
            if isinstance(exc.__cause__, ContentEncodingError):
                kind = "bad_encoding"  # a body that does not decode as its Content-Encoding says
            progress.fail("error", kind, one_line(exc), monotonic_ns())
        except aiohttp.ClientResponseError as exc:
            kind, message = "client_error", one_line(exc)
            if isinstance(exc.__cause__, HttpProcessingError):  # the response could not be framed
                kind = "bad_framing"
                message = ("the response broke HTTP/1.1 framing (e.g. bytes past its Content-Length) "
                           f"and was discarded: {message}")
            progress.fail("error", kind, message, monotonic_ns())
        except aiohttp.ClientError as exc:
            progress.fail("error", "client_error", one_line(exc), monotonic_ns())
        except Exception as exc:  # noqa: BLE001 - a failed request must stay a record, not end the run
            progress.fail("error", "client_exception", one_line(exc), monotonic_ns())
        finally:
            watchdog.stop()
        finish_outcome(record, progress)
        return partial(finish_tokens, record, progress)

    async def _post(self, session: aiohttp.ClientSession, data: bytes,
                    headers: dict[str, str]) -> aiohttp.ClientResponse:
        """POST until the response headers; again if a reused connection was found closed (module
        doc). Each such failure discards that connection, so this ends within the pool's size."""
        while True:
            attempt = Attempt()
            try:
                return await session.post(self._url, data=data, headers=headers,
                                          timeout=self._timeout, trace_request_ctx=attempt)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                # Closed before or while we wrote: the server never read the request. A reset
                # (ECONNRESET) can come after it did, and stays a failed request.
                if not attempt.reused or getattr(exc, "errno", None) == errno.ECONNRESET:
                    raise

    async def list_models(self) -> list[str]:
        """The model ids the endpoint serves. Raises ``TargetError`` with a one-line reason."""
        url = f"{self.base_url}/models"
        timeout = aiohttp.ClientTimeout(total=min(self.timeout_s, _LIST_MODELS_TIMEOUT_S),
                                        sock_connect=self.connect_timeout_s)
        try:
            async with self._get_session().get(url, timeout=timeout) as resp:
                if resp.status >= 400:
                    message = self._server_text(await read_error_message(resp))
                    raise TargetError(f"GET {url} failed: HTTP {resp.status}: {message}")
                body = await resp.read()
        except asyncio.TimeoutError:
            raise TargetError(f"GET {url} failed: no answer within {timeout.total:g} s") from None
        except aiohttp.ClientError as exc:
            raise TargetError(f"GET {url} failed: {self._server_text(one_line(exc))}") from None
        try:
            models = orjson.loads(body)["data"]
            return [str(model["id"]) for model in models]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise TargetError(f"GET {url} returned an unexpected body ({type(exc).__name__})") from None

    def _server_text(self, text: str) -> str:
        """A server's text for a one-line error: secrets masked (as ``Progress.fail`` does for records)."""
        return truncate(one_line(redact(text, self._secrets)))
