"""Shared prefixes, trace replay, reasoning and tools: the plan's items as the runner and simulator see them."""

from __future__ import annotations

import json
from itertools import islice

import numpy as np
import pytest

from tokenpace.config import BenchConfig
from tokenpace.errors import UsageError
from tokenpace.workload import load_tokenizer, parse_shared_prefix, plan_requests, workload_from_config


def plan(**kw):
    return list(islice(plan_requests(workload_from_config(BenchConfig(**kw))), 10_000))


def test_shared_prefix_grouped_identical_prefixes_unique_suffixes():
    items = plan(shared_prefix="groups=3,prefix-tokens=200,per-group=4,order=grouped", input_tokens="50")
    assert len(items) == 12
    assert [p.prefix_group for p in items] == [0] * 4 + [1] * 4 + [2] * 4
    systems = [p.prompt[0]["content"] for p in items]
    for g in range(3):
        assert len({s for s, p in zip(systems, items) if p.prefix_group == g}) == 1
    assert len(set(systems)) == 3  # each group its own prefix
    suffixes = [p.prompt[1]["content"] for p in items]
    assert len(set(suffixes)) == 12
    assert all(len(s.split()) == 200 for s in systems)
    assert all(p.prefix_tokens == 200 and p.input_tokens == 250 for p in items)


def test_shared_prefix_interleaved_cycles_through_groups():
    items = plan(shared_prefix="groups=4,prefix-tokens=16,per-group=3", input_tokens="8")
    assert [p.prefix_group for p in items] == [0, 1, 2, 3] * 3


def test_shared_prefix_exact_with_a_tokenizer(bpe_json):
    items = plan(shared_prefix="groups=2,prefix-tokens=300,per-group=2", input_tokens="uniform:min=20,max=40",
                 tokenizer=str(bpe_json))
    tok = load_tokenizer(bpe_json)
    for p in items:
        system, user = p.prompt[0]["content"], p.prompt[1]["content"]
        assert tok.count(system) == 300
        assert tok.count(user) == p.input_tokens - 300


@pytest.mark.parametrize("text, match", [
    ("groups=0,prefix-tokens=5", "groups must be a whole number >= 1"),
    ("groups=2", "prefix-tokens= is required"),
    ("groups=2,prefix-tokens=5,order=grouped", "needs per-group"),
    ("groups=2,prefix-tokens=5,order=random", "grouped or interleaved"),
    ("groups=2,prefix-tokens=5,size=3", "unknown key 'size'"),
    ("groups", "expected key=value"),
])
def test_shared_prefix_spec_errors(text, match):
    with pytest.raises(UsageError, match=match):
        parse_shared_prefix(text)


