"""The decode cohort: sequences in plain decode, advanced together instead of one by one.

Under chunked prefill every running sequence that is decoding gets exactly one token in every step
(unless the token budget runs out), so between the events that change its course (it needs a new KV
block, it produces its last token, it is preempted or cancelled) a decoding sequence only counts:
one more computed token, one more generated token and one more chunk, whose time is the step's end.
A cohort member keeps the step at which its fields were last brought up to date (``co_from``); its
state at any later step follows from the shared clock, the end time of every engine step
(``ends``), and its chunk times are a slice of that list. Two heaps hold the events: the step at
which each member needs its next KV block, and the step that produces its last token. A step then
costs work in the number of such events, not in the number of running sequences.

Fields are written back (``sync``) when a member leaves (finishes, is preempted or cancelled) and
when the cohort is dissolved (a step whose token budget cannot hold every decode: the one-by-one
pass decides which run). A full cache is handled inside the cohort: the scheduler gives the due
blocks in running order and preempts with the one-by-one pass's victims (``ChunkedPrefill``); a
jump over identical steps is measured from the heaps (``jump_length``, ``allocate``). Only plain
decoding with one token per step and no prefix cache uses a cohort (``Engine(cohort=True)``,
which ``simulate`` sets; the real-time server reads every sequence after each step and does not);
the results are the same, byte for byte, as stepping each sequence.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from heapq import heappop, heappush, heapreplace

from tokenpace.simulator.sequence import Sequence
from tokenpace.simulator.step import ShiftedContexts


class DecodeCohort:
    __slots__ = ("block_size", "members", "keys", "offsets", "offset_sum", "ends", "_blocks", "_finish", "_short")

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.members: list[Sequence] = []  # in running order (admission number)
        self.keys: list[int] = []  # their admission numbers, for bisect
        self.offsets: list[int] = []  # a member's computed tokens before step s are s + offset
        self.offset_sum = 0  # their sum
        self.ends: list[int] = []  # end time of engine step i (every step, in or out of a cohort)
        self._blocks: list[tuple[int, int, Sequence]] = []  # (step needing a new block, admit_no, seq)
        self._finish: list[tuple[int, int, Sequence]] = []  # (step producing the last token, admit_no, seq)
        self._short: list[Sequence] = []  # members needing blocks during a jump (jump_length -> allocate)

    def __len__(self) -> int:
        return len(self.members)

    @property
    def clock(self) -> int:
        """Steps finished so far (the index of the next step)."""
        return len(self.ends)

    def contexts(self, step: int) -> ShiftedContexts:
        """Every member's tokens in the KV cache before ``step``, in running order (with their sum,
        kept as members join and leave: no per-member work)."""
        return ShiftedContexts(tuple(self.offsets), step, step * len(self.offsets) + self.offset_sum)

    # -- membership ------------------------------------------------------------------------------

    def join(self, seq: Sequence, step: int) -> None:
        """``seq`` decodes from ``step`` on; its fields are up to date before ``step``."""
        seq.co_from = step
        offset = seq.num_computed - step
        i = bisect_left(self.keys, seq.admit_no)
        self.members.insert(i, seq)
        self.keys.insert(i, seq.admit_no)
        self.offsets.insert(i, offset)
        self.offset_sum += offset
        heappush(self._blocks, (seq.num_blocks * self.block_size - offset, seq.admit_no, seq))
        heappush(self._finish, (step + seq.output_len - seq.generated - 1, seq.admit_no, seq))

    def sync(self, seq: Sequence, step: int) -> None:
        """Write back the ``step - co_from`` decode steps ``seq`` took since it was last brought up
        to date."""
        d = step - seq.co_from
        if d > 0:
            seq.num_computed += d
            seq.generated += d
            seq.decode_steps += d
            seq.chunk_ns += self.ends[seq.co_from:step]
            seq.co_from = step

    def leave(self, seq: Sequence, step: int) -> None:
        """``seq`` leaves after the steps before ``step`` (its heap entries go stale)."""
        self.sync(seq, step)
        i = bisect_left(self.keys, seq.admit_no)
        self.offset_sum -= self.offsets[i]
        del self.members[i], self.keys[i], self.offsets[i]
        seq.co_from = -1

    def dissolve(self, step: int) -> list[Sequence]:
        """Every member's fields written back as of ``step``; the cohort is empty. Returns them."""
        out = self.members
        for seq in out:
            self.sync(seq, step)
            seq.co_from = -1
        self.members, self.keys, self.offsets = [], [], []
        self.offset_sum = 0
        self._blocks.clear()
        self._finish.clear()
        return out

    # -- events ----------------------------------------------------------------------------------

    def _valid(self, seq: Sequence, admit_no: int) -> bool:
        return seq.co_from >= 0 and seq.admit_no == admit_no

    def take_blocks(self, step: int, kv, keep: int = 0) -> list[Sequence]:  # type: ignore[no-untyped-def]
        """Give the members whose decode in ``step`` needs a new KV block their block, in running
        order, while more than ``keep`` blocks are free. Returns the ones left without (taken off
        the heap, in running order): the caller gives them blocks or preempts, then ``grew``."""
        heap, bs, rest = self._blocks, self.block_size, []
        while heap and heap[0][0] <= step:
            at, no, seq = heap[0]
            if not (seq.co_from >= 0 and seq.admit_no == no
                    and seq.co_from - seq.num_computed + seq.num_blocks * bs == at):
                heappop(heap)  # stale: it left, or its blocks changed
            elif rest or kv.num_free <= keep:
                heappop(heap)
                rest.append(seq)
            else:
                kv.num_free -= 1  # one block: a decode step grows a sequence by one token
                seq.num_blocks += 1
                heapreplace(heap, (at + bs, no, seq))
        assert not heap or heap[0][0] > step, "a cohort member ran past its KV blocks"
        return rest

    def grew(self, seqs: list[Sequence]) -> None:
        """``seqs`` (from ``take_blocks``) got their block: the next one is due a block later."""
        heap, bs = self._blocks, self.block_size
        for seq in seqs:
            heappush(heap, (seq.co_from - seq.num_computed + seq.num_blocks * bs, seq.admit_no, seq))

    def jump_length(self, step: int, limit: int, free: int) -> int:
        """How many identical decode steps from ``step`` on the cohort can run as one (at most
        ``limit``): up to its first finish, and as far as ``free`` blocks carry the members that
        need new ones (the engine's ``_jump_length``, from the heaps). ``allocate`` must follow."""
        fin = self._finish
        while fin and not self._valid_finish(*fin[0]):
            heappop(fin)
        k = min(limit, fin[0][0] - step + 1) if fin else limit
        if k <= 1:
            return 1
        heap, bs, short, rooms = self._blocks, self.block_size, self._short, []
        # The members whose blocks run out within k steps, soonest first. Each needs a block of its
        # own, so once more of them than ``free`` are out, no jump reaches the last one's step.
        while heap and heap[0][0] < step + k:
            at, no, seq = heappop(heap)
            if self._valid(seq, no) and seq.co_from - seq.num_computed + seq.num_blocks * bs == at:
                short.append(seq)
                rooms.append(at - step)  # tokens it can still hold (>= 1: this step's)
                if len(short) > free:
                    k = at - step
                    break

        def extra_blocks(steps: int) -> int:  # step i needs room for i + 1 more tokens
            return sum(-(-(steps - r) // bs) for r in rooms if r < steps)

        return longest_fit(k, extra_blocks, free)

    def allocate(self, kv, step: int, k: int) -> None:  # type: ignore[no-untyped-def]
        """Give the members ``jump_length`` found short the blocks for ``k`` steps from ``step``."""
        for seq in self._short:
            ok = kv.grow(seq, step - seq.co_from + seq.num_computed + k)
            assert ok, "jump length exceeded the free KV blocks"
        self.grew(self._short)
        self._short = []

    def _valid_finish(self, at: int, no: int, seq: Sequence) -> bool:
        return self._valid(seq, no) and seq.co_from + seq.output_len - seq.generated - 1 == at

    def finishing(self, step: int) -> list[Sequence]:
        """Members whose last token is produced by ``step``, in running order."""
        heap, out = self._finish, []
        while heap and heap[0][0] <= step:
            entry = heappop(heap)
            if self._valid_finish(*entry):
                out.append(entry[2])
        return out


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
