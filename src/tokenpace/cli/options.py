"""Option groups shared by the commands that drive load (bench, sim): one definition, one meaning."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from tokenpace.config import ARRIVALS, DEFAULT_SCRAPE_INTERVAL_S, MIN_SCRAPE_INTERVAL_S, PROGRESS_MODES, check_seed
from tokenpace.errors import UsageError


DEFAULT_TIMEOUT_S = 600.0  # bench's total per-request timeout


def add_load_workload_slo(p: argparse.ArgumentParser, *, sweep: bool = False) -> None:
    """``sweep``: --concurrency and --rate take lists (and --rate auto), and the bound is per step
    (--requests-per-step, --duration-per-step); everything else means what it means for bench."""
    g = p.add_argument_group("load")
    if sweep:
        g.add_argument("--concurrency", dest="concurrency_spec", metavar="N[,N...]",
                       help="closed-loop steps at these concurrencies; with --rate: one number, the cap "
                            "on requests in flight")
        g.add_argument("--rate", dest="rate_spec", metavar="RPS[,RPS...]|auto",
                       help="open-loop steps at these request rates, or auto (the default): measure the "
                            "synchronous and saturation rates, then step between them")
        g.add_argument("--requests-per-step", dest="requests", type=int, metavar="N",
                       help="measured requests per step (default: bounded by --duration-per-step)")
        g.add_argument("--duration-per-step", dest="duration", type=float, metavar="SECONDS",
                       help="measure each step for this long (default 60; 300 virtual seconds with --sim)")
        p.set_defaults(concurrency=None, rate=None)
    else:
        g.add_argument("--concurrency", type=int, metavar="N", help="requests in flight (closed loop), "
                       "or the cap on them with --rate")
        g.add_argument("--rate", type=float, metavar="RPS", help="open loop: requests per second")
        g.add_argument("--requests", type=int, metavar="N", help="measured requests to send")
        g.add_argument("--duration", type=float, metavar="SECONDS", help="measure for this long")
    g.add_argument("--ramp", type=float, default=0.0, metavar="SECONDS",
                   help="raise the rate or concurrency linearly to its target over this long; rates "
                        "count from its end (with --duration: the duration follows it)")
    g.add_argument("--arrival", choices=ARRIVALS, default="poisson", help="open-loop arrivals")
    g.add_argument("--burstiness", type=float, default=1.0, metavar="SHAPE",
                   help="gamma shape (1 = Poisson, <1 burstier)")
    g.add_argument("--warmup", metavar="N|SECONDS", default="0",
                   help="excluded from metrics: '20req', '5s', or a bare number (requests with "
                        "--requests, seconds with --duration)")
    g.add_argument("--grace", type=float, metavar="SECONDS",
                   help="time in-flight requests get to finish after --duration or Ctrl-C "
                        "(default 10; a count-bounded run waits up to --timeout)")
    g.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="total per-request timeout (default 600; simulated runs: none unless given, "
                        "and the engine cancels the request at that virtual moment)")
    g.add_argument("--connect-timeout", type=float, metavar="SECONDS",
                   help="give up on a request whose connection is not made within this time")
    g.add_argument("--ttft-timeout", type=float, metavar="SECONDS",
                   help="give up on a request with no token within this time of sending it")
    g.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                   help="give up on a stream silent for this long (before the first token only "
                        "without --ttft-timeout)")
    g.add_argument("--retries", type=int, default=0, metavar="N",
                   help="retry a request that failed before its first token (429, 5xx, connect) "
                        "up to N times; every attempt is recorded (default 0)")
    g.add_argument("--retry-backoff", type=float, default=0.5, metavar="SECONDS",
                   help="first retry delay without Retry-After; doubles each time (default 0.5)")
    add_seed(g)
    add_workload(p)
    g = p.add_argument_group("SLO and cost")
    g.add_argument("--slo", metavar="PRESET|EXPR", help="goodput SLO, e.g. chat or ttft=300ms,tpot=40ms")
    g.add_argument("--gpu-hour-usd", type=float, metavar="USD", help="price of one GPU-hour")
    g.add_argument("--gpus", type=int, default=1, metavar="N", help="GPUs behind the endpoint")
    g.add_argument("--input-usd-per-mtok", type=float, metavar="USD",
                   help="a hosted API's price per million prompt tokens: prices each request, with cache "
                        "writes, reads and misses apart (with --output-usd-per-mtok)")
    g.add_argument("--output-usd-per-mtok", type=float, metavar="USD",
                   help="a hosted API's price per million output tokens")
    g.add_argument("--cache-price-multipliers", metavar="write=W,read=R", default=None,
                   help="cache prices as multiples of the input price (default write=1.25,read=0.1: "
                        "Anthropic's 5-minute cache)")


def add_seed(g: Any) -> None:
    g.add_argument("--seed", type=seed_value, default=0, metavar="N",
                   help="seed for schedule and prompts (0 to 2**64-1)")


def seed_value(text: str) -> int:
    """argparse type of --seed: a whole number in numpy's seed range (else one line, exit 2)."""
    try:
        seed = int(text)
        check_seed(seed)
    except (ValueError, UsageError):
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to 2**64-1, not {text!r}") from None
    return seed


