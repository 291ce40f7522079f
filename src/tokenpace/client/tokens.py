"""How many tokens each chunk carried: pure functions of what the stream reported.

Batching and speculative-decoding servers send chunks with several tokens, so counting one token per
chunk makes ITL and TPOT wrong (REFERENCE section 1). In order of preference:

1. ``chunk_usage``: the server put cumulative ``usage`` on every chunk (vLLM
   ``continuous_usage_stats``); each chunk carried the difference. Exact.
2. ``apportioned``: only a total is known (the final usage chunk); it is split over the chunks in
   proportion to their text length, every chunk getting at least one token.
3. ``one_per_chunk``: the server gave no count at all.

Both 1 and 2 come out of one walk over "usage marks", so a server that mixes the two (usage on some
chunks only) still gets the best split its data allows.
"""

from __future__ import annotations

from collections.abc import Sequence


def apportion_tokens(total: int, weights: Sequence[int]) -> list[int]:
    """Split ``total`` tokens over chunks in proportion to ``weights`` (their text length).

    The result sums to ``total`` exactly (largest-remainder rounding, ties to the earlier chunk).
    When ``total >= len(weights)`` every chunk gets at least one token: a chunk whose share would
    round below one is given exactly one, and the rest is re-apportioned over the others. Integer
    arithmetic only, so the result is deterministic.
    """
    n = len(weights)
    if n == 0:
        return []
    total = max(0, total)
    if total == n:  # the usual stream, one token a chunk: at least one each leaves exactly one each
        return [1] * n
    counts = [0] * n
    free = list(range(n))  # chunks whose count is still proportional
    rest = total
    if total >= n:
        while True:
            weight_sum = sum(weights[i] for i in free)
            small = [i for i in free if _share_below_one(rest, weights[i], weight_sum, len(free))]
            if not small:
                break
            for i in small:
                counts[i] = 1
            rest -= len(small)
            free = [i for i in free if counts[i] == 0]
            if not free:
                break
    if not free:
        return counts
    weight_sum = sum(max(0, weights[i]) for i in free)
    if weight_sum == 0:  # no text to go by: split evenly
        free_weights = {i: 1 for i in free}
        weight_sum = len(free)
    else:
        free_weights = {i: max(0, weights[i]) for i in free}
    remainders = []
    given = 0
    for i in free:
        quota, remainder = divmod(rest * free_weights[i], weight_sum)
        counts[i] = quota
        given += quota
        remainders.append((-remainder, i))
    remainders.sort()
    for _, i in remainders[: rest - given]:
        counts[i] += 1
    return counts


def _share_below_one(rest: int, weight: int, weight_sum: int, n_free: int) -> bool:
    if weight_sum <= 0:
        return rest < n_free  # an even split of ``rest`` over ``n_free`` chunks
    return rest * max(0, weight) < weight_sum


def split_chunk_tokens(
    weights: Sequence[int], usage_marks: Sequence[tuple[int, int]]
) -> tuple[list[int], str]:
    """Tokens per token-carrying chunk, and how they were found.

    ``weights``: the text length of each token-carrying chunk, in arrival order.
    ``usage_marks``: for each chunk that carried ``usage.completion_tokens``, in arrival order,
    ``(token_chunks_so_far, cumulative_completion_tokens)``, where ``token_chunks_so_far`` counts
    the token-carrying chunks up to and including that chunk.

    The tokens a mark adds belong to the token chunks since the previous mark (one chunk: exact;
    several: apportioned over them). A mark on a non-token chunk that adds tokens with no token chunk
    waiting (the server held text back) passes them to the next token chunk, or to the last one at
    the end of the stream. Token chunks after the last mark get one token each.
    Returns ``(chunk_tokens, source)``, source one of "chunk_usage", "apportioned", "one_per_chunk".
    """
    n = len(weights)
    if not usage_marks:
        return [1] * n, "one_per_chunk"
    counts: list[int] = []
    exact = True
    seen_chunks = 0
    seen_tokens = 0
    carried = 0  # tokens reported before the chunk that showed them
    # Runs once per request, on the loop that stamps chunks, with a mark per chunk when the server
    # streams usage: kept to plain comparisons (no slice, no max()) for the one-chunk segments.
    for chunks_so_far, cumulative in usage_marks:
        if cumulative > seen_tokens:
            added = cumulative - seen_tokens
            seen_tokens = cumulative
        else:
            added = 0  # never negative, even if a server's count dips
        if chunks_so_far <= seen_chunks:
            carried += added
            continue
        if chunks_so_far - seen_chunks == 1:
            counts.append(added + carried)
        else:
            exact = False
            counts.extend(apportion_tokens(added + carried, weights[seen_chunks:chunks_so_far]))
        carried = 0
        seen_chunks = chunks_so_far
    if seen_chunks < n:
        exact = False
        counts.extend([1] * (n - seen_chunks))
    if carried and counts:
        counts[-1] += carried
    return counts, "chunk_usage" if exact else "apportioned"
