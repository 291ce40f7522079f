"""One observed call: its record, what its response showed so far, and the one place it ends.

``CallRecorder.finish`` is idempotent and every exit path calls it (end of stream, an exception,
``close()``, cancellation, garbage collection), so a call yields exactly one record. The record is
the bench client's: ``Progress`` stamps it (with slabs for the text chunks' stamps, ``slabs.py``)
and ``finish_record`` fills its counts.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from random import getrandbits
from time import monotonic_ns
from typing import Any

from tokenpace.client.chunks import ChunkInfo
from tokenpace.client.progress import finish_record, one_line
from tokenpace.record import RequestRecord

from .slabs import SlabProgress

Observer = Callable[[RequestRecord], None]


class CallRecorder:
    __slots__ = ("record", "progress", "_observers", "finished", "injected_usage", "hasher", "prompt")

    def __init__(self, record: RequestRecord, observers: tuple[Observer, ...], *, streaming: bool) -> None:
        self.record = record
        self.progress = SlabProgress(streaming=streaming)
        self._observers = observers
        self.finished = False
        self.injected_usage = False  # the caller did not ask for usage: the usage-only chunk is ours
        self.hasher: Any = None  # advise.hashchain.PromptHasher, when the prompt's hash chain is kept...
        self.prompt: dict[str, Any] | None = None  # ...of this request body, hashed in finish()

    def chunk(self, info: ChunkInfo, now_ns: int) -> None:
        self.progress.last_read_ns = now_ns
        self.progress.add(self.record, info, now_ns)

    def done(self, now_ns: int) -> None:
        """The response ended normally (end of stream, or a whole body)."""
        progress = self.progress
        if progress.status != "ok":
            return
        progress.spill(self.record)
        if not self.record.chunk_ns:
            progress.fail("error", "empty_response", "the response ended with no token", now_ns)
            return
        progress.saw_done = True
        if progress.done_ns is None:
            progress.done_ns = now_ns

    def fail(self, status: str, error_kind: str | None, message: str | None, now_ns: int | None = None) -> None:
        self.progress.fail(status, error_kind, message, monotonic_ns() if now_ns is None else now_ns)

    def finish(self) -> None:
        """Fill the record and hand it to the observers, once; later calls do nothing."""
        if self.finished:
            return
        self.finished = True
        progress = self.progress
        if progress.status == "ok" and not progress.saw_done:  # it stopped short of its end
            progress.fail("cancelled", "abandoned", None, monotonic_ns())
        progress.spill(self.record)
        finish_record(self.record, progress)
        if self.prompt is not None:  # hashed once the caller has its answer, never before the call
            self.record.prompt_hash_chain = self.hasher(self.prompt)
            self.prompt = None
        for observer in self._observers:
            try:
                observer(self.record)
            except Exception:  # noqa: BLE001 - an exporter's failure must not break the caller's call
                pass


class RecordFactory:
    """Numbers the calls of one instrumented client and gives each a fresh record."""

    __slots__ = ("_counter", "observers", "hasher")

    def __init__(self, observers: tuple[Observer, ...], hasher: Any = None) -> None:
        self._counter = itertools.count()
        self.observers = observers
        self.hasher = hasher  # advise.hashchain.PromptHasher: records keep their prompt's hash chain

    def start(self, api: str, stream: bool, max_tokens: Any = None, model: Any = None) -> CallRecorder:
        # 128 random bits as a uuid4's hex would carry, without its os.urandom system call per request
        record = RequestRecord(request_id=f"{getrandbits(128):032x}", index=next(self._counter), api=api, stream=stream,
                               model=model if type(model) is str else None)
        if type(max_tokens) is int:
            record.requested_output_tokens = max_tokens
        recorder = CallRecorder(record, self.observers, streaming=stream)
        recorder.hasher = self.hasher
        record.sent_ns = recorder.progress.last_read_ns = monotonic_ns()
        return recorder


_PROMPT_KEYS = ("messages", "prompt", "tools", "system", "model")


def prompt_of(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The parts of a call's arguments a hash chain reads, lists copied (a caller that appends to its
    ``messages`` after the call does not change what is hashed)."""
    return {k: list(v) if type(v) is list else v for k, v in kwargs.items()
            if k in _PROMPT_KEYS and isinstance(v, (str, list, dict))}


def classify_exception(exc: BaseException, response_seen: bool) -> tuple[str, str, str, int | None]:
    """(status, error_kind, message, http_status) for an exception raised by an HTTP client library.

    Read from class names and attributes, so that neither ``openai`` nor ``httpx`` is imported.
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    message = one_line(str(exc) or type(exc).__name__)
    status_code = getattr(exc, "status_code", None)
    if type(status_code) is int:
        return "error", f"http_{status_code}", message, status_code
    if "CancelledError" in names or "KeyboardInterrupt" in names:
        return "cancelled", "cancelled", message, None
    if names & {"APITimeoutError", "TimeoutException", "TimeoutError"}:
        return "timeout", "total_timeout", message, None
    if response_seen and names & {"APIConnectionError", "RemoteProtocolError", "ReadError",
                                  "NetworkError", "ClientPayloadError", "ServerDisconnectedError"}:
        return "error", "reset_mid_stream", message, None
    if names & {"APIConnectionError", "ConnectError", "ClientConnectorError"}:
        return "error", "connect", message, None
    if names & {"RemoteProtocolError", "ReadError", "ServerDisconnectedError"}:
        return "error", "reset_before_headers", message, None
    if "APIError" in names:  # the SDK raises it for an error object inside the stream
        return "error", "stream_error", message, None
    return "error", "client_exception", message, None
