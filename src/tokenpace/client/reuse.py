"""Which POST went out on a kept-alive connection (an aiohttp trace), for the client's resend rule.

Stale kept-alive connections. A server may close a connection right after a response without
saying ``Connection: close`` (llama-server does after every stream); a closed-loop run sends the
next request at once, before the close is seen, on that pooled connection, and the server never
reads it. When a *reused* connection turns out closed before any response byte (end of stream, or
a write that fails on a closed connection), the request is sent again on another connection. A
reset (ECONNRESET), or any failure on a new connection, is the server's and stays a failed request.
"""

from __future__ import annotations

from typing import Any

import aiohttp


class Attempt:
    """One POST attempt's trace context: did the pool hand it a kept-alive connection?"""

    __slots__ = ("reused",)

    def __init__(self) -> None:
        self.reused = False


async def _on_connection_reused(_session: Any, context: Any, _params: Any) -> None:
    if isinstance(context.trace_request_ctx, Attempt):
        context.trace_request_ctx.reused = True


def reuse_trace() -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(_on_connection_reused)
    return trace