def add_workload(p: argparse.ArgumentParser) -> None:
    """The workload group: shared by bench, sim and `workload inspect`."""
    g = p.add_argument_group("workload")
    g.add_argument("--input-tokens", default="512", metavar="SPEC",
                   help="prompt length spec (with --shared-prefix: the unique suffix)")
    g.add_argument("--output-tokens", default="128", metavar="SPEC", help="max_tokens length spec")
    g.add_argument("--tokenizer", metavar="PATH|NAME", help="local tokenizer.json, HF tokenizer "
                   "folder, .gguf file, or a Hugging Face name in the local HF cache: exact prompt "
                   "lengths (nothing is downloaded)")
    g.add_argument("--dataset", metavar="PATH", help="prompts from a ShareGPT JSON or a JSONL of "
                   "messages/prompts")
    g.add_argument("--trace", metavar="PATH", help="replay a Mooncake-style trace JSONL: arrival "
                   "times and lengths")
    g.add_argument("--time-scale", type=float, default=1.0, metavar="F",
                   help="multiply trace arrival offsets by F (0.5: twice as fast; default 1)")
    g.add_argument("--sort-trace", action="store_true",
                   help="replay a trace whose timestamps are out of order in time order "
                        "(default: refuse it)")
    g.add_argument("--skip-bad-lines", action="store_true",
                   help="skip (and count) bad dataset/trace lines instead of stopping")
    g.add_argument("--shared-prefix", metavar="SPEC", help="groups=8,prefix-tokens=2048,per-group=50,"
                   "order=grouped|interleaved")
    g.add_argument("--conversations", metavar="SPEC", help="multi-turn sessions: sessions=20,turns=6,"
                   "think-time=exp:3s")
    g.add_argument("--reasoning-effort", choices=("low", "medium", "high"),
                   help="send reasoning_effort with every request")
    g.add_argument("--tools", type=int, default=0, metavar="N",
                   help="attach N synthetic function tools and ask for a call (chat API)")
    g.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                   help="don't send ignore_eos/min_tokens (hosted APIs reject them)")
    g.add_argument("--extra-body", metavar="JSON", help="JSON object merged into every request body")


def workload_values(args: argparse.Namespace) -> dict[str, Any]:
    """The BenchConfig fields set by add_workload's flags."""
    return dict(
        input_tokens=args.input_tokens, output_tokens=args.output_tokens, tokenizer=args.tokenizer,
        dataset=args.dataset, trace=args.trace, time_scale=args.time_scale,
        skip_bad_lines=args.skip_bad_lines, sort_trace=args.sort_trace, shared_prefix=args.shared_prefix,
        conversations=args.conversations, reasoning_effort=args.reasoning_effort, tools=args.tools,
        ignore_eos=args.ignore_eos, extra_body=parse_json_object(args.extra_body, "--extra-body"),
    )


def add_output(p: argparse.ArgumentParser, *, kind: str) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--out", metavar="PATH", help=f"result JSON (default tokenpace-runs/{kind}-<time>.json)")
    g.add_argument("--progress", dest="progress_mode", choices=PROGRESS_MODES, default="auto",
                   help="progress while the run goes: auto (default: live on a terminal, plain when "
                        "piped), live, plain (a line every 5 s), json (one object per line), off")
    g.add_argument("--no-progress", dest="progress_mode", action="store_const", const="plain",
                   help="no live view: a plain line every 5 s, as when piped (as --progress plain)")
    g.add_argument("-q", "--quiet", dest="progress_mode", action="store_const", const="off",
                   help="no progress output (as --progress off); the summary still prints")


def progress_values(args: argparse.Namespace) -> dict[str, Any]:
    """The BenchConfig fields set by add_output's progress flags."""
    return dict(progress=args.progress_mode != "off", progress_mode=args.progress_mode)


def load_workload_slo_values(args: argparse.Namespace, *, simulated: bool = False) -> dict[str, Any]:
    """The BenchConfig fields set by add_load_workload_slo's flags. ``simulated``: no total timeout
    unless --timeout is given (a simulated client waits in virtual time)."""
    warmup_requests, warmup_s = parse_warmup(args.warmup, by_time=args.duration is not None)
    return dict(
        concurrency=args.concurrency, rate=args.rate, arrival=args.arrival,
        burstiness=args.burstiness, requests=args.requests, duration_s=args.duration,
        warmup_requests=warmup_requests, warmup_s=warmup_s, ramp_s=args.ramp, grace_s=args.grace,
        timeout_s=args.timeout if args.timeout is not None else (None if simulated else DEFAULT_TIMEOUT_S),
        connect_timeout_s=args.connect_timeout,
        ttft_timeout_s=args.ttft_timeout, idle_timeout_s=args.idle_timeout,
        retries=args.retries, retry_backoff_s=args.retry_backoff,
        seed=args.seed, **workload_values(args), slo=args.slo,
        gpu_hour_usd=args.gpu_hour_usd, gpus=args.gpus,
        input_usd_per_mtok=args.input_usd_per_mtok, output_usd_per_mtok=args.output_usd_per_mtok,
        cache_price_multipliers=parse_multipliers(args.cache_price_multipliers),
    )


