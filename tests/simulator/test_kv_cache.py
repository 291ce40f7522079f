"""The paged KV cache keeps its books under any sequence of operations."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenpace.simulator.kv_cache import KVCache
from tokenpace.simulator.prefix_cache import PrefixCache
from tokenpace.simulator.request import SimRequest
from tokenpace.simulator.sequence import Sequence


def seq(i: int, prompt: int, group: int | None = None) -> Sequence:
    shared = prompt if group is not None else 0
    return Sequence(i, SimRequest(prompt, 10, prefix_group=group, prefix_tokens=shared), 0)


def test_grow_is_all_or_nothing():
    kv = KVCache(10, 16)
    a = seq(0, 100)
    assert kv.grow(a, 100) and a.num_blocks == 7 and kv.num_free == 3
    assert not kv.grow(a, 16 * 11) and a.num_blocks == 7 and kv.num_free == 3
    kv.free(a)
    assert kv.num_free == 10 and a.num_blocks == 0


def test_prefix_hit_leaves_at_least_one_token_to_compute():
    kv = PrefixCache(100, 16)
    a, b = seq(0, 64, group=1), seq(1, 64, group=1)  # exactly 4 full blocks
    kv.match_prefix(a)
    kv.admit(a, 0)
    kv.grow(a, 64)
    a.num_computed = 64
    kv.publish(a)
    hits, evictable = kv.match_prefix(b)
    assert (hits, evictable) == (3, 0)  # the 4th block would leave nothing to compute
    kv.check()


ops = st.lists(st.tuples(st.sampled_from(["admit", "free"]), st.integers(0, 7), st.integers(1, 200),
                         st.sampled_from([None, 1, 2])), max_size=60)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_prefix_cache_invariants_hold(operations):
    kv = PrefixCache(40, 16)
    live: dict[int, Sequence] = {}
    for n, (op, slot, prompt, group) in enumerate(operations):
        if op == "admit" and slot not in live:
            s = seq(n, prompt, group)
            hits, evictable = kv.match_prefix(s)
            need = -(-prompt // 16) - hits
            if need + evictable > kv.num_free:
                continue
            kv.admit(s, hits)
            assert kv.grow(s, prompt)
            s.num_computed = prompt
            kv.publish(s)
            live[slot] = s
        elif op == "free" and slot in live:
            kv.free(live.pop(slot))
        kv.check()
        held = {b for s in live.values() for b in s.blocks}
        assert kv.num_free == 40 - len(held)
    for s in live.values():
        kv.free(s)
    kv.check()
    assert kv.num_free == 40
