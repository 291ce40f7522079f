"""Garbage only a collection frees, and the collector switched on around a test: shared by the
tests of ``quiet_gc`` and of the proxy's ``--gc``."""

import gc
import weakref

import pytest


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def _cycles(n: int) -> list[weakref.ref]:
    """``n`` unreachable two-object cycles (freed only by a collection); weak references to them."""
    refs = []
    for _ in range(n):
        a, b = Node(), Node()
        a.other, b.other = b, a
        refs.append(weakref.ref(a))
    return refs


@pytest.fixture(autouse=True)
def _collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()
