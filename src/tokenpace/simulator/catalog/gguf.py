"""A model's shape and its weights' precision, read from a GGUF file (llama.cpp's format).

The shape comes from the architecture's metadata keys (``<arch>.block_count``,
``<arch>.embedding_length``, ``<arch>.attention.head_count`` and ``head_count_kv``,
``<arch>.attention.key_length``, ``<arch>.feed_forward_length``, ``<arch>.expert_count`` and
``expert_used_count``); the vocabulary from the embedding matrix's shape;
tied embeddings from the absence of an ``output.weight`` tensor.

The precision is measured, not looked up: llama.cpp's "Q4_K_M" mixes block types per tensor
(Q4_K, Q6_K, and Q5_0/Q8_0 where a row is not a multiple of 256), so the weights' precision is
the mean bits per weight of the transformer blocks' matrices, and the embedding's (the LM head
when tied) is its own, both from the bytes the tensor table gives each tensor. That is what a
decode step streams.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.simulator.catalog.model import ModelSpec
from tokenpace.simulator.catalog.precision import Precision

# general.file_type → llama.cpp's name for the mix (for display only; the bits are measured).
_FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
               11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
               17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}


def load_gguf(path: str | Path, label: str = "--model") -> tuple[ModelSpec, Precision]:
    """The model and its weights' precision; UsageError naming what is missing."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError(f"{label}: {path}: cannot read: {exc.strerror or exc}") from None
    return _load(str(path), st.st_mtime_ns, st.st_size, label)  # the model and its precision: one read


@functools.lru_cache(maxsize=8)
def _load(path: str, _mtime_ns: int, _size: int, label: str) -> tuple[ModelSpec, Precision]:
    from tokenpace.gguf import read_gguf_header  # the shared GGUF reader

    header = read_gguf_header(path, label=label, skip=("tokenizer.",))  # the vocabulary is not needed
    meta = header.metadata
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise UsageError(f"{label}: {path}: no general.architecture key: not a model file")
    tensors = {t.name: t for t in header.tensors}

    def key(name: str, default: Any = None) -> Any:
        value = meta.get(f"{arch}.{name}", default)
        if value is None:
            raise UsageError(f"{label}: {path}: no {arch}.{name} key (a {arch} model the simulator "
                             "cannot read)")
        return value[0] if isinstance(value, list) and value else value

    hidden, heads = int(key("embedding_length")), int(key("attention.head_count"))
    kv_heads = key("attention.head_count_kv", heads)
    embed = tensors.get("token_embd.weight")
    if embed is None or len(embed.shape) != 2:
        raise UsageError(f"{label}: {path}: no token_embd.weight matrix (the vocabulary size comes from it)")
    vocab = embed.shape[1]
    experts = int(meta.get(f"{arch}.expert_count") or 1)
    ffn = key("expert_feed_forward_length") if experts > 1 and f"{arch}.expert_feed_forward_length" in meta \
        else key("feed_forward_length")
    model_id = Path(path).name.removesuffix(".gguf")
    model = ModelSpec.from_dict({
        "id": model_id,
        "name": str(meta.get("general.name") or model_id),
        "num_layers": key("block_count"),
        "hidden_size": hidden,
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": meta.get(f"{arch}.attention.key_length") or hidden // heads,
        "intermediate_size": ffn,
        "vocab_size": vocab,
        "tie_word_embeddings": "output.weight" not in tensors,
        "gated_mlp": any(n.endswith(("ffn_gate.weight", "ffn_gate_exps.weight")) for n in tensors),
        "num_experts": experts,
        "experts_per_token": int(meta.get(f"{arch}.expert_used_count") or 1),
    })
    return model, _precision(header.tensors, meta, model_id, label, path)


def _precision(tensors: list, meta: dict[str, Any], model_id: str, label: str, path: Any) -> Precision:
    block_bytes = block_values = 0
    for t in tensors:
        if t.name.startswith("blk.") and len(t.shape) >= 2:  # matrices; norms and biases left out
            block_bytes += t.nbytes
            block_values += t.elements
    if not block_values:
        raise UsageError(f"{label}: {path}: no transformer-block weight tensors (blk.*)")
    head = next((t for t in tensors if t.name == "output.weight"), None) or \
        next((t for t in tensors if t.name == "token_embd.weight"), None)
    mix = _FILE_TYPES.get(meta.get("general.file_type"), "GGUF")
    bits = round(8 * block_bytes / block_values, 3)
    return Precision.from_dict({
        "id": f"gguf-{mix.lower()}", "name": f"{mix} (measured from {model_id}.gguf)",
        "bits": bits, "compute": "bf16",
        "embedding_bits": None if head is None else round(8 * head.nbytes / head.elements, 3),
    })
