"""The catalogs hold REFERENCE's hardware and models, and read a user's files and HF configs."""

from __future__ import annotations

import json

import pytest

from tokenpace.errors import UsageError
from tokenpace.simulator import get_gpu, get_model, get_precision, list_gpus, list_models

# REFERENCE section 5: (id, bf16 TFLOPS, fp8 TFLOPS, memory GB, HBM TB/s, link GB/s)
GPUS = [
    ("h100-sxm", 989, 1979, 80, 3.35, 900), ("h100-pcie", 756, 1513, 80, 2.0, 600),
    ("h200", 989, 1979, 141, 4.8, 900), ("a100-80gb", 312, None, 80, 2.039, 600),
    ("a100-40gb", 312, None, 40, 1.555, 600), ("l40s", 362, 733, 48, 0.864, 64),
    ("rtx-a6000", 154.8, None, 48, 0.768, 112.5), ("l4", 121, 242.5, 24, 0.3, 64),
    ("h20", 148, 296, 96, 4.0, 900), ("mi300x", 1307, 2615, 192, 5.3, 896),
]


@pytest.mark.parametrize("gid,bf16,fp8,mem,hbm,link", GPUS)
def test_every_reference_gpu_is_in_the_catalog(gid, bf16, fp8, mem, hbm, link):
    g = get_gpu(gid)
    assert (g.bf16_tflops, g.fp8_tflops, g.memory_gb, g.hbm_tb_s, g.link_gb_s) == (bf16, fp8, mem, hbm, link)


def test_gpu_names_match_loosely():
    assert get_gpu("H100_SXM").id == "h100-sxm"
    assert get_gpu("a6000").id == "rtx-a6000"


# (id, layers, hidden, heads, kv heads, intermediate, vocab, published params B)
MODELS = [
    ("llama-3.1-8b", 32, 4096, 32, 8, 14336, 128256, 8.03),
    ("llama-3.1-70b", 80, 8192, 64, 8, 28672, 128256, 70.6),
    ("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 7.24),
    ("qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064, 7.62),
    ("qwen3-8b", 36, 4096, 32, 8, 12288, 151936, 8.19),
    ("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 46.7),
]


@pytest.mark.parametrize("mid,layers,hidden,heads,kv,inter,vocab,params_b", MODELS)
def test_every_reference_model_reproduces_its_published_size(
        mid, layers, hidden, heads, kv, inter, vocab, params_b):
    m = get_model(mid)
    assert (m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.intermediate_size, m.vocab_size) == (
        layers, hidden, heads, kv, inter, vocab)
    assert m.params / 1e9 == pytest.approx(params_b, rel=0.01)


def test_mixtral_routes_two_of_eight_experts():
    m = get_model("mixtral-8x7b")
    assert (m.num_experts, m.experts_per_token) == (8, 2)
    assert m.active_params / 1e9 == pytest.approx(12.9, rel=0.01)  # Mistral's published active size


def test_qwen3_head_dim_is_128():
    assert get_model("qwen3-8b").head_dim == 128


def test_precision_bytes_include_group_scales():
    assert get_precision("int4").bytes_per_value == 0.5 + 2 / 128
    assert get_precision("fp8").bytes_per_value == 1.0
    assert get_precision("int8").bytes_per_value == 1.0
    assert get_precision("bf16").bytes_per_value == 2.0
    assert get_precision("fp8").compute == "fp8" and get_precision("int4").compute == "bf16"


def test_fp8_without_fp8_units_computes_in_bf16():
    a100 = get_gpu("a100-80gb")
    assert a100.peak_flops("fp8") == a100.peak_flops("bf16") == 312e12


def test_hf_config_json(tmp_path):
    cfg = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 36,
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "intermediate_size": 12288, "vocab_size": 151936, "tie_word_embeddings": False}
    d = tmp_path / "Qwen3-8B"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    for path in (str(d / "config.json"), str(d)):
        m = get_model(path)
        assert m.id == "Qwen3-8B"
        assert m.params / 1e9 == pytest.approx(8.19, rel=0.01)


def test_hf_moe_config_json(tmp_path):
    cfg = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
           "num_local_experts": 8, "num_experts_per_tok": 2}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = get_model(str(p))
    assert (m.num_experts, m.experts_per_token, m.head_dim) == (8, 2, 128)
    assert m.params / 1e9 == pytest.approx(46.7, rel=0.01)


def test_user_catalog_file_extends_the_builtin_one(tmp_path):
    mine = {"gpus": [{"id": "my-accelerator", "bf16_tflops": 2250, "fp8_tflops": 4500, "memory_gb": 180,
                      "hbm_tb_s": 8.0, "link_gb_s": 1800}]}
    p = tmp_path / "my_gpus.json"
    p.write_text(json.dumps(mine))
    ids = [g.id for g in list_gpus(extra=p)]
    assert "my-accelerator" in ids and "h100-sxm" in ids
    assert get_gpu(str(p)).hbm_tb_s == 8.0
    assert get_gpu("my-accelerator", extra=p).memory_gb == 180


def test_unknown_names_are_usage_errors_listing_the_choices():
    with pytest.raises(UsageError, match="h100-sxm"):
        get_gpu("h1000")
    with pytest.raises(UsageError, match="llama-3.1-8b"):
        get_model("llama-9")


def test_bad_catalog_entry_is_a_usage_error(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps([{"id": "x", "bf16_tflops": 1}]))
    with pytest.raises(UsageError, match="invalid gpu entry 'x'"):
        get_gpu(str(p))


def test_catalog_ids_are_unique():
    for items in (list_gpus(), list_models()):
        names = [n for e in items for n in (e.id, *e.aliases)]
        assert len(names) == len(set(names))
