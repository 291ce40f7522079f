"""tokenpace: the latency and cost that users feel from LLM serving.

The library API (the CLI is a thin layer over it):

    from tokenpace import BenchConfig, run_bench
    result = run_bench(BenchConfig(concurrency=8, requests=100, slo="chat"))
    print(result.summary["latency_ms"]["ttft"]["p99"])

Records from any run can be summarized again with `summarize(records, slo=parse_slo("chat"))`.
"""

from tokenpace._version import __version__
from tokenpace.config import BenchConfig
from tokenpace.errors import ExitCode, RunInterrupted, TargetError, TokenpaceError, UsageError
from tokenpace.metrics import SLO, parse_slo, summarize
from tokenpace.record import RequestRecord
from tokenpace.runner.bench import BenchResult, run_bench, run_bench_async
from tokenpace.runner.sink import read_records

__all__ = [
    "SLO", "BenchConfig", "BenchResult", "ExitCode", "RequestRecord", "RunInterrupted",
    "TargetError", "TokenpaceError", "UsageError", "__version__", "parse_slo", "read_records",
    "run_bench", "run_bench_async", "summarize",
]
