"""The paged KV cache with prefix caching (vLLM's automatic prefix caching).

A block that fills with prompt tokens (for a conversation's turn, reply tokens too) is published under
its chained content hash (block_hashes.py);
a later request whose prompt starts with the same blocks attaches them instead of computing them.
When its last user frees a published block, it stays cached but evictable; blocks are evicted least
recently freed first, a sequence's tail before its head, as in vLLM. Fresh blocks come from
never-published free blocks before any cached block is evicted.
"""

from __future__ import annotations

from collections import OrderedDict, deque

from tokenpace.simulator.block_hashes import prompt_block_hashes
from tokenpace.simulator.kv_cache import KVCache
from tokenpace.simulator.sequence import Sequence


class PrefixCache(KVCache):
    prefix_caching = True

    def __init__(self, num_blocks: int, block_size: int) -> None:
        super().__init__(num_blocks, block_size)
        self._free: deque[int] = deque(range(num_blocks))  # ref 0, not cached
        self._evictable: OrderedDict[int, None] = OrderedDict()  # ref 0, cached; oldest first
        self._ref = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        self._cached: dict[int, int] = {}  # content hash -> block

    def grow(self, seq: Sequence, slots: int) -> bool:
        need = -(-slots // self.block_size) - seq.num_blocks
        if need <= 0:
            return True
        if need > self.num_free:
            return False
        for _ in range(need):
            seq.blocks.append(self._take())
        seq.num_blocks += need
        self.num_free -= need
        return True

    def match_prefix(self, seq: Sequence) -> tuple[int, int]:
        """At least one token is always left to compute: sampling needs the last position's logits."""
        if seq.block_hashes is None:
            seq.block_hashes = prompt_block_hashes(seq.request, seq.index, self.block_size)
        limit = (seq.num_tokens - 1) // self.block_size
        hits = evictable = 0
        for h in seq.block_hashes[:limit]:
            b = self._cached.get(h)
            if b is None:
                break
            hits += 1
            evictable += self._ref[b] == 0
        return hits, evictable

    def admit(self, seq: Sequence, hits: int) -> None:
        self.query_tokens += seq.num_tokens
        self.hit_tokens += hits * self.block_size
        for h in seq.block_hashes[:hits]:  # type: ignore[index]
            b = self._cached[h]
            if self._ref[b] == 0:
                del self._evictable[b]
                self.num_free -= 1
            self._ref[b] += 1
            seq.blocks.append(b)
        seq.num_blocks = len(seq.blocks)
        seq.num_computed = hits * self.block_size
        seq.num_registered = hits

    def publish(self, seq: Sequence) -> None:
        """Register the full blocks computed so far that have a content hash: the prompt's, and for
        a conversation's turn the reply's too (block_hashes.py)."""
        full = min(seq.num_computed // self.block_size, len(seq.block_hashes or ()))
        for i in range(seq.num_registered, full):
            h = seq.block_hashes[i]  # type: ignore[index]
            if h not in self._cached:  # another sequence may have published the same content first
                b = seq.blocks[i]
                self._cached[h] = b
                self._hash[b] = h
        seq.num_registered = max(seq.num_registered, full)

    def free(self, seq: Sequence) -> None:
        for b in reversed(seq.blocks):
            self._ref[b] -= 1
            if self._ref[b] == 0:
                self.num_free += 1
                if self._hash[b] is None:
                    self._free.append(b)
                else:
                    self._evictable[b] = None
        seq.blocks = []
        seq.num_blocks = 0
        seq.num_registered = 0

    def _take(self) -> int:
        if self._free:
            b = self._free.popleft()
        else:
            b, _ = self._evictable.popitem(last=False)
            del self._cached[self._hash[b]]  # type: ignore[index]
            self._hash[b] = None
        self._ref[b] = 1
        return b

    def check(self) -> None:
        """Invariants, for tests: counts agree, and every cached hash points at its block."""
        assert self.num_free == len(self._free) + len(self._evictable)
        assert all(self._ref[b] == 0 for b in self._free) and all(self._ref[b] == 0 for b in self._evictable)
        assert all(self._hash[b] == h for h, b in self._cached.items())
