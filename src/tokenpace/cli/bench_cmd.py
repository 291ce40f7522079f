"""`tokenpace bench`: flags → BenchConfig → run_bench → console summary."""

from __future__ import annotations

import argparse

from tokenpace.cli import options
from tokenpace.config import (API_HELP, APIS, CACHE_BREAKPOINTS, DEFAULT_CONCURRENCY, DEFAULT_REQUESTS, BenchConfig,
                              default_api_key_env)
from tokenpace.errors import NotSaved

EPILOG = f"""\
examples:
  tokenpace bench
  tokenpace bench --url http://127.0.0.1:8000/v1 --model my-model --api chat \\
      --concurrency 16 --requests 500 --input-tokens 512 --output-tokens 128 \\
      --slo chat --gpu-hour-usd 3.0 --gpus 1 --out run.json
  tokenpace bench --url http://127.0.0.1:8000/v1 --rate 8 --arrival poisson --duration 60 --warmup 5
  tokenpace bench --url http://127.0.0.1:8000/v1 --scrape-metrics      # engine metrics from :8000/metrics
  tokenpace bench --url http://127.0.0.1:8000/v1 --concurrency 512 --workers 4   # 4 client processes
  tokenpace bench --url http://10.0.0.5:8000/v1 --rate 2000 --duration 60 --ray auto   # Ray actors

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
    g.add_argument("--api", choices=APIS, default="chat", help=API_HELP)
    g.add_argument("--cache-breakpoint", choices=CACHE_BREAKPOINTS, default="none",
                   help="--api anthropic: put cache_control at the end of the shared prefix (prefix) or "
                        "of the system prompt (system); default none")
    g.add_argument("--no-stream", dest="stream", action="store_false",
                   help="non-streaming requests (TTFT = E2E)")
    g.add_argument("--api-key-env", metavar="VAR", default=None,
                   help="environment variable holding the API key (never printed or saved; default "
                        "OPENAI_API_KEY, ANTHROPIC_API_KEY with --api anthropic)")
    options.add_load_workload_slo(p)
    g = p.add_argument_group("built-in server (without --url)")
    g.add_argument("--builtin-timing", choices=("sim", "parametric"), default="sim",
                   help="sim (default): the engine simulator, Llama-3.1-8B on an H100; "
                        "parametric: the simple timing model")
    g.add_argument("--tokens-per-chunk", type=int, default=1, metavar="N",
                   help="tokens the built-in server sends per chunk (parametric timing)")
    options.add_scale_out(p)
    options.add_engine_metrics(p)
    options.add_output(p, kind="bench")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    return BenchConfig(
        url=args.url, model=args.model, api=args.api, stream=args.stream,
        api_key_env=args.api_key_env or default_api_key_env(args.api),
        cache_breakpoint=args.cache_breakpoint, server_tokens_per_chunk=args.tokens_per_chunk,
        builtin_timing=args.builtin_timing,
        **options.load_workload_slo_values(args), **options.engine_metrics_values(args),
        workers=args.workers, ray=args.ray, max_clock_offset_ms=args.max_clock_offset_ms,
        out=args.out, **options.progress_values(args),
    ).validate()


def run(args: argparse.Namespace) -> int:
    from tokenpace.cli.streams import stdout_console

    from tokenpace.reports.console import render_run
    from tokenpace.results import result_document
    from tokenpace.runner.bench import run_bench

    config = config_from_args(args)
    options.warn_unset_key_variable(config.api_key_env, default_api_key_env(config.api))
    console = stdout_console()
    try:
        result = run_bench(config)
    except NotSaved as exc:  # disk full: show what was measured, then the one-line error
        if exc.result is not None:
            render_run(result_document(exc.result), console)
        raise
    render_run(result_document(result), console)
    console.print(f"Results: {result.result_path} · records: {result.records_path}")
    return result.status.exit_code  # the one rule: tokenpace.results.status
