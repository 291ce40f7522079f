"""`tokenpace workload inspect`: what a person sees in the terminal, and exit 2 with one line on bad input."""

from __future__ import annotations

import json

import pytest

from tokenpace.cli.main import main


def run(capsys, *argv):
    code = main(["workload", "inspect", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_shared_prefix_structure(capsys):
    code, out, _ = run(capsys, "--shared-prefix", "groups=8,prefix-tokens=256,per-group=10,order=grouped",
                       "--input-tokens", "32")
    assert code == 0
    assert out.startswith("80 requests · input lengths: approximate")
    assert "8 distinct shared prefixes · 8 prefix groups" in out
    assert "arrivals: closed loop" in out
    # 72 of 80 requests reuse their group's 256-word prefix (+ the "system:" marker)
    assert "reusable" in out and "input tokens: mean 288.0" in out


def test_json_output_for_an_open_loop(capsys):
    code, out, _ = run(capsys, "--rate", "20", "--arrival", "constant", "--requests", "101",
                       "--input-tokens", "uniform:min=10,max=20", "--json")
    assert code == 0
    r = json.loads(out)
    assert r["requests"] == 101 and r["arrivals"]["span_s"] == pytest.approx(5.0)
    assert r["arrivals"]["mean_rate_rps"] == pytest.approx(20.0) and r["arrivals"]["gap_cv"] == pytest.approx(0, abs=1e-9)
    assert 10 <= r["input_tokens"]["min"] and r["input_tokens"]["max"] <= 20
    assert sum(b["count"] for b in r["input_tokens"]["histogram"]) == 101


def test_dataset_with_a_tokenizer_counts_tokens(capsys, bpe_json):
    code, out, _ = run(capsys, "--dataset", "sample", "--tokenizer", str(bpe_json))
    assert code == 0
    assert "input lengths: exact (tokenizer.json:" in out
    assert "(sharegpt, 100 entries, 0 bad lines skipped)" in out
    assert "over tokens" in out


def test_trace_arrivals(capsys):
    code, out, _ = run(capsys, "--trace", "sample", "--time-scale", "0.5", "--json")
    r = json.loads(out)
    assert code == 0 and r["requests"] == 200 and r["arrivals"]["mean_rate_rps"] > 4
    assert r["prefix_sharing"]["distinct_prefixes"] == 8  # the sample trace's 8 system prompts


def test_prefix_structure_over_token_ids(capsys, bpe_json):
    code, out, _ = run(capsys, "--shared-prefix", "groups=5,prefix-tokens=300,per-group=6", "--input-tokens",
                       "uniform:min=20,max=60", "--tokenizer", str(bpe_json), "--json")
    p = json.loads(out)["prefix_sharing"]
    assert code == 0 and p["unit"] == "tokens" and p["distinct_prefixes"] == 5
    # 25 of 30 requests reuse their group's 300-token prompt: at least 7,500 tokens reusable
    assert 7_500 <= p["reusable_units"] < 7_500 + 25 * 20


def test_conversations(capsys):
    code, out, _ = run(capsys, "--conversations", "sessions=4,turns=3,think-time=2s", "--input-tokens", "10",
                       "--output-tokens", "5")
    assert code == 0
    assert "conversations: 4 sessions × 3 turns · think time mean 2.00 s" in out
    assert "input tokens: mean 25.0" in out  # turns of 10, 25 and 40 tokens


@pytest.mark.parametrize("argv, message", [
    (["--input-tokens", "lognormal:mean=5"], "--input-tokens: lognormal needs sigma"),
    (["--dataset", "/nonexistent.jsonl"], "--dataset: cannot read /nonexistent.jsonl"),
    (["--shared-prefix", "groups=two"], "--shared-prefix: groups must be a whole number"),
    (["--tokenizer", "/nonexistent/tokenizer.json"], "--tokenizer: /nonexistent/tokenizer.json does not exist"),
    (["--tools", "2", "--api", "completions"], "--tools needs --api chat"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and message in err
