"""The OpenAI-compatible client: send one request, stamp every chunk, fill the record.

The client only stamps ``time.monotonic_ns()``; every duration is computed later by pure functions
in ``tokenpace.metrics``. A failed request is a record with a status and an error kind, never an
exception (STYLE habit 5). Stamps are taken as soon as a read returns, once per read: every event
parsed from that read shares its stamp, because that is when its bytes reached us.
"""

from __future__ import annotations

import asyncio
from time import monotonic_ns
from typing import Any

import aiohttp
import orjson

from tokenpace._version import __version__
from tokenpace.errors import TargetError
from tokenpace.record import RequestRecord

from .chunks import ChunkInfo, classify_chunk, classify_response, error_message
from .progress import Progress, finish_record
from .sse import SSEParser

_ERROR_MESSAGE_CHARS = 300
_ERROR_BODY_BYTES = 64 * 1024  # enough for any error message; a bigger body is cut, not awaited
_LIST_MODELS_TIMEOUT_S = 30.0  # a preflight request should fail fast, whatever the run's timeout


class OpenAIClient:
    """Sends requests to an OpenAI-compatible endpoint (``/chat/completions`` or ``/completions``).

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
    ) -> None:
        if api not in ("chat", "completions"):
            raise ValueError(f"api must be 'chat' or 'completions', not {api!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api = api
        self.stream = stream
        self.ignore_eos = ignore_eos
        self.extra_body = dict(extra_body or {})
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self._url = f"{self.base_url}/chat/completions" if api == "chat" else f"{self.base_url}/completions"
        self._headers = {"Content-Type": "application/json", "User-Agent": f"tokenpace/{__version__}"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # Only a total deadline: connect, header and per-read waits all count against it.
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:  # never shows the API key
        keyed = "Authorization" in self._headers
        return (
            f"OpenAIClient(base_url={self.base_url!r}, model={self.model!r}, api={self.api!r}, "
            f"stream={self.stream}, api_key={'***' if keyed else None})"
        )

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.max_connections or 0, limit_per_host=0)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def request_body(self, record: RequestRecord, prompt: str | list[dict[str, Any]]) -> dict[str, Any]:
        """The JSON body for ``record``: public so that a dry run can show what would be sent."""
        body: dict[str, Any] = {"model": self.model}
        if self.api == "chat":
            body["messages"] = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        max_tokens = record.requested_output_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
            if self.ignore_eos:  # only with a cap: ignoring EOS without one runs to the context limit
                body["ignore_eos"] = True
                body["min_tokens"] = max_tokens
        body["stream"] = self.stream
        if self.stream:
            body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        body.update(self.extra_body)
        return body

    async def send(self, record: RequestRecord, prompt: str | list[dict[str, Any]]) -> None:
        """Send one request and fill ``record`` in place. Never raises for a failed request.

        If the task is cancelled, the record is finished with status "cancelled" (partial tokens
        kept) before ``CancelledError`` propagates.
        """
        record.api = self.api
        record.stream = self.stream
        data = orjson.dumps(self.request_body(record, prompt))
        headers = {"X-Request-ID": record.request_id}
        progress = Progress(streaming=self.stream)
        session = self._get_session()
        record.sent_ns = monotonic_ns()
        try:
            async with session.post(self._url, data=data, headers=headers, timeout=self._timeout) as resp:
                progress.response_seen = True
                record.http_status = resp.status
                if resp.status >= 400:
                    message = await _read_error_message(resp)
                    progress.fail("error", f"http_{resp.status}", message, monotonic_ns())
                elif self.stream and not resp.content_type.endswith("json"):
                    await _read_stream(resp, record, progress)
                else:  # non-streaming, or a server that ignored "stream": true
                    progress.streaming = False  # one whole body: no per-chunk client count
                    await _read_whole(resp, record, progress)
        except asyncio.CancelledError:
            if not progress.saw_done:
                progress.fail("cancelled", None, None, monotonic_ns())
            finish_record(record, progress)
            raise
        except asyncio.TimeoutError:  # before ClientError: aiohttp's timeout errors are both
            message = f"no complete response within timeout_s={self.timeout_s:g}"
            progress.fail("timeout", "total_timeout", message, monotonic_ns())
        except aiohttp.ClientConnectorError as exc:
            progress.fail("error", "connect", _one_line(exc), monotonic_ns())
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            kind = "reset_mid_stream" if progress.response_seen else "reset_before_headers"
            progress.fail("error", kind, _one_line(exc), monotonic_ns())
        except aiohttp.ClientError as exc:
            progress.fail("error", "client_error", _one_line(exc), monotonic_ns())
        except Exception as exc:  # noqa: BLE001 - a failed request must stay a record, not end the run
            progress.fail("error", "client_exception", _one_line(exc), monotonic_ns())
        finish_record(record, progress)

    async def list_models(self) -> list[str]:
        """The model ids the endpoint serves. Raises ``TargetError`` with a one-line reason."""
        url = f"{self.base_url}/models"
        timeout = aiohttp.ClientTimeout(total=min(self.timeout_s, _LIST_MODELS_TIMEOUT_S))
        try:
            async with self._get_session().get(url, timeout=timeout) as resp:
                if resp.status >= 400:
                    message = await _read_error_message(resp)
                    raise TargetError(f"GET {url} failed: HTTP {resp.status}: {message}")
                body = await resp.read()
        except asyncio.TimeoutError:
            raise TargetError(f"GET {url} failed: no answer within {timeout.total:g} s") from None
        except aiohttp.ClientError as exc:
            raise TargetError(f"GET {url} failed: {_one_line(exc)}") from None
        try:
            models = orjson.loads(body)["data"]
            return [str(model["id"]) for model in models]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise TargetError(f"GET {url} returned an unexpected body ({type(exc).__name__})") from None


async def _read_stream(resp: aiohttp.ClientResponse, record: RequestRecord, progress: Progress) -> None:
    parser = SSEParser()
    read = resp.content.readany
    last_read_ns = record.sent_ns
    while True:
        data = await read()
        now = monotonic_ns()
        if not data:  # EOF
            if not progress.saw_done and _on_events(parser.close(), last_read_ns, record, progress):
                return
            if not progress.saw_done:
                progress.done_ns = now
                if not record.chunk_ns:
                    progress.fail("error", "empty_response", "stream ended with no token and no [DONE]", now)
            return
        last_read_ns = now
        # After [DONE], reading on to EOF lets the connection go back to the pool.
        if not progress.saw_done and _on_events(parser.feed(data), now, record, progress):
            return


def _on_events(events: list[Any], now: int, record: RequestRecord, progress: Progress) -> bool:
    """Apply the events of one read, all stamped ``now``. True when the stream must stop (an error)."""
    for event in events:
        payload = event.data
        if payload == "[DONE]":
            progress.saw_done = True
            progress.done_ns = now
            return False
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            progress.fail("error", "malformed_sse", _truncate(f"undecodable data line: {payload}"), now)
            return True
        if type(obj) is not dict:
            progress.fail("error", "malformed_sse", _truncate(f"data line is not an object: {payload}"), now)
            return True
        info = classify_chunk(obj)
        if info.error is not None:
            progress.fail("error", "stream_error", _truncate(error_message(info.error)), now)
            return True
        progress.add(record, info, now)
    return False


async def _read_whole(resp: aiohttp.ClientResponse, record: RequestRecord, progress: Progress) -> None:
    body = await resp.read()
    now = monotonic_ns()
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        progress.fail("error", "malformed_response", _truncate(f"undecodable body: {body[:200]!r}"), now)
        return
    info: ChunkInfo = classify_response(obj) if type(obj) is dict else ChunkInfo()
    if info.error is not None:
        progress.fail("error", "response_error", _truncate(error_message(info.error)), now)
        return
    progress.add(record, info, now)
    progress.saw_done = True  # a complete body is the whole response
    progress.done_ns = now


async def _read_error_message(resp: aiohttp.ClientResponse) -> str:
    body = b""
    try:
        while len(body) < _ERROR_BODY_BYTES:
            data = await resp.content.readany()
            if not data:
                break
            body += data
    except (aiohttp.ClientError, asyncio.TimeoutError):
        pass  # the status code is the failure that matters; keep what of the body arrived
    try:
        message = error_message(orjson.loads(body))
    except orjson.JSONDecodeError:
        message = body.decode("utf-8", "replace") or (resp.reason or "")
    return _truncate(_one_line(message))


def _one_line(value: object) -> str:
    text = value if isinstance(value, str) else f"{type(value).__name__}: {value}"
    return " ".join(text.split())


def _truncate(text: str) -> str:
    return text if len(text) <= _ERROR_MESSAGE_CHARS else text[: _ERROR_MESSAGE_CHARS - 3] + "..."
