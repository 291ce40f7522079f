"""Retry policy (off by default): which failed attempts are tried again, and after how long.

Only failures that happened before any token arrived are retried, so a retry never repeats
tokens the user already saw; each attempt stays on disk as its own record.
"""

from __future__ import annotations

from tokenpace.record import RequestRecord

RETRYABLE_KINDS = frozenset({"http_429", "http_500", "http_502", "http_503", "http_504", "http_529",
                             "overloaded",  # Anthropic's overloaded_error event, before any token
                             "connect", "connect_timeout", "reset_before_headers"})
MAX_RETRY_AFTER_S = 60.0  # a server asking for longer is treated as asking for this
MAX_BACKOFF_S = 30.0


def should_retry(record: RequestRecord, *, retries: int) -> bool:
    return (record.attempt <= retries and record.status in ("error", "timeout")
            and record.error_kind in RETRYABLE_KINDS and record.first_token_ns is None)


def retry_delay_s(record: RequestRecord, *, backoff_s: float) -> float:
    """The server's Retry-After when it gave one, else exponential backoff from backoff_s."""
    if record.retry_after_s is not None and record.retry_after_s >= 0:
        return min(record.retry_after_s, MAX_RETRY_AFTER_S)
    return min(backoff_s * 2 ** (record.attempt - 1), MAX_BACKOFF_S)
