"""The official ``openai`` SDK, observed: ``client.chat.completions.create`` and
``client.completions.create`` (sync or async, streamed or not) record one ``RequestRecord`` per call.

The wrapper never imports ``openai``: it wraps whatever client it is given and finds out from the
result of ``create`` whether the call was async (an awaitable) or streamed (an iterator). Anything
else on the client is the client's own, reached through attribute delegation.
"""

from __future__ import annotations

import inspect
from time import monotonic_ns
from typing import Any

from tokenpace.client.chunk_objects import classify_response_object

from .call import CallRecorder, RecordFactory, classify_exception, prompt_of
from .streams import InstrumentedAsyncStream, InstrumentedStream


class InstrumentedClient:
    """An SDK client whose generation calls are recorded. ``unwrap()`` gives the client back."""

    def __init__(self, client: Any, factory: RecordFactory, *, inject_usage: bool = True) -> None:
        self._client = client
        self._factory = factory
        self._inject_usage = inject_usage
        self.completions = _Create(client.completions, "completions", factory, inject_usage)
        self.chat = _Chat(client.chat, factory, inject_usage)

    def unwrap(self) -> Any:
        return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def __repr__(self) -> str:
        return f"instrumented({self._client!r})"


class _Chat:
    def __init__(self, chat: Any, factory: RecordFactory, inject_usage: bool) -> None:
        self._chat = chat
        self.completions = _Create(chat.completions, "chat", factory, inject_usage)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._chat, name)


class _Create:
    """A resource whose ``create`` is observed; its other methods are the resource's own."""

    def __init__(self, resource: Any, api: str, factory: RecordFactory, inject_usage: bool) -> None:
        self._resource = resource
        self._api = api
        self._factory = factory
        self._inject_usage = inject_usage

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resource, name)

    def create(self, *args: Any, **kwargs: Any) -> Any:
        stream = kwargs.get("stream") is True
        recorder = self._factory.start(self._api, stream, kwargs.get("max_tokens", kwargs.get("max_completion_tokens")),
                                       kwargs.get("model"))
        if stream and self._inject_usage:
            options = kwargs.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage")):
                kwargs["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
                recorder.injected_usage = True
        if recorder.hasher is not None:
            recorder.prompt = prompt_of(kwargs)
        headers = kwargs.get("extra_headers")
        kwargs["extra_headers"] = {**(headers or {}), "X-Request-ID": recorder.record.request_id}
        try:
            result = self._resource.create(*args, **kwargs)
        except BaseException as exc:
            _failed(recorder, exc)
            raise
        if inspect.isawaitable(result):
            return _await(result, recorder, stream)
        return _received(result, recorder, stream)


def _received(result: Any, recorder: CallRecorder, stream: bool) -> Any:
    """The response has arrived (its headers, for a stream)."""
    recorder.progress.response_seen = True
    recorder.record.http_status = 200
    if stream:
        return InstrumentedStream(result, recorder)
    now = monotonic_ns()
    recorder.progress.streaming = False
    recorder.chunk(classify_response_object(result), now)
    recorder.done(now)
    recorder.finish()
    return result


async def _await(result: Any, recorder: CallRecorder, stream: bool) -> Any:
    try:
        response = await result
    except BaseException as exc:  # CancelledError included
        _failed(recorder, exc)
        raise
    if stream:
        recorder.progress.response_seen = True
        recorder.record.http_status = 200
        return InstrumentedAsyncStream(response, recorder)
    return _received(response, recorder, stream)


def _failed(recorder: CallRecorder, exc: BaseException) -> None:
    status, kind, message, http_status = classify_exception(exc, response_seen=False)
    recorder.record.http_status = http_status
    recorder.fail(status, kind, message)
    recorder.finish()
