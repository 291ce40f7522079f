"""Cost per million output tokens, from the GPU price and the measured token rate.

usd_per_1m = gpu_hour_usd x gpus / (tokens_s x 3600) x 1e6 (REFERENCE section 1): $3/h at
4,000 tok/s is 14.4M tokens/h, about $0.21 per 1M. Also per 1M *good* output tokens (those of
requests that met the SLO), the price of the service users actually got.
"""

from __future__ import annotations

import math

from tokenpace.errors import UsageError


def usd_per_1m_tokens(gpu_hour_usd: float, gpus: int, tokens_s: float | None) -> float | None:
    """Dollars per 1M tokens at ``tokens_s``; None when the rate is unknown or zero."""
    if tokens_s is None or tokens_s <= 0:
        return None
    return gpu_hour_usd * gpus / (tokens_s * 3600.0) * 1e6


def cost(gpu_hour_usd: float, gpus: int, output_tokens_s: float | None,
         good_output_tokens_s: float | None = None) -> dict:
    """The summary's ``cost`` section; ``good_output_tokens_s`` is None without an SLO."""
    if not (isinstance(gpu_hour_usd, (int, float)) and math.isfinite(gpu_hour_usd)
            and gpu_hour_usd >= 0):
        raise UsageError(f"GPU price must be a finite number of dollars per hour >= 0, "
                         f"got {gpu_hour_usd!r}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise UsageError(f"number of GPUs must be an integer >= 1, got {gpus!r}")
    return {
        "gpu_hour_usd": float(gpu_hour_usd),
        "gpus": gpus,
        "usd_per_1m_output_tokens": usd_per_1m_tokens(gpu_hour_usd, gpus, output_tokens_s),
        "usd_per_1m_good_output_tokens": usd_per_1m_tokens(gpu_hour_usd, gpus,
                                                           good_output_tokens_s),
    }
