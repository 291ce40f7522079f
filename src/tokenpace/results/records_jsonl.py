"""Records as JSONL lines, with a simulated run's chunk times formatted once for the whole run.

A line is the bytes of ``orjson.dumps(record, default=json_default)`` (a test holds it to that).
Most of a simulated record's line is its chunk times, 256 for a 256-token reply: 20,000 records
are 5 million large integers to format, most of the records file's cost. They need no formatting
per record: a simulated record's chunk times are runs of the engine's step ends (``ChunkRuns``),
each end shared by every request in that step's batch, so the step ends are formatted once
(``StepEndsText``) and each record's list is cut from that text (an ``orjson.Fragment``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import orjson

from tokenpace.chunk_runs import ChunkRuns, StepEnds, json_default

_POWERS_OF_TEN = np.array([10 ** k for k in range(1, 19)], dtype=np.int64)


class StepEndsText:
    """The JSON text of one run's step ends, made once, and any ``ChunkRuns`` over them cut from it."""

    def __init__(self, steps: StepEnds) -> None:
        self.steps, self.count = steps, len(steps)
        self.text = orjson.dumps(steps)  # "[e0,e1,...]": the same digits a record's list gets
        values = steps.array()
        # Where each end's digits start: after "[", each end's digits and one separator.
        widths = 1 + np.searchsorted(_POWERS_OF_TEN, values, side="right")
        at = np.empty(len(values) + 1, dtype=np.int64)
        at[0] = 1
        np.cumsum(widths + 1, out=at[1:])
        at[1:] += 1
        # at[n] is where the closing bracket ends; the text is only used when that checks out
        # (negative ends, which the engine never makes, would have a sign the widths miss).
        self.usable = not len(values) or (int(values.min()) >= 0 and int(at[-1]) == len(self.text))
        self.at: list[int] = at.tolist()

    def json(self, runs: ChunkRuns) -> bytes:
        """The JSON text of ``runs``' chunk times (its ``tolist()`` through orjson)."""
        text, at, bounds = self.text, self.at, runs.runs
        if not bounds:
            return b"[]"
        pieces = [text[at[bounds[i]]:at[bounds[i + 1]] - 1] for i in range(0, len(bounds), 2)]
        return b"[" + b",".join(pieces) + b"]"


class RecordLines:
    """Lines for the rows of one run; keeps the step ends' text between records."""

    def __init__(self) -> None:
        self._text: StepEndsText | None = None

    def line(self, row: Any) -> bytes:
        return orjson.dumps(row, default=self._default, option=orjson.OPT_APPEND_NEWLINE)

    def _default(self, value: Any) -> Any:
        if type(value) is ChunkRuns:
            text = self._text
            if text is None or text.steps is not value.steps or text.count != len(value.steps):
                text = self._text = StepEndsText(value.steps)
            if text.usable:
                return orjson.Fragment(text.json(value))
        return json_default(value)


def record_lines(rows: Iterable[Any]) -> Iterator[bytes]:
    """Each row's JSONL line (a record, or any row orjson serializes, e.g. a timeline row)."""
    return map(RecordLines().line, rows)
