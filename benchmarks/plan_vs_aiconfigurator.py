"""tokenpace's event simulation against aiconfigurator's static estimate on one deployment: where the
two disagree, and why (issue 21: "a case where AIConfigurator and tokenpace disagree").

Deployment: Llama-3.1-8B, 1 x H100 SXM, FP8 weights and KV, the vLLM preset (vLLM's tables for
aiconfigurator); every request 1,500 tokens in, 300 out; Poisson arrivals on one replica.

For each rate r:
- tokenpace: the simulator serves 60 s of Poisson arrivals at r (the planner's probe, 10% warm-up
  left out): TTFT p50/p99, TPOT p50, the mean number of requests in flight (Little's law:
  r x mean E2E), and the chat SLO's attainment;
- aiconfigurator: ``run_static(batch=B, isl=1500, osl=300)`` with B = that mean concurrency rounded
  (its way to ask "what latency at this load"): TTFT = its context phase, TPOT = its generation
  phase / 299.

    python benchmarks/plan_vs_aiconfigurator.py       # needs the kernels extra (aiconfigurator-core)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _aic_estimate import MODELS, _handle  # noqa: E402

from tokenpace.metrics.latency import e2e, tpot, ttft  # noqa: E402
from tokenpace.metrics.slo import parse_slo  # noqa: E402
from tokenpace.plan.candidates import Candidate  # noqa: E402
from tokenpace.plan.search import Traffic, probe  # noqa: E402
from tokenpace.simulator.kernels import GPU_SYSTEMS, tables_available  # noqa: E402
from tokenpace.simulator.simulate import simulate  # noqa: E402
from tokenpace.workload.lengths import parse_length  # noqa: E402

RATES = (1, 4, 8, 12, 16, 18, 20, 22)
ISL, OSL = 1500, 300


def main() -> int:
    if not tables_available():
        print("aiconfigurator-core is not installed: pip install 'tokenpace[kernels]'")
        return 1
    cand = Candidate("h100-sxm", 1, "fp8", "vllm")
    traffic = Traffic(1.0, parse_length(str(ISL)), parse_length(str(OSL)))
    slo = parse_slo("chat")
    aic = _handle(MODELS["llama-3.1-8b"], GPU_SYSTEMS["h100-sxm"], "vllm", 1, "fp8", "fp8")
    print("Llama-3.1-8B, 1 x H100 SXM, FP8 weights and KV, vLLM preset/tables; 1,500 in / 300 out; "
          "Poisson arrivals; chat SLO (TTFT <= 500 ms, TPOT <= 50 ms, 90%)\n")
    print(f"{'rate':>5} | {'tokenpace TTFT p50/p99 ms':>26} {'TPOT p50':>9} {'in flight':>9} {'SLO':>5} | "
          f"{'aic batch':>9} {'aic TTFT ms':>11} {'aic TPOT':>8} | {'TTFT p99 / aic':>14}")
    for rate in RATES:
        n = int(min(1200, max(200, rate * 60)))
        records = simulate(cand.sim_config("llama-3.1-8b", seed=0), traffic.requests(rate, n)).records
        judged = [r for r in records[int(len(records) * 0.1):] if r.status == "ok"]
        t = np.array([ttft(r) for r in judged])
        p = np.array([v for r in judged if (v := tpot(r)) is not None])
        in_flight = rate * float(np.mean([e2e(r) for r in judged])) / 1e3
        got = probe(cand, "llama-3.1-8b", traffic, slo, rate)
        batch = max(1, round(in_flight))
        ctx, gen, _total = aic.run_static(batch_size=batch, isl=ISL, osl=OSL)
        t50, t99 = np.percentile(t, [50, 99])
        print(f"{rate:>5} | {t50:>12.0f} / {t99:>10.0f} {np.median(p):>9.1f} {in_flight:>9.1f} "
              f"{got.attainment:>5.0%} | {batch:>9} {ctx:>11.0f} {gen / (OSL - 1):>8.1f} | {t99 / ctx:>13.1f}x")
    print("\nreproduce: python benchmarks/plan_vs_aiconfigurator.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
