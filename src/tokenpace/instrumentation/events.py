"""The lowest level: any async iterator of SSE events (objects with a ``data`` string, such as
``tokenpace.client.sse.SSEEvent``, or the strings themselves), observed on the way through.

The events are judged by the bench client's own function (``responses.apply_events``), so a
``data:`` payload counts here exactly as it counts in a load test; each event is stamped when the
iterator hands it over. The events reach the caller unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from time import monotonic_ns
from typing import Any

from tokenpace.client.responses import apply_events
from tokenpace.client.sse import SSEEvent

from .call import RecordFactory, classify_exception


async def observe_events(events: AsyncIterator[Any], factory: RecordFactory, *, api: str = "chat") -> AsyncIterator[Any]:
    """Yield ``events`` unchanged, recording one ``RequestRecord`` for the stream they make up."""
    recorder = factory.start(api, True)
    recorder.progress.response_seen = True
    stopped = False  # an error object or broken framing ended the measurement (events still flow)
    try:
        async for event in events:
            if not stopped:
                now = monotonic_ns()
                recorder.progress.last_read_ns = now
                item = event if hasattr(event, "data") else SSEEvent(str(event))
                stopped = apply_events([item], now, recorder.record, recorder.progress)
            yield event
        if not recorder.progress.saw_done:
            recorder.done(monotonic_ns())
    except (GeneratorExit, asyncio.CancelledError) as exc:
        recorder.fail("cancelled", "closed_early" if isinstance(exc, GeneratorExit) else "cancelled", None)
        raise
    except BaseException as exc:
        status, kind, message, _ = classify_exception(exc, response_seen=True)
        recorder.fail(status, kind, message)
        raise
    finally:
        recorder.finish()
