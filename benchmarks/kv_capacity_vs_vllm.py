"""The vLLM preset's KV capacity against the "GPU KV cache size" vLLM logged for the same setup.

Reads the cases in tests/simulator/data/vllm_kv_logs.json (each with its source log, setup and the
figures vLLM printed) and prints, per case, the tokens vLLM logged, the simulator's tokens
(``engine_kv_capacity``, memory model "vllm", floored to whole blocks of 16) and the error, and
the same for each term of the formula. ``--before REV`` runs the same cases against the formula at
another git revision (its ``src`` checked out in a temporary work tree) for comparison.

Then the same for the TensorRT-LLM and SGLang presets against the start-up logs in
tests/simulator/data/engine_kv_logs.json (TensorRT-LLM's "max_tokens", SGLang's
"max_total_num_tokens"), with the KV bytes and, where the log prints them, the weights.

    .venv/bin/python benchmarks/kv_capacity_vs_vllm.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tokenpace.simulator import get_gpu, get_model, get_precision  # noqa: E402
from tokenpace.simulator.memory import (  # noqa: E402
    engine_kv_capacity, vllm_activation_peak_bytes, vllm_non_torch_bytes, weight_bytes,
)

GIB = 2**30
DATA = ROOT / "tests" / "simulator" / "data" / "vllm_kv_logs.json"
ENGINE_DATA = ROOT / "tests" / "simulator" / "data" / "engine_kv_logs.json"


def main() -> int:
    cases = json.loads(DATA.read_text())["cases"]
    print("| case | setup | logged tokens | ours | error | weights GiB logged/ours | activation peak | non-torch |")
    print("|---|---|---:|---:|---:|---|---|---|")
    errors = []
    for c in cases:
        m, g = get_model(c["model"]), get_gpu(c["gpu"])
        w, kv = get_precision(c["weights"]), get_precision(c["kv_cache_dtype"])
        tp, mbt, seqs = c["tp"], c["max_num_batched_tokens"], c["max_num_seqs"]
        cap = engine_kv_capacity(m, g, w, kv, memory_model="vllm", fraction=c["gpu_memory_utilization"], tp=tp,
                                 max_batched_tokens=mbt, max_num_seqs=seqs)
        ours = cap.blocks(16) * 16
        logged = c["logged"]
        err = 100 * (ours - logged["kv_cache_tokens"]) / logged["kv_cache_tokens"]
        errors.append(abs(err))

        def pair(key, value):
            return f"{logged[key]:.2f} / {value / GIB:.2f}" if key in logged else f"— / {value / GIB:.2f}"

        setup = (f"{c['model']} {g.id} TP{tp} weights {w.id} KV {kv.id}, util {c['gpu_memory_utilization']}, "
                 f"{mbt} tok / {seqs} seqs")
        print(f"| [{c['name']}]({c['source']}) | {setup} | {logged['kv_cache_tokens']:,} | {ours:,} | {err:+.2f}% "
              f"| {pair('weights_gib', weight_bytes(m, w, tp))} "
              f"| {pair('torch_peak_increase_gib', vllm_activation_peak_bytes(m, tp, mbt, seqs))} "
              f"| {pair('non_torch_increase_gib', vllm_non_torch_bytes(tp))} |")
    print(f"\nworst |error| {max(errors):.2f}%, median {sorted(errors)[len(errors) // 2]:.2f}% over {len(errors)} cases")
    print()
    engine_logs()
    return 0


def engine_logs() -> None:
    """The TensorRT-LLM and SGLang presets against their engines' logs."""
    print("| case | setup | logged tokens | ours | error | KV GiB logged/ours | weights GiB logged/ours |")
    print("|---|---|---:|---:|---:|---|---|")
    for c in json.loads(ENGINE_DATA.read_text())["cases"]:
        m, g = get_model(c["model"]), get_gpu(c["gpu"])
        w, kv = get_precision(c["weights"]), get_precision(c["kv_cache_dtype"])
        limits = {}
        if c["engine"] == "trtllm":
            limits = {"max_batched_tokens": c["max_num_tokens"], "max_num_seqs": c["max_batch_size"]}
        cap = engine_kv_capacity(m, g, w, kv, memory_model=c["engine"], fraction=c["fraction"], tp=c["tp"],
                                 **limits)
        logged = c["logged"]
        key, kv_key = (("max_tokens", "allocated_kv_gib") if c["engine"] == "trtllm"
                       else ("max_total_num_tokens", "k_plus_v_gib"))
        err = 100 * (cap.tokens - logged[key]) / logged[key]
        weights = weight_bytes(m, w, c["tp"]) / GIB
        wl = f"{logged['weights_gib']:.2f} / {weights:.2f}" if "weights_gib" in logged else f"— / {weights:.2f}"
        setup = f"{c['engine']} {c['model']} {g.id} TP{c['tp']} weights {w.id} KV {kv.id}, fraction {c['fraction']}"
        print(f"| [{c['name']}]({c['source']}) | {setup} | {logged[key]:,} | {cap.tokens:,} | {err:+.2f}% "
              f"| {logged[kv_key]:.2f} / {cap.tokens * cap.kv_bytes_per_token / GIB:.2f} | {wl} |")


if __name__ == "__main__":
    raise SystemExit(main())
