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
