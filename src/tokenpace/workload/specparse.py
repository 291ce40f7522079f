"""The `key=value,key=value` syntax of the workload flags, with one-line errors naming the flag."""

from __future__ import annotations

import math

from tokenpace.errors import UsageError


def parse_kv(text: str, flag: str, allowed: tuple[str, ...]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        key, eq, value = part.partition("=")
        key = key.strip().lower()
        if not eq or not value.strip():
            raise UsageError(f"{flag}: expected key=value, got {part!r}")
        if key not in allowed:
            raise UsageError(f"{flag}: unknown key {key!r}; use {', '.join(allowed)}")
        pairs[key] = value.strip()
    return pairs


def whole(pairs: dict[str, str], key: str, flag: str, *, default: int | None = None,
          minimum: int = 1) -> int:
    if key not in pairs:
        if default is None:
            raise UsageError(f"{flag}: {key}= is required")
        return default
    try:
        value = float(pairs[key])
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value == int(value) and value >= minimum):
        raise UsageError(f"{flag}: {key} must be a whole number >= {minimum}, not {pairs[key]!r}")
    return int(value)


def seconds(text: str, flag: str) -> float:
    """'3s', '250ms', '2m' or a bare number of seconds."""
    raw = text.strip().lower()
    scale = 1.0
    for suffix, factor in (("ms", 1e-3), ("s", 1.0), ("m", 60.0)):
        if raw.endswith(suffix):
            raw, scale = raw[: -len(suffix)], factor
            break
    try:
        value = float(raw) * scale
    except ValueError:
        raise UsageError(f"{flag}: {text!r} is not a duration like 3s or 250ms") from None
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(f"{flag}: a duration must be finite and >= 0, not {text!r}")
    return value
