"""`tokenpace bench`: flags → BenchConfig → run_bench → console summary."""

from __future__ import annotations

import argparse
import json

from tokenpace.config import APIS, ARRIVALS, DEFAULT_CONCURRENCY, DEFAULT_REQUESTS, BenchConfig
from tokenpace.errors import ExitCode, UsageError

EPILOG = f"""\
examples:
  tokenpace bench
  tokenpace bench --url http://127.0.0.1:8000/v1 --model my-model --api chat \\
      --concurrency 16 --requests 500 --input-tokens 512 --output-tokens 128 \\
      --slo chat --gpu-hour-usd 3.0 --gpus 1 --out run.json
  tokenpace bench --url http://127.0.0.1:8000/v1 --rate 8 --arrival poisson --duration 60 --warmup 5

Without --url, tokenpace starts its built-in simulated server on a free loopback port.
Without --rate it runs closed loop (default --concurrency {DEFAULT_CONCURRENCY}); without --requests
or --duration it sends {DEFAULT_REQUESTS} measured requests. Length specs: 512,
uniform:min=128,max=1024, normal:mean=200,std=80,min=1, lognormal:mean=800,sigma=0.6,max=8000.
SLO: a preset (chat, code, summarization, classification, batch) or ttft=300ms,tpot=40ms,e2e=10s.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="load-test an OpenAI-compatible streaming endpoint",
                       description="Load-test an OpenAI-compatible endpoint and report what users feel.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("target")
    g.add_argument("--url", metavar="URL", help="base URL ending in /v1 (default: built-in server)")
    g.add_argument("--model", metavar="NAME", help="model name (default: the first the server lists)")
    g.add_argument("--api", choices=APIS, default="chat", help="chat (default) or completions")
    g.add_argument("--no-stream", dest="stream", action="store_false",
                   help="non-streaming requests (TTFT = E2E)")
    g.add_argument("--api-key-env", metavar="VAR", default="OPENAI_API_KEY",
                   help="environment variable holding the API key (never printed or saved)")
    g = p.add_argument_group("load")
    g.add_argument("--concurrency", type=int, metavar="N", help="requests in flight (closed loop), "
                   "or the cap on them with --rate")
    g.add_argument("--rate", type=float, metavar="RPS", help="open loop: requests per second")
    g.add_argument("--arrival", choices=ARRIVALS, default="poisson", help="open-loop arrivals")
    g.add_argument("--burstiness", type=float, default=1.0, metavar="SHAPE",
                   help="gamma shape (1 = Poisson, <1 burstier)")
    g.add_argument("--requests", type=int, metavar="N", help="measured requests to send")
    g.add_argument("--duration", type=float, metavar="SECONDS", help="measure for this long")
    g.add_argument("--warmup", metavar="N|SECONDS", default="0",
                   help="excluded from metrics: '20req', '5s', or a bare number (requests with "
                        "--requests, seconds with --duration)")
    g.add_argument("--grace", type=float, default=10.0, metavar="SECONDS",
                   help="time in-flight requests get to finish at the end (default 10)")
    g.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="total per-request timeout (default 600)")
    g.add_argument("--seed", type=int, default=0, metavar="N", help="seed for schedule and prompts")
    g = p.add_argument_group("workload")
    g.add_argument("--input-tokens", default="512", metavar="SPEC", help="prompt length spec")
    g.add_argument("--output-tokens", default="128", metavar="SPEC", help="max_tokens length spec")
    g.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                   help="don't send ignore_eos/min_tokens (hosted APIs reject them)")
    g.add_argument("--extra-body", metavar="JSON", help="JSON object merged into every request body")
    g = p.add_argument_group("SLO and cost")
    g.add_argument("--slo", metavar="PRESET|EXPR", help="goodput SLO, e.g. chat or ttft=300ms,tpot=40ms")
    g.add_argument("--gpu-hour-usd", type=float, metavar="USD", help="price of one GPU-hour")
    g.add_argument("--gpus", type=int, default=1, metavar="N", help="GPUs behind the endpoint")
    g = p.add_argument_group("built-in server (without --url)")
    g.add_argument("--tokens-per-chunk", type=int, default=1, metavar="N",
                   help="tokens the built-in server sends per chunk")
    g = p.add_argument_group("output")
    g.add_argument("--out", metavar="PATH", help="result JSON (default tokenpace-runs/bench-<time>.json)")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="no live progress bar")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    warmup_requests, warmup_s = parse_warmup(args.warmup, by_time=args.duration is not None)
    extra = {}
    if args.extra_body:
        try:
            extra = json.loads(args.extra_body)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--extra-body is not valid JSON: {exc}") from None
        if not isinstance(extra, dict):
            raise UsageError("--extra-body must be a JSON object")
    return BenchConfig(
        url=args.url, model=args.model, api=args.api, stream=args.stream, api_key_env=args.api_key_env,
        concurrency=args.concurrency, rate=args.rate, arrival=args.arrival, burstiness=args.burstiness,
        requests=args.requests, duration_s=args.duration, warmup_requests=warmup_requests,
        warmup_s=warmup_s, grace_s=args.grace, timeout_s=args.timeout, seed=args.seed,
        input_tokens=args.input_tokens, output_tokens=args.output_tokens, ignore_eos=args.ignore_eos,
        extra_body=extra, slo=args.slo, gpu_hour_usd=args.gpu_hour_usd, gpus=args.gpus,
        server_tokens_per_chunk=args.tokens_per_chunk, out=args.out, progress=args.progress,
    ).validate()


def parse_warmup(text: str, *, by_time: bool) -> tuple[int, float]:
    """'20req' → 20 requests; '5s' → 5 seconds; a bare number follows the run's bound."""
    raw = str(text).strip().lower()
    for suffix, is_time in (("req", False), ("r", False), ("s", True)):
        if raw.endswith(suffix) and raw[: -len(suffix)].strip():
            raw, by_time = raw[: -len(suffix)].strip(), is_time
            break
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"--warmup must be like 20req, 5s or a number, not {text!r}") from None
    if value < 0 or value != value:
        raise UsageError(f"--warmup must be >= 0, not {text!r}")
    if by_time:
        return 0, value
    if value != int(value):
        raise UsageError(f"--warmup in requests must be a whole number, not {text!r}")
    return int(value), 0.0


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tokenpace.reports.console import render_run
    from tokenpace.reports.result_file import result_document
    from tokenpace.runner.bench import run_bench

    result = run_bench(config_from_args(args))
    console = Console()
    render_run(result_document(result), console)
    console.print(f"Results: {result.result_path} · records: {result.records_path}")
    counts = result.summary["counts"]
    if result.interrupted:
        return ExitCode.INTERRUPTED
    if counts["sent"] and counts["ok"] == 0:
        return ExitCode.RUN_FAILED
    if not result.load.get("valid", True):
        return ExitCode.INVALID_RUN
    return ExitCode.OK
