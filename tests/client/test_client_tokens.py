"""Tokens per chunk. Expected values are worked out by hand (in the comments), not recomputed."""

from __future__ import annotations

import pytest

from tokenpace.client.tokens import apportion_tokens, split_chunk_tokens


@pytest.mark.parametrize(
    ("total", "weights", "expected"),
    [
        # Exactly proportional: 14 * 4/56 = 1 each, 14 * 40/56 = 10.
        (14, [4, 4, 4, 4, 40], [1, 1, 1, 1, 10]),
        # 10 over 1:1:1 = 3.33 each; floors 3,3,3 and the one left over goes to the earliest tie.
        (10, [5, 5, 5], [4, 3, 3]),
        # 7 over 1:2:4 = 1, 2, 4 exactly.
        (7, [1, 2, 4], [1, 2, 4]),
        # 5 over 1:1:8: shares 0.5, 0.5, 4 -> the two small chunks get 1 each, the rest (3) goes to the third.
        (5, [1, 1, 8], [1, 1, 3]),
        # Zero-weight chunks (e.g. a tool call with no text yet) still get one token when there are enough.
        (5, [0, 0, 10], [1, 1, 3]),
        # No text at all: even split, remainder to the earliest.
        (10, [0, 0, 0], [4, 3, 3]),
        # 10 over 3:3:3:1 (W=10): 3, 3, 3, 1 exactly.
        (10, [3, 3, 3, 1], [3, 3, 3, 1]),
        # 9 over 2:3 = 3.6, 5.4 -> floors 3, 5; the larger remainder (0.6) takes the last token.
        (9, [2, 3], [4, 5]),
        # Fewer tokens than chunks: no minimum, 2 over 1:1:2 = 0.5, 0.5, 1.
        (2, [1, 1, 2], [1, 0, 1]),
        (0, [3, 4], [0, 0]),
        (3, [], []),
    ],
)
def test_apportion_tokens(total, weights, expected):
    assert apportion_tokens(total, weights) == expected


def test_continuous_usage_on_every_chunk_is_exact():
    # Role chunk (0 tokens), then chunks at cumulative 1, 4, 5, the finish chunk repeating 5 and a
    # usage-only final chunk repeating 5.
    weights = [5, 14, 3]
    marks = [(0, 0), (1, 1), (2, 4), (3, 5), (3, 5), (3, 5)]
    assert split_chunk_tokens(weights, marks) == ([1, 3, 1], "chunk_usage")


def test_final_usage_only_is_apportioned_by_text_length():
    # 12 tokens over chunks of 2, 2, 8 chars -> 2, 2, 8.
    assert split_chunk_tokens([2, 2, 8], [(3, 12)]) == ([2, 2, 8], "apportioned")


def test_tokens_reported_before_their_text_go_to_the_next_token_chunk():
    # A non-token chunk raises the count to 3 (text held back), then the next chunk shows it at 4.
    marks = [(1, 1), (1, 3), (2, 4)]
    assert split_chunk_tokens([1, 4], marks) == ([1, 3], "chunk_usage")


def test_tokens_reported_after_the_last_token_chunk_go_to_it():
    # An EOS token counted on the finish chunk, which carries no text.
    assert split_chunk_tokens([3, 3], [(1, 1), (2, 2), (2, 3)]) == ([1, 2], "chunk_usage")


def test_usage_only_on_some_chunks_apportions_within_segments():
    # Usage on chunk 2 (total 6 over chunks of 1 and 5 chars -> 1, 5) and on chunk 3 (1 more).
    assert split_chunk_tokens([1, 5, 2], [(2, 6), (3, 7)]) == ([1, 5, 1], "apportioned")


def test_token_chunks_after_the_last_usage_count_one_each():
    # The stream was cut after chunk 4, whose usage never came.
    assert split_chunk_tokens([1, 1, 1, 1], [(1, 2), (2, 3), (3, 5)]) == ([2, 1, 2, 1], "apportioned")


def test_a_dipping_count_never_gives_negative_tokens():
    assert split_chunk_tokens([1, 1, 1], [(1, 3), (2, 2), (3, 4)]) == ([3, 0, 1], "chunk_usage")


def test_no_usage_is_one_token_per_chunk():
    assert split_chunk_tokens([7, 0, 2], []) == ([1, 1, 1], "one_per_chunk")


def test_a_count_that_dips_adds_nothing_and_the_next_rise_counts_from_the_highest():
    # Cumulative 2, then a dip to 1 (nothing added: 0 tokens), then 3 (3 - 2 = 1 token).
    assert split_chunk_tokens([1, 1, 1], [(1, 2), (2, 1), (3, 3)]) == ([2, 0, 1], "chunk_usage")