def parse_multipliers(text: str | None) -> dict[str, float] | None:
    """``--cache-price-multipliers write=1.25,read=0.1``; None when not given."""
    if text is None:
        return None
    out: dict[str, float] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        key = key.strip()
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not eq or key not in ("write", "read") or not (math.isfinite(number) and number >= 0):
            raise UsageError(f"--cache-price-multipliers: expected write=W,read=R with numbers >= 0, not {text!r}")
        out[key] = number
    if set(out) != {"write", "read"}:
        raise UsageError(f"--cache-price-multipliers: give both write=W and read=R, not {text!r}")
    return out


def parse_json_object(text: str | None, flag: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object")
    return value


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
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(f"--warmup must be a finite number >= 0, not {text!r}")
    if by_time:
        return 0, value
    if value != int(value):
        raise UsageError(f"--warmup in requests must be a whole number, not {text!r}")
    return int(value), 0.0


def add_engine_metrics(p: argparse.ArgumentParser) -> None:
    """--scrape-metrics and --scrape-interval (tokenpace.observe)."""
    g = p.add_argument_group("engine metrics")
    g.add_argument("--scrape-metrics", nargs="?", const="", default=None, metavar="URL",
                   help="scrape the engine's Prometheus /metrics during the run (vLLM, SGLang, TGI, "
                        "llama.cpp); default URL: the target's without /v1, plus /metrics")
    g.add_argument("--scrape-interval", type=float, metavar="SECONDS",
                   help=f"time between scrapes (default {DEFAULT_SCRAPE_INTERVAL_S:g}; at least "
                        f"{MIN_SCRAPE_INTERVAL_S:g})")


def engine_metrics_values(args: argparse.Namespace) -> dict[str, Any]:
    """The BenchConfig fields set by add_engine_metrics's flags."""
    url = args.scrape_metrics
    if url is None and args.scrape_interval is not None:
        raise UsageError("--scrape-interval needs --scrape-metrics")
    return dict(scrape_metrics=url is not None, metrics_url=url or None,
                scrape_interval_s=(DEFAULT_SCRAPE_INTERVAL_S if args.scrape_interval is None
                                   else args.scrape_interval))


def warn_unset_key_variable(variable: str, default: str) -> None:
    """--api-key-env names a variable the user meant to be set: running without a key would
    only show up as 401s. The default variable may be unset (local servers need no key)."""
    import os
    import sys

    if variable != default and not os.environ.get(variable):
        print(f"tokenpace: warning: --api-key-env {variable}: that variable is not set or empty; "
              "sending requests without an API key", file=sys.stderr, flush=True)


def add_scale_out(p: argparse.ArgumentParser, *, sweep: bool = False) -> None:
    """--workers, --ray, --max-clock-offset (bench and sweep); --jobs (sweep --sim)."""
    g = p.add_argument_group("scale-out")
    per = " of each step" if sweep else ""
    g.add_argument("--workers", type=workers_count, default=None, metavar="N|auto",
                   help=f"send the load{per} from N processes, each with its own event loop (default 1; "
                        "auto: one per 128 streams, at most one fewer than the CPUs). With --ray: "
                        "the number of actors (default: one per node)"
                        + ("; a closed-loop step of c streams uses at most c" if sweep else ""))
    g.add_argument("--ray", metavar="ADDRESS|auto",
                   help="run the load as Ray actors on a cluster (`pip install 'tokenpace[ray]'`)"
                        + ("; with --sim, run the simulated steps as Ray tasks on it" if sweep else ""))
    g.add_argument("--max-clock-offset", dest="max_clock_offset_ms", type=float, default=50.0,
                   metavar="MS", help="--ray: refuse a node whose clock is further than this from "
                                      "this machine's (default 50)")
    if sweep:
        g.add_argument("--jobs", type=jobs_count, default=1, metavar="N|auto",
                       help="with --sim: simulate the steps (or, with --rate auto, the --vary "
                            "combinations) in N local processes (auto: one per CPU); the same files "
                            "as one after another (default 1)")


def workers_count(text: str) -> int:
    """--workers: a count, or auto (0 in the config)."""
    if text == "auto":
        return 0
    return _count(text)


def jobs_count(text: str) -> int:
    """--jobs: a count, or auto (one per CPU)."""
    if text == "auto":
        from tokenpace.sweep.fanout import default_jobs

        return default_jobs()
    return _count(text)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1 or auto, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1 or auto, not {text!r}")
    return value
