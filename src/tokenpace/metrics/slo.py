"""Service-level objectives: limits on TTFT, TPOT and E2E, the presets of REFERENCE section 2, and
the ``--slo`` text syntax.

Syntax (``parse_slo``), parts separated by commas:

    chat                                   a preset
    ttft=300ms,tpot=40ms,e2e=10s           limits only
    chat,ttft=300ms,attainment=0.95        a preset, then overrides
    chat,tpot=none                         drop one of the preset's limits

Keys: ``ttft``, ``tpot``, ``e2e`` (durations: ``300ms``, ``0.3s``; a bare number means ms, and needs its unit below 1) and
``attainment`` (a fraction in (0, 1], or a percentage such as ``95%``). Presets and units are
case-insensitive. A preset may only come first.

``attainment`` is the fraction of measured requests that must be good for the run to meet the
SLO. It defaults to 0.90, the convention of DistServe (Zhong et al., OSDI 2024), where goodput is
the highest rate at which 90% of requests meet their SLO.

A request is good when its status is ok and it meets every limit. An undefined TPOT (one output
token, or a non-streamed response) meets a TPOT limit vacuously: there was no decode stream to be
slow. An undefined TTFT or E2E (an ok response with no token) does not meet its limit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.metrics.latency import e2e, tpot, ttft
from tokenpace.record import RequestRecord

DEFAULT_ATTAINMENT = 0.90

# Metric -> how to measure it on one record. Order is report order.
LIMITED_METRICS: dict[str, Callable[[RequestRecord], float | None]] = {
    "ttft": ttft, "tpot": tpot, "e2e": e2e,
}
VACUOUS_WHEN_UNDEFINED = frozenset({"tpot"})


@dataclass(frozen=True)
class SLO:
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    attainment: float = DEFAULT_ATTAINMENT
    name: str | None = None  # the preset or spec it came from, for reports

    def __post_init__(self) -> None:
        for metric, limit in self.limits_ms().items():
            if not (math.isfinite(limit) and limit > 0):
                raise UsageError(f"SLO {metric} limit must be a positive duration, got {limit!r}")
        if not (isinstance(self.attainment, (int, float)) and 0 < self.attainment <= 1):
            raise UsageError(f"SLO attainment must be in (0, 1], got {self.attainment!r}")

    def limits_ms(self) -> dict[str, float]:
        """The limits that are set, metric -> ms, in report order."""
        limits = {"ttft": self.ttft_ms, "tpot": self.tpot_ms, "e2e": self.e2e_ms}
        return {metric: limit for metric, limit in limits.items() if limit is not None}

    def good_mask(self, ok: np.ndarray, values_ms: dict[str, np.ndarray]) -> np.ndarray:
        """Per request: ``ok`` and every limit met. ``values_ms`` maps each limited metric to
        float values aligned with ``ok``, NaN where undefined (see the module docstring)."""
        good = np.array(ok, dtype=bool)
        for metric, limit in self.limits_ms().items():
            values = values_ms[metric]
            met = values <= limit  # False for NaN
            if metric in VACUOUS_WHEN_UNDEFINED:
                met |= np.isnan(values)
            good &= met
        return good

    def is_good(self, record: RequestRecord) -> bool:
        """``good_mask`` for one record."""
        # The same rule for one record without numpy: live exports judge every record as it ends.
        if record.status != "ok":
            return False
        return meets(self.limits_ms().items(), lambda metric: LIMITED_METRICS[metric](record))

    def to_dict(self) -> dict:
        return {"name": self.name, "ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms,
                "e2e_ms": self.e2e_ms, "attainment": self.attainment}


# REFERENCE section 2. Plain data: add a preset by adding an entry.
SLO_PRESETS: dict[str, SLO] = {
    "chat": SLO(ttft_ms=500.0, tpot_ms=50.0, name="chat"),
    "code": SLO(ttft_ms=200.0, tpot_ms=30.0, name="code"),
    "summarization": SLO(ttft_ms=3000.0, e2e_ms=30000.0, name="summarization"),
    "classification": SLO(ttft_ms=100.0, e2e_ms=200.0, name="classification"),
    "batch": SLO(name="batch"),  # no latency limit: every ok request is good
}
SLO_PRESETS["code-completion"] = SLO_PRESETS["code"]

_FIELDS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms", "attainment": "attainment"}
_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?"
_DURATION = re.compile(rf"({_NUMBER})\s*(ms|s)?", re.IGNORECASE)
_PERCENT = re.compile(rf"({_NUMBER})\s*%", re.IGNORECASE)
_NO_LIMIT = {"none", "off"}


def parse_slo(text: str) -> SLO:
    """Parse an SLO spec (see the module docstring); raise ``UsageError`` naming the bad part."""
    spec = text.strip() if isinstance(text, str) else ""
    if not spec:
        raise UsageError(f"empty SLO {text!r}: give a preset ({_preset_names()}) "
                         "or limits such as ttft=300ms,tpot=40ms")
    parts = [part.strip() for part in spec.split(",")]
    slo = SLO()
    seen: set[str] = set()
    for position, part in enumerate(parts):
        if not part:
            raise UsageError(f"SLO {spec!r} has an empty part (two commas in a row?)")
        if "=" not in part:
            if position > 0:
                raise UsageError(f"SLO part {part!r} in {spec!r} is not key=value "
                                 "(a preset name may only come first)")
            preset = SLO_PRESETS.get(part.lower())
            if preset is None:
                raise UsageError(f"unknown SLO preset {part!r} (known: {_preset_names()})")
            slo = preset
            continue
        key, _, value = (piece.strip() for piece in part.partition("="))
        key = key.lower()
        if key not in _FIELDS:
            raise UsageError(f"unknown SLO key {key!r} in {part!r} "
                             f"(known: {', '.join(_FIELDS)})")
        if key in seen:
            raise UsageError(f"SLO key {key!r} given twice in {spec!r}")
        seen.add(key)
        parsed = _attainment(value, part) if key == "attainment" else _duration_ms(value, part)
        slo = replace(slo, **{_FIELDS[key]: parsed})
    name = spec.lower() if len(parts) > 1 or slo.name is None else slo.name
    return replace(slo, name=name)


def _duration_ms(value: str, part: str) -> float | None:
    if value.lower() in _NO_LIMIT:
        return None
    match = _DURATION.fullmatch(value)
    if match is None:
        raise UsageError(f"bad duration {value!r} in SLO part {part!r} "
                         "(expected e.g. 300ms or 2s; a bare number is ms, 'none' drops the limit)")
    number = float(match.group(1))
    if not (math.isfinite(number) and number > 0):
        raise UsageError(f"duration in SLO part {part!r} must be positive and finite")
    if match.group(3) is None and number < 1:  # 0.3 is far more often meant as seconds
        raise UsageError(f"SLO part {part!r}: a bare number is milliseconds; below 1 give the unit "
                         f"({value}s or {value}ms)")
    return number * 1000.0 if (match.group(3) or "ms").lower() == "s" else number


def _attainment(value: str, part: str) -> float:
    percent = _PERCENT.fullmatch(value)
    try:
        fraction = float(percent.group(1)) / 100.0 if percent else float(value)
    except ValueError:
        raise UsageError(f"bad attainment {value!r} in SLO part {part!r} "
                         "(expected a fraction such as 0.9 or a percentage such as 90%)") from None
    if not (math.isfinite(fraction) and 0 < fraction <= 1):
        raise UsageError(f"attainment in SLO part {part!r} must be in (0, 1] (or 0-100%)")
    return fraction


def _preset_names() -> str:
    return ", ".join(SLO_PRESETS)


def meets(limits: Iterable[tuple[str, float]], value_of: Callable[[str], float | None]) -> bool:
    """Every (metric, limit ms) met by ``value_of(metric)``; an undefined value fails a limit
    unless the metric is vacuous when undefined (see the module docstring)."""
    for metric, limit in limits:
        value = value_of(metric)
        if value is None:
            if metric not in VACUOUS_WHEN_UNDEFINED:
                return False
        elif not value <= limit:
            return False
    return True
