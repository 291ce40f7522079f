"""Tokenizers from local files only: a `tokenizer.json`, a Hugging Face tokenizer folder, a GGUF
model file, or a Hugging Face name already in the local Hugging Face cache. Nothing is ever
downloaded (REFERENCE: tools that hang while fetching a tokenizer).

The engine is the Hugging Face `tokenizers` library (Rust). A GGUF file's vocabulary becomes one:
- `gpt2` (byte-level BPE: Llama 3, Qwen, Mistral Nemo, ...): its vocabulary and merges, with the
  pre-tokenizer named by `tokenizer.ggml.pre` (`llama-bpe`, `qwen2`, else GPT-2's);
- `llama` (SentencePiece: Llama 2, Mistral 7B, ...): a BPE whose merges follow the token scores,
  with byte fallback, as `transformers` converts a SentencePiece model.
Other GGUF tokenizer types are refused with a message asking for the model's `tokenizer.json`.

Counts are of the text alone (`add_special_tokens=False`): a server adds its chat template and BOS
tokens, which is why its own count is always recorded beside ours.

Building a tokenizer from a GGUF vocabulary costs seconds (a SentencePiece vocabulary of 262k
tokens, Gemma 3's, yields half a million merges to derive and load), so the result is kept as a
`tokenizer.json` in a cache: `$TOKENPACE_TOKENIZER_CACHE`, else `tokenizers/` in
`$TOKENPACE_CACHE` or `~/.cache/tokenpace`, keyed by the GGUF file's path, size and
modification time, this conversion's version and the `tokenizers` library's. Loading it again
takes about 40% of the time (benchmarks/RESULTS.md). A cache that cannot be written is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenpace.errors import NotSaved, UsageError
from tokenpace.files import cache_dir, write_whole
from tokenpace.gguf import GGUFVocab, is_gguf, read_gguf_vocab
from tokenpace.workload.hf_cache import cached_tokenizer_json, looks_like_repo_id

# Pre-tokenizer patterns of llama.cpp's `tokenizer.ggml.pre` values (from the models' tokenizer.json).
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_SPLITS = {"llama-bpe": _LLAMA3_SPLIT, "llama3": _LLAMA3_SPLIT, "smaug-bpe": _LLAMA3_SPLIT,
           "qwen2": _QWEN2_SPLIT, "deepseek-r1-qwen": _QWEN2_SPLIT}
_CONTROL, _USER_DEFINED = 3, 4
# Bump when from_gguf builds a different tokenizer from the same file: old cache entries then miss.
GGUF_CONVERSION_VERSION = 1


@dataclass(frozen=True, eq=False)
class Tokenizer:
    """A loaded tokenizer. `source` says where it came from, for reports."""

    backend: Any  # tokenizers.Tokenizer
    source: str

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.backend.decode(ids, skip_special_tokens=False)

    def count(self, text: str) -> int:
        return len(self.encode(text))


def load_tokenizer(path: str | Path) -> Tokenizer:
    """`tokenizer.json`, a folder holding one, a `.gguf` model file, or a Hugging Face name found
    in the local Hugging Face cache (hf_cache.py); UsageError otherwise."""
    p = Path(path)
    if p.is_dir():
        inner = p / "tokenizer.json"
        if not inner.is_file():
            raise UsageError(f"--tokenizer: {p} has no tokenizer.json (a slow-only tokenizer, e.g. "
                             "tokenizer.model alone, is not supported: convert it with transformers)")
        return _from_json(inner)
    if not p.is_file():
        if looks_like_repo_id(str(path)):  # a Hub name: from the local Hugging Face cache only
            tokenizer = _from_json(cached_tokenizer_json(str(path)))
            return Tokenizer(tokenizer.backend, f"{path} (Hugging Face cache): {tokenizer.source}")
        raise UsageError(f"--tokenizer: {p} does not exist (give a local tokenizer.json, a folder "
                         "holding one, a .gguf file, or a Hugging Face name in the local cache; "
                         "nothing is downloaded)")
    if is_gguf(p):
        return _gguf_cached(p)
    return _from_json(p)


def tokenizer_cache_dir() -> Path:
    """Where built tokenizers are kept (see the module docstring)."""
    return cache_dir("tokenizers", "TOKENPACE_TOKENIZER_CACHE")


def _gguf_cached(path: Path) -> Tokenizer:
    """``from_gguf``, through the cache: a hit loads the tokenizer.json built before. The entry's
    ``.source`` file (written first; the JSON, renamed into place last, marks it complete) keeps
    the description."""
    import tokenizers

    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{GGUF_CONVERSION_VERSION}|"
                         f"{tokenizers.__version__}".encode()).hexdigest()[:16]
    cached = tokenizer_cache_dir() / f"{path.stem}-{key}.json"
    source = cached.with_suffix(".source")
    if cached.is_file():
        with contextlib.suppress(Exception):  # a damaged or half-removed entry is rebuilt
            return Tokenizer(_from_json(cached).backend, source.read_text(encoding="utf-8"))
    tokenizer = from_gguf(read_gguf_vocab(path))
    with contextlib.suppress(OSError, NotSaved):  # no cache: converted again next time
        write_whole(source, tokenizer.source.encode("utf-8"))
        write_whole(cached, tokenizer.backend.to_str().encode("utf-8"))
    return tokenizer


def _from_json(path: Path) -> Tokenizer:
    from tokenizers import Tokenizer as HFTokenizer

    try:
        backend = HFTokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises a bare Exception for a bad file
        raise UsageError(f"--tokenizer: {path} is not a valid tokenizer.json: {exc}") from None
    return Tokenizer(backend, f"tokenizer.json: {path}")


def from_gguf(vocab: GGUFVocab) -> Tokenizer:
    if vocab.model == "gpt2":
        backend = _byte_level_bpe(vocab)
    elif vocab.model == "llama":
        backend = _sentencepiece_bpe(vocab)
    else:
        raise UsageError(f"--tokenizer: {vocab.path}: GGUF tokenizer type {vocab.model!r} is not "
                         "supported (gpt2 and llama are); pass the model's tokenizer.json instead")
    _add_whole_tokens(backend, vocab)
    pre = f", pre={vocab.pre}" if vocab.pre else ""
    return Tokenizer(backend, f"gguf: {vocab.path} ({vocab.model}{pre})")


def _byte_level_bpe(vocab: GGUFVocab) -> Any:
    from tokenizers import Regex, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer

    if not vocab.merges:
        raise UsageError(f"--tokenizer: {vocab.path}: a gpt2-type GGUF vocabulary needs "
                         "tokenizer.ggml.merges")
    ids = {tok: i for i, tok in enumerate(vocab.tokens)}
    merges = [tuple(m.split(" ", 1)) for m in vocab.merges if " " in m]
    split = _SPLITS.get(vocab.pre or "")
    backend = HFTokenizer(models.BPE(ids, merges, ignore_merges=split is _LLAMA3_SPLIT))
    if split is None:
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    backend.decoder = decoders.ByteLevel()
    return backend


def _sentencepiece_bpe(vocab: GGUFVocab) -> Any:
    from tokenizers import decoders, models, normalizers
    from tokenizers import Tokenizer as HFTokenizer

    ids = {tok: i for i, tok in enumerate(vocab.tokens)}
    scores = vocab.scores or [0.0] * len(vocab.tokens)
    # Merges from the vocabulary: every split of a token into two tokens is a merge, ranked by
    # the merged token's score (highest first), as transformers' SentencePiece converter does.
    ranked = []
    for tok, i in ids.items():
        for cut in range(1, len(tok)):
            left, right = tok[:cut], tok[cut:]
            if left in ids and right in ids:
                ranked.append((-scores[i], ids[left], ids[right], left, right))
    ranked.sort()
    merges = [(left, right) for *_, left, right in ranked]
    unk = next((t for t, kind in zip(vocab.tokens, vocab.token_types) if kind == 2), None)
    backend = HFTokenizer(models.BPE(ids, merges, unk_token=unk, fuse_unk=True, byte_fallback=True))
    # SentencePiece's dummy prefix ("▁" before the text): llama.cpp adds it unless the file says
    # not to (Gemma's does: tokenizer.ggml.add_space_prefix = false).
    space_prefix = bool(vocab.metadata.get("tokenizer.ggml.add_space_prefix", True))
    backend.normalizer = normalizers.Sequence(
        [normalizers.Prepend("▁")] * space_prefix + [normalizers.Replace(" ", "▁")])
    backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                         decoders.Fuse()] + [decoders.Strip(" ", 1, 0)] * space_prefix)
    return backend


def _add_whole_tokens(backend: Any, vocab: GGUFVocab) -> None:
    """Tokens llama.cpp cuts out of the raw text before the model sees it: control tokens, and
    user-defined ones (Gemma's runs of spaces and newlines, "<table>", ...), always."""
    from tokenizers import AddedToken

    kinds = list(zip(vocab.tokens, vocab.token_types))
    control = [t for t, kind in kinds if kind == _CONTROL]
    if control:
        backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    user = [t for t, kind in kinds if kind == _USER_DEFINED]
    if user:
        backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in user])
