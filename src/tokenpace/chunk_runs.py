"""A simulated request's chunk times as runs of engine steps, not one integer per token.

In the engine simulator every chunk a request receives is the end of some engine step, and a
decoding request gets one chunk at every step from its first decode until it finishes or is
preempted. So its chunk times are a few slices of one list that every request of the run shares,
the end time of every engine step (``StepEnds``): ``ChunkRuns`` holds the step ranges
``[start, stop)`` of those slices, a few integers however long the reply, instead of a Python list
of 256 (or 20,000) ints copied out of the shared one.

``ChunkRuns`` is what a simulated ``RequestRecord.chunk_ns`` holds: a read-only sequence of ints
that equals the list it stands for (``len``, indexing, slicing into a list, iteration, ``==``),
copies (``copy.deepcopy``, ``asdict``), pickles and serializes (``json_default``) as that list,
and gives NumPy the values without a Python int each (``np.asarray``; ``gather`` for many
records at once). A consumer that wants to change a record's chunk times assigns a new list.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import chain
from typing import Any, overload

import numpy as np


class StepEnds(list):
    """The end time (ns) of every engine step of one run, in step order; only ever appended to.
    ``array()``: the same as an int64 array, made once for every record that asks (again only
    after more steps were appended)."""

    __slots__ = ("_array",)

    def __init__(self) -> None:
        super().__init__()
        self._array: np.ndarray | None = None

    def array(self) -> np.ndarray:
        a = self._array
        if a is None or len(a) != len(self):
            a = self._array = np.array(self, dtype=np.int64)
        return a


class ChunkRuns(Sequence):
    """Chunk times: the step ends of ``steps`` in the ranges ``runs`` (flat: start, stop, start,
    stop, ...; increasing, not touching: ``add`` merges a range that continues the last)."""

    __slots__ = ("steps", "runs", "count")

    def __init__(self, steps: StepEnds) -> None:
        self.steps = steps
        self.runs: list[int] = []
        self.count = 0

    def add(self, start: int, stop: int) -> None:
        """The chunks at the ends of steps ``start`` to ``stop - 1`` (after every chunk so far)."""
        runs = self.runs
        if runs and runs[-1] == start:
            runs[-1] = stop
        else:
            runs.append(start)
            runs.append(stop)
        self.count += stop - start

    def tolist(self) -> list[int]:
        runs, steps = self.runs, self.steps
        if len(runs) == 2:
            return steps[runs[0]:runs[1]]
        out: list[int] = []
        for i in range(0, len(runs), 2):
            out += steps[runs[i]:runs[i + 1]]
        return out

    def __len__(self) -> int:
        return self.count

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> list[int]: ...
    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        if isinstance(i, slice):
            return self.tolist()[i]
        if i == -1 and self.runs:  # the last chunk: what a record's ``last_token_ns`` is
            return self.steps[self.runs[-1] - 1]
        n = self.count
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("chunk index out of range")
        runs = self.runs
        for r in range(0, len(runs), 2):
            width = runs[r + 1] - runs[r]
            if i < width:
                return self.steps[runs[r] + i]
            i -= width
        raise AssertionError("unreachable")  # pragma: no cover

    def __iter__(self):  # type: ignore[no-untyped-def]
        runs, steps = self.runs, self.steps
        return chain.from_iterable(steps[runs[i]:runs[i + 1]] for i in range(0, len(runs), 2))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, ChunkRuns)):
            return self.tolist() == (other if isinstance(other, list) else other.tolist())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as a list's

    def __repr__(self) -> str:
        return repr(self.tolist())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = gather([self])
        return out if dtype is None else out.astype(dtype, copy=False)

    def copy(self) -> ChunkRuns:
        out = ChunkRuns(self.steps)
        out.runs, out.count = list(self.runs), self.count
        return out

    def __deepcopy__(self, memo: dict) -> list[int]:
        return self.tolist()  # (``dataclasses.asdict``, ``to_dict``: the list it stands for)

    def __reduce__(self) -> tuple:
        return list, (self.tolist(),)  # pickled as its list: not the whole run's step ends


def all_runs(values: Sequence) -> bool:
    """True when every one of ``values`` is a ``ChunkRuns`` over one run's step ends."""
    first = values[0] if len(values) else None
    if type(first) is not ChunkRuns:
        return False
    steps = first.steps
    return all(type(v) is ChunkRuns and v.steps is steps for v in values)


def gather(values: Sequence[ChunkRuns]) -> np.ndarray:
    """The chunk times of ``values`` (``ChunkRuns`` over one run's step ends, ``all_runs``) one
    after another, as one int64 array: every run's slice of the step ends in one NumPy gather."""
    if not len(values):
        return np.zeros(0, np.int64)
    ends = values[0].steps.array()
    bounds = np.fromiter(chain.from_iterable(v.runs for v in values), dtype=np.int64)
    starts, stops = bounds[0::2], bounds[1::2]
    widths = stops - starts
    total = int(widths.sum())
    if len(starts) == 1:
        return ends[starts[0]:stops[0]].copy()
    # Chunk j of run r is step starts[r] + (j - first[r]), where first[r] is where run r begins in the output.
    first = np.cumsum(widths) - widths
    index = np.arange(total, dtype=np.int64) + np.repeat(starts - first, widths)
    return ends[index]


def chunk_times(lists: Sequence) -> np.ndarray:
    """Many records' chunk times one after another as one int64 array: gathered with NumPy when
    they are all runs of one simulated run's steps, else flattened (lists, runs or any sequence)."""
    if all_runs(lists):
        return gather(lists)
    column = array("q")
    for values in lists:
        if type(values) is list:
            column.fromlist(values)  # about twice as fast as extend for a list's integers
        elif type(values) is ChunkRuns:
            column.fromlist(values.tolist())
        else:
            column.extend(values)
    return np.frombuffer(column, dtype=np.int64) if len(column) else np.zeros(0, np.int64)


def json_default(value: Any) -> Any:
    """orjson's ``default`` for records that may hold ``ChunkRuns``: its list."""
    if isinstance(value, ChunkRuns):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
