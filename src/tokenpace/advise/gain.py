"""What a cache hit buys: the prefill time it saves, priced by the simulator's step model for a
model on a GPU (the same roofline `tokenpace sim` runs), and dollars, from the provider's cache
prices or, for a self-hosted engine, the GPU time saved at a GPU-hour price."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from tokenpace.errors import UsageError


class PrefillCost:
    """Seconds to prefill a prompt of ``total`` tokens of which ``cached`` are read from the cache,
    in chunks of the engine's token budget (as chunked prefill runs it), each chunk one step."""

    def __init__(self, model: str = "llama-3.1-8b", gpu: str = "h100-sxm", *,
                 calibration: str | None = None) -> None:
        from tokenpace.simulator.config import SimConfig
        from tokenpace.simulator.simulate import build_predictor
        from tokenpace.simulator.step import StepBatch

        self.source = "simulator roofline prefill"
        try:
            if calibration is not None:  # fitted to a measured run: its model, hardware and efficiencies
                from tokenpace.simulator.calibrate.calibration import load_calibration

                cal = load_calibration(calibration)
                config = SimConfig(model=cal.model, gpu=cal.hardware, weights=cal.weights,
                                   kv_cache_dtype=cal.kv_cache_dtype, tp=cal.tp, roofline=cal.roofline,
                                   max_batched_tokens=cal.max_batched_tokens or SimConfig().max_batched_tokens)
                model, gpu = cal.model.id, cal.hardware.id
                self.source = f"prefill of the calibration {calibration} (fitted to a measured run)"
            else:
                config = SimConfig(model=model, gpu=gpu)
            self._predictor = build_predictor(config)
        except (KeyError, ValueError) as exc:
            raise UsageError(f"--sim-model/--gpu/--calibration: {exc}") from None
        self._batch = StepBatch
        self.chunk = config.max_batched_tokens
        self.model, self.gpu = model, gpu
        self.seconds = lru_cache(maxsize=65536)(self._seconds)

    def _seconds(self, total: int, cached: int) -> float:
        done, t = cached, 0.0
        while done < total:
            n = min(self.chunk, total - done)
            t += self._predictor.step_s(self._batch(prefill=((n, done),)))
            done += n
        return t

    def saved_s(self, total: int, cached_before: int, cached_after: int) -> float:
        return self.seconds(total, cached_before) - self.seconds(total, cached_after)

    def describe(self) -> dict[str, Any]:
        return {"model": self.model, "gpu": self.gpu, "source": f"{self.source} (chunks of {self.chunk} tokens)"}
