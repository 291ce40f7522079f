"""Records as JSONL lines, with a simulated run's chunk lists formatted once for the whole run.

A line is the bytes of ``orjson.dumps(record, default=json_default)`` (a test holds it to that).
Most of a simulated record's line is its two chunk lists, 256 chunk times and 256 token counts for
a 256-token reply: 20,000 records are 10 million integers to format, most of the records file's
cost. Neither needs formatting per record:

- a simulated record's chunk times are runs of the engine's step ends (``ChunkRuns``), each end
  shared by every request in that step's batch: the step ends are formatted once
  (``StepEndsText``), and a record's list is cut from that text;
- its token counts are one list per length, shared by every record of that length
  (``simulator.records.ones``): formatted once per list.

The rest of a record goes to orjson as a dict of its fields in their order: the same bytes as the
dataclass, and building the dict costs less than orjson's path for a slotted dataclass.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import fields
from operator import attrgetter
from typing import Any

import numpy as np
import orjson

from tokenpace.chunk_runs import ChunkRuns, StepEnds, json_default
from tokenpace.record import RequestRecord

_NAMES = tuple(f.name for f in fields(RequestRecord))
_VALUES = attrgetter(*_NAMES)
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
    """Lines for records of one run; keeps the step ends' text and the token-count lists' text
    between records."""

    def __init__(self) -> None:
        self._steps: dict[int, StepEndsText] = {}
        # id of a token-count list -> (the list, its text once seen twice); the list is held so
        # that its id is not reused while this writer lives.
        self._tokens: dict[int, tuple[list[int], orjson.Fragment | None]] = {}

    def line(self, row: Any) -> bytes:
        if type(row) is not RequestRecord or type(row.chunk_ns) is not ChunkRuns:
            return orjson.dumps(row, default=json_default, option=orjson.OPT_APPEND_NEWLINE)
        steps = self._steps_text(row.chunk_ns.steps)
        if steps is None:
            return orjson.dumps(row, default=json_default, option=orjson.OPT_APPEND_NEWLINE)
        doc = dict(zip(_NAMES, _VALUES(row)))
        doc["chunk_ns"] = orjson.Fragment(steps.json(row.chunk_ns))
        tokens = row.chunk_tokens
        if type(tokens) is list:
            seen = self._tokens.get(id(tokens))
            if seen is None:
                self._tokens[id(tokens)] = (tokens, None)
            elif seen[1] is not None:
                doc["chunk_tokens"] = seen[1]
            else:
                text = orjson.Fragment(orjson.dumps(tokens))
                self._tokens[id(tokens)] = (tokens, text)
                doc["chunk_tokens"] = text
        return orjson.dumps(doc, default=json_default, option=orjson.OPT_APPEND_NEWLINE)

    def _steps_text(self, steps: StepEnds) -> StepEndsText | None:
        text = self._steps.get(id(steps))
        if text is None or text.steps is not steps or text.count != len(steps):
            text = self._steps[id(steps)] = StepEndsText(steps)
        return text if text.usable else None


def record_lines(rows: Iterable[Any]) -> Iterator[bytes]:
    """Each row's JSONL line (a record, or any row orjson serializes, e.g. a timeline row)."""
    lines = RecordLines()
    return (lines.line(row) for row in rows)
