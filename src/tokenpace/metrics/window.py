"""The measurement window over which every rate (tokens/s, requests/s, goodput) is counted.

Default: from the earliest ``sent_ns`` of a measured record to the latest ``done_ns`` of a
measured record (a record without ``done_ns`` ends at its ``last_token_ns``, else its ``sent_ns``).
Or an explicit ``(start_ns, end_ns)``, e.g. to cut off ramp-up or a cancelled tail, or a ``Window``
whose ``rule`` says in words how its ends were chosen (the runner's steady-state window,
``tokenpace.runner.steady``). Both ends are inclusive. A window of zero length (or no measured records) has no rates: they are None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.record import RequestRecord

_COUNTING = (
    " Output tokens count only chunks that arrived inside the window, so cancelled or timed-out"
    " tails neither dilute nor inflate them; requests/s and input tokens count ok requests by their"
    " progress inside the window (the fraction of a request's output tokens that arrived inside it;"
    " a request without output tokens counts whole if it completed inside), so requests in flight"
    " at either end count for the part done inside. Input tokens include cached prompt tokens, which are"
    " also reported apart (cached_prompt_tokens_s, uncached_input_tokens_s);"
    " total_tokens_s = (input + output tokens) / duration."
)


def completion_ns(record: RequestRecord) -> int | None:
    """When a request finished: ``done_ns``, else ``last_token_ns``, else ``sent_ns``."""
    for stamp in (record.done_ns, record.last_token_ns, record.sent_ns):
        if stamp is not None:
            return stamp
    return None


@dataclass(frozen=True)
class Window:
    start_ns: int | None
    end_ns: int | None
    explicit: bool = False
    rule: str | None = None  # how an explicit window's ends were chosen, in words

    @property
    def duration_s(self) -> float:
        if self.start_ns is None or self.end_ns is None:
            return 0.0
        return (self.end_ns - self.start_ns) / 1e9

    def contains(self, ns: int | None) -> bool:
        if ns is None or self.start_ns is None or self.end_ns is None:
            return False
        return self.start_ns <= ns <= self.end_ns

    def contains_all(self, ns: np.ndarray) -> np.ndarray:
        """``contains`` for an int64 array of stamps."""
        if self.start_ns is None or self.end_ns is None:
            return np.zeros(ns.shape, dtype=bool)
        return (ns >= self.start_ns) & (ns <= self.end_ns)

    def rate(self, count: float) -> float | None:
        """``count`` per second over the window; None when the window has no length."""
        duration_s = self.duration_s
        return None if duration_s <= 0 else count / duration_s

    @property
    def definition(self) -> str:
        if self.rule:
            bounds = self.rule
        elif self.explicit:
            bounds = "Window given explicitly as [start_ns, end_ns], both ends inclusive."
        else:
            bounds = ("Window from the earliest sent_ns to the latest done_ns of measured"
                      " (non-warmup, sent) records, both ends inclusive.")
        return bounds + _COUNTING

    def to_dict(self) -> dict:
        return {"start_ns": self.start_ns, "end_ns": self.end_ns,
                "duration_s": self.duration_s, "definition": self.definition}


def measurement_window(measured: Sequence[RequestRecord],
                       window: tuple[int, int] | Window | None = None) -> Window:
    """The window for ``measured`` records, or the explicit ``window`` after checking it."""
    if isinstance(window, Window):
        if window.start_ns is None or window.end_ns is None:
            return measurement_window(measured)
        checked = measurement_window(measured, (window.start_ns, window.end_ns))
        return Window(checked.start_ns, checked.end_ns, explicit=True, rule=window.rule)
    if window is not None:
        try:
            start_ns, end_ns = (int(bound) for bound in window)
        except (TypeError, ValueError):
            raise UsageError(f"window must be (start_ns, end_ns), got {window!r}") from None
        if end_ns < start_ns:
            raise UsageError(f"window ends before it starts: ({start_ns}, {end_ns})")
        return Window(start_ns, end_ns, explicit=True)
    starts = [r.sent_ns for r in measured if r.sent_ns is not None]
    ends = [e for e in map(completion_ns, measured) if e is not None]
    if not starts or not ends:
        return Window(None, None)
    start_ns = min(starts)
    return Window(start_ns, max(max(ends), start_ns))
