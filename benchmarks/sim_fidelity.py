"""How close the simulator's default step-time model comes to published measurements.

Runs the simulator on every published point in REFERENCE section 5, states every parameter of each
point, and prints the predicted figure, the published one and the error. The roofline efficiencies
are the library defaults (``RooflineParams()``); nothing here is fitted per point.

    .venv/bin/python benchmarks/sim_fidelity.py            # table
    .venv/bin/python benchmarks/sim_fidelity.py --json     # machine-readable
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tokenpace.simulator import RooflineParams, SimConfig, SimRequest, simulate  # noqa: E402


@dataclass
class Point:
    name: str
    source: str
    config: SimConfig
    prompt: int
    output: int
    batch: int
    published: dict[str, float]
    assumptions: list[str] = field(default_factory=list)


def measure(p: Point) -> dict[str, float]:
    """Run the point's workload; return TTFT, TPOT (ms) and throughput the way its source reports them."""
    reqs = [SimRequest(p.prompt, p.output) for _ in range(p.batch)]
    res = simulate(p.config, reqs)
    recs = res.records
    if p.batch == 1:
        r = recs[0]
        e2e_s = (r.last_token_ns - r.sent_ns) / 1e9
        return {
            "ttft_ms": (r.first_token_ns - r.sent_ns) / 1e6,
            "itl_ms": (r.last_token_ns - r.first_token_ns) / (r.output_tokens - 1) / 1e6,
            "output_tok_s": r.output_tokens / e2e_s,
        }
    # A batch served together (SGLang bench_one_batch style): prefill all prompts, then decode.
    prefill_end = max(r.first_token_ns for r in recs)
    end = max(r.last_token_ns for r in recs)
    return {
        "prefill_tok_s": p.batch * p.prompt / (prefill_end / 1e9),
        "decode_tok_s": p.batch * (p.output - 1) / ((end - prefill_end) / 1e9),
    }


def points() -> list[Point]:
    nim = dict(model="llama-3.3-70b", gpu="h100-sxm", weights="fp8", kv_cache_dtype="bf16", tp=2,
               concurrency=1, max_batched_tokens=8192)
    nim_assume = ["KV cache in BF16 (NIM's KV dtype is not published)",
                  "whole prompt in one step (max_batched_tokens 8192)",
                  "published ITL is (E2E − TTFT)/(output − 1), i.e. our TPOT"]
    ft = dict(model="gpt-13b", gpu="a100-40gb", weights="fp16", kv_cache_dtype="fp16", concurrency=1)
    ft_assume = ["FasterTransformer's GPT 13B: 40 layers, hidden 5120, 40 heads, FFN 20480, vocab 51200",
                 "32 output tokens (the published ms/token is a decode step at ~512 context)"]
    return [
        Point("NIM 70B FP8 TP2, 5000/500", "NVIDIA NIM 1.8.0 benchmarks", SimConfig(**nim), 5000, 500, 1,
              {"ttft_ms": 406.77, "itl_ms": 18.58, "output_tok_s": 51.67}, nim_assume),
        Point("NIM 70B FP8 TP2, 500/2000", "NVIDIA NIM 1.8.0 benchmarks", SimConfig(**nim), 500, 2000, 1,
              {"ttft_ms": 47.77, "itl_ms": 18.91}, nim_assume),
        Point("FT 13B A100-40GB TP1, 512 in", "FasterTransformer GPT docs", SimConfig(**ft, tp=1), 512, 32, 1,
              {"ttft_ms": 63.17, "itl_ms": 22.0}, ft_assume),
        Point("FT 13B A100-40GB TP2, 512 in", "FasterTransformer GPT docs", SimConfig(**ft, tp=2), 512, 32, 1,
              {"ttft_ms": 45.45, "itl_ms": 13.5}, ft_assume),
        Point("SGLang Qwen3-8B FP8 H20, batch 64", "SGLang benchmark (bench_one_batch style)",
              SimConfig(model="qwen3-8b", gpu="h20", weights="fp8", kv_cache_dtype="bf16",
                        policy="prefill-first", max_batched_tokens=8192, concurrency=64),
              4096, 2048, 64, {"prefill_tok_s": 15061, "decode_tok_s": 2682},
              ["KV cache in BF16 (SGLang's default for an FP8 checkpoint)",
               "prefill in steps of 8,192 tokens (SGLang's default chunk), all prompts before decoding"]),
        Point("Llama-3-8B H100 light load, mid-2024", "a 2024 profile of a popular engine",
              SimConfig(model="llama-3.1-8b", gpu="h100-sxm", weights="bf16", concurrency=1), 512, 256, 1,
              {"itl_ms": 13.0},
              ["512 in / 256 out (not published)",
               "that engine spent most of a step on the CPU; our default overhead models "
               "CUDA-graph engines"]),
    ]


NOTES = [
    "TTFT of short prompts is low (NIM 500 in: -14%): measured TTFT includes HTTP, tokenization and "
    "scheduling (~6 ms here) that an engine step does not; add it when comparing with client figures.",
    "FasterTransformer 13B TP1 prefill (+35%): FT reached ~0.67 of A100 peak on one GPU but scaled only "
    "1.39x to TP2; one MFU for all GEMM shapes cannot fit both (TP2 lands within 1%).",
    "SGLang H20 prefill (-40%): the H20's compute is capped, so its GEMMs run near their (low) peak, "
    "~0.9 MFU; a per-GPU or shape-dependent MFU would fix this. Its decode is within 5%.",
    "2024 engine at 13 ms/token (-40%): that engine spent most of each step on the CPU (no CUDA graphs); "
    "step_overhead_s=0.007 reproduces it. The default models today's CUDA-graph engines.",
]


def main() -> None:
    rows, defaults = [], RooflineParams()
    for p in points():
        got = measure(p)
        for metric, published in p.published.items():
            rows.append({"point": p.name, "metric": metric, "published": published,
                         "predicted": round(got[metric], 2),
                         "error_pct": round((got[metric] / published - 1) * 100, 1),
                         "config": {k: v for k, v in p.config.to_dict().items()
                                    if k in ("model", "gpu", "weights", "kv_cache_dtype", "tp", "policy",
                                             "max_batched_tokens", "concurrency")},
                         "workload": {"input": p.prompt, "output": p.output, "batch": p.batch},
                         "assumptions": p.assumptions, "source": p.source})
    if "--json" in sys.argv:
        print(json.dumps({"roofline": defaults.to_dict(), "rows": rows}, indent=2))
        return
    print("Step-time model: roofline with the library defaults "
          + ", ".join(f"{k}={v}" for k, v in defaults.to_dict().items()))
    print("Command: .venv/bin/python benchmarks/sim_fidelity.py\n")
    last = None
    for r in rows:
        if r["point"] != last:
            last = r["point"]
            c, w = r["config"], r["workload"]
            print(f"{last}  [{r['source']}]")
            print(f"  model={c['model']} gpu={c['gpu']} weights={c['weights']} kv={c['kv_cache_dtype']} "
                  f"tp={c['tp']} policy={c['policy']} max_batched_tokens={c['max_batched_tokens']} "
                  f"input={w['input']} output={w['output']} batch={w['batch']}")
            for a in r["assumptions"]:
                print(f"  assumes: {a}")
        print(f"    {r['metric']:<14} published {r['published']:>10.2f}  predicted {r['predicted']:>10.2f}"
              f"  error {r['error_pct']:+6.1f}%")
    print("\nWhere the model misses, and why:")
    for note in NOTES:
        print(f"  - {note}")


if __name__ == "__main__":
    main()
