"""The default step-time model: a roofline per operator group, plus TP all-reduce and CPU overhead.

Each operator group takes max(FLOPs / (peak × mfu), bytes / (bandwidth × mbu)), per layer:

- attention projections (QKV, O): weights streamed once per step, 2 FLOPs per weight per token;
- MLP: dense, or for MoE the experts the batch touches: with top-k routing over E experts a batch of
  T tokens touches E·(1 − (1 − k/E)^T) distinct experts on average (uniform routing), and each token
  pays for k experts' FLOPs;
- attention over the KV history: reads each sequence's KV once (and writes its new tokens);
  4·heads·head_dim FLOPs per (query, key) pair, causal within a chunk; always in BF16 (FlashAttention);
- the LM head (kept in 16 bits) for the tokens that need logits.

Then two ring all-reduces per layer under TP (2(t−1)/t × tokens × hidden × 2 bytes over one
direction of the link, plus a fixed latency each) and a fixed per-step CPU overhead (scheduling,
input preparation, sampling, detokenization: the host work a GPU waits on).
Activation traffic, norms, rotary and sampling FLOPs are left out (each well under 2% of a step).
For a fixed decode batch the step time is affine in the total context: the engine relies on that
when it jumps over runs of identical decode steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenpace.simulator.catalog import GPU, ModelSpec, Precision
from tokenpace.simulator.memory import EMBEDDING_BYTES, kv_heads_per_gpu
from tokenpace.simulator.step import StepBatch

# Defaults, chosen from physics and REFERENCE section 5's published points (benchmarks/sim_fidelity.py
# prints the comparison; the decode-bound points all land within 10% with these values):
# - MFU 0.5: middle of the typical 0.35–0.7 for large prefill GEMMs; NIM's 70B FP8 TP2 5k-token TTFT
#   implies 0.49. (FasterTransformer's 13B TP1 prefill implies 0.67, an H20 ~0.9: see the benchmark.)
# - MBU 0.75: middle of the typical 0.6–0.9 for streaming weights and KV; FT 13B on A100 and NIM 70B
#   on H100 decode imply 0.7–0.8.
# - Step overhead 1.75 ms: engines that replay CUDA graphs (vLLM V1, SGLang, TRT-LLM) spend 1–2 ms of
#   host time per step; engines without them spend several ms more (the 2024 13 ms/token point).
# - All-reduce latency 8 µs: NCCL ring all-reduce of a small message over NVLink.
DEFAULT_MFU = 0.5
DEFAULT_MBU = 0.75
DEFAULT_STEP_OVERHEAD_S = 0.00175
DEFAULT_ALLREDUCE_LATENCY_S = 8e-6


@dataclass(frozen=True, slots=True)
class RooflineParams:
    mfu: float = DEFAULT_MFU
    mbu: float = DEFAULT_MBU
    step_overhead_s: float = DEFAULT_STEP_OVERHEAD_S
    allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S

    def to_dict(self) -> dict[str, float]:
        return {"mfu": self.mfu, "mbu": self.mbu, "step_overhead_s": self.step_overhead_s,
                "allreduce_latency_s": self.allreduce_latency_s}


class RooflinePredictor:
    """Step time of ``model`` in ``weights`` precision with a ``kv`` cache on ``tp`` × ``gpu``."""

    def __init__(self, model: ModelSpec, gpu: GPU, weights: Precision, kv: Precision,
                 tp: int = 1, params: RooflineParams | None = None) -> None:
        if tp < 1:
            raise ValueError("tp must be >= 1")
        self.model, self.gpu, self.weights, self.kv, self.tp = model, gpu, weights, kv, tp
        self.params = p = params or RooflineParams()
        bpw = weights.bytes_per_value
        self._layers = model.num_layers
        self._lin_flops_s = gpu.peak_flops(weights.compute) * p.mfu
        self._bf16_flops_s = gpu.peak_flops("bf16") * p.mfu
        self._bytes_s = gpu.hbm_bytes_s * p.mbu
        # Per layer, per GPU.
        self._attn_proj_bytes = model.attn_params_per_layer / tp * bpw
        self._attn_proj_flops_tok = 2 * model.attn_params_per_layer / tp
        self._expert_bytes = model.expert_params / tp * bpw
        self._expert_flops_tok = 2 * model.expert_params / tp
        self._router_flops_tok = 2 * model.router_params_per_layer  # replicated, tiny
        self._attn_flops_pair = 4 * (model.num_heads / tp) * model.head_dim
        self._kv_bytes_tok = 2 * kv_heads_per_gpu(model, tp) * model.head_dim * kv.bytes_per_value
        # Whole model.
        self._lm_bytes = model.vocab_size * model.hidden_size / tp * EMBEDDING_BYTES
        self._lm_flops_tok = 2 * model.vocab_size * model.hidden_size / tp
        ring = 2 * (tp - 1) / tp
        self._ar_bytes_tok = ring * model.hidden_size * 2 / gpu.link_bytes_s_per_direction if tp > 1 else 0.0
        self._ar_count = 2 * model.num_layers if tp > 1 else 0

    def step_s(self, batch: StepBatch) -> float:
        g = batch.decode_tokens_per_seq
        nd = len(batch.decode_context)
        ctx = sum(batch.decode_context)
        tokens = nd * g
        pairs = g * ctx + nd * g * (g + 1) // 2  # causal (query, key) pairs
        kv_tokens = ctx + tokens  # KV read and written
        logits = tokens
        for n, c in batch.prefill:
            tokens += n
            pairs += n * c + n * (n + 1) // 2
            kv_tokens += c + n
            logits += 1
        p = self.params
        if tokens == 0:
            return p.step_overhead_s
        t = self.model.experts_per_token if self.model.is_moe else 1
        lin, bw = self._lin_flops_s, self._bytes_s
        attn_proj = max(tokens * self._attn_proj_flops_tok / lin, self._attn_proj_bytes / bw)
        if self.model.is_moe:
            e = self.model.num_experts
            touched = e * (1.0 - (1.0 - t / e) ** tokens)
            mlp_flops = tokens * (t * self._expert_flops_tok + self._router_flops_tok)
            mlp = max(mlp_flops / lin, touched * self._expert_bytes / bw)
        else:
            mlp = max(tokens * self._expert_flops_tok / lin, self._expert_bytes / bw)
        attn = max(pairs * self._attn_flops_pair / self._bf16_flops_s, kv_tokens * self._kv_bytes_tok / bw)
        lm_head = max(logits * self._lm_flops_tok / self._bf16_flops_s, self._lm_bytes / bw)
        allreduce = self._ar_count * (p.allreduce_latency_s + tokens * self._ar_bytes_tok)
        return self._layers * (attn_proj + mlp + attn) + lm_head + allreduce + p.step_overhead_s

    def describe(self) -> dict[str, Any]:
        return {"predictor": "roofline", "model": self.model.id, "gpu": self.gpu.id,
                "weights": self.weights.id, "kv": self.kv.id, "tp": self.tp, **self.params.to_dict()}
