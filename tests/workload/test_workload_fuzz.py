"""Fuzzing the workload parsers: any text gives a value or the documented error, nothing else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenpace.errors import UsageError
from tokenpace.workload import parse_conversations, parse_shared_prefix
from tokenpace.workload.datasets import parse_entry

ALPHABET = st.sampled_from(list("0123456789.,:=-+ ") + ["groups", "prefix-tokens", "per-group", "order",
                           "grouped", "interleaved", "sessions", "turns", "think-time", "exp", "uniform",
                           "s", "ms", "..", "nan", "inf"])
spec_text = st.one_of(st.text(max_size=40), st.lists(ALPHABET, max_size=14).map("".join))


@settings(max_examples=300, deadline=None)
@given(spec_text)
def test_shared_prefix_parser(text):
    try:
        spec = parse_shared_prefix(text)
    except UsageError:
        return
    assert spec.groups >= 1 and spec.prefix_tokens >= 1


@settings(max_examples=300, deadline=None)
@given(spec_text)
def test_conversation_parser(text):
    try:
        spec = parse_conversations(text)
    except UsageError:
        return
    assert spec.sessions >= 1 and spec.turns >= 1 and spec.think_time.mean_s >= 0


json_values = st.recursive(st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                               st.sampled_from(["prompt", "messages", "role", "content", "conversations", "from",
                                                "value", "timestamp", "input_length", "output_length",
                                                "hash_ids", "max_tokens", "output_tokens"]), inner, max_size=5),
                           max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_dataset_lines(value):
    try:
        entry = parse_entry("1", value)
    except ValueError:
        return
    assert entry.kind in ("sharegpt", "messages", "prompt", "trace")
    assert entry.output_tokens is None or entry.output_tokens >= 1
