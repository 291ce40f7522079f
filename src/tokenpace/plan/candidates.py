"""The deployments a plan considers: GPU, TP degree, weight precision, engine preset and its knobs.
One ``Candidate`` is one engine (one replica); the plan decides how many replicas.

Each is first priced by bounds that need no simulation (``bounds``): memory fit, the TTFT and TPOT
floors of an idle engine, and a throughput ceiling (a full batch of decodes, prefill free). Those
prune before the simulator runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import product
from typing import Any

from tokenpace.simulator.catalog import get_gpu, get_precision
from tokenpace.simulator.config import SimConfig
from tokenpace.simulator.engines import with_engine
from tokenpace.simulator.step_price import RooflineParams
from tokenpace.simulator.simulate import build_predictor
from tokenpace.simulator.spec_decode import SpecDecodeConfig
from tokenpace.simulator.step import StepBatch


@dataclass(frozen=True)
class Candidate:
    gpu: str
    tp: int
    weights: str
    engine: str = "vllm"
    chunked_prefill: bool | None = None  # None: the preset's policy
    max_num_seqs: int | None = None  # None: the preset's
    prefix_caching: bool = False
    spec: SpecDecodeConfig | None = None
    roofline: RooflineParams | None = None  # a calibration's, for its GPU; None: the catalog's
    max_batched_tokens: int | None = None  # None: the preset's
    kv_dtype: str | None = None  # None: the engine default (FP8 with FP8 weights, else BF16)
    predictor: str = "roofline"  # or "kernels": aiconfigurator-core's measured tables (simulator/kernels)

    def label(self) -> str:
        weights = self.weights.upper() + ("" if self.kv_dtype is None else f" KV {self.kv_dtype.upper()}")
        parts = [f"{self.tp} x {get_gpu(self.gpu).name}", f"TP{self.tp}", weights, self.engine]
        if self.chunked_prefill is not None:
            parts.append("chunked prefill" if self.chunked_prefill else "prefill-first")
        if self.max_num_seqs is not None:
            parts.append(f"max {self.max_num_seqs} seqs")
        if self.max_batched_tokens is not None:
            parts.append(f"{self.max_batched_tokens} tokens/step")
        if self.prefix_caching:
            parts.append("prefix caching")
        if self.spec is not None:
            parts.append(f"spec decode (γ={self.spec.num_draft_tokens}, α={self.spec.acceptance_rate:g})")
        return " ".join(parts[:3]) + " (" + ", ".join(parts[3:]) + ")"

    def sim_config(self, model: str, **load: Any) -> SimConfig:
        """This candidate as the simulator's config, with ``load`` (SimConfig's load fields)."""
        base = SimConfig(model=model, gpu=self.gpu, weights=self.weights, kv_cache_dtype=self.kv_dtype, tp=self.tp,
                         roofline=self.roofline or RooflineParams(), predictor=self.predictor, timeline=False,
                         **load)
        given = {"step_overhead_s"} if self.roofline is not None else set()
        config = with_engine(base, self.engine, given=given)
        changes: dict[str, Any] = {"prefix_caching": self.prefix_caching, "spec_decode": self.spec}
        if self.chunked_prefill is not None:
            changes.update(policy="chunked-prefill" if self.chunked_prefill else "prefill-first",
                           chunked_prompts=self.chunked_prefill)
        if self.max_num_seqs is not None:
            changes["max_num_seqs"] = self.max_num_seqs
        if self.max_batched_tokens is not None:
            changes["max_batched_tokens"] = self.max_batched_tokens
        return dataclasses.replace(config, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "tp": self.tp, "weights": self.weights, "engine": self.engine,
                "chunked_prefill": self.chunked_prefill, "max_num_seqs": self.max_num_seqs,
                "max_batched_tokens": self.max_batched_tokens, "kv_dtype": self.kv_dtype,
                "prefix_caching": self.prefix_caching,
                "spec_decode": None if self.spec is None else self.spec.to_dict(),
                "calibrated": self.roofline is not None, "predictor": self.predictor, "label": self.label()}


def enumerate_candidates(*, gpus: list[str], tps: list[int], weights: list[str], engines: list[str],
                         chunked: list[bool | None], max_num_seqs: list[int | None],
                         prefix_caching: list[bool] | bool, specs: list[SpecDecodeConfig | None],
                         calibration: Any = None,
                         max_batched_tokens: list[int | None] | None = None,
                         kv_dtypes: list[str | None] | None = None, predictor: str = "roofline") -> list[Candidate]:
    """Every combination, less those a GPU cannot run (FP8 weights without FP8 tensor cores)."""
    out = []
    caching = [prefix_caching] if isinstance(prefix_caching, bool) else prefix_caching
    for gpu, tp, w, engine, ch, seqs, spec, tokens, kv, cached in product(
            gpus, tps, weights, engines, chunked, max_num_seqs, specs, max_batched_tokens or [None],
            kv_dtypes or [None], caching):
        g = get_gpu(gpu)
        fp8 = get_precision(w).compute == "fp8" or (kv is not None and get_precision(kv).id == "fp8")
        if fp8 and not g.fp8_tflops:
            continue
        kv = None if kv is None else get_precision(kv).id
        roofline = calibration.roofline if calibration is not None and calibration.hardware.id == g.id else None
        out.append(Candidate(g.id, tp, get_precision(w).id, engine, ch, seqs, cached, spec, roofline, tokens,
                             kv, predictor))
    return out


@dataclass(frozen=True)
class Bounds:
    """What an idle engine can do at best, from the step-time model alone (no queue)."""

    ttft_floor_ms: float  # the mean prompt's prefill (its uncached part with prefix caching), alone
    tpot_floor_ms: float  # one decode step with one sequence at the mean context
    max_rps: float  # a full batch of decodes at the mean context, prefill free: no engine does better
    batch: int  # that batch: max_num_seqs, or fewer when the KV cache holds fewer contexts

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def bounds(config: SimConfig, mean_input: float, mean_output: float, kv_sequences: int,
           prefill_tokens: float | None = None) -> Bounds:
    """``prefill_tokens``: the prompt tokens an idle engine computes (fewer than ``mean_input`` when a
    prefix cache serves the rest); the TPOT floor still reads the whole context."""
    predictor = build_predictor(config)
    prompt = int(round(mean_input if prefill_tokens is None else prefill_tokens))
    chunk = config.max_batched_tokens
    ttft_s, done = 0.0, 0
    while done < prompt:
        n = min(chunk, prompt - done)
        ttft_s += predictor.step_s(StepBatch(prefill=((n, done),)))
        done += n
    context = int(round(mean_input + mean_output / 2))
    per_step = 1 + (config.spec_decode.num_draft_tokens if config.spec_decode else 0)
    tokens_per_step = config.spec_decode.expected_tokens_per_step if config.spec_decode else 1.0
    tpot_s = predictor.step_s(StepBatch(decode_context=(context,), decode_tokens_per_seq=per_step)) / tokens_per_step
    batch = max(1, min(config.max_num_seqs, kv_sequences))
    step_s = predictor.step_s(StepBatch(decode_context=(context,) * batch, decode_tokens_per_seq=per_step))
    max_rps = batch * tokens_per_step / (step_s * max(1.0, mean_output))
    return Bounds(ttft_s * 1e3, tpot_s * 1e3, max_rps, batch)
