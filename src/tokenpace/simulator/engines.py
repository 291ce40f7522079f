"""Engine presets (``data/engines.json``): how vLLM, SGLang or TensorRT-LLM admit, preempt, limit
their batches, size their KV cache and spend host time per step, as plain data a user can extend.

``with_engine(config, name, given=...)`` returns ``config`` with the preset's values in every field
not in ``given`` (the fields the user set explicitly), and records the preset and each value it set
(``SimConfig.engine``, ``SimConfig.engine_set``), so a result states where its numbers came from.
``trtllm_bench_limits`` is trtllm-bench's tuning of max batch size and max tokens per step for a
workload's mean input and output lengths; ``simulate`` applies it when the preset asks for it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.simulator.catalog import get_gpu, get_model, get_precision
from tokenpace.simulator.catalog._files import build, builtin_entries, entries_of, find, looks_like_path, read_json
from tokenpace.simulator.catalog.gpu import GIB
from tokenpace.simulator.config import SimConfig
from tokenpace.simulator.memory import kv_bytes_per_token
from tokenpace.simulator.policies.base import ADMISSIONS


@dataclass(frozen=True)
class EnginePreset:
    id: str
    name: str
    policy: str
    admission: str
    chunked_prompts: bool
    memory_model: str
    memory_fraction: float
    limits: tuple[dict[str, Any], ...]  # tried in order; the first that matches the GPU applies
    step_overhead_ms: float
    heuristic: str | None = None  # "trtllm-bench": limits from the workload's lengths
    host_seq_us: float = 0.0  # host time per sequence a step overlaps with the GPU (RooflineParams.host_seq_s)
    sources: tuple[str, ...] = ()
    aliases: tuple[str, ...] = field(default=())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EnginePreset:
        mem = d.get("memory", {})
        preset = cls(
            id=str(d["id"]), name=str(d.get("name", d["id"])), policy=str(d.get("policy", "chunked-prefill")),
            admission=str(d.get("admission", "context")), chunked_prompts=bool(d.get("chunked_prompts", True)),
            memory_model=str(mem.get("model", "vllm")), memory_fraction=float(mem.get("fraction", 0.9)),
            limits=tuple(d.get("limits") or ({"max_num_seqs": 256, "max_batched_tokens": 8192},)),
            step_overhead_ms=float(d.get("step_overhead_ms", 1.75)), heuristic=d.get("heuristic"),
            host_seq_us=float(d.get("host_seq_us", 0.0)),
            sources=tuple(d.get("sources", ())), aliases=tuple(d.get("aliases", ())),
        )
        if preset.admission not in ADMISSIONS:
            raise ValueError(f"admission must be one of {', '.join(ADMISSIONS)}")
        if preset.heuristic not in (None, "trtllm-bench"):
            raise ValueError("heuristic must be trtllm-bench or absent")
        if not 0 < preset.memory_fraction <= 1:
            raise ValueError("memory fraction must lie in (0, 1]")
        if not 0 <= preset.host_seq_us < float("inf"):
            raise ValueError("host_seq_us must be >= 0")
        return preset

    def limits_for(self, gpu_id: str, cuda_memory_gib: float) -> dict[str, Any]:
        for rule in self.limits:
            if cuda_memory_gib < rule.get("min_memory_gib", 0) or gpu_id in rule.get("not_gpus", ()):
                continue
            return rule
        return self.limits[-1]


def list_engines(extra: str | Path | None = None) -> list[EnginePreset]:
    items = [build(e, EnginePreset.from_dict, "engine") for e in builtin_entries("engines")]
    if extra is not None:
        more = [build(e, EnginePreset.from_dict, "engine") for e in entries_of(read_json(extra), "engines")]
        ids = {e.id for e in more}
        items = [e for e in items if e.id not in ids] + more
    return items


def get_engine(name: str | EnginePreset) -> EnginePreset:
    if isinstance(name, EnginePreset):
        return name
    if looks_like_path(name):
        return [build(e, EnginePreset.from_dict, "engine") for e in entries_of(read_json(name), "engines")][0]
    return find(list_engines(), name, "engine")


def with_engine(config: SimConfig, name: str | EnginePreset, *, given: frozenset[str] | set[str] = frozenset(),
                offline: bool = False) -> SimConfig:
    """``config`` with ``name``'s values in the fields not in ``given``. Fields a preset sets: policy,
    admission, chunked_prompts, memory_model, gpu_memory_utilization (the engine's fraction),
    max_num_seqs, max_batched_tokens, and the roofline's step_overhead_s and host_seq_s. ``offline``: every request
    is queued at once (vLLM's LLM class uses its larger token budget then)."""
    preset = get_engine(name)
    gpu = get_gpu(config.gpu)
    rule = preset.limits_for(gpu.id, gpu.cuda_memory_bytes / GIB)
    tokens = rule["max_batched_tokens"]
    if offline:
        tokens = rule.get("offline_max_batched_tokens", tokens)
    values: dict[str, Any] = {
        "policy": preset.policy, "admission": preset.admission, "chunked_prompts": preset.chunked_prompts,
        "memory_model": preset.memory_model, "gpu_memory_utilization": preset.memory_fraction,
        "max_num_seqs": int(rule["max_num_seqs"]), "max_batched_tokens": int(tokens),
    }
    values = {k: v for k, v in values.items() if k not in given}
    roofline = config.roofline
    if "step_overhead_s" not in given:
        roofline = dataclasses.replace(roofline, step_overhead_s=preset.step_overhead_ms / 1e3)
        values_set = {**values, "step_overhead_s": roofline.step_overhead_s}
    else:
        values_set = dict(values)
    if preset.host_seq_us and "host_seq_s" not in given:
        roofline = dataclasses.replace(roofline, host_seq_s=preset.host_seq_us / 1e6)
        values_set["host_seq_s"] = roofline.host_seq_s
    if preset.heuristic and not {"max_num_seqs", "max_batched_tokens"} & set(given):
        values_set["limits_heuristic"] = preset.heuristic
    try:
        return dataclasses.replace(config, **values, roofline=roofline, engine=preset.id,
                                   engine_set=tuple(values_set.items()))
    except ValueError as exc:
        raise UsageError(f"engine {preset.id}: {exc}") from None


def needs_workload_limits(config: SimConfig) -> bool:
    return dict(config.engine_set).get("limits_heuristic") == "trtllm-bench"


def trtllm_bench_limits(config: SimConfig, mean_input: float, mean_output: float,
                        kv_fraction: float | None = None) -> tuple[int, int]:
    """trtllm-bench's max batch size and max tokens per step (tensorrt_llm/bench/build/tuning.py,
    restated): the requests of mean length ISL + OSL whose KV fits in ``kv_fraction`` of the memory
    left after weights (its estimate: parameters × bytes per weight, every KV head at least once per
    GPU), then batch = that count rounded up (to 32 under 256, at least 64; to 128 under 1024; to 256
    above; at most 4096), tokens = batch × (1 + ISL/OSL) at most 32,768, rounded up (to 256 under
    4,096, at least 2,048; to 512 under 8,192; to 1,024 above)."""
    model, gpu = get_model(config.model), get_gpu(config.gpu)
    weights, kv = get_precision(config.weights), get_precision(config.kv_cache_dtype)
    fraction = config.gpu_memory_utilization if kv_fraction is None else kv_fraction
    tp = config.tp
    per_token_all_gpus = kv_bytes_per_token(model, kv, 1) * max(tp, model.num_kv_heads) / model.num_kv_heads
    engine_bytes = model.params * weights.bytes_per_value
    available = gpu.cuda_memory_bytes * tp - engine_bytes
    max_requests = fraction * available / (per_token_all_gpus * (mean_input + mean_output))
    if max_requests < 1:
        raise UsageError(f"engine trtllm: the KV cache holds no {mean_input:.0f} + {mean_output:.0f}-token request")
    raw_bs = min(max_requests, 4096)
    raw_tokens = min(raw_bs * (1 + mean_input / mean_output), 32768)
    if raw_bs < 256:
        batch = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        batch = 128 * math.ceil(raw_bs / 128)
    else:
        batch = 256 * math.ceil(raw_bs / 256)
    if raw_tokens < 4096:
        tokens = max(2048, 256 * math.ceil(raw_tokens / 256))
    elif raw_tokens < 8192:
        tokens = 512 * math.ceil(raw_tokens / 512)
    else:
        tokens = 1024 * math.ceil(raw_tokens / 1024)
    return batch, tokens


def with_workload_limits(config: SimConfig, mean_input: float, mean_output: float) -> SimConfig:
    """Apply the preset's workload heuristic (trtllm-bench) when it asked for one."""
    if not needs_workload_limits(config):
        return config
    batch, tokens = trtllm_bench_limits(config, mean_input, mean_output)
    tokens = max(tokens, (config.spec_decode.num_draft_tokens + 1) if config.spec_decode else 1)
    engine_set = {**dict(config.engine_set), "max_num_seqs": batch, "max_batched_tokens": tokens,
                  "limits_heuristic": f"trtllm-bench (mean input {mean_input:g}, output {mean_output:g})"}
    return dataclasses.replace(config, max_num_seqs=batch, max_batched_tokens=tokens,
                               engine_set=tuple(engine_set.items()))


__all__ = ["EnginePreset", "get_engine", "list_engines", "trtllm_bench_limits", "with_engine",
           "with_workload_limits"]
