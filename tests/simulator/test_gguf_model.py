"""A GGUF file as the simulator reads it: the model's shape from the architecture keys and the
weights' precision measured from the tensor table, so that the bytes a step streams are the file's."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.errors import UsageError
from tokenpace.simulator import get_model, get_precision, weight_bytes
from tokenpace.simulator.args import engine_config
from tokenpace.simulator.catalog.gguf import load_gguf
from tokenpace.gguf import read_gguf_header

gguf = pytest.importorskip("gguf")
Q8_0, F16, F32 = gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.F32

# A Llama-shaped toy: 2 blocks, hidden 64, 4 heads of 16 with 2 KV heads, FFN 128, vocabulary 256.
HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, LAYERS = 64, 4, 2, 128, 256, 2


def write_model(path, *, blocks=F16, embedding=Q8_0, tied=True, arch="llama", drop_key=None):
    w = gguf.GGUFWriter(str(path), arch)
    keys = {"block_count": LAYERS, "embedding_length": HIDDEN, "feed_forward_length": FFN,
            "attention.head_count": HEADS, "attention.head_count_kv": KV_HEADS, "context_length": 2048}
    for key, value in keys.items():
        if key != drop_key:
            w.add_uint32(f"{arch}.{key}", value)
    w.add_token_list([f"t{i}" for i in range(VOCAB)])  # skipped: the shape comes from token_embd
    rng = np.random.default_rng(0)

    def add(name, rows, cols, kind):
        data = rng.standard_normal((rows, cols)).astype(np.float32)
        if kind == F16:
            w.add_tensor(name, data.astype(np.float16))
        elif kind == F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, gguf.quants.quantize(data, kind), raw_dtype=kind)  # shape: in bytes

    add("token_embd.weight", VOCAB, HIDDEN, embedding)
    if not tied:
        add("output.weight", VOCAB, HIDDEN, F16)
    head_dim = HIDDEN // HEADS
    for i in range(LAYERS):
        add(f"blk.{i}.attn_q.weight", HEADS * head_dim, HIDDEN, blocks)
        add(f"blk.{i}.attn_k.weight", KV_HEADS * head_dim, HIDDEN, blocks)
        add(f"blk.{i}.attn_v.weight", KV_HEADS * head_dim, HIDDEN, blocks)
        add(f"blk.{i}.attn_output.weight", HIDDEN, HEADS * head_dim, blocks)
        for m, (rows, cols) in {"gate": (FFN, HIDDEN), "up": (FFN, HIDDEN), "down": (HIDDEN, FFN)}.items():
            add(f"blk.{i}.ffn_{m}.weight", rows, cols, blocks)
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))  # 1-D: not a weight matrix
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_shape_comes_from_the_architecture_keys_and_the_tensor_table(tmp_path):
    model = get_model(str(write_model(tmp_path / "toy.gguf")))
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == \
        (LAYERS, HIDDEN, HEADS, KV_HEADS, HIDDEN // HEADS)
    assert (model.intermediate_size, model.vocab_size, model.gated_mlp) == (FFN, VOCAB, True)
    assert model.tie_word_embeddings  # no output.weight tensor
    assert not get_model(str(write_model(tmp_path / "untied.gguf", tied=False))).tie_word_embeddings


def test_precision_is_measured_so_the_weights_weigh_what_the_file_holds(tmp_path):
    path = write_model(tmp_path / "toy.gguf", blocks=F16, embedding=Q8_0)
    model, precision = load_gguf(path)
    assert precision.bits == 16  # F16 blocks
    assert precision.embedding_bits == 8.5  # Q8_0: 34 bytes per 32 values
    # What the simulator counts as weights (matrices; norms left out) is what the file stores for them.
    in_file = sum(t.nbytes for t in read_gguf_header(path, label="t").tensors if len(t.shape) >= 2)
    assert weight_bytes(model, precision) == pytest.approx(in_file, rel=0.01)
    q8 = load_gguf(write_model(tmp_path / "q8.gguf", blocks=Q8_0, embedding=F32))[1]
    assert (q8.bits, q8.embedding_bits) == (8.5, 32)


def test_sim_takes_a_gguf_model_with_its_own_precision_unless_quant_is_given(tmp_path):
    import argparse

    from tokenpace.simulator.args import add_engine_arguments

    path = str(write_model(tmp_path / "toy.gguf", blocks=Q8_0))
    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    own = engine_config(parser.parse_args([]), model=path, max_num_seqs=None)
    assert get_precision(own.weights).bits == 8.5
    forced = engine_config(parser.parse_args(["--quant", "int4"]), model=path, max_num_seqs=None)
    assert get_precision(forced.weights).id == "int4"


def test_unreadable_or_incomplete_gguf_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 5)
    with pytest.raises(UsageError, match="truncated GGUF header"):
        get_model(str(bad))
    with pytest.raises(UsageError, match="cannot read"):
        get_model(str(tmp_path / "missing.gguf"))
    with pytest.raises(UsageError, match=r"no llama\.feed_forward_length key"):
        get_model(str(write_model(tmp_path / "nokey.gguf", drop_key="feed_forward_length")))
