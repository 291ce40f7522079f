"""Content hashes of a prompt's full KV blocks, chained so that a block matches only after the same
prefix (vLLM's scheme: hash(previous block's hash, this block's tokens)).

The simulator has no token ids, so a block's "tokens" are a content id: the shared-prefix group and
block position for a shared prefix, the user's id from ``prompt_block_hashes``, or the request's own
index for the unique rest. A conversation's request (``session`` set) is all session content: the
session and the block's position in the session's token stream, whose turns each extend the last
(prompt, reply, next user message), so its hashes run on over the reply, whose full blocks are
published too: the next turn's prompt finds them. Only ints and tuples of ints are hashed, which Python hashes the same way
in every process (strings are salted per process, so a string group id is digested first).
"""

from __future__ import annotations

import hashlib

from tokenpace.simulator.request import SimRequest

_SHARED, _USER, _UNIQUE, _SESSION = 1, 2, 3, 4


def _group_key(group: str | int) -> int:
    if isinstance(group, int):
        return group
    return int.from_bytes(hashlib.blake2b(group.encode("utf-8"), digest_size=8).digest(), "big")


def prompt_block_hashes(req: SimRequest, index: int, block_size: int) -> list[int]:
    """One chained hash per full block of the prompt (a partial last block is never cached); for a
    session's turn, per full block of prompt + reply."""
    full = req.prompt_tokens // block_size
    contents: list[tuple[int, int, int]] = []
    if req.session is not None:
        full = (req.prompt_tokens + req.output_tokens) // block_size
        contents = [(_SESSION, req.session, i) for i in range(full)]
    elif req.prompt_block_hashes is not None:
        contents = [(_USER, h, 0) for h in req.prompt_block_hashes[:full]]
    elif req.prefix_group is not None:
        g = _group_key(req.prefix_group)
        contents = [(_SHARED, g, i) for i in range(min(full, req.prefix_tokens // block_size))]
    contents += [(_UNIQUE, index, i) for i in range(len(contents), full)]
    hashes, prev = [], 0
    for c in contents:
        prev = hash((prev, c))
        hashes.append(prev)
    return hashes
