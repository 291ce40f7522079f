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
- ``offline`` (max throughput): not estimated here (aiconfigurator finds it by sweeping batch sizes
  in its own driver, which this benchmark does not run).

Models: those aiconfigurator ships a config for (Llama-3.1 8B/70B/405B, Llama-3.3-70B as 3.1-70B's
architecture, Qwen3-8B); GPUs: those with tables (``tokenpace.simulator.kernels.GPU_SYSTEMS``).
"""

from __future__ import annotations

import logging
from functools import lru_cache

from tokenpace.simulator import get_gpu, get_model, get_precision
from tokenpace.simulator.kernels import GPU_SYSTEMS, tables_available

MODELS = {"llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B", "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
          "llama-3.3-70b": "meta-llama/Meta-Llama-3.1-70B", "llama-3.1-405b": "meta-llama/Meta-Llama-3.1-405B",
          "qwen3-8b": "Qwen/Qwen3-8B"}


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
    if model not in MODELS:
        return f"aiconfigurator ships no config for {model}"
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
        h = _handle(MODELS[model], GPU_SYSTEMS[gpu], backend, c.tp, gemm, "fp8" if kv.id == "fp8" else "bfloat16")
    except Exception as exc:  # noqa: BLE001 - its own errors, reported as the reason
        return f"aiconfigurator failed: {type(exc).__name__}: {str(exc)[:120]}"
    batch = {"single": 1, "closed": c.concurrency, "static": s.n, "batch": s.n}[s.kind]
    ctx, gen, total = h.run_static(batch_size=batch, isl=s.prompt, osl=s.output)
    if s.kind == "static":
        return {"output_tok_s_per_gpu": batch * s.output / (total / 1e3) / c.tp}
    if s.kind == "batch":
        return {"prefill_tok_s": batch * s.prompt / (ctx / 1e3), "decode_tok_s": batch * (s.output - 1) / (gen / 1e3)}
    tpot = gen / (s.output - 1) if s.output > 1 else float("nan")
    return {"ttft_ms": ctx, "itl_ms": tpot, "tpot_ms": tpot, "output_tok_s": s.output / (total / 1e3),
            "e2e_ms": total}
