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
NON_TORCH_GIB = 0.15  # CUDA/cuBLAS workspaces outside PyTorch's allocator, one GPU
NON_TORCH_TP_GIB = 0.6  # NCCL and custom all-reduce buffers, added under tensor parallelism


def activation_peak_bytes(model: ModelSpec, tp: int, max_batched_tokens: int, max_num_seqs: int) -> float:
    """The peak of an engine's profiling forward pass, beyond the weights: the larger of
    ``max_batched_tokens`` tokens through one layer (the MLP's gate+up output and activation,
    3 × intermediate / tp, plus about six hidden-sized buffers, all 16-bit) and the sampler's
    warm-up over ``max_num_seqs`` rows of FP32 logits (logits and probabilities, 8 bytes per
    vocabulary entry). An estimate of what vLLM logs as "PyTorch activation peak memory"."""
    per_token = (3 * model.intermediate_size * model.experts_per_token / tp + 6 * model.hidden_size) * 2
    return max(max_batched_tokens * per_token, max_num_seqs * model.vocab_size * 8.0)


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
      (vLLM V1's ``determine_available_memory``; CUDA graphs are captured after the KV cache is
      allocated and come out of the fraction left over);
    - ``trtllm``: free_gpu_memory_fraction × (total − weights − peak activations − non-torch),
      i.e. a fraction of the memory left free after loading and a profiling pass;
    - ``sglang``: mem_fraction_static × total − weights (activations live outside the fraction).

    Assumptions (state them when comparing with an engine's log): the activation peak is
    ``activation_peak_bytes``; non-torch memory is 0.15 GiB on one GPU and 0.75 GiB under TP (NCCL);
    weights are ``weight_bytes`` (16-bit embeddings and LM head). ``fraction`` is the engine's knob.
    """
    if memory_model == "nominal":
        return kv_capacity(model, gpu, weights, kv, tp=tp, gpu_memory_utilization=fraction)
    if memory_model not in MEMORY_MODELS:
        raise ValueError(f"memory model must be one of {', '.join(MEMORY_MODELS)}, not {memory_model!r}")
    total = float(gpu.cuda_memory_bytes)
    w = weight_bytes(model, weights, tp)
    per_token = kv_bytes_per_token(model, kv, tp)
    non_torch = (NON_TORCH_GIB + (NON_TORCH_TP_GIB if tp > 1 else 0.0)) * GIB
    act = activation_peak_bytes(model, tp, max_batched_tokens, max_num_seqs)
    if memory_model == "vllm":
        usable, reserve = total * fraction, act + non_torch
        kv_bytes = usable - w - reserve
    elif memory_model == "trtllm":
        usable, reserve = total, act + non_torch
        kv_bytes = fraction * (total - w - reserve)
    else:  # sglang
        usable, reserve = total * fraction, 0.0
        kv_bytes = usable - w
    tokens = int(max(0.0, kv_bytes) // per_token)
    return KVCapacity(usable, w, reserve, per_token, tokens)
