"""Cache advice on logs built with known answers: `tokenpace lint`, `workload reuse`, `workload dedupe`."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tokenpace.advise.hashchain import prompt_hash_chain
from tokenpace.advise.providers import get_provider
from tokenpace.advise.radix import RadixTree, brute_force_lru
from tokenpace.cli.main import main

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda omicron sigma".split()


def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def chat(system, user, **extra):
    return {"model": "m", "messages": [{"role": "system", "content": system},
                                       {"role": "user", "content": user}], **extra}


# --- lint -------------------------------------------------------------------------------------

def test_a_planted_timestamp_is_found_with_its_invalidated_count_exact(tmp_path, capsys):
    head = "You are a support agent for Acme. Today:"  # 8 words before the timestamp
    static = words(400, 1)  # 400 words after it, the same in every request
    n = 30
    rows = [chat(f"{head} 2026-11-{1 + i % 28:02d}T{i % 24:02d}:15:00Z {static}", f"question {words(5, 100 + i)}")
            for i in range(n)]
    code, out, _ = cli(capsys, "lint", write(tmp_path / "log.jsonl", rows), "--json")
    assert code == 0
    r = json.loads(out)
    assert [f["kind"] for f in r["findings"]] == ["timestamp"]
    f = r["findings"][0]
    assert f["requests"] == n - 1  # the first request has nothing to share with
    # Each later request loses the timestamp word and the 400 words after it.
    assert f["invalidated_units"] == (n - 1) * 401
    assert f["token_offset"] == {"min": 8, "median": 8.0, "max": 8}
    assert f["json_path"] == "$.messages[0].content" and f["char_offset"] == len(head) + 1
    # vLLM caches whole 16-word blocks: 409 prefix words → 25 blocks (400 words); before, none
    assert f["cached_tokens_gained"] == (n - 1) * 400
    assert f["ttft_saved_ms_mean"] > 0


def test_the_timestamp_offset_in_tokens_with_a_tokenizer(tmp_path, capsys, bpe_json):
    from tokenpace.workload.tokenizer import load_tokenizer

    head = "latency percentile prefill decode at"
    rows = [chat(f"{head} {day}day, November {d}, 2026 {words(200, 1)}", f"q {i}")
            for i, (day, d) in enumerate([("Mon", 23), ("Tues", 24), ("Wednes", 25), ("Thurs", 26)])]
    code, out, _ = cli(capsys, "lint", write(tmp_path / "log.jsonl", rows), "--tokenizer", str(bpe_json), "--json")
    r = json.loads(out)
    assert code == 0 and r["unit"] == "tokens"
    f = r["findings"][0]
    assert f["kind"] == "timestamp" and f["requests"] == 3
    assert f["token_offset"]["min"] == len(load_tokenizer(bpe_json).encode(head + " "))


def test_a_clean_log_gives_no_finding(tmp_path, capsys):
    system = words(1200, 2)
    rows = [chat(system, f"order 10{i} placed on 2026-11-{i + 1:02d}: where is it? mail me at u{i}@x.org")
            for i in range(20)]
    for provider in ("vllm", "openai"):
        code, out, _ = cli(capsys, "lint", write(tmp_path / "log.jsonl", rows), "--provider", provider, "--json")
        assert code == 0 and json.loads(out)["findings"] == [], provider
    code, out, _ = cli(capsys, "lint", str(tmp_path / "log.jsonl"))
    assert "no findings" in out


def test_openai_routing_prefix_is_named(tmp_path, capsys):
    rows = [chat(f"request req_{i:06d}x " + words(1300, 14), f"q{i}") for i in range(3)]
    code, out, _ = cli(capsys, "lint", write(tmp_path / "log.jsonl", rows), "--provider", "openai", "--json")
    f = json.loads(out)["findings"][0]
    assert f["cached_tokens_gained"] == 2 * 1280 and "first 256 tokens" in f["fix"]


@pytest.mark.parametrize("kind,make", [
    ("uuid", lambda i: f"session {i:08x}-2fa1-11d2-883f-0016d3cca427"),
    ("email", lambda i: f"the user is u{i}@example.com"),
    ("id", lambda i: f"request req_{i:08d}abc"),
    ("user_name", lambda i: f"user: {['Alice', 'Bob', 'Carol'][i % 3]} Smith"),
])
def test_each_volatile_kind_is_named(tmp_path, capsys, kind, make):
    rows = [chat(f"{make(i)} {words(100, 3)}", f"hi {i}") for i in range(6)]
    code, out, _ = cli(capsys, "lint", write(tmp_path / "log.jsonl", rows), "--json")
    kinds = [f["kind"] for f in json.loads(out)["findings"]]
    assert kinds and kinds[0] == kind


def test_tool_order_and_key_order_drift(tmp_path, capsys):
    tools = [{"type": "function", "function": {"name": n, "description": words(30, k), "parameters": {}}}
             for k, n in enumerate(["search", "lookup", "refund"])]
    flipped = [{"function": t["function"], "type": "function"} for t in tools]  # same tools, keys reordered
    rows = []
    for i in range(8):
        ts = tools[i % 3:] + tools[:i % 3] if i < 4 else (tools if i % 2 else flipped)
        rows.append(chat(words(50, 4), f"q {i}", tools=ts))
    code, out, _ = cli(capsys, "lint", write(tmp_path / "log.jsonl", rows), "--json", "--min-requests", "1")
    got = {f["kind"]: f["requests"] for f in json.loads(out)["findings"]}
    assert got["tool_order"] == 2 and got["json_key_order"] == 1  # two new rotations; one new key order


def anthropic(system_blocks, user="hi", model="claude-sonnet-4-5"):
    return {"model": model, "max_tokens": 100, "system": system_blocks,
            "messages": [{"role": "user", "content": user}]}


def bp(text):
    return {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}


def test_provider_minimums_per_model():
    assert get_provider("openai").cached_tokens(1023) == 0
    assert get_provider("openai").cached_tokens(1300) == 1280  # 128-token steps
    assert get_provider("anthropic", "claude-sonnet-4-5-20250929").min_cacheable_tokens == 1024
    assert get_provider("anthropic", "claude-haiku-4-5").min_cacheable_tokens == 4096
    assert get_provider("anthropic", "claude-3-5-haiku-latest").min_cacheable_tokens == 2048
    assert get_provider("vllm", block_size=32).cached_tokens(100) == 96


def test_anthropic_rules(tmp_path, capsys):
    short = [anthropic([bp(words(300, 5))], f"q{i}") for i in range(3)]  # below 1,024
    many = [anthropic([bp(words(300, 6 + k)) for k in range(7)], f"q{i}") for i in range(3)]  # 7 breakpoints
    moving = [{"model": "claude-sonnet-4-5", "max_tokens": 10, "system": words(1500, 9),
               "messages": [{"role": "user", "content": [bp(f"turn {i} {words(20, 50 + i)}")]}]}
              for i in range(3)]
    for rows, kind in ((short, "below_minimum"), (many, "too_many_breakpoints"), (moving, "moving_breakpoint")):
        code, out, _ = cli(capsys, "lint", write(tmp_path / "a.jsonl", rows), "--provider", "anthropic",
                           "--model", "claude-sonnet-4-5", "--json")
        assert code == 0
        got = {f["kind"]: f for f in json.loads(out)["findings"]}
        assert kind in got, (kind, list(got))
    # 2,000 words is enough for Sonnet 4.5 (1,024) and not for Haiku 4.5 (4,096)
    rows = [anthropic([bp(words(2000, 7))], f"q{i}") for i in range(3)]
    for model, expect in (("claude-sonnet-4-5", False), ("claude-haiku-4-5", True)):
        code, out, _ = cli(capsys, "lint", write(tmp_path / "b.jsonl", rows), "--provider", "anthropic",
                           "--model", model, "--json")
        assert ("below_minimum" in {f["kind"] for f in json.loads(out)["findings"]}) is expect, model


def test_fail_on_gives_exit_8_and_dollars_with_a_price(tmp_path, capsys):
    rows = [anthropic([bp(f"now {i}:{i:02d} PM " + words(1500, 8))], f"q{i}") for i in range(5)]
    log = write(tmp_path / "log.jsonl", rows)
    code, out, _ = cli(capsys, "lint", log, "--provider", "anthropic", "--model", "claude-sonnet-4-5",
                       "--fail-on", "timestamp", "--json")
    assert code == 8
    f = json.loads(out)["findings"][0]
    assert f["kind"] == "timestamp" and f["usd_saved"] > 0
    code, _, _ = cli(capsys, "lint", log, "--provider", "anthropic", "--fail-on", "uuid")
    assert code == 0


# --- reuse ------------------------------------------------------------------------------------

def test_radix_lru_matches_a_brute_force_replay():
    for trial in range(200):
        rng = random.Random(trial)
        seqs = []
        for _ in range(rng.randint(1, 40)):
            toks = [rng.randint(0, 4)] + [rng.randint(0, 2) for _ in range(rng.randint(0, 11))]
            keys, h = [], 0
            for t in toks:  # chained, as block hashes are
                h = (h * 1_000_003 + t + 1) % (2**61 - 1)
                keys.append(h)
            seqs.append(keys)
        cap = rng.randint(1, 60)
        tree = RadixTree(cap)
        got = [tree.match_insert(np.array(s, dtype=np.uint64)) for s in seqs]
        assert got == brute_force_lru(seqs, cap), trial
        assert tree.size <= cap


def test_reuse_ceiling_and_lru_on_a_known_log(tmp_path, capsys):
    prefixes = [words(160, 20 + g) for g in range(3)]  # 3 groups, 10 blocks of 16 words each
    rows = [chat(prefixes[i % 3], f"u{i} " + words(4, 200 + i)) for i in range(30)]  # interleaved
    log = write(tmp_path / "log.jsonl", rows)
    code, out, _ = cli(capsys, "workload", "reuse", log, "--json")
    r = json.loads(out)
    assert code == 0 and r["unit"] == "words"
    assert r["ceiling"]["hit_units"] == 27 * 160  # every request but each group's first
    assert r["top_prefixes"][0]["requests"] == 10 and r["top_prefixes"][0]["prefix_units"] == 160
    assert r["shared_prefix_spec"] == "groups=3,prefix-tokens=160,per-group=10"
    # Room for two groups' 10 blocks: interleaving three groups thrashes an LRU; room for three holds them
    code, out, _ = cli(capsys, "workload", "reuse", log, "--cache-tokens", str(2 * 160), "--json")
    assert json.loads(out)["lru"]["hit_units"] == 0
    code, out, _ = cli(capsys, "workload", "reuse", log, "--cache-tokens", str(3 * 160), "--json")
    assert json.loads(out)["lru"]["hit_units"] == 27 * 160


def test_reuse_reports_provider_cached_tokens_and_writes_a_trace(tmp_path, capsys):
    system = words(1100, 30)
    rows = [{"request": chat(system, f"q{i}"),
             "response": {"usage": {"prompt_tokens": 1500, "completion_tokens": 20,
                                    "prompt_tokens_details": {"cached_tokens": 0 if i == 0 else 1408}}},
             "timestamp": 1_700_000_000 + i} for i in range(4)]
    trace = tmp_path / "t.jsonl"
    code, out, _ = cli(capsys, "workload", "reuse", write(tmp_path / "log.jsonl", rows), "--emit-trace",
                       str(trace), "--json")
    r = json.loads(out)
    assert r["provider_reported"]["cached_tokens"] == 3 * 1408 and r["provider_reported"]["requests"] == 4
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert [x["timestamp"] for x in lines] == [0, 1000, 2000, 3000]
    assert lines[0]["hash_ids"] == lines[1]["hash_ids"] == [0, 1]  # 1,101 words: two 512-word blocks
    code, out, _ = cli(capsys, "workload", "inspect", "--trace", str(trace), "--json")
    assert code == 0


def test_hash_chain_records_reuse_without_text(tmp_path, capsys):
    text = words(64, 40)
    rows = [{"prompt_hash_chain": prompt_hash_chain(text + f" tail{i}", b"salt-a")} for i in range(3)]
    rows.append({"prompt_hash_chain": prompt_hash_chain(text, b"salt-b")})  # another salt shares nothing
    code, out, _ = cli(capsys, "workload", "reuse", write(tmp_path / "log.jsonl", rows), "--json")
    r = json.loads(out)
    assert code == 0 and r["log"]["formats"] == {"hash-chain": 4}
    assert r["ceiling"]["hit_units"] == 2 * 64  # 4 blocks of 16 words, for the 2nd and 3rd requests
    assert "text" not in json.dumps(rows[0]) and text.split()[0] not in json.dumps(rows[0])


# --- dedupe -----------------------------------------------------------------------------------

def test_a_near_duplicate_pair_is_a_hit_above_its_similarity_and_not_below(tmp_path, capsys):
    # 5-grams: abcdefghij has 6, abcdefghix shares 5 of them: Jaccard 5 / 7 = 0.714
    rows = [chat("sys", "abcdefghij"), chat("sys", "ABCDEFGHIX!"), chat("sys", "abcdefghij"),
            chat("other system", "abcdefghij"), chat("sys", "abcdefghij", temperature=0.2)]
    log = write(tmp_path / "log.jsonl", rows)
    code, out, _ = cli(capsys, "workload", "dedupe", log, "--similarity", "0.6", "--json")
    r = json.loads(out)
    assert code == 0
    assert r["exact"]["hits"] == 1  # the third request; another system prompt or temperature is another key
    assert r["near"]["hits"] == 2
    ex = next(c for c in r["curve"] if c["threshold"] == 0.7)["examples"]
    assert ex and ex[0]["jaccard_exact"] == pytest.approx(5 / 7, abs=1e-3)
    code, out, _ = cli(capsys, "workload", "dedupe", log, "--similarity", "0.8", "--json")
    assert json.loads(out)["near"]["hits"] == 1


# --- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("line,argv,needle", [
    ("not json", ["lint"], "log.jsonl:2: not valid JSON"),
    ('{"messages": "x"}', ["lint"], "log.jsonl:2: 'messages' must be a list"),
    ('{"messages": [], "tools": [1]}', ["lint"], "tools[0] must be an object"),
    ('{"request": {"prompt": "x"}, "usage": {"prompt_tokens": -1}}', ["workload", "reuse"], "'prompt_tokens' must be"),
    ('{"prompt_hash_chain": {"v": 9}}', ["workload", "reuse"], "'prompt_hash_chain' must be"),
    ('[1, 2]', ["workload", "dedupe"], "a line must be a JSON object"),
])
def test_every_bad_line_is_one_line_with_file_and_line(tmp_path, capsys, line, argv, needle):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(chat("s", "u")) + "\n" + line + "\n")
    code, _, err = cli(capsys, *argv, str(log))
    assert code == 2 and needle in err and err.count("\n") == 1


@pytest.mark.parametrize("argv,needle", [
    (["lint", "{log}", "--provider", "nope"], "unknown provider 'nope'"),
    (["lint", "{log}", "--fail-on", "dates"], "--fail-on: unknown kind 'dates'"),
    (["lint", "{log}", "--block-size", "0"], "--block-size must be >= 1"),
    (["lint", "{log}", "--providers", "{log}"], "--providers:"),
    (["lint", "{log}", "--sim-model", "no-such-model"], "no-such-model"),
    (["lint", "{missing}"], "cannot read"),
    (["workload", "reuse", "{log}", "--cache-tokens", "3"], "--cache-tokens must hold at least one block"),
    (["workload", "reuse", "{log}", "--tokenizer", "{missing}"], "does not exist"),
    (["workload", "dedupe", "{log}", "--similarity", "1.5"], "--similarity must be in (0, 1]"),
    (["workload", "dedupe", "{empty}"], "holds no request"),
])
def test_every_bad_flag_is_one_line_exit_2(tmp_path, capsys, argv, needle):
    log = write(tmp_path / "log.jsonl", [chat("s", "u")])
    (tmp_path / "empty.jsonl").write_text("\n")
    subs = {"{log}": log, "{missing}": str(tmp_path / "nope.jsonl"), "{empty}": str(tmp_path / "empty.jsonl")}
    code, _, err = cli(capsys, *[subs.get(a, a) for a in argv])
    assert code == 2 and needle in err and err.count("\n") == 1, err


def test_skip_bad_lines_counts_them(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(chat("s", "u")) + "\nnope\n" + json.dumps(chat("s", "v")) + "\n")
    code, out, _ = cli(capsys, "lint", str(log), "--skip-bad-lines", "--json")
    r = json.loads(out)
    assert code == 0 and r["requests"] == 2 and r["log"]["skipped_lines"] == 1


def test_whitespace_drift(tmp_path, capsys):
    base = words(200, 60)
    rows = [chat(base.replace(" ", "  ", 1 + i) if i % 2 else base, f"q {i}") for i in range(6)]
    code, out, _ = cli(capsys, "lint", write(tmp_path / "log.jsonl", rows), "--json")
    f = json.loads(out)["findings"]
    assert f and f[0]["kind"] == "whitespace" and f[0]["requests"] == 3


def test_the_fast_volatile_matcher_finds_what_the_plain_pattern_finds():
    from tokenpace.advise import volatile

    pieces = ["2026-11-24T10:00:05Z", "Tuesday, November 24, 2026 at 10:05 AM", "user: Alice Smith", "a.b@x.io",
              "sess_abc123XYZ", "550e8400-e29b-41d4-a716-446655440000", "turn 7", "1.2.3", "24 Nov 2026",
              "1764000000", "10:05:33", "11/24/2026", "req_9f8e7d6c", "name=Bob", "x1y2", "v2.0", "\n",
              "order_" + "x" * 120, "deadbeef0eadbeefdeadbeef", "\u0662\u0660\u0662\u0666"]  # (Arabic-Indic digits)
    filler = ["lorem ipsum dolor sit amet ", "the quick brown fox ", " " * 300, "naïve café "]
    for trial in range(600):
        rng = random.Random(trial)
        dense = rng.random() < 0.5
        text = "".join((rng.choice(pieces) if rng.random() < (0.5 if dense else 0.08) else rng.choice(filler))
                       + rng.choice([" ", "", ". "]) for _ in range(rng.randint(0, 60)))
        fast = [(m.span(), m.lastgroup) for m in volatile.matches(text)]
        assert fast == [(m.span(), m.lastgroup) for m in volatile.PATTERN.finditer(text)], text


def test_a_conversation_with_its_breakpoint_on_the_newest_turn_reads_what_the_turn_before_wrote(tmp_path, capsys):
    system = words(1500, 70)
    history: list = []
    rows = []
    for turn in range(5):
        history = [{**m, "content": [{"type": "text", "text": m["content"][0]["text"]}]} for m in history]
        history.append({"role": "user", "content": [bp(f"turn {turn} " + words(30, 80 + turn))]})
        rows.append({"model": "claude-sonnet-4-5", "max_tokens": 10, "system": system, "messages": list(history)})
        history.append({"role": "assistant", "content": [{"type": "text", "text": words(40, 90 + turn)}]})
    code, out, _ = cli(capsys, "lint", write(tmp_path / "log.jsonl", rows), "--provider", "anthropic", "--json")
    assert code == 0 and "moving_breakpoint" not in {f["kind"] for f in json.loads(out)["findings"]}


def test_a_proxy_chain_of_a_body_reuses_like_the_body_itself(tmp_path, capsys):
    from tokenpace.advise.hashchain import body_hash_chain

    system = words(300, 75)
    bodies = [chat(system, f"q{i} " + words(20, 300 + i)) for i in range(5)]
    code, out, _ = cli(capsys, "workload", "reuse", write(tmp_path / "text.jsonl", bodies), "--json")
    from_text = json.loads(out)["ceiling"]["hit_units"]
    chains = [{"prompt_hash_chain": body_hash_chain(b, b"secret")} for b in bodies]
    code, out, _ = cli(capsys, "workload", "reuse", write(tmp_path / "chain.jsonl", chains), "--json")
    assert json.loads(out)["ceiling"]["hit_units"] == from_text == 4 * 288  # the system prompt's 18 whole blocks


def test_word_counts_agree_with_word_units():
    from tokenpace.advise.units import Encoder

    enc = Encoder()
    rng = random.Random(5)
    for _ in range(500):
        text = "".join(rng.choice(["a", "bc", " ", "  ", "\n", "é"]) for _ in range(rng.randint(0, 12)))
        assert enc.count(text) == len(enc(text)), repr(text)


def test_ttft_saved_from_a_calibration_of_a_slower_engine_is_larger(tmp_path, capsys):
    from tokenpace.simulator.calibrate.calibration import Calibration, write_calibration
    from tokenpace.simulator.catalog import get_gpu, get_model, get_precision
    from tokenpace.simulator.roofline import RooflineParams

    rows = [chat(f"now 2026-11-{i + 1:02d} {words(2000, 11)}", f"q{i}") for i in range(4)]
    log = write(tmp_path / "log.jsonl", rows)
    code, out, _ = cli(capsys, "lint", log, "--json")
    default = json.loads(out)["findings"][0]["ttft_saved_ms_mean"]
    slow = tmp_path / "slow.json"
    write_calibration(Calibration(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), get_precision("bf16"),
                                  get_precision("bf16"), RooflineParams(mfu=0.05, mbu=0.05)), slow)
    code, out, _ = cli(capsys, "lint", log, "--calibration", str(slow), "--json")
    r = json.loads(out)
    assert code == 0 and "calibration" in r["prefill"]["source"]
    assert r["findings"][0]["ttft_saved_ms_mean"] > 2 * default


def test_no_breakpoint_and_static_after_dynamic(tmp_path, capsys):
    rows = [{"model": "claude-sonnet-4-5", "max_tokens": 10, "system": words(1500, 12),
             "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(4)]
    code, out, _ = cli(capsys, "lint", write(tmp_path / "a.jsonl", rows), "--provider", "anthropic", "--json")
    got = {f["kind"]: f for f in json.loads(out)["findings"]}
    assert got["no_breakpoint"]["requests"] == 3 and got["no_breakpoint"]["cached_tokens_gained"] == 3 * 1500
    examples = words(400, 13)  # the same few-shot examples in every request, after a system prompt that changes
    rows = [{"model": "m", "messages": [{"role": "system", "content": words(30, 500 + i)},
                                        {"role": "user", "content": examples},
                                        {"role": "assistant", "content": "ok"},
                                        {"role": "user", "content": f"q{i}"}]} for i in range(4)]
    code, out, _ = cli(capsys, "lint", write(tmp_path / "b.jsonl", rows), "--json")
    got = {(f["kind"], f["segment"]): f for f in json.loads(out)["findings"]}
    f = got[("static_after_dynamic", "messages[1].content")]
    assert f["requests"] == 3 and f["invalidated_units"] == 3 * 400


def test_a_completions_prompt_is_linted_whole(tmp_path, capsys):
    rows = [{"model": "m", "prompt": f"[{10 + i}:30:00] " + words(300, 15) + f" Question {i}?"} for i in range(5)]
    code, out, _ = cli(capsys, "lint", write(tmp_path / "log.jsonl", rows), "--json")
    f = json.loads(out)["findings"][0]
    assert f["kind"] == "timestamp" and f["requests"] == 4 and f["json_path"] == "$.prompt"


def test_reuse_counts_tokens_with_a_tokenizer(tmp_path, capsys, bpe_json):
    from tokenpace.workload.tokenizer import load_tokenizer

    system = "latency percentile prefill decode scheduler batching " * 20
    rows = [chat(system, f"kilowatt {i} serendipity") for i in range(3)]
    code, out, _ = cli(capsys, "workload", "reuse", write(tmp_path / "log.jsonl", rows), "--tokenizer",
                       str(bpe_json), "--json")
    r = json.loads(out)
    shared_blocks = len(load_tokenizer(bpe_json).encode(system)) // 16
    assert code == 0 and r["unit"] == "tokens" and "tokenizer.json" in r["unit_source"]
    assert r["ceiling"]["hit_units"] == 2 * shared_blocks * 16


def test_proxy_records_with_a_hash_chain_reuse_like_their_bodies_and_carry_the_provider_counts(tmp_path, capsys):
    from tokenpace.advise.hashchain import body_hash_chain
    from tokenpace.record import RequestRecord

    system = words(300, 76)
    bodies = [chat(system, f"q{i} " + words(20, 400 + i)) for i in range(5)]
    code, out, _ = cli(capsys, "workload", "reuse", write(tmp_path / "text.jsonl", bodies), "--json")
    from_text = json.loads(out)["ceiling"]["hit_units"]
    rows = []
    for i, body in enumerate(bodies):  # what a proxy writes: its request record, the chain in place of the text
        rec = RequestRecord(request_id=f"r{i}", index=i, model="m", prompt_tokens=400 + i,
                            cached_prompt_tokens=0 if i == 0 else 384, output_tokens=7).to_dict()
        rec["prompt_hash_chain"] = body_hash_chain(body, b"secret")
        rows.append(rec)
    code, out, _ = cli(capsys, "workload", "reuse", write(tmp_path / "records.jsonl", rows), "--json")
    r = json.loads(out)
    assert code == 0 and r["log"]["formats"] == {"hash-chain": 5}
    assert r["ceiling"]["hit_units"] == from_text == 4 * 288
    p = r["provider_reported"]
    assert p["requests"] == 5 and p["prompt_tokens"] == sum(400 + i for i in range(5))
    assert p["cached_tokens"] == 4 * 384 and p["predicted_cached_units"] == 4 * 288


def _word_id(word: str) -> int:
    """The word id as defined (units.word_units): sum of mix(byte_k) * BASE^k mod 2^64, XOR the length."""
    from tokenpace.advise.units import _BASE, _BYTE_MIX

    h, p = 0, 1
    for byte in word.encode("utf-8"):
        h = (h + int(_BYTE_MIX[byte]) * p) % 2**64
        p = p * int(_BASE) % 2**64
    return h ^ len(word.encode("utf-8"))


def test_word_units_and_batched_encoding_match_the_definition_word_by_word():
    from tokenpace.advise.units import Encoder, word_units

    rng = random.Random(5)
    pieces = ["a", "bb", "ccc", " ", "  ", "é", "", "\n", "x1", "naïve"]
    for _ in range(400):
        texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 9))) for _ in range(rng.randint(0, 6))]
        enc = Encoder()
        enc.prefetch(texts)  # several texts encoded in one pass
        for t in texts:
            words = t.split(" ")
            if t.startswith(" "):
                words = words[1:]
            if t.endswith(" ") and words:
                words = words[:-1]
            want = [_word_id(w) for w in words] if t else []
            assert word_units(t).tolist() == want, t
            assert enc(t).tolist() == want, (texts, t)
