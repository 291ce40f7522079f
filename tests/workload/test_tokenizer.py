"""Offline tokenizers: tokenizer.json, a tokenizer folder, a GGUF vocabulary; exact-length prompts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokenpace.errors import UsageError
from tokenpace.workload import PromptMaker, exact_prompt, load_tokenizer
from tokenpace.gguf import read_gguf_vocab

SAMPLE = "the river garden throughput at night: decode 1234 tokens, prefill serendipity!"


def test_exact_prompts_reencode_to_the_requested_length(bpe_json):
    tok = load_tokenizer(bpe_json)
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 7, 16, 100, 517, 2048):
        text = exact_prompt(tok, n, rng)
        assert len(tok.encode(text)) == n, n
    # the tokenizer really splits words: one word is not one token here
    assert tok.count("onomatopoeia serendipity") > 2


def test_a_folder_holding_tokenizer_json(bpe_json):
    tok = load_tokenizer(bpe_json.parent)
    assert tok.count("the river") == load_tokenizer(bpe_json).count("the river")
    assert "tokenizer.json" in tok.source


def test_prompt_maker_labels_its_source(bpe_json):
    assert PromptMaker().source.startswith("approximate")
    assert not PromptMaker().exact
    maker = PromptMaker(load_tokenizer(bpe_json))
    assert maker.exact and maker.source.startswith("exact")
    assert maker.count(maker.text(np.random.default_rng(0), 300)) == 300


def test_bad_tokenizer_paths_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        load_tokenizer(tmp_path / "nope.json")
    with pytest.raises(UsageError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"not": "a tokenizer"}))
    with pytest.raises(UsageError, match="not a valid tokenizer.json"):
        load_tokenizer(bad)
    gguf_bad = tmp_path / "model.gguf"
    gguf_bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 5)
    with pytest.raises(UsageError, match="truncated"):
        load_tokenizer(gguf_bad)


def _write_gguf(path, tokens, *, model, merges=None, scores=None, types=None, pre=None):
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    if pre:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    if merges:
        w.add_token_merges(merges)
    if scores:
        w.add_token_scores(scores)
    if types:
        w.add_token_types(types)
    w.add_uint32("llama.context_length", 4096)  # an unrelated key, skipped by the reader
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_byte_level_bpe_matches_its_tokenizer_json(bpe_json, tmp_path):
    spec = json.loads(bpe_json.read_text())
    vocab = spec["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    types = [3 if t.startswith("<|") else 1 for t in tokens]
    path = tmp_path / "tiny.gguf"
    _write_gguf(path, tokens, model="gpt2", merges=merges, types=types)

    vocab_read = read_gguf_vocab(path)
    assert vocab_read.tokens == tokens and vocab_read.merges == merges and vocab_read.model == "gpt2"
    assert "llama.context_length" not in vocab_read.metadata  # only tokenizer keys are kept

    from_gguf, from_json = load_tokenizer(path), load_tokenizer(bpe_json)
    assert from_gguf.source.startswith("gguf:")
    assert from_gguf.encode(SAMPLE) == from_json.encode(SAMPLE)
    assert from_gguf.decode(from_gguf.encode(SAMPLE)) == SAMPLE
    assert from_gguf.count(exact_prompt(from_gguf, 64, np.random.default_rng(1))) == 64


def test_gguf_sentencepiece_vocabulary(tmp_path):
    # A SentencePiece-style (llama) vocabulary: merges follow the scores, bytes fall back.
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + \
             ["▁", "t", "h", "e", "r", "i", "v", "▁t", "he", "▁the", "▁r", "iv", "er", "▁riv", "▁river"]
    scores = [0.0] * 259 + [-float(i) for i in range(15)]
    scores[-1], scores[-6] = 10.0, 9.0  # "▁river" and "▁the" are the best merges
    types = [2, 3, 3] + [6] * 256 + [1] * 15
    path = tmp_path / "spm.gguf"
    _write_gguf(path, tokens, model="llama", scores=scores, types=types)
    tok = load_tokenizer(path)
    ids = tok.encode("the river")
    assert [tokens[i] for i in ids] == ["▁the", "▁river"]
    assert tok.decode(ids) == "the river"
    assert tok.count("the river!") == 3  # "!" is not in the vocabulary: one byte-fallback token


def test_unsupported_gguf_tokenizer_type(tmp_path):
    path = tmp_path / "bert.gguf"
    _write_gguf(path, ["[PAD]", "a"], model="bert")
    with pytest.raises(UsageError, match="not supported"):
        load_tokenizer(path)


def test_gguf_sentencepiece_without_space_prefix():
    # Gemma's GGUF says tokenizer.ggml.add_space_prefix = false: llama.cpp then puts no "▁" before
    # the text, and the first word is not the "▁word" token (found against a real llama-server).
    from tokenpace.gguf import GGUFVocab
    from tokenpace.workload.tokenizer import from_gguf

    # ... and a user-defined token (type 4: Gemma has runs of spaces and newlines), which llama.cpp
    # cuts out of the raw text whole, before the model.
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + \
             ["▁", "t", "h", "e", "r", "i", "v", "▁t", "he", "▁the", "▁r", "iv", "er", "▁riv", "▁river",
              "  "]
    scores = [0.0] * 259 + [-float(i) for i in range(15)] + [0.0]
    scores[-2], scores[-7] = 10.0, 9.0
    types = [2, 3, 3] + [6] * 256 + [1] * 15 + [4]
    vocab = GGUFVocab(path="spm.gguf", model="llama", tokens=tokens, scores=scores, token_types=types,
                      metadata={"tokenizer.ggml.add_space_prefix": False})
    tok = from_gguf(vocab)
    ids = tok.encode("the river")
    assert [tokens[i] for i in ids] == ["t", "he", "▁river"]
    assert tok.decode(ids) == "the river"
    assert [tokens[i] for i in tok.encode(" the")] == ["▁the"]
    ids = tok.encode("the  river")
    assert [tokens[i] for i in ids][2] == "  " and tok.decode(ids) == "the  river"


def test_gguf_tokenizer_is_cached_and_rebuilt_when_the_file_changes(tmp_path, monkeypatch):
    import os

    from tokenpace.workload import tokenizer as tokenizer_module

    monkeypatch.setenv("TOKENPACE_TOKENIZER_CACHE", str(tmp_path / "cache"))
    tokens = ["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab"]
    path = tmp_path / "spm.gguf"
    _write_gguf(path, tokens, model="llama", scores=[0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -1.5, -1.2, -0.5],
                types=[2, 3, 3, 1, 1, 1, 1, 1, 1])
    built = load_tokenizer(path)
    entries = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(entries) == 2 and entries[0].endswith(".json") and entries[1].endswith(".source")

    builds = []
    real_from_gguf = tokenizer_module.from_gguf
    monkeypatch.setattr(tokenizer_module, "from_gguf", lambda vocab: builds.append(vocab) or real_from_gguf(vocab))
    again = load_tokenizer(path)  # from the cache: nothing built
    assert builds == [] and again.source == built.source and again.encode("ab a") == built.encode("ab a")

    # A damaged entry is rebuilt; so is a changed file (a new entry beside the old one).
    (tmp_path / "cache" / entries[0]).write_text("{not json")
    assert load_tokenizer(path).encode("ab a") == built.encode("ab a") and len(builds) == 1
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    load_tokenizer(path)
    assert len(builds) == 2 and len(list((tmp_path / "cache").glob("*.json"))) == 2

    # A cache that cannot be written is skipped: the tokenizer still loads.
    monkeypatch.setenv("TOKENPACE_TOKENIZER_CACHE", str(path))  # a file, not a folder
    assert load_tokenizer(path).encode("ab a") == built.encode("ab a") and len(builds) == 3


def _hf_cache(root, repo, tokenizer_json, *, revision="main", commit="0123abcd"):
    """A Hugging Face hub cache as huggingface_hub leaves it: refs/REV names a snapshot."""
    model = root / ("models--" + repo.replace("/", "--"))
    (model / "refs").mkdir(parents=True)
    (model / "refs" / revision).write_text(commit)
    snapshot = model / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "tokenizer.json").write_bytes(tokenizer_json.read_bytes())
    return root


@pytest.mark.parametrize("variable, hub", [("HF_HUB_CACHE", ""), ("HF_HOME", "hub")])
def test_a_hugging_face_name_resolves_from_the_local_cache_only(bpe_json, tmp_path, monkeypatch,
                                                                variable, hub):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    _hf_cache(tmp_path / hub if hub else tmp_path, "meta-llama/Llama-3.1-8B", bpe_json)
    monkeypatch.setenv(variable, str(tmp_path))
    tok = load_tokenizer("meta-llama/Llama-3.1-8B")
    assert tok.count(SAMPLE) == load_tokenizer(bpe_json).count(SAMPLE)
    assert tok.source.startswith("meta-llama/Llama-3.1-8B (Hugging Face cache)")


def test_a_revision_and_a_missing_name_in_the_cache(bpe_json, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(_hf_cache(tmp_path, "org/tiny", bpe_json, revision="v2")))
    assert load_tokenizer("org/tiny@v2").count("the river") > 0
    with pytest.raises(UsageError) as missing:
        load_tokenizer("org/absent")
    message = str(missing.value)
    assert "no tokenizer.json for org/absent in the local Hugging Face cache" in message
    assert "nothing is downloaded" in message
    assert "`huggingface-cli download org/absent tokenizer.json tokenizer_config.json`" in message
    with pytest.raises(UsageError, match="--revision main"):
        load_tokenizer("org/tiny@main")  # the cache holds only v2
