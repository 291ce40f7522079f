"""A radix tree over sequences of 64-bit keys (token ids, or chained block hashes), optionally an
LRU cache of a fixed number of keys.

``match_insert(seq)`` returns how many leading keys of ``seq`` the tree already held, then inserts
it, touching every node on its path. With a ``capacity`` the least recently used leaf is evicted
first, its tail before its head (vLLM and SGLang evict this way), so the tree stays closed under
prefixes and a hit is always a prefix. Edges are numpy arrays: a request costs a few array
comparisons per node on its path, not one step per key.
"""

from __future__ import annotations

import heapq
from itertools import count

import numpy as np


class Node:
    __slots__ = ("key", "children", "parent", "last", "requests", "depth", "origin")

    def __init__(self, key: np.ndarray, parent: Node | None, last: int, depth: int, origin: int) -> None:
        self.key = key
        self.children: dict[int, Node] = {}
        self.parent = parent
        self.last = last  # the request that touched it last
        self.requests = 0  # requests whose sequence passes through all of it
        self.depth = depth  # keys from the root to the end of this node
        self.origin = origin  # the request that created it


class RadixTree:
    def __init__(self, capacity: int | None = None) -> None:
        if capacity is not None and capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self.root = Node(np.empty(0, np.uint64), None, -1, 0, -1)
        self.size = 0  # keys held
        self.clock = 0
        self._heap: list[tuple[int, int, Node]] = []
        self._tie = count()

    def match_insert(self, seq: np.ndarray) -> int:
        """Leading keys of ``seq`` already held; then ``seq`` is inserted and its path touched."""
        self.clock += 1
        now, n = self.clock, len(seq)
        node, i = self.root, 0
        matched = None
        while i < n:
            child = node.children.get(seq.item(i))
            if child is None:
                break
            key = child.key
            m = min(len(key), n - i)
            if key[:m].tobytes() == seq[i:i + m].tobytes():  # (one memory comparison: most edges match whole)
                j = m
            else:
                j = int((key[:m] != seq[i:i + m]).argmax())
            if j < len(key):
                child = self._split(child, j)
            child.last = now
            child.requests += 1
            node, i = child, i + j
            if j < m:
                break
        matched = i
        if i < n:
            leaf = Node(np.array(seq[i:], dtype=np.uint64), node, now, node.depth + n - i, now)
            leaf.requests = 1
            node.children[seq.item(i)] = leaf
            self.size += n - i
            self._push(leaf)
        else:
            self._push(node)
        if self.capacity is not None and self.size > self.capacity:
            self._evict(self.size - self.capacity)
        return matched

    def _split(self, child: Node, j: int) -> Node:
        """Cut ``child`` after ``j`` keys: a new node for the head, ``child`` keeps the tail."""
        parent = child.parent
        head = Node(child.key[:j].copy(), parent, child.last, child.depth - len(child.key) + j, child.origin)
        head.requests = child.requests
        parent.children[int(head.key[0])] = head
        child.key = child.key[j:].copy()
        child.parent = head
        head.children[int(child.key[0])] = child
        return head

    def _push(self, node: Node) -> None:
        if self.capacity is not None and node is not self.root:
            heapq.heappush(self._heap, (node.last, next(self._tie), node))

    def _evict(self, excess: int) -> None:
        while excess > 0 and self._heap:
            last, _, node = heapq.heappop(self._heap)
            if node.children or node.parent is None or node.last != last or not len(node.key):
                continue  # no longer a leaf, removed, or touched since: a stale entry
            if node.parent.children.get(int(node.key[0])) is not node:
                continue
            if len(node.key) > excess:  # the tail goes first
                node.key = node.key[:len(node.key) - excess]
                node.depth -= excess
                self.size -= excess
                heapq.heappush(self._heap, (node.last, next(self._tie), node))
                return
            excess -= len(node.key)
            self.size -= len(node.key)
            parent = node.parent
            del parent.children[int(node.key[0])]
            node.parent = None
            if not parent.children and parent is not self.root:
                self._push(parent)

    def nodes(self):
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())


def brute_force_lru(seqs: list[list[int]], capacity: int) -> list[int]:
    """The reference the tree is tested against: one entry per block hash in an ordered dict,
    each request's blocks touched tail first (its head the most recent), the oldest evicted."""
    from collections import OrderedDict

    cache: OrderedDict[int, None] = OrderedDict()
    hits = []
    for seq in seqs:
        h = 0
        while h < len(seq) and seq[h] in cache:
            h += 1
        hits.append(h)
        for key in reversed(seq):
            cache[key] = None
            cache.move_to_end(key)
        while len(cache) > capacity:
            cache.popitem(last=False)
    return hits
