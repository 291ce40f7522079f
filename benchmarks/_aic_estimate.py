"""aiconfigurator's own estimate of a fidelity point, for ``sim_fidelity.py`` to show beside ours.

aiconfigurator-core (``pip install 'tokenpace[kernels]'``) compiles a model for a system, engine
and version (``EngineHandle.compile``) and prices a static batch from the same kernel tables the
kernel predictor reads: ``run_static(batch, isl, osl)`` → (context ms, generation ms, total ms).
It is a static, mean-field estimator with no queue, so each kind of point is read from one static
batch:

- ``single``: batch 1; TTFT = the context phase, TPOT/ITL = generation / (OSL − 1);
- ``closed`` at concurrency C: batch C, the same (no queueing: what a static estimate can say);
- ``static`` batch B: output tokens per GPU = B × OSL / total / TP;
- ``batch`` B: prefill rate B × ISL / context, decode rate B × (OSL − 1) / generation;
- ``latency`` B: E2E = the static batch's total;
- ``offline`` (max throughput): not estimated here (aiconfigurator finds it by sweeping batch sizes
  in its own driver, which this benchmark does not run).

Models: those aiconfigurator ships a config for (Llama-3.1 8B/70B/405B, Llama-3.3-70B as 3.1-70B's
architecture, Qwen3-8B); other dense Llama-architecture models of our catalog (Llama-2 7B/13B/70B)
through a Hugging Face ``config.json`` written from the catalog entry into a temporary directory
(aiconfigurator reads a local path as it reads a hub name). GPUs: those with tables
(``tokenpace.simulator.kernels.GPU_SYSTEMS``).
"""

from __future__ import annotations

import json
import logging
import tempfile
from functools import lru_cache
from pathlib import Path

from tokenpace.simulator import get_gpu, get_model, get_precision
from tokenpace.simulator.kernels import GPU_SYSTEMS, tables_available

MODELS = {"llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B", "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
          "llama-3.3-70b": "meta-llama/Meta-Llama-3.1-70B", "llama-3.1-405b": "meta-llama/Meta-Llama-3.1-405B",
          "qwen3-8b": "Qwen/Qwen3-8B"}


@lru_cache(maxsize=16)
def _model_path(model_id: str) -> str | None:
    """aiconfigurator's name for a model, or a directory holding a config.json written from our
    catalog (dense, gated-MLP Llama architecture only); None when neither applies."""
    if model_id in MODELS:
        return MODELS[model_id]
    m = get_model(model_id)
    if m.is_moe or not m.gated_mlp or not m.id.startswith("llama"):
        return None
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": m.hidden_size,
           "num_hidden_layers": m.num_layers, "num_attention_heads": m.num_heads,
           "num_key_value_heads": m.num_kv_heads, "head_dim": m.head_dim, "intermediate_size": m.intermediate_size,
           "vocab_size": m.vocab_size, "tie_word_embeddings": m.tie_word_embeddings, "hidden_act": "silu",
           "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "torch_dtype": "float16"}
    d = Path(_config_root().name) / m.id
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return str(d)


@lru_cache(maxsize=1)
def _config_root() -> tempfile.TemporaryDirectory:
    """One temporary directory for the configs this process writes, removed when it exits."""
    return tempfile.TemporaryDirectory(prefix="tokenpace-aic-configs-")


@lru_cache(maxsize=32)
def _handle(model: str, system: str, backend: str, tp: int, gemm: str, kv: str):
    from aiconfigurator_core.sdk.engine import EngineHandle

    for name in ("aiconfigurator_core", "aiconfigurator_core.sdk"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return EngineHandle.compile(model, system, backend, tp_size=tp, gemm_quant_mode=gemm, kvcache_quant_mode=kv)


def estimate(s) -> dict[str, float] | str:
    """The point's metrics as aiconfigurator estimates them, or why there is no estimate."""
    if not tables_available():
        return "aiconfigurator-core not installed"
    c = s.after
    model, gpu = get_model(c.model).id, get_gpu(c.gpu).id
    path = _model_path(model)
    if path is None:
        return f"aiconfigurator ships no config for {model}, and it is not a Llama-architecture model"
    if gpu not in GPU_SYSTEMS:
        return f"aiconfigurator has no tables for {gpu}"
    if s.kind == "offline":
        return "max-throughput points need aiconfigurator's own batch sweep (not run)"
    w, kv = get_precision(c.weights), get_precision(c.kv_cache_dtype)
    gemm = "fp8" if w.id == "fp8" else "bfloat16" if w.bits == 16 else None
    if gemm is None:
        return f"no mapping for {w.id} weights"
    backend = c.engine if c.engine in ("vllm", "sglang", "trtllm") else "vllm"
    try:
        h = _handle(path, GPU_SYSTEMS[gpu], backend, c.tp, gemm, "fp8" if kv.id == "fp8" else "bfloat16")
    except Exception as exc:  # noqa: BLE001 - its own errors, reported as the reason
        return f"aiconfigurator failed: {type(exc).__name__}: {str(exc)[:120]}"
    batch = {"single": 1, "closed": c.concurrency, "static": s.n, "batch": s.n, "latency": s.n}[s.kind]
    ctx, gen, total = h.run_static(batch_size=batch, isl=s.prompt, osl=s.output)
    if s.kind == "static":
        return {"output_tok_s_per_gpu": batch * s.output / (total / 1e3) / c.tp}
    if s.kind == "batch":
        return {"prefill_tok_s": batch * s.prompt / (ctx / 1e3), "decode_tok_s": batch * (s.output - 1) / (gen / 1e3)}
    tpot = gen / (s.output - 1) if s.output > 1 else float("nan")
    out = batch if s.kind == "closed" else 1  # a closed loop's throughput is the system's
    return {"ttft_ms": ctx, "itl_ms": tpot, "tpot_ms": tpot, "output_tok_s": out * s.output / (total / 1e3),
            "e2e_ms": total}
