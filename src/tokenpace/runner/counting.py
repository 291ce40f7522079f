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
    closed = not workload.open_loop and workload.conversations is None
    check_holdable(config.concurrency if closed else None, wanted)  # the default one adapts (config.py)
    return wanted


def check_holdable(concurrency: int | None, requests: int | None, *, flag: str = "--requests") -> None:
    """Refuse a closed loop that its request count cannot hold: ``concurrency`` workers with fewer
    than ``concurrency`` requests never have that many in flight, yet the run would be labelled
    with it. Refused rather than raised silently: the user chose the count (one line, exit 2)."""
    if concurrency is None or requests is None or requests >= concurrency:
        return
    raise UsageError(f"--concurrency {concurrency} cannot be held with {flag} {requests}: at most "
                     f"{requests} requests would ever be in flight; give {flag} {concurrency} or more "
                     f"(several times {concurrency} for a steady state), a duration, or a lower --concurrency")
