"""Plans for traffic that shares prompt prefixes: prefix caching searched both ways, priced by the
simulator's own cache (bounds stay optimistic), checked against a separate `tokenpace sweep --sim`
of the same shared-prefix traffic, and the same from a trace's block ids."""

from __future__ import annotations

import json

import pytest

from tests.plan.test_plan_search import cli
from tokenpace.metrics.slo import parse_slo
from tokenpace.plan.candidates import Candidate
from tokenpace.plan.search import Traffic, dataset_traffic, prepare
from tokenpace.workload.lengths import parse_length
from tokenpace.workload.shared_prefix import SharedPrefixSpec

SHARED = ["--shared-prefix", "groups=4,prefix-tokens=3000", "--input-tokens", "200", "--output-tokens", "150"]


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    proc = cli("plan", "--model", "llama-3.1-8b", "--rate", "20", "--slo", "chat", "--gpus", "l40s",
               "--quant", "fp8", "--tp", "1", *SHARED, "--jobs", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "3,000 shared (4 prefix groups) + 200" in " ".join(proc.stdout.split())
    return json.loads(out.read_text())


def _rows(doc: dict) -> dict[bool, dict]:
    return {r["candidate"]["prefix_caching"]: r for r in doc["ranked"] + doc["rejected"]}


def test_shared_prefixes_search_prefix_caching_both_ways_and_the_what_if_reads_the_plans_rows(plan):
    rows = _rows(plan)
    assert set(rows) == {True, False}
    on, off = rows[True], rows[False]
    assert on["meets_slo"] and on["rank"] == 1
    assert on["bounds"]["ttft_floor_ms"] < off["bounds"]["ttft_floor_ms"]  # 200 tokens computed, not 3,200
    assert "--enable-prefix-caching" in plan["winner"]["flags"]["vllm"]
    line = next(w for w in plan["what_ifs"] if w.startswith("prefix caching on 1 x L40S TP1 FP8 (vllm)"))
    if off["meets_slo"]:
        assert f"{off['replicas']} -> {on['replicas']} replicas" in line
        assert on["cost"]["usd_per_hour"] <= off["cost"]["usd_per_hour"]
    else:
        assert ": needed;" in line


def test_the_caching_winner_meets_the_slo_in_a_sweep_of_the_same_traffic_and_misses_it_without_the_cache(plan,
                                                                                                         tmp_path):
    w = plan["winner"]
    assert w["candidate"]["prefix_caching"]
    per_replica = plan["traffic"]["rate_rps"] / w["replicas"]
    verdicts = {}
    for caching in (True, False):
        out = tmp_path / f"sweep-{caching}.json"
        proc = cli("sweep", "--sim", "--model", "llama-3.1-8b", "--gpu", "l40s", "--tp", "1", "--quant", "fp8",
                   "--engine", "vllm", *(["--prefix-caching"] if caching else []), *SHARED,
                   "--rate", f"{per_replica:.3f}", "--slo", "chat", "--duration-per-step", "120", "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        (step,) = json.loads(out.read_text())["steps"]
        verdicts[caching] = step["summary"]["goodput"]["verdict"]["met"]
    off = _rows(plan)[False]
    assert verdicts[True]
    # Without the cache, one replica at this rate must fail where the plan said the cacheless twin needs more.
    if not off["meets_slo"] or off["replicas"] > w["replicas"]:
        assert not verdicts[False]


def test_the_caching_floors_assume_every_shared_block_hits_and_the_memory_fit_counts_the_whole_prompt():
    traffic = Traffic(10, parse_length("200"), parse_length("100"), shared_prefix=SharedPrefixSpec(4, 3000))
    ins, _ = traffic.lengths(50)
    assert set(ins.tolist()) == {3200} and traffic.mean_uncached_input() == 200
    requests = traffic.requests(10, 8)
    assert [r.prefix_group for r in requests] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert {(r.prompt_tokens, r.prefix_tokens) for r in requests} == {(3200, 3000)}
    slo = parse_slo("chat")
    on, off = (prepare(Candidate("l40s", 1, "fp8", prefix_caching=c), "llama-3.1-8b", traffic, slo, 1.0)
               for c in (True, False))
    assert on.fit == off.fit and on.fit["context_tokens"] >= 3300
    assert on.bounds.ttft_floor_ms < off.bounds.ttft_floor_ms / 5
    assert on.bounds.tpot_floor_ms == off.bounds.tpot_floor_ms  # decode still reads the whole context


def test_a_traces_block_ids_become_shared_blocks_and_an_uncached_floor(tmp_path):
    trace = tmp_path / "reuse.trace.jsonl"
    lines = []
    for i in range(40):  # every request: the same 4 blocks (2,048 tokens), then 300 tokens of its own
        lines.append({"timestamp": 100 * i, "input_length": 2348, "output_length": 80,
                      "hash_ids": [1, 2, 3, 4, 1000 + i]})
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    traffic = dataset_traffic(8.0, str(trace), trace=True)
    assert traffic.shares_prefixes and traffic.mean_uncached_input() == 300
    first, second = traffic.requests(8.0, 2, block_tokens=16)
    shared = 4 * 512 // 16
    assert first.prompt_block_hashes[:shared] == second.prompt_block_hashes[:shared]
    assert first.prompt_block_hashes[shared:] != second.prompt_block_hashes[shared:]
    out = tmp_path / "plan.json"
    proc = cli("plan", "--model", "llama-3.1-8b", "--rate", "8", "--trace", str(trace), "--gpus", "l40s",
               "--quant", "fp8", "--tp", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["traffic"]["trace_block_ids"] and doc["traffic"]["mean_uncached_input_tokens"] == 300
    assert {r["candidate"]["prefix_caching"] for r in doc["ranked"] + doc["rejected"]} == {True, False}


@pytest.mark.parametrize("args, message", [
    (["--shared-prefix", "groups=2,prefix-tokens=100,per-group=5,order=grouped"], "steady rate"),
    (["--shared-prefix", "groups=2"], "prefix-tokens"),
    (["--dataset", "a.jsonl", "--trace", "b.jsonl"], "one traffic source"),
    (["--prefix-caching", "maybe"], "--prefix-caching"),
])
def test_bad_prefix_input_is_one_line_and_exit_2(args, message):
    proc = cli("plan", "--model", "llama-3.1-8b", "--rate", "5", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
