"""A Hugging Face tokenizer folder built offline from a GGUF model's vocabulary.

The peers load tokenizers with ``transformers.AutoTokenizer.from_pretrained(PATH)``; given a
folder holding ``tokenizer.json`` and ``tokenizer_config.json`` they never touch a hub. The
``tokenizers`` object comes from tokenpace's own GGUF reader (``tokenpace.workload.tokenizer``),
so every tool, tokenpace included, counts with the same vocabulary as the server. The chat
template and special tokens are copied from the GGUF metadata.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenpace.gguf import read_gguf_vocab
from tokenpace.workload.tokenizer import from_gguf


def _token(vocab, key: str) -> str | None:
    index = vocab.metadata.get(f"tokenizer.ggml.{key}")
    return vocab.tokens[index] if isinstance(index, int) and 0 <= index < len(vocab.tokens) else None


def write_tokenizer_dir(gguf: str | Path, out_dir: str | Path) -> Path:
    """Write ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = read_gguf_vocab(gguf)
    tokenizer = from_gguf(vocab)
    tokenizer.backend.save(str(out / "tokenizer.json"))
    special = {name: tok for name, tok in (("bos_token", _token(vocab, "bos_token_id")),
                                           ("eos_token", _token(vocab, "eos_token_id")),
                                           ("unk_token", _token(vocab, "unknown_token_id")),
                                           ("pad_token", _token(vocab, "padding_token_id")))
               if tok is not None}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1 << 20,
              "clean_up_tokenization_spaces": False, **special}
    template = vocab.metadata.get("tokenizer.chat_template")
    if template:
        config["chat_template"] = template
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=1))
    (out / "source.txt").write_text(f"built offline from {gguf} ({tokenizer.source})\n")
    return out


def write_hub_cache_mirror(tokenizer_dir: str | Path, hub_cache: str | Path, repo_id: str) -> Path:
    """Lay the folder out as a Hugging Face hub cache entry ``repo_id`` (revision ``main``).

    aiperf 0.13.0 with ``HF_HUB_OFFLINE=1`` resolves every ``--tokenizer`` through
    ``snapshot_download(name, local_files_only=True)``, which rejects a filesystem path; a
    cache entry under our own ``HF_HUB_CACHE`` is what it can load offline. Nothing is
    downloaded: the snapshot holds copies of our files.
    """
    import hashlib
    import shutil

    src = Path(tokenizer_dir)
    digest = hashlib.sha1((src / "tokenizer.json").read_bytes()).hexdigest()
    repo = Path(hub_cache) / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / digest
    if not (snapshot / "tokenizer.json").exists():
        snapshot.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            if f.is_file():
                shutil.copy2(f, snapshot / f.name)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(digest)
    return Path(hub_cache)
