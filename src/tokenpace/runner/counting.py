"""How many requests a run measures: one rule for bench and sim."""

from __future__ import annotations

from tokenpace.config import DEFAULT_REQUESTS, BenchConfig
from tokenpace.errors import UsageError
from tokenpace.workload import WorkloadSpec


def request_count(config: BenchConfig, workload: WorkloadSpec) -> int | None:
    """Measured requests: --requests, else (no --duration) all of a finite workload or the default;
    never more than a finite workload holds (after warmup)."""
    finite = workload.finite_requests
    if config.requests is None and config.duration_s is None:
        wanted = DEFAULT_REQUESTS if finite is None else finite - config.warmup_requests
    else:
        wanted = config.requests
    if finite is not None and wanted is not None:
        wanted = min(wanted, finite - config.warmup_requests)
    if wanted is not None and wanted < 1:
        raise UsageError(f"the workload holds {finite} requests: nothing left to measure after "
                         f"--warmup {config.warmup_requests}")
    return wanted
