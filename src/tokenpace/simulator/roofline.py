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
direction of the link, plus a fixed latency each), a fixed per-step CPU overhead (scheduling,
input preparation: the host work a GPU waits on), and a per-sequence overhead for each sequence in
the step (sampling over the vocabulary, detokenization, streaming its token: 0 by default, as GPU
engines batch it; a CPU engine such as llama.cpp pays it per sequence, and calibration fits it).
Activation traffic, norms, rotary and sampling FLOPs are left out (each well under 2% of a step).
For a fixed decode batch the step time is affine in the total context: the engine relies on that
when it jumps over runs of identical decode steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from tokenpace.simulator.catalog import GPU, ModelSpec, Precision
from tokenpace.simulator.memory import kv_heads_per_gpu
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
    seq_overhead_s: float = 0.0  # per sequence in a step (each decode, each prompt chunk)

    def to_dict(self) -> dict[str, float]:
        return {"mfu": self.mfu, "mbu": self.mbu, "step_overhead_s": self.step_overhead_s,
                "allreduce_latency_s": self.allreduce_latency_s, "seq_overhead_s": self.seq_overhead_s}

    def price(self, work: StepWork | tuple) -> float:
        """Seconds for a step of this ``work`` (a StepWork, or a plain tuple in its order): each
        operator group at its bound, plus overheads."""
        compute_s, memory_s, link_s, allreduces, sequences = work
        mfu, mbu = self.mfu, self.mbu
        t = self.step_overhead_s + sequences * self.seq_overhead_s
        if allreduces:
            t += link_s + allreduces * self.allreduce_latency_s
        for c, m in zip(compute_s, memory_s):
            c /= mfu
            m /= mbu
            t += c if c > m else m
        return t


class StepWork(NamedTuple):
    """One step's work before any efficiency applies: per operator group (attention projections,
    MLP, attention, LM head; whole model), the seconds its FLOPs take at the GPU's peak
    (``compute_s``) and its bytes at the full HBM bandwidth (``memory_s``); the all-reduce bytes at
    the link's bandwidth (``link_s``) and their count; the sequences in the step (each decode and
    each prompt chunk). ``RooflineParams.price`` turns it into
    seconds; a calibration fits the params to measured steps through it."""

    compute_s: tuple[float, ...] = ()
    memory_s: tuple[float, ...] = ()
    link_s: float = 0.0
    allreduces: int = 0
    sequences: int = 0


class RooflinePredictor:
    """Step time of ``model`` in ``weights`` precision with a ``kv`` cache on ``tp`` × ``gpu``."""

    def __init__(self, model: ModelSpec, gpu: GPU, weights: Precision, kv: Precision,
                 tp: int = 1, params: RooflineParams | None = None) -> None:
        if tp < 1:
            raise ValueError("tp must be >= 1")
        self.model, self.gpu, self.weights, self.kv, self.tp = model, gpu, weights, kv, tp
        self.params = params or RooflineParams()
        bpw = weights.bytes_per_value
        layers = model.num_layers
        lin = gpu.peak_flops(weights.compute)
        bf16 = gpu.peak_flops("bf16")
        bw = gpu.hbm_bytes_s
        # Seconds at peak, per token / per pair / per step, for all layers on one GPU.
        self._attn_proj_mem = layers * model.attn_params_per_layer / tp * bpw / bw
        self._attn_proj_cmp_tok = layers * 2 * model.attn_params_per_layer / tp / lin
        self._expert_mem = layers * model.expert_params / tp * bpw / bw
        self._expert_cmp_tok = layers * 2 * model.expert_params / tp / lin
        self._router_cmp_tok = layers * 2 * model.router_params_per_layer / lin  # replicated, tiny
        self._attn_cmp_pair = layers * 4 * (model.num_heads / tp) * model.head_dim / bf16
        self._kv_mem_tok = layers * 2 * kv_heads_per_gpu(model, tp) * model.head_dim * kv.bytes_per_value / bw
        # The LM head (the embedding matrix when tied).
        self._lm_mem = model.vocab_size * model.hidden_size / tp * weights.embedding_bytes_per_value / bw
        self._lm_cmp_tok = 2 * model.vocab_size * model.hidden_size / tp / bf16
        ring = 2 * (tp - 1) / tp
        self._ar_s_tok = ring * model.hidden_size * 2 / gpu.link_bytes_s_per_direction if tp > 1 else 0.0
        self._ar_count = 2 * model.num_layers if tp > 1 else 0

    def work(self, batch: StepBatch) -> StepWork:
        """What ``batch`` asks of the hardware, before efficiencies (empty for an empty batch)."""
        return StepWork(*self._work(batch))

    def step_s(self, batch: StepBatch) -> float:
        return self.params.price(self._work(batch))

    def _work(self, batch: StepBatch) -> tuple:
        """``work`` as a plain tuple: the engine prices every scheduled batch, and a tuple is the
        cheapest thing to make."""
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
        if tokens == 0:
            return (), (), 0.0, 0, 0
        model = self.model
        if model.is_moe:
            e, k = model.num_experts, model.experts_per_token
            touched = e * (1.0 - (1.0 - k / e) ** tokens)
            mlp_cmp = tokens * (k * self._expert_cmp_tok + self._router_cmp_tok)
            mlp_mem = touched * self._expert_mem
        else:
            mlp_cmp, mlp_mem = tokens * self._expert_cmp_tok, self._expert_mem
        return ((tokens * self._attn_proj_cmp_tok, mlp_cmp, pairs * self._attn_cmp_pair, logits * self._lm_cmp_tok),
                (self._attn_proj_mem, mlp_mem, kv_tokens * self._kv_mem_tok, self._lm_mem),
                self._ar_count * tokens * self._ar_s_tok, self._ar_count, nd + len(batch.prefill))

    def describe(self) -> dict[str, Any]:
        return {"predictor": "roofline", "model": self.model.id, "gpu": self.gpu.id,
                "weights": self.weights.id, "kv": self.kv.id, "tp": self.tp, **self.params.to_dict()}
