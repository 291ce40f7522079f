"""The decode cohort: sequences in plain decode, advanced together instead of one by one.

Under chunked prefill every running sequence that is decoding gets exactly one token in every step
(unless the token budget runs out), so between the events that change its course (it needs a new KV
block, it produces its last token, it is preempted or cancelled) a decoding sequence only counts:
one more computed token, one more generated token and one more chunk, whose time is the step's end.
A cohort member keeps the step at which its fields were last brought up to date (``co_from``); its
state at any later step follows from the shared clock, the end time of every engine step
(``ends``), and its chunk times are a slice of that list (``tokenpace.chunk_runs``: a run of steps,
not copied). Its events: the step at which it needs
its next KV block (kept by that step's residue modulo the block size, so the members due in a step
are one list: cohort_blocks.py), and the step that produces its last token (a heap). A step then
costs work in the number of such events, not in the number of running sequences.

Fields are written back (``sync``) when a member leaves (finishes, is preempted or cancelled) and
when the cohort is dissolved (a step whose token budget cannot hold every decode: the one-by-one
pass decides which run). A full cache is handled inside the cohort: the scheduler gives the due
blocks in running order and preempts with the one-by-one pass's victims (``ChunkedPrefill``); a
jump over identical steps is measured from the same events (``jump_length``, ``allocate``). Only plain
decoding with one token per step and no prefix cache uses a cohort (``Engine(cohort=True)``,
which ``simulate`` sets; the real-time server reads every sequence after each step and does not);
the results are the same, byte for byte, as stepping each sequence.
"""

from __future__ import annotations

from bisect import bisect_left
from heapq import heappop, heappush

from tokenpace.chunk_runs import StepEnds
from tokenpace.simulator.cohort_blocks import CohortBlocks
from tokenpace.simulator.sequence import Sequence
from tokenpace.simulator.step import ShiftedContexts


class DecodeCohort:
    __slots__ = ("block_size", "members", "keys", "offsets", "offset_sum", "ends", "blocks", "_finish", "_base")

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.members: list[Sequence] = []  # in running order (admission number)
        self.keys: list[int] = []  # their admission numbers, for bisect
        self.offsets: list[int] = []  # a member's computed tokens before step s are s + offset
        self.offset_sum = 0  # their sum
        self.ends = StepEnds()  # end time of engine step i (every step, in or out of a cohort)
        self.blocks = CohortBlocks(block_size)  # when each member needs its next KV block
        self._finish: list[tuple[int, int, Sequence]] = []  # (step producing the last token, admit_no, seq)
        self._base: tuple[int, ...] | None = None  # ``offsets`` as a tuple, until the members change

    def __len__(self) -> int:
        return len(self.members)

    @property
    def clock(self) -> int:
        """Steps finished so far (the index of the next step)."""
        return len(self.ends)

    def contexts(self, step: int) -> ShiftedContexts:
        """Every member's tokens in the KV cache before ``step``, in running order (with their sum,
        kept as members join and leave; their offsets copied once per change of members, not per step)."""
        base = self._base
        if base is None:
            base = self._base = tuple(self.offsets)
        return ShiftedContexts(base, step, step * len(base) + self.offset_sum)

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
        self._base = None
        self.blocks.add(seq, step)
        heappush(self._finish, (step + seq.output_len - seq.generated - 1, seq.admit_no, seq))

    def sync(self, seq: Sequence, step: int) -> None:
        """Write back the ``step - co_from`` decode steps ``seq`` took since it was last brought up
        to date."""
        d = step - seq.co_from
        if d > 0:
            seq.num_computed += d
            seq.generated += d
            seq.decode_steps += d
            seq.chunk_ns.add(seq.co_from, step)  # a ChunkRuns over ``ends``
            seq.co_from = step

    def leave(self, seq: Sequence, step: int) -> None:
        """``seq`` leaves after the steps before ``step`` (its heap entries go stale)."""
        self.sync(seq, step)
        self.blocks.remove(seq)
        i = bisect_left(self.keys, seq.admit_no)
        self.offset_sum -= self.offsets[i]
        del self.members[i], self.keys[i], self.offsets[i]
        self._base = None
        seq.co_from = -1

    def dissolve(self, step: int) -> list[Sequence]:
        """Every member's fields written back as of ``step``; the cohort is empty. Returns them."""
        out = self.members
        for seq in out:
            self.sync(seq, step)
            seq.co_from = -1
        self.members, self.keys, self.offsets = [], [], []
        self.offset_sum = 0
        self._base = None
        self.blocks.clear()
        self._finish.clear()
        return out

    # -- events ----------------------------------------------------------------------------------

    def _valid(self, seq: Sequence, admit_no: int) -> bool:
        return seq.co_from >= 0 and seq.admit_no == admit_no

    def take_blocks(self, step: int, kv, keep: int = 0) -> list[Sequence]:  # type: ignore[no-untyped-def]
        """Give the members whose decode in ``step`` needs a new KV block their block, in running
        order, while more than ``keep`` blocks are free. Returns the ones left without, in running
        order: the caller gives each its block or preempts it (cohort_blocks.py)."""
        return self.blocks.take(step, kv, keep)

    def jump_length(self, step: int, limit: int, free: int) -> int:
        """How many identical decode steps from ``step`` on the cohort can run as one (at most
        ``limit``): up to its first finish, and as far as ``free`` blocks carry the members that
        need new ones (the engine's ``_jump_length``, by block residue). ``allocate`` must follow."""
        fin = self._finish
        while fin and not self._valid_finish(*fin[0]):
            heappop(fin)
        k = min(limit, fin[0][0] - step + 1) if fin else limit
        if k <= 1:
            return 1
        return self.blocks.jump_length(step, k, free)

    def allocate(self, kv, step: int, k: int) -> None:  # type: ignore[no-untyped-def]
        """Give the members the blocks for ``k`` steps from ``step`` (``jump_length`` measured them)."""
        self.blocks.allocate(kv, step, k)

    def _valid_finish(self, at: int, no: int, seq: Sequence) -> bool:
        return self._valid(seq, no) and seq.co_from + seq.output_len - seq.generated - 1 == at

    def finishing(self, step: int) -> list[Sequence]:
        """Members whose last token is produced by ``step``, in running order."""
        heap, out = self._finish, []
        while heap and heap[0][0] <= step:
            at, no, seq = heappop(heap)
            # ``_valid_finish``, inline: once per member
            if seq.co_from >= 0 and seq.admit_no == no and seq.co_from + seq.output_len - seq.generated - 1 == at:
                out.append(seq)
        return out

