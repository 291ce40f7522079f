"""tokenpace: the latency and cost that users feel from LLM serving.

The library API (the CLI is a thin layer over it):

    from tokenpace import BenchConfig, run_bench
    result = run_bench(BenchConfig(concurrency=8, requests=100, slo="chat"))
    print(result.summary["latency_ms"]["ttft"]["p99"])

Records from any run can be summarized again with `summarize(records, slo=parse_slo("chat"))`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tokenpace._version import __version__

# The public names and the modules that define them. They are imported on first use, so that
# `import tokenpace.servers` (a server process) or `tokenpace --help` does not pay for numpy and
# the whole runner.
_EXPORTS = {
    "BenchConfig": "tokenpace.config",
    "ExitCode": "tokenpace.errors", "NotSaved": "tokenpace.errors", "RunInterrupted": "tokenpace.errors",
    "TargetError": "tokenpace.errors", "TokenpaceError": "tokenpace.errors",
    "UsageError": "tokenpace.errors",
    "SLO": "tokenpace.metrics", "parse_slo": "tokenpace.metrics", "summarize": "tokenpace.metrics",
    "RequestRecord": "tokenpace.record",
    "instrument": "tokenpace.instrumentation", "observe_events": "tokenpace.instrumentation",
    "RunResult": "tokenpace.results", "BenchResult": "tokenpace.runner.bench",
    "SimRunResult": "tokenpace.runner.simulate", "run_bench": "tokenpace.runner.bench",
    "run_bench_async": "tokenpace.runner.bench",
    "read_records": "tokenpace.results",
    "SweepConfig": "tokenpace.sweep", "SweepResult": "tokenpace.sweep", "run_sweep": "tokenpace.sweep",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tokenpace' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, eagerly
    from tokenpace.config import BenchConfig
    from tokenpace.errors import (ExitCode, NotSaved, RunInterrupted, TargetError, TokenpaceError,
                                  UsageError)
    from tokenpace.metrics import SLO, parse_slo, summarize
    from tokenpace.instrumentation import instrument, observe_events
    from tokenpace.record import RequestRecord
    from tokenpace.results import RunResult, read_records
    from tokenpace.runner.bench import BenchResult, run_bench, run_bench_async
    from tokenpace.runner.simulate import SimRunResult
    from tokenpace.sweep import SweepConfig, SweepResult, run_sweep
