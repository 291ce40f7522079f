"""The paged KV cache: fixed-size blocks, handed out to sequences as they grow.

Without prefix caching, which block holds what never matters, so this class only counts: a sequence
holds ``num_blocks`` blocks and the cache ``num_free``. ``PrefixCache`` (prefix_cache.py) adds block
identities, content hashes and LRU eviction behind the same verbs. Paired verbs keep the invariants
visible: ``blocks_to_grow`` / ``grow``, ``match_prefix`` / ``admit``, ``publish``, ``free``.
"""

from __future__ import annotations

from tokenpace.simulator.sequence import Sequence


class KVCache:
    prefix_caching = False

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.num_free = num_blocks  # blocks a new allocation may take
        self.query_tokens = 0  # prefix-cache lookups, in tokens (vLLM's prefix_cache_queries)
        self.hit_tokens = 0  # of which found cached (vLLM's prefix_cache_hits)

    @property
    def usage(self) -> float:
        """Fraction of blocks held by running sequences (vLLM's kv_cache_usage_perc)."""
        return 1.0 - self.num_free / self.num_blocks

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0

    def blocks_to_grow(self, seq: Sequence, slots: int) -> int:
        """New blocks ``seq`` needs so that it holds ``slots`` tokens."""
        return max(0, -(-slots // self.block_size) - seq.num_blocks)

    def grow(self, seq: Sequence, slots: int) -> bool:
        """Give ``seq`` room for ``slots`` tokens; all or nothing."""
        need = -(-slots // self.block_size) - seq.num_blocks
        if need <= 0:
            return True
        if need > self.num_free:
            return False
        self.num_free -= need
        seq.num_blocks += need
        return True

    def match_prefix(self, seq: Sequence) -> tuple[int, int]:
        """(cached leading blocks, of which evictable) for a sequence about to be admitted."""
        return 0, 0

    def admit(self, seq: Sequence, hits: int) -> None:
        """Attach the first ``hits`` cached blocks to ``seq``; they count as computed tokens."""
        seq.num_computed = 0

    def publish(self, seq: Sequence) -> None:
        """Offer the prompt blocks ``seq`` has filled to later requests (prefix caching only)."""

    def free(self, seq: Sequence) -> None:
        self.num_free += seq.num_blocks
        seq.num_blocks = 0
