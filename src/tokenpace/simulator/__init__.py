"""Discrete-event simulator of an LLM serving engine, in virtual time.

It emits the same ``RequestRecord`` a measured benchmark does, so metrics, SLO verdicts and reports
apply unchanged. Parts, bottom up: typed catalogs (GPUs, models, precisions), a step-time model
behind ``StepPredictor`` (default: ``RooflinePredictor``), a paged KV cache with prefix caching,
pluggable scheduling policies, and an event loop that knows nothing of policy.

    from tokenpace.simulator import SimConfig, SimRequest, simulate
    reqs = [SimRequest(prompt_tokens=1024, output_tokens=256) for _ in range(1000)]
    result = simulate(SimConfig(model="llama-3.1-8b", gpu="h100-sxm", concurrency=64), reqs)
"""

from tokenpace.simulator.catalog import (
    GPU, ModelSpec, Precision, get_gpu, get_model, get_precision, list_gpus, list_models, list_precisions,
)
from tokenpace.simulator.config import SimConfig
from tokenpace.simulator.memory import KVCapacity, kv_bytes_per_token, kv_capacity, weight_bytes
from tokenpace.simulator.policies import POLICIES
from tokenpace.simulator.request import SimRequest
from tokenpace.simulator.result import SimResult
from tokenpace.simulator.roofline import RooflineParams, RooflinePredictor
from tokenpace.simulator.simulate import build_engine, build_predictor, simulate
from tokenpace.simulator.spec_decode import SpecDecodeConfig
from tokenpace.simulator.step import StepBatch, StepPredictor
from tokenpace.simulator.timeline import TimelineRow

__all__ = [
    "GPU", "KVCapacity", "ModelSpec", "POLICIES", "Precision", "RooflineParams", "RooflinePredictor",
    "SimConfig", "SimRequest", "SimResult", "SpecDecodeConfig", "StepBatch", "StepPredictor",
    "TimelineRow", "build_engine", "build_predictor", "get_gpu", "get_model", "get_precision", "kv_bytes_per_token",
    "kv_capacity", "list_gpus", "list_models", "list_precisions", "simulate", "weight_bytes",
]
