"""When the decode cohort's members need their next KV block, kept by the step's residue.

A member in plain decode computes one token a step, so it needs a new block every ``block_size``
steps, always at the same residue of the step modulo ``block_size``: a member whose blocks end
``room`` tokens past its context needs its next block in step ``step + room``. A member with less
than a block of room ("tight": every member whose blocks are handed out one at a time, as they
fill) sits in ``ring[due % block_size]`` and stays there, whatever blocks it is given, until it
leaves. So the members due in step ``s`` are exactly ``ring[s % block_size]``: a step's blocks are
given in one pass over those, with no heap operation and no look at the others, and a jump over
``k`` steps reads how many members are due at each of the next steps from the ring's list lengths.
Members holding more than a block of room (admitted with their output reserved, as TensorRT-LLM's
no-evict policy does) wait in a heap until they are within a block of their due step.

The invariant the ring relies on: when a step is scheduled, every ring member is due in that step
or in one of the next ``block_size - 1``; once its blocks are given, in one of the next
``block_size``. Every path that gives a member blocks keeps it (``take``, the scheduler's own grants
for ``take``'s rest, ``allocate`` for a jump, whose steps are never scheduled one by one).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from operator import attrgetter

from tokenpace.simulator.sequence import Sequence

_ADMIT_NO = attrgetter("admit_no")


def due_step(seq: Sequence, block_size: int) -> int:
    """The step in which cohort member ``seq`` fills its blocks (its decode needs a new one)."""
    return seq.co_from - seq.num_computed + seq.num_blocks * block_size


class CohortBlocks:
    __slots__ = ("block_size", "ring", "later", "_short")

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.ring: list[list[Sequence]] = [[] for _ in range(block_size)]  # tight members by due step mod bs
        self.later: list[tuple[int, int, Sequence]] = []  # (due step, admit_no, seq): more than a block of room
        self._short: list[Sequence] = []  # members of ``later`` needing blocks during a jump (jump_length -> allocate)

    def add(self, seq: Sequence, step: int) -> None:
        """``seq`` joined in ``step`` with its blocks for that step already given."""
        bs = self.block_size
        at = seq.co_from - seq.num_computed + seq.num_blocks * bs  # due_step, inline: once per join
        if at - step <= bs:
            self.ring[at % bs].append(seq)
        else:
            heappush(self.later, (at, seq.admit_no, seq))

    def remove(self, seq: Sequence) -> None:
        """``seq`` left (its fields up to date): out of the ring (a heap entry goes stale)."""
        bs = self.block_size
        bucket = self.ring[(seq.co_from - seq.num_computed + seq.num_blocks * bs) % bs]  # due_step's residue
        try:
            bucket.remove(seq)
        except ValueError:
            pass  # it waits in ``later``

    def clear(self) -> None:
        for bucket in self.ring:
            bucket.clear()
        self.later.clear()
        self._short = []

    def _promote(self, step: int) -> None:
        """Members of ``later`` due within a block of ``step`` (before its blocks) join the ring."""
        later, bs, ring = self.later, self.block_size, self.ring
        while later and later[0][0] < step + bs:
            at, no, seq = heappop(later)
            if seq.co_from >= 0 and seq.admit_no == no and due_step(seq, bs) == at:
                ring[at % bs].append(seq)

    def take(self, step: int, kv, keep: int = 0) -> list[Sequence]:  # type: ignore[no-untyped-def]
        """Give the members whose decode in ``step`` needs a new KV block their block, in running
        order, while more than ``keep`` blocks are free. Returns the ones left without, in running
        order: the caller gives each its block (``kv.grow``) or preempts it (it leaves)."""
        if self.later:
            self._promote(step)
        due = self.ring[step % self.block_size]
        n = len(due)
        if not n:
            return []
        give = kv.num_free - keep
        if give >= n:
            kv.num_free -= n  # one block each: a decode step grows a sequence by one token
            for seq in due:
                seq.num_blocks += 1
            return []
        due.sort(key=_ADMIT_NO)
        give = max(give, 0)
        kv.num_free -= give
        for seq in due[:give]:
            seq.num_blocks += 1
        return due[give:]

    def jump_length(self, step: int, k: int, free: int) -> int:
        """How many identical decode steps from ``step`` on (at most ``k``) the ``free`` blocks
        carry: each member whose room runs out within them needs its own blocks, so the steps end
        before the member that would find none. ``allocate`` must follow."""
        bs, ring = self.block_size, self.ring
        rooms: list[tuple[int, int]] = []  # (tokens of room, members with it): ring members, room 1..bs
        short = 0
        for j in range(1, min(k, bs + 1)):
            c = len(ring[(step + j) % bs])
            if c:
                rooms.append((j, c))
                short += c
                if short > free:
                    k = j
                    break
        if k > bs and short <= free:  # members with more room, from the heap, soonest first
            later, held = self.later, self._short
            while later and later[0][0] < step + k:
                at, no, seq = heappop(later)
                if seq.co_from >= 0 and seq.admit_no == no and due_step(seq, bs) == at:
                    held.append(seq)
                    rooms.append((at - step, 1))
                    short += 1
                    if short > free:
                        k = at - step
                        break

        def extra_blocks(steps: int) -> int:  # step i needs room for i + 1 more tokens
            return sum(c * -(-(steps - r) // bs) for r, c in rooms if r < steps)

        return longest_fit(k, extra_blocks, free)

    def allocate(self, kv, step: int, k: int) -> None:  # type: ignore[no-untyped-def]
        """Give every member the blocks for ``k`` steps from ``step`` (``jump_length`` found them)."""
        bs, ring = self.block_size, self.ring
        for j in range(1, min(k, bs + 1)):
            bucket = ring[(step + j) % bs]
            if bucket:
                n = -(-(k - j) // bs)
                kv.num_free -= n * len(bucket)
                for seq in bucket:
                    seq.num_blocks += n
        held, self._short = self._short, []
        for seq in held:
            ok = kv.grow(seq, step - seq.co_from + seq.num_computed + k)
            assert ok, "jump length exceeded the free KV blocks"
            at = due_step(seq, bs)
            if at - (step + k) < bs:
                ring[at % bs].append(seq)
            else:
                heappush(self.later, (at, seq.admit_no, seq))
        assert kv.num_free >= 0, "jump length exceeded the free KV blocks"


def longest_fit(k: int, extra_blocks: Callable[[int], int], free: int) -> int:
    """The most steps, up to ``k``, whose extra KV blocks fit in ``free`` (``extra_blocks``
    grows with the steps, and ``extra_blocks(1) == 0``: the first step is already allocated)."""
    if extra_blocks(k) <= free:
        return k
    lo, hi = 1, k
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if extra_blocks(mid) <= free:
            lo = mid
        else:
            hi = mid - 1
    return lo
