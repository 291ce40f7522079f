"""Streams handed back to the caller: the SDK's stream, chunk for chunk, with each chunk stamped.

What the caller sees is unchanged, with one exception: when the request asked for usage only because
we did (``CallRecorder.injected_usage``), the usage-only last chunk (``choices: []``) is read for its
counts and not handed on. Every way a stream can end finishes the record exactly once: its end, an
exception, ``close()`` (or leaving a ``with`` block), cancellation, and garbage collection of a
stream that was dropped unfinished (an early ``break`` ends that way in CPython).
"""

from __future__ import annotations

from time import monotonic_ns
from typing import Any

from tokenpace.client.chunk_objects import classify_chunk_object, text_chars

from .call import CallRecorder, classify_exception


def _is_injected_usage_chunk(chunk: Any, recorder: CallRecorder) -> bool:
    return recorder.injected_usage and not getattr(chunk, "choices", None) and getattr(chunk, "usage", None) is not None


def _on_error(recorder: CallRecorder, exc: BaseException) -> None:
    status, kind, message, http_status = classify_exception(exc, response_seen=True)
    if http_status is not None:
        recorder.record.http_status = http_status
    recorder.fail(status, kind, message)
    recorder.finish()


class InstrumentedStream:
    """Wraps the SDK's synchronous ``Stream``; attributes it does not define go to the SDK's."""

    def __init__(self, stream: Any, recorder: CallRecorder) -> None:
        self._stream = stream
        self._iterator = iter(stream)
        self._recorder = recorder

    def __iter__(self) -> InstrumentedStream:
        return self

    def __next__(self) -> Any:
        recorder = self._recorder
        while True:
            try:
                chunk = next(self._iterator)
            except StopIteration:
                recorder.done(monotonic_ns())
                recorder.finish()
                raise
            except BaseException as exc:
                _on_error(recorder, exc)
                raise
            now = monotonic_ns()
            progress = recorder.progress  # CallRecorder.chunk, inlined: this runs once a chunk
            chars = text_chars(chunk)
            if chars > 0:  # the common chunk, text only: no ChunkInfo, no usage to look for
                progress.add_text(recorder.record, chars, now)
                return chunk
            progress.last_read_ns = now  # read by no watchdog here: the text path above skips it
            info = classify_chunk_object(chunk)
            progress.add(recorder.record, info, now)
            if info.usage is None or not _is_injected_usage_chunk(chunk, recorder):
                return chunk

    def close(self) -> None:
        self._recorder.fail("cancelled", "closed_early", None)
        self._recorder.finish()
        self._stream.close()

    def __enter__(self) -> InstrumentedStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        recorder = getattr(self, "_recorder", None)
        if recorder is not None and not recorder.finished:
            recorder.fail("cancelled", "abandoned", None)
            recorder.finish()

    def __getattr__(self, name: str) -> Any:
        if name in ("_stream", "_iterator", "_recorder"):  # not set: __init__ failed part way
            raise AttributeError(name)
        return getattr(self._stream, name)


class InstrumentedAsyncStream:
    """Wraps the SDK's ``AsyncStream``; attributes it does not define go to the SDK's."""

    def __init__(self, stream: Any, recorder: CallRecorder) -> None:
        self._stream = stream
        self._iterator = stream.__aiter__()
        self._recorder = recorder

    def __aiter__(self) -> InstrumentedAsyncStream:
        return self

    async def __anext__(self) -> Any:
        recorder = self._recorder
        while True:
            try:
                chunk = await self._iterator.__anext__()
            except StopAsyncIteration:
                recorder.done(monotonic_ns())
                recorder.finish()
                raise
            except BaseException as exc:  # CancelledError included: a "cancelled" record
                _on_error(recorder, exc)
                raise
            now = monotonic_ns()
            progress = recorder.progress  # CallRecorder.chunk, inlined: this runs once a chunk
            chars = text_chars(chunk)
            if chars > 0:  # the common chunk, text only: no ChunkInfo, no usage to look for
                progress.add_text(recorder.record, chars, now)
                return chunk
            progress.last_read_ns = now  # read by no watchdog here: the text path above skips it
            info = classify_chunk_object(chunk)
            progress.add(recorder.record, info, now)
            if info.usage is None or not _is_injected_usage_chunk(chunk, recorder):
                return chunk

    async def close(self) -> None:
        self._recorder.fail("cancelled", "closed_early", None)
        self._recorder.finish()
        await self._stream.close()

    async def __aenter__(self) -> InstrumentedAsyncStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __del__(self) -> None:
        recorder = getattr(self, "_recorder", None)
        if recorder is not None and not recorder.finished:
            recorder.fail("cancelled", "abandoned", None)
            recorder.finish()

    def __getattr__(self, name: str) -> Any:
        if name in ("_stream", "_iterator", "_recorder"):  # not set: __init__ failed part way
            raise AttributeError(name)
        return getattr(self._stream, name)
