"""The built-in server's one config dataclass; each component copies the fields it needs."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..simulator.config import SimConfig
from .faults import parse_faults
from .formats import NAMES as API_FORMATS
from .timing import ParametricTiming, TimingModel

TIMING_MODELS = ("parametric",)


@dataclass
class BuiltinServerConfig:
    host: str = "127.0.0.1"
    port: int = 0  # 0: any free port
    model: str = "tokenpace-sim"
    # The request formats served (formats.py): chat, completions, responses, anthropic (all by default).
    api_formats: tuple[str, ...] = API_FORMATS

    # Timing ("parametric": see ParametricTiming).
    timing: str = "parametric"
    prefill_base_s: float = 0.005
    prefill_per_token_s: float = 0.00005
    decode_base_s: float = 0.010
    decode_per_running_s: float = 0.0001
    jitter_frac: float = 0.05
    seed: int | None = 0

    tokens_per_chunk: int = 1  # tokens carried by each streamed chunk (one engine step)
    max_num_seqs: int = 256  # running requests at most; more wait in a FIFO queue
    kv_capacity_tokens: int = 262_144  # denominator of vllm:kv_cache_usage_perc
    default_max_tokens: int = 16  # when a request names no max_tokens
    max_model_len: int = 131_072  # context length: prompt + max_tokens at most, else HTTP 400 (as vLLM)
    send_log_path: str | None = None  # JSONL truth log of every write (see sendlog.py)
    send_log_flush_s: float = 0.2  # small batches: each flush briefly holds the event loop
    timings: bool = False  # llama.cpp's per-request `timings` object on each response (--timings)
    faults: str | None = None  # a --faults spec (see faults.py); `seed` makes its fractions repeatable
    sim: SimConfig | None = None  # the engine simulator instead of `timing` (sim_backend.py); it takes
    # max_num_seqs and seed from the fields above

    def __post_init__(self) -> None:
        if self.timing not in TIMING_MODELS:
            raise ValueError(f"unknown timing model {self.timing!r}; known: {', '.join(TIMING_MODELS)}")
        if not 0 <= self.port <= 65535:
            raise ValueError("port must be in 0..65535")
        for name in ("tokens_per_chunk", "max_num_seqs", "kv_capacity_tokens", "default_max_tokens", "max_model_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.send_log_flush_s <= 0:
            raise ValueError("send_log_flush_s must be > 0")
        self.make_timing()  # validates the timing parameters early
        if self.sim is not None:
            self.sim = replace(self.sim, max_num_seqs=self.max_num_seqs, seed=self.seed or 0)
        unknown = [name for name in self.api_formats if name not in API_FORMATS]
        if unknown or not self.api_formats:
            raise ValueError(f"api_formats: {unknown or 'none'}; known: {', '.join(API_FORMATS)}")
        if self.faults is not None:
            parse_faults(self.faults)  # ValueError with a one-line message

    def make_timing(self) -> TimingModel:
        return ParametricTiming(
            prefill_base_s=self.prefill_base_s,
            prefill_per_token_s=self.prefill_per_token_s,
            decode_base_s=self.decode_base_s,
            decode_per_running_s=self.decode_per_running_s,
            jitter_frac=self.jitter_frac,
            seed=self.seed,
        )
