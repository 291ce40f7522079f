"""Shared-prefix workloads: N groups, each with its own system prompt of P tokens, and requests
that add a unique user message to their group's prompt.

`--shared-prefix groups=8,prefix-tokens=2048,per-group=50,order=grouped|interleaved`: `grouped`
sends a group's requests one after another (its cached blocks are still resident when the next
arrives); `interleaved` cycles through the groups (request i belongs to group i mod N), the
harder case for a cache under pressure. Without `per-group`, interleaved runs without end (the run
stops by count or time); grouped needs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tokenpace.errors import UsageError
from tokenpace.workload.specparse import parse_kv, whole

FLAG = "--shared-prefix"
ORDERS = ("grouped", "interleaved")


@dataclass(frozen=True)
class SharedPrefixSpec:
    groups: int
    prefix_tokens: int
    per_group: int | None = None
    order: str = "interleaved"

    @property
    def total(self) -> int | None:
        return None if self.per_group is None else self.groups * self.per_group

    def group_order(self) -> Iterator[int]:
        """The group of each request, in sending order (finite when per_group is given)."""
        if self.order == "grouped":
            for g in range(self.groups):
                for _ in range(self.per_group or 0):
                    yield g
            return
        i = 0
        while self.total is None or i < self.total:
            yield i % self.groups
            i += 1


def parse_shared_prefix(text: str) -> SharedPrefixSpec:
    pairs = parse_kv(text, FLAG, ("groups", "prefix-tokens", "per-group", "order"))
    order = pairs.get("order", "interleaved").lower()
    if order not in ORDERS:
        raise UsageError(f"{FLAG}: order must be grouped or interleaved, not {order!r}")
    per_group = whole(pairs, "per-group", FLAG) if "per-group" in pairs else None
    if order == "grouped" and per_group is None:
        raise UsageError(f"{FLAG}: order=grouped needs per-group=N")
    return SharedPrefixSpec(groups=whole(pairs, "groups", FLAG),
                            prefix_tokens=whole(pairs, "prefix-tokens", FLAG),
                            per_group=per_group, order=order)
