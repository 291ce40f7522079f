"""Everything a simulation depends on, in one dataclass. Each component copies the fields it needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenpace.simulator.catalog import GPU, ModelSpec, Precision
from tokenpace.simulator.memory import MEMORY_MODELS
from tokenpace.simulator.policies.base import ADMISSIONS
from tokenpace.simulator.step_price import RooflineParams
from tokenpace.simulator.spec_decode import SpecDecodeConfig

# Step-time models a config can name: what each prices a step from.
PREDICTORS = {
    "roofline": "FLOPs and bytes at efficiencies by GPU, precision, engine and operator (data/efficiency.json; "
                "measured GPUs: data/efficiency_measured.json, _moe.json, from aiconfigurator-core's tables)",
    "kernels": "silicon-measured GEMM, attention, MoE and all-reduce tables (aiconfigurator-core; "
               "pip install 'tokenpace[kernels]'), the rest as the roofline",
}


@dataclass(frozen=True)
class SimConfig:
    # What runs where.
    model: str | ModelSpec = "llama-3.1-8b"  # catalog name, JSON path or HF config.json path
    gpu: str | GPU = "h100-sxm"
    weights: str | Precision = "bf16"  # weight precision (quantization)
    # None: FP8 weights imply an FP8 KV cache (an FP8 checkpoint ships KV scales and every engine
    # serves it so), anything else BF16; ``kv_dtype_implied`` then says so.
    kv_cache_dtype: str | Precision | None = None
    tp: int = 1  # tensor-parallel degree (GPUs per engine)
    roofline: RooflineParams = field(default_factory=RooflineParams)  # mfu, mbu, overheads
    efficiency_file: str | None = None  # a user's efficiency catalog, added to data/efficiency.json
    # The step-time model (PREDICTORS): "roofline", or "kernels" (measured kernel tables, an optional
    # extra: simulator/kernels/).
    predictor: str = "roofline"

    # The engine (vLLM's names and defaults where they exist).
    policy: str = "chunked-prefill"  # static | prefill-first | decode-first | chunked-prefill
    max_num_seqs: int = 256
    max_batched_tokens: int = 8192
    # How much of a sequence's KV must fit when it is admitted (policies/base.py): "context" (the
    # whole context fits, blocks allocated chunk by chunk: vLLM V1), "prompt", "prompt+output", or
    # "chunk" (the first chunk's blocks: this simulator before engine presets, which could loop).
    admission: str = "context"
    chunked_prompts: bool = True  # False: prompts run whole (TensorRT-LLM without chunked context)
    block_size: int = 16
    gpu_memory_utilization: float = 0.9  # the engine's memory fraction (see memory_model)
    kv_reserve_gib: float = 1.5  # activations and CUDA graphs, per GPU (memory_model "nominal" only)
    # How the KV cache is sized (memory.py): "nominal" (memory × fraction − weights − reserve), or
    # as "vllm", "trtllm" or "sglang" compute it from the memory CUDA reports.
    memory_model: str = "nominal"
    engine: str | None = None  # the engine preset these values came from (engines.py), for the record
    engine_set: tuple[tuple[str, Any], ...] = ()  # (field, value) the preset set
    num_gpu_blocks: int | None = None  # override the KV capacity computed from memory
    prefix_caching: bool = False
    spec_decode: SpecDecodeConfig | None = None
    waiting_served_ratio: float = 0.3  # decode-first only (TGI's default)
    max_waiting_steps: int = 20  # decode-first only (TGI's max_waiting_tokens)

    # The load.
    concurrency: int | None = None  # closed loop with this many in flight; None: open loop
    max_in_flight: int | None = None  # open loop only: cap on requests in flight (bench's --concurrency with --rate)
    stop_issuing_s: float | None = None  # no request is issued at or after this virtual time
    turnaround_s: float = 0.0  # closed loop: a client sends its next request this long after one ends
    # Closed loop: a spread of turnarounds instead (a calibration's measured quantiles); the k-th
    # request issued after an end waits turnarounds_s[k × 7 mod n] (every value in turn, mixed).
    turnarounds_s: tuple[float, ...] = ()
    # The client's limits, in virtual time: at sent + timeout_s (or, with no token yet, sent +
    # ttft_timeout_s) the client gives up and the engine cancels the request, freeing its KV.
    timeout_s: float | None = None
    ttft_timeout_s: float | None = None
    ramp_s: float = 0.0  # closed loop: client k of C starts at k * ramp_s / C (tokenpace.workload.ramp)
    # Closed loop: the first wave's requests go out this far apart, as a real client sends them one
    # after another (client k starts at k * max(first_wave_gap_s, ramp_s / C)); 0: all at once.
    first_wave_gap_s: float = 0.0
    seed: int = 0
    # Every engine step's time times a lognormal factor of mean 1 and this standard deviation (of its
    # log), drawn per step from noise_seed (step_noise.py); 0: every step at its price.
    step_noise: float = 0.0
    noise_seed: int = 0

    # The simulator itself.
    jump_decode_steps: bool = True  # jump over runs of identical decode steps (same results)
    timeline: bool = True
    kv_dtype_implied: bool = False  # set when kv_cache_dtype was None: implied by the weights

    def __post_init__(self) -> None:
        if self.kv_cache_dtype is None:
            object.__setattr__(self, "kv_cache_dtype", implied_kv_dtype(self.weights))
            object.__setattr__(self, "kv_dtype_implied", True)
        if self.tp < 1:
            raise ValueError("tp must be >= 1")
        if self.max_num_seqs < 1 or self.max_batched_tokens < 1 or self.block_size < 1:
            raise ValueError("max_num_seqs, max_batched_tokens and block_size must be >= 1")
        if self.predictor not in PREDICTORS:
            raise ValueError(f"predictor must be one of {', '.join(PREDICTORS)}, not {self.predictor!r}")
        if self.memory_model not in MEMORY_MODELS:
            raise ValueError(f"memory_model must be one of {', '.join(MEMORY_MODELS)}, not {self.memory_model!r}")
        if self.admission not in ADMISSIONS:
            raise ValueError(f"admission must be one of {', '.join(ADMISSIONS)}, not {self.admission!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization must lie in (0, 1]")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if self.max_in_flight is not None and (self.max_in_flight < 1 or self.concurrency is not None):
            raise ValueError("max_in_flight must be >= 1, and is for an open loop (concurrency None)")
        if self.stop_issuing_s is not None and not self.stop_issuing_s > 0:
            raise ValueError("stop_issuing_s must be > 0")
        for name in ("timeout_s", "ttft_timeout_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0")
        if not self.ramp_s >= 0:
            raise ValueError("ramp_s must be >= 0")
        if not 0 <= self.first_wave_gap_s < 1:
            raise ValueError("first_wave_gap_s must lie in [0, 1) seconds")
        if not 0 <= self.turnaround_s < 60 or not all(0 <= t < 60 for t in self.turnarounds_s):
            raise ValueError("turnaround_s must lie in [0, 60) seconds")
        if not 0 <= self.step_noise < 1:
            raise ValueError("step_noise must lie in [0, 1)")
        if self.spec_decode is not None and self.spec_decode.num_draft_tokens + 1 > self.max_batched_tokens:
            raise ValueError("max_batched_tokens must hold at least one verification step")

    def to_dict(self) -> dict[str, Any]:
        def name(x: Any) -> Any:
            return x if isinstance(x, str) else x.to_dict()

        return {
            "model": name(self.model), "gpu": name(self.gpu), "weights": name(self.weights),
            "kv_cache_dtype": name(self.kv_cache_dtype), "kv_dtype_implied": self.kv_dtype_implied,
            "tp": self.tp,
            "roofline": self.roofline.to_dict(), "step_predictor": self.predictor, "efficiency_file": self.efficiency_file, "policy": self.policy,
            "max_num_seqs": self.max_num_seqs, "max_batched_tokens": self.max_batched_tokens,
            "admission": self.admission, "chunked_prompts": self.chunked_prompts,
            "block_size": self.block_size, "gpu_memory_utilization": self.gpu_memory_utilization,
            "kv_reserve_gib": self.kv_reserve_gib, "memory_model": self.memory_model,
            "num_gpu_blocks": self.num_gpu_blocks,
            "prefix_caching": self.prefix_caching,
            "spec_decode": None if self.spec_decode is None else self.spec_decode.to_dict(),
            "waiting_served_ratio": self.waiting_served_ratio,
            "max_waiting_steps": self.max_waiting_steps, "concurrency": self.concurrency,
            "max_in_flight": self.max_in_flight, "stop_issuing_s": self.stop_issuing_s,
            "turnaround_s": self.turnaround_s,
            **({"turnarounds_s": list(self.turnarounds_s)} if self.turnarounds_s else {}), "timeout_s": self.timeout_s, "ttft_timeout_s": self.ttft_timeout_s,
            "ramp_s": self.ramp_s, **({"first_wave_gap_s": self.first_wave_gap_s} if self.first_wave_gap_s else {}),
            "seed": self.seed,
            **({"step_noise": self.step_noise, "noise_seed": self.noise_seed} if self.step_noise else {}),
            "jump_decode_steps": self.jump_decode_steps, "timeline": self.timeline,
            "engine": None if self.engine is None else {"preset": self.engine, "set": dict(self.engine_set)},
        }


def implied_kv_dtype(weights: str | Precision) -> str:
    """The KV cache an engine uses for these weights when not told: FP8 for FP8 (W8A8) and NVFP4
    (W4A4) weights, whose checkpoints ship FP8 KV scales (ModelOpt's ``kv_cache_quant_algo: FP8``)."""
    from tokenpace.simulator.catalog import get_precision

    try:
        p = weights if isinstance(weights, Precision) else get_precision(weights)
    except Exception:  # noqa: BLE001 - an unknown name fails later, where the catalogs are checked
        return "bf16"
    return "fp8" if p.compute in ("fp8", "fp4") and p.bits <= 8 else "bf16"
