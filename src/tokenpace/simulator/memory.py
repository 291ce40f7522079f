"""Memory arithmetic: weight bytes, KV bytes per token, and how many tokens of KV fit on a GPU.

All figures are per GPU under tensor parallelism of degree ``tp``: weights are split evenly; KV heads
are split too, but a GPU always holds at least one (vLLM replicates KV heads when tp > kv_heads).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenpace.simulator.catalog import GPU, ModelSpec, Precision
from tokenpace.simulator.catalog.gpu import GIB


def kv_heads_per_gpu(model: ModelSpec, tp: int) -> int:
    return max(1, -(-model.num_kv_heads // tp))


def kv_bytes_per_token(model: ModelSpec, kv: Precision, tp: int = 1) -> float:
    """K and V for every layer: 2 × layers × kv_heads × head_dim × bytes (per GPU under TP)."""
    return 2 * model.num_layers * kv_heads_per_gpu(model, tp) * model.head_dim * kv.bytes_per_value


def weight_bytes(model: ModelSpec, weights: Precision, tp: int = 1) -> float:
    """Weights held by one GPU: transformer blocks in ``weights``, embeddings in 16 bits (or in the
    precision's ``embedding_bits``)."""
    blocks = model.block_params * weights.bytes_per_value
    return (blocks + model.embedding_params * weights.embedding_bytes_per_value) / tp


@dataclass(frozen=True, slots=True)
class KVCapacity:
    """How the memory of one GPU is spent, and the KV tokens it holds (per GPU = per engine under TP)."""

    usable_bytes: float  # memory × gpu_memory_utilization
    weight_bytes: float
    reserve_bytes: float  # activations, CUDA graphs, allocator slack
    kv_bytes_per_token: float
    tokens: int

    def blocks(self, block_size: int) -> int:
        return self.tokens // block_size


def kv_capacity(
    model: ModelSpec,
    gpu: GPU,
    weights: Precision,
    kv: Precision,
    *,
    tp: int = 1,
    gpu_memory_utilization: float = 0.9,
    reserve_gib: float = 1.5,
) -> KVCapacity:
    """KV capacity = (memory × utilization − weights − reserve) / KV bytes per token.

    ``reserve_gib`` default 1.5 GiB: the peak activations of an 8k-token batch plus CUDA graphs, which
    vLLM profiles at 1–2 GiB for 7–8B models. Llama-3.1-8B in BF16 on one H100 at 0.9 utilization
    then holds about 455k tokens (55.5 GiB of KV).
    """
    usable = gpu.memory_gb * GIB * gpu_memory_utilization
    w = weight_bytes(model, weights, tp)
    reserve = reserve_gib * GIB
    per_token = kv_bytes_per_token(model, kv, tp)
    tokens = int(max(0.0, usable - w - reserve) // per_token)
    return KVCapacity(usable, w, reserve, per_token, tokens)


MEMORY_MODELS = ("nominal", "vllm", "trtllm", "sglang")

# vLLM V1 (checked against v0.19.0 logs on H100, tests/simulator/data/vllm_kv_logs.json): memory
# outside PyTorch's allocator that grows during the profiling forward pass ("non-torch forward
# increase memory" in vLLM's log): CUDA/cuBLAS workspaces on one GPU, plus NCCL, custom all-reduce
# and symmetric-memory buffers under tensor parallelism. Measured: 0.25 GiB at TP1; 2.07 (8B TP2),
# 2.10 (70B TP2) and 2.13 GiB (8B TP4) with TP > 1.
VLLM_NON_TORCH_GIB = 0.25
VLLM_NON_TORCH_TP_GIB = 2.1
# vLLM's sampler warm-up per logit (one row per sequence, one column per vocabulary entry): the LM
# head's bf16 logits (2 B), their fp32 copy (4 B), the softmax probabilities (4 B) and the
# exponential noise the random sampler divides them by (4 B) - vllm/v1/sample/sampler.py and
# ops/topk_topp_sampler.py, all alive at once.
VLLM_SAMPLER_BYTES_PER_LOGIT = 14
# TensorRT-LLM: estimates; the whole formula is within 1.6% of one TensorRT-LLM 0.20.0 log
# (tests/simulator/data/engine_kv_logs.json), whose excerpt does not print these terms apart.
NON_TORCH_GIB = 0.15  # CUDA/cuBLAS workspaces outside PyTorch's allocator, one GPU
NON_TORCH_TP_GIB = 0.6  # NCCL and custom all-reduce buffers, added under tensor parallelism


def activation_peak_bytes(model: ModelSpec, tp: int, max_batched_tokens: int, max_num_seqs: int) -> float:
    """A rough peak of an engine's profiling forward pass (used for TensorRT-LLM; not checked on its
    own, only within the whole formula, see ``engine_kv_capacity``): the
    larger of ``max_batched_tokens`` tokens through one layer (the MLP's gate+up output and
    activation, 3 × intermediate / tp, plus about six hidden-sized buffers, all 16-bit) and a
    sampler over ``max_num_seqs`` rows of FP32 logits (8 bytes per vocabulary entry)."""
    per_token = (3 * model.intermediate_size * model.experts_per_token / tp + 6 * model.hidden_size) * 2
    return max(max_batched_tokens * per_token, max_num_seqs * model.vocab_size * 8.0)


def vllm_activation_peak_bytes(model: ModelSpec, tp: int, max_batched_tokens: int,
                               max_num_seqs: int) -> float:
    """vLLM V1's "torch peak memory increase": its profile run sends ``max_batched_tokens`` tokens
    through the model, then samples one token for each of min(``max_num_seqs``,
    ``max_batched_tokens``) sequences. The peak is the larger of

    - the forward pass at its widest point, the MLP: gate+up output and activation output
      (3 × intermediate / tp, 2 × for a plain MLP; top-k experts for MoE) plus four hidden-sized
      buffers (hidden states, residual, normed input, MLP output), 16-bit, per token;
    - the sampler: ``VLLM_SAMPLER_BYTES_PER_LOGIT`` per row and vocabulary entry (the logits are
      gathered whole on every GPU, so this does not shrink with TP), while the forward pass's
      hidden states and residual (2 × hidden, 16-bit, per token) are still alive.

    Checked on H100 logs (vLLM 0.19.0): Llama-3.1-8B 1.84 GiB (logged 1.89), Qwen2.5-7B 2.14
    (2.21), Llama-3.3-70B TP2 1.96 (1.96)."""
    rows = min(max_num_seqs, max_batched_tokens)
    mlp = (3 if model.gated_mlp else 2) * model.intermediate_size * model.experts_per_token / tp
    forward = max_batched_tokens * (mlp + 4 * model.hidden_size) * 2
    sampler = (rows * model.vocab_size * VLLM_SAMPLER_BYTES_PER_LOGIT
               + max_batched_tokens * 2 * model.hidden_size * 2)
    return max(forward, sampler)


def vllm_non_torch_bytes(tp: int) -> float:
    return (VLLM_NON_TORCH_TP_GIB if tp > 1 else VLLM_NON_TORCH_GIB) * GIB


def engine_kv_capacity(
    model: ModelSpec,
    gpu: GPU,
    weights: Precision,
    kv: Precision,
    *,
    memory_model: str,
    fraction: float,
    tp: int = 1,
    max_batched_tokens: int = 8192,
    max_num_seqs: int = 256,
) -> KVCapacity:
    """KV capacity the way an engine computes it, from the memory CUDA reports (``gpu.cuda_memory_bytes``):

    - ``vllm``: total × gpu_memory_utilization − weights − peak activations − non-torch memory
      (vLLM V1's ``determine_available_memory``: "Total non KV cache memory" is weights + "torch
      peak memory increase" + "non-torch forward increase memory"; CUDA graphs are captured after
      the KV cache is allocated and come out of the fraction left over). The terms are
      ``vllm_activation_peak_bytes`` and ``vllm_non_torch_bytes``; the result is floored to whole
      blocks by the caller, as vLLM does. Within 0.5% of vLLM 0.19.0's logged "GPU KV cache size"
      on the cases in tests/simulator/data/vllm_kv_logs.json;
    - ``trtllm``: free_gpu_memory_fraction × (total − weights − peak activations − non-torch),
      i.e. a fraction of the memory left free after loading and a profiling pass (TensorRT-LLM's
      PyTorch backend, ``tensorrt_llm/_torch/pyexecutor/_util.py``: fraction × (device total − the
      profiling pass's peak, torch and non-torch, + the temporary KV cache it held));
    - ``sglang``: mem_fraction_static × total − weights (activations live outside the fraction).
      SGLang's ``profile_max_num_token`` (``model_runner.py``) computes free memory after loading −
      free memory before loading × (1 − fraction), i.e. fraction × free-before-loading − what the
      loading took; "before loading" is after the CUDA context and torch.distributed start (0.4–0.6
      GiB below the total on an H100), which this leaves out: about 1% more tokens than SGLang.

    Checked against the engines' start-up logs (tests/simulator/data/engine_kv_logs.json, each with
    its source): TensorRT-LLM 0.20.0, Llama-3.1-8B FP8 on an H100 at fraction 0.8, +1.6% of its
    "max_tokens"; SGLang, Llama-3.1-8B BF16 on an H100 at 0.88, +0.9% and +1.3% of its
    "max_total_num_tokens". Assumptions for ``trtllm`` (its terms not logged apart): the activation
    peak is ``activation_peak_bytes``; non-torch memory is 0.15 GiB on one GPU and 0.75 GiB under TP.
    Weights are ``weight_bytes`` (16-bit embeddings and LM head; vLLM also counts its rotary
    cos/sin cache, about 0.03 GiB, left out). ``fraction`` is the engine's knob.
    """
    if memory_model == "nominal":
        return kv_capacity(model, gpu, weights, kv, tp=tp, gpu_memory_utilization=fraction)
    if memory_model not in MEMORY_MODELS:
        raise ValueError(f"memory model must be one of {', '.join(MEMORY_MODELS)}, not {memory_model!r}")
    total = float(gpu.cuda_memory_bytes)
    w = weight_bytes(model, weights, tp)
    per_token = kv_bytes_per_token(model, kv, tp)
    if memory_model == "vllm":
        reserve = (vllm_activation_peak_bytes(model, tp, max_batched_tokens, max_num_seqs)
                   + vllm_non_torch_bytes(tp))
        usable = total * fraction
        kv_bytes = usable - w - reserve
    elif memory_model == "trtllm":
        non_torch = (NON_TORCH_GIB + (NON_TORCH_TP_GIB if tp > 1 else 0.0)) * GIB
        act = activation_peak_bytes(model, tp, max_batched_tokens, max_num_seqs)
        usable, reserve = total, act + non_torch
        kv_bytes = fraction * (total - w - reserve)
    else:  # sglang
        usable, reserve = total * fraction, 0.0
        kv_bytes = usable - w
    tokens = int(max(0.0, kv_bytes) // per_token)
    return KVCapacity(usable, w, reserve, per_token, tokens)
