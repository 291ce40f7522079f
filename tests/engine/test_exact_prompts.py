"""Exact-length prompts from the model's own GGUF vocabulary agree with llama.cpp's tokenizer.

Our tokenizer (`--tokenizer model.gguf`) is checked against the engine's `/tokenize` (the text
alone, no BOS), token id for token id, and a bench run on the completions API must report
usage.prompt_tokens = planned length + the BOS token(s) the server adds (asked of the server too,
not assumed).
"""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest

from tokenpace.config import BenchConfig
from tokenpace.runner.bench import run_bench
from tokenpace.workload.prompts import exact_prompt
from tokenpace.workload.tokenizer import load_tokenizer

pytestmark = pytest.mark.engine

_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
LENGTHS = (1, 2, 7, 33, 100, 257)
# Edge cases for a SentencePiece vocabulary: leading and repeated spaces, newlines, digits (split
# one by one in Gemma), punctuation, non-ASCII, and a special token written out as text.
TRICKY = ("Hello world", " leading space", "two  spaces and   three", "a\nb\n\nc\n",
          "Don't stop: 12345, 3.14!", "café naïve 東京 🙂", "<start_of_turn>user\nhi")


def server_tokenize(base_url: str, text: str, *, add_special: bool = False) -> list[int]:
    root = base_url.removesuffix("/v1")
    body = json.dumps({"content": text, "add_special": add_special}).encode()
    request = urllib.request.Request(root + "/tokenize", data=body,
                                     headers={"Content-Type": "application/json"})
    with _LOOPBACK.open(request, timeout=30) as response:
        return json.loads(response.read())["tokens"]


@pytest.fixture(scope="module")
def gguf_tokenizer(model_gguf):
    return load_tokenizer(model_gguf)


def test_our_gguf_tokenizer_matches_llama_cpp(llama_url, gguf_tokenizer):
    rng = np.random.default_rng(3)
    for text in TRICKY:
        assert gguf_tokenizer.encode(text) == server_tokenize(llama_url, text), repr(text)
    for n in LENGTHS:
        text = exact_prompt(gguf_tokenizer, n, rng)
        assert gguf_tokenizer.count(text) == n
        assert server_tokenize(llama_url, text) == gguf_tokenizer.encode(text), (n, text)


def test_bench_prompts_have_the_planned_length_on_the_server(llama_url, model_gguf, tmp_path):
    bos = len(server_tokenize(llama_url, "x", add_special=True)) - len(server_tokenize(llama_url, "x"))
    assert bos >= 0
    planned = 48
    result = run_bench(BenchConfig(
        url=llama_url, api="completions", concurrency=2, requests=4,
        input_tokens=str(planned), output_tokens="4", tokenizer=str(model_gguf), timeout_s=60,
        progress=False, out=str(tmp_path / "exact.json")))
    assert result.summary["counts"]["ok"] == 4, [(r.index, r.error_kind, r.error_message) for r in result.records if r.status != "ok"]
    for record in result.records:
        assert record.requested_input_tokens == planned
        assert record.prompt_tokens_source == "usage"
        assert record.prompt_tokens == planned + bos, record