def write_trace(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_trace_offsets_lengths_and_shared_blocks(tmp_path):
    trace = write_trace(tmp_path / "t.jsonl", [
        {"timestamp": 5000, "input_length": 1000, "output_length": 20, "hash_ids": [7, 8]},
        {"timestamp": 5400, "input_length": 700, "output_length": 30, "hash_ids": [7, 9]},
        {"timestamp": 6000, "input_length": 300, "output_length": 40, "hash_ids": [11]},
    ])
    items = plan(trace=trace, time_scale=0.5)
    assert [p.offset_s for p in items] == [0.0, 0.2, 0.5]  # (ts - first) x 0.5 / 1000
    assert [(p.input_tokens, p.output_tokens) for p in items] == [(1000, 20), (700, 30), (300, 40)]
    assert [len(p.prompt.split()) for p in items] == [1000, 700, 300]
    a, b, c = (p.prompt.split() for p in items)
    assert a[:512] == b[:512] and a[512:700] != b[512:700]  # block 7 shared, 8 and 9 differ
    assert c[:300] != a[:300]
    assert items[0].block_hashes == (7, 8)
    assert workload_from_config(BenchConfig(trace=trace)).open_loop


def test_trace_refuses_rate(tmp_path):
    trace = write_trace(tmp_path / "t.jsonl", [{"timestamp": 0, "input_length": 5, "output_length": 5}])
    with pytest.raises(UsageError, match="drop --rate"):
        workload_from_config(BenchConfig(trace=trace, rate=3))
    with pytest.raises(UsageError, match="--time-scale"):
        workload_from_config(BenchConfig(trace=trace, time_scale=0))


def test_reasoning_and_tools_body_fields():
    items = plan(reasoning_effort="high", tools=3, input_tokens="20", requests=4)[:4]
    body = items[0].extra_body
    assert body["reasoning_effort"] == "high" and body["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup_weather_0", "lookup_inventory_1",
                                                             "lookup_calendar_2"]
    assert "Call the function lookup_inventory_1" in items[1].prompt
    assert items[0].input_tokens == len(items[0].prompt.split()) > 20  # the invitation is counted
    with pytest.raises(UsageError, match="--api chat"):
        workload_from_config(BenchConfig(tools=1, api="completions"))
    assert plan(input_tokens="5")[0].extra_body is None


def test_same_seed_same_plan_and_core_prompts_unchanged():
    a = plan(input_tokens="lognormal:mean=50,sigma=0.5", rate=5.0, seed=3)[:50]
    b = plan(input_tokens="lognormal:mean=50,sigma=0.5", rate=5.0, seed=3)[:50]
    assert a == b
    # the synthetic stream is the core generator's: first prompt of seed 0 stays what it was
    from tokenpace.workload.prompts import synthetic_prompt
    lengths, prompts, *_ = (np.random.default_rng(s) for s in np.random.SeedSequence(0).spawn(3))
    n = int(workload_from_config(BenchConfig(input_tokens="uniform:min=5,max=9")).input_tokens.sample(lengths, 256)[0])
    assert plan(input_tokens="uniform:min=5,max=9")[0].prompt == synthetic_prompt(prompts, n)


def test_trace_blocks_at_the_engine_block_size(tmp_path):
    from tokenpace.workload.plan import engine_block_hashes

    trace = write_trace(tmp_path / "t.jsonl", [
        {"timestamp": 0, "input_length": 1000, "output_length": 2, "hash_ids": [7, 8]},
        {"timestamp": 1, "input_length": 600, "output_length": 2, "hash_ids": [7, 9]},
    ])
    a, b = (engine_block_hashes(p, 16) for p in plan(trace=trace))
    assert len(a) == 62 and len(b) == 37  # full 16-token blocks of 1000 and 600 tokens
    assert a[:32] == b[:32] and a[32] != b[32]  # the first 512 tokens (32 blocks) are shared


@pytest.mark.parametrize("extra", [{}, {"shared_prefix": "groups=3,prefix-tokens=64"}, {"tools": 2},
                                   {"trace": "sample"}])
def test_a_plan_without_text_has_the_same_requests_and_empty_generated_prompts(extra):
    # The simulator reads only lengths: it plans without generating text, and must see the very
    # requests that bench would send.
    if extra.get("trace") == "sample":
        from tokenpace.workload.datasets import SAMPLES

        extra = {"trace": str(SAMPLES["--trace"]), "rate": None}
    config = BenchConfig(**{"input_tokens": "uniform:min=10,max=300", "output_tokens": "lognormal:mean=50,sigma=0.5",
                            "rate": 4.0, "seed": 9, **extra})
    spec = workload_from_config(config)
    with_text = list(islice(plan_requests(spec), 40))
    lengths_only = list(islice(plan_requests(spec, text=False), 40))
    fields = ("index", "input_tokens", "output_tokens", "offset_s", "prefix_group", "prefix_tokens",
              "block_hashes", "extra_body")
    assert [[getattr(p, f) for f in fields] for p in lengths_only] == [[getattr(p, f) for f in fields] for p in with_text]
    assert all(p.prompt for p in with_text)
    texts = [p.prompt if isinstance(p.prompt, str) else "".join(m["content"] for m in p.prompt) for p in lengths_only]
    assert all(t.strip() == "" or extra.get("tools") for t in texts)
