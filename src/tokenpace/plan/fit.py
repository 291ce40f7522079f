"""Does a model fit, and how much room is left for KV: one candidate's memory, the way its engine
sizes it (simulator/memory.py), with every figure a person needs to check it by hand.

Per GPU under tensor parallelism of degree ``tp``; one engine (one replica) holds ``kv_tokens`` of KV.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tokenpace.simulator.catalog import get_gpu, get_model, get_precision
from tokenpace.simulator.catalog.gpu import GIB
from tokenpace.simulator.config import SimConfig
from tokenpace.simulator.engines import with_engine
from tokenpace.simulator.memory import engine_kv_capacity, kv_bytes_per_token, weight_bytes


@dataclass(frozen=True)
class MemoryFit:
    model: str
    gpu: str
    weights: str
    kv_dtype: str
    tp: int
    engine: str | None
    memory_model: str
    memory_fraction: float
    gpu_memory_gib: float  # as CUDA reports it, one GPU
    weights_gib: float  # one GPU
    reserve_gib: float  # activations peak and non-torch memory (the engine's profile), one GPU
    kv_bytes_per_token: float  # one GPU
    kv_tokens: int  # the engine's KV capacity in tokens
    context_tokens: int  # the workload's context per sequence (prompt + output)
    max_num_seqs: int  # the engine's batch limit
    sequences: int  # sequences of ``context_tokens`` the KV holds at once, capped by max_num_seqs

    @property
    def fits(self) -> bool:
        return self.sequences >= 1

    @property
    def kv_gib_per_sequence(self) -> float:
        """One whole context's KV across the engine's GPUs (the seed's "1.3 GB" figure, in GiB)."""
        return self.kv_bytes_per_token * self.tp * self.context_tokens / GIB

    def reason(self) -> str | None:
        """Why it does not fit, with the numbers; None when it fits."""
        if self.fits:
            return None
        free = self.kv_tokens * self.kv_bytes_per_token / GIB
        if self.kv_tokens <= 0:
            return (f"weights {self.weights_gib:.1f} GiB + reserve {self.reserve_gib:.1f} GiB per GPU leave no "
                    f"KV room in {self.memory_fraction:g} x {self.gpu_memory_gib:.1f} GiB")
        return (f"one {self.context_tokens}-token context needs {self.kv_bytes_per_token * self.context_tokens / GIB:.2f} "
                f"GiB of KV per GPU; {free:.2f} GiB is free after weights {self.weights_gib:.1f} GiB")

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.update(fits=self.fits, kv_gib_per_sequence=self.kv_gib_per_sequence, reason=self.reason())
        return out


def memory_fit(model: str, gpu: str, weights: str = "bf16", *, kv_dtype: str | None = None, tp: int = 1,
               engine: str | None = "vllm", context_tokens: int = 4096,
               max_num_seqs: int | None = None, max_batched_tokens: int | None = None) -> MemoryFit:
    """The memory of one candidate. ``kv_dtype`` None: implied by the weights (FP8 weights, FP8 KV);
    ``engine`` None: the simulator's nominal memory model (memory x 0.9 - weights - 1.5 GiB)."""
    config = SimConfig(model=model, gpu=gpu, weights=weights, kv_cache_dtype=kv_dtype, tp=tp)
    if engine is not None:
        config = with_engine(config, engine)
    if max_num_seqs is not None or max_batched_tokens is not None:
        config = dataclasses.replace(config, max_num_seqs=max_num_seqs or config.max_num_seqs,
                                     max_batched_tokens=max_batched_tokens or config.max_batched_tokens)
    m, g = get_model(config.model), get_gpu(config.gpu)
    w, kv = get_precision(config.weights), get_precision(config.kv_cache_dtype)
    capacity = engine_kv_capacity(m, g, w, kv, memory_model=config.memory_model,
                                  fraction=config.gpu_memory_utilization, tp=tp,
                                  max_batched_tokens=config.max_batched_tokens,
                                  max_num_seqs=config.max_num_seqs)
    reserve = capacity.reserve_bytes
    per_token = kv_bytes_per_token(m, kv, tp)
    sequences = min(capacity.tokens // max(1, context_tokens), config.max_num_seqs)
    return MemoryFit(
        model=m.id, gpu=g.id, weights=w.id, kv_dtype=kv.id, tp=tp, engine=config.engine,
        memory_model=config.memory_model, memory_fraction=config.gpu_memory_utilization,
        gpu_memory_gib=g.cuda_memory_bytes / GIB, weights_gib=weight_bytes(m, w, tp) / GIB,
        reserve_gib=reserve / GIB, kv_bytes_per_token=per_token, kv_tokens=capacity.tokens,
        context_tokens=context_tokens, max_num_seqs=config.max_num_seqs, sequences=int(sequences),
    )
