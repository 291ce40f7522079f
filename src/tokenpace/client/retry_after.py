"""The wait a server asks for in its error response (``retry-after-ms``, ``Retry-After``)."""

from __future__ import annotations

import email.utils
import math
from collections.abc import Mapping
from datetime import datetime, timezone


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The wait a server asks for: ``retry-after-ms`` (OpenAI's) or ``Retry-After`` in seconds or as
    an HTTP date; None when absent or unreadable."""
    millis = _non_negative(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    text = headers.get("Retry-After")
    seconds = _non_negative(text)
    if seconds is not None or text is None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())  # wall clock: the header's


def _non_negative(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None
