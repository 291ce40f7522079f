"""A stream of chunk objects already made, in the shape of the SDK's ``Stream`` (iterable,
``close()``): what ``InstrumentedStream`` wraps when its input is known in advance. The tests use it
to drive the wrapper chunk by chunk, the overhead benchmark to time the wrapper without the SDK's
parsing in the timings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class ListStream:
    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.closed = False

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)

    def close(self) -> None:
        self.closed = True
