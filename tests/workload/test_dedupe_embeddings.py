"""`workload dedupe --embeddings DIR`: near duplicates by a local model2vec model, built here.

The model folder is made in the test: a word-level tokenizer.json (the `tokenizers` library) and an
embeddings table designed by hand, so nothing is downloaded. Content words about returns lie on one
axis, about weather on another; every function word is the same small vector on a third. After
normalizing, "whats the return policy" averages to (0.5, 0, 0.3) and "how do i return an item" to
(1/3, 0, 0.4): cosine 0.944; "whats the weather in paris" averages to (0, 0.4, 0.36): cosine 0.34
with the first and 0.51 with the second (only the function words agree).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokenpace.cli.main import main

pytest.importorskip("model2vec")

CONTENT = {"return": [1, 0, 0], "policy": [1, 0, 0], "item": [1, 0, 0], "weather": [0, 1, 0], "paris": [0, 1, 0]}
FUNCTION = ["whats", "the", "how", "do", "i", "an", "in"]


def make_model(folder) -> str:
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    words = ["[UNK]", *CONTENT, *FUNCTION]
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    table = np.zeros((len(words), 3), np.float32)
    for i, w in enumerate(words):
        table[i] = CONTENT.get(w, [0, 0, 0.6] if w in FUNCTION else [0, 0, 0])
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    save_file({"embeddings": table}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "model2vec", "normalize": True,
                                                    "hidden_dim": 3}))
    return str(folder)


def chat(user: str) -> dict:
    return {"model": "m", "messages": [{"role": "system", "content": "shop assistant"},
                                       {"role": "user", "content": user}]}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def log(tmp_path):
    rows = [chat("What's the return policy?"), chat("How do I return an item?"),
            chat("What's the weather in Paris?")]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_a_paraphrase_is_a_hit_above_its_cosine_and_not_below(tmp_path, capsys, log):
    model = make_model(tmp_path / "model")
    code, out, _ = run(capsys, "workload", "dedupe", log, "--embeddings", model, "--similarity", "0.9", "--json")
    r = json.loads(out)
    assert code == 0 and r["similarity"]["method"] == "embeddings"
    assert r["exact"]["hits"] == 0 and r["near"]["hits"] == 1  # the paraphrase; the weather question is far
    ex = next(c for c in r["curve"] if c["threshold"] == 0.9)["examples"]
    assert len(ex) == 1 and ex[0]["text"] == "how do i return an item"
    assert ex[0]["earlier"] == "whats the return policy" and ex[0]["cosine"] == pytest.approx(0.944, abs=2e-3)
    curve = {c["threshold"]: c["hits"] for c in r["curve"]}
    assert curve[0.6] == 1 and curve[0.5] == 2  # the weather question's best, 0.51, counts only at 0.5
    code, out, _ = run(capsys, "workload", "dedupe", log, "--embeddings", model, "--similarity", "0.95", "--json")
    assert code == 0 and json.loads(out)["near"]["hits"] == 0


def test_minhash_misses_the_paraphrase_the_embeddings_find(capsys, log):
    code, out, _ = run(capsys, "workload", "dedupe", log, "--similarity", "0.9", "--json")
    r = json.loads(out)
    assert code == 0 and r["similarity"]["method"] == "minhash" and r["near"]["hits"] == 0


def test_a_name_that_is_not_a_folder_is_refused_without_a_download(tmp_path, capsys, log, monkeypatch):
    import huggingface_hub

    def no_download(*a, **k):
        raise AssertionError("a hub download was attempted")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_download)
    for name in ("minishlab/potion-base-8M", str(tmp_path / "missing")):
        code, out, err = run(capsys, "workload", "dedupe", log, "--embeddings", name)
        assert code == 2 and out == ""
        assert err.strip().count("\n") == 0 and "is not a folder" in err and "nothing is downloaded" in err


def test_a_folder_without_a_model_is_one_line(tmp_path, capsys, log):
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "workload", "dedupe", log, "--embeddings", str(tmp_path / "empty"))
    assert code == 2 and err.strip().count("\n") == 0 and "is not a model2vec model folder" in err


def test_without_model2vec_it_says_how_to_install(tmp_path, capsys, log, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "model2vec", None)  # import model2vec raises ImportError
    code, _, err = run(capsys, "workload", "dedupe", log, "--embeddings", str(tmp_path))
    assert code == 2 and "pip install 'tokenpace[embed]'" in err


def test_the_text_report_shows_the_pair_and_its_cosine(tmp_path, capsys, log):
    code, out, _ = run(capsys, "workload", "dedupe", log, "--embeddings", make_model(tmp_path / "model"))
    assert code == 0 and "model2vec" in out
    assert "0.94: 'how do i return an item' ~ 'whats the return policy'" in out
