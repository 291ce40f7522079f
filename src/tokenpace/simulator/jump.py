"""How many identical decode steps a batch can run as one event when its sequences are not a cohort
(``engine.Engine``; a cohort measures its own, ``cohort.DecodeCohort.jump_length``)."""

from __future__ import annotations

from tokenpace.simulator.cohort_blocks import longest_fit
from tokenpace.simulator.kv_cache import KVCache
from tokenpace.simulator.policies.base import Batch


def jump_length(batch: Batch, kv: KVCache, decode_tokens: int, *, plain: bool) -> int:
    """The steps until the first of ``batch``'s decodes finishes, its ``repeat_limit``, or the KV
    cache's free blocks run out for the sequences' growth. ``plain``: one token per sequence and
    step (no speculative decoding); ``decode_tokens``: tokens a verification step needs room for."""
    free, g, bs = kv.num_free, decode_tokens, kv.block_size
    if plain:  # one pass: the steps until the first finishes, and the room every sequence has left
        k = batch.repeat_limit
        rooms = []  # tokens each sequence can still hold in its blocks (>= 1: this step's)
        for s in batch.decode:
            left = s.output_len - s.generated
            if left < k:
                k = left
            rooms.append(s.num_blocks * bs - s.num_computed)
        if k <= 1:
            return 1
        # Step i needs ceil((i − room) / bs) more blocks for a sequence (none while i <= room):
        # only the sequences with less room than k steps count.
        short = [r for r in rooms if r < k]
        if not short:
            return k
    else:
        k = min(batch.repeat_limit, min(s.steps_to_finish() for s in batch.decode))
        if k <= 1:
            return 1

    def extra_blocks(steps: int) -> int:
        if plain:  # step i needs room for num_computed + i tokens
            return sum(-(-(steps - r) // bs) for r in short if r < steps)
        return sum(kv.blocks_to_grow(s, s.num_computed + s.tokens_after(steps - 1) + g) for s in batch.decode)

    return longest_fit(k, extra_blocks, free)
