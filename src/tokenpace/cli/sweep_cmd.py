"""`tokenpace sweep`: flags → SweepConfig → run_sweep (a row per step as it ends) → the analysis."""

from __future__ import annotations

import argparse
import dataclasses

from tokenpace.cli import options
from tokenpace.config import API_HELP, APIS, CACHE_BREAKPOINTS, BenchConfig, default_api_key_env
from tokenpace.errors import ExitCode, UsageError

# Steps are bounded by time unless --requests-per-step is given: a steady-state window needs many
# request latencies of sending (a count-bounded step at a high rate ends before the engine fills).
DEFAULT_DURATION_PER_STEP_S = 60.0
DEFAULT_SIM_DURATION_PER_STEP_S = 300.0  # virtual seconds cost little

EPILOG = """\
examples:
  tokenpace sweep --concurrency 1,4,16,32,64 --requests-per-step 200 --slo chat --out sweep.json
  tokenpace sweep --url http://127.0.0.1:8000/v1 --model m --rate auto --slo ttft=300ms,tpot=40ms \\
      --duration-per-step 60 --gpu-hour-usd 3
  tokenpace sweep --sim --model llama-3.1-70b --gpu h100-sxm --tp 2 --quant fp8 --rate auto --slo chat
  tokenpace sweep --url http://127.0.0.1:8000/v1 --concurrency 1,8,32 --scrape-metrics  # engine's view per step
  tokenpace sweep --sim --calibration cal.json --concurrency 1,2,4,8,16   # a calibrated engine's curve
  tokenpace sweep --sim --rate auto --slo chat --vary policy=prefill-first,chunked-prefill \\
      --vary quant=bf16,fp8                                   # what-if grid: one sweep per combination
  tokenpace sweep --url http://127.0.0.1:8000/v1 --model m --concurrency 1,8,32 --slo chat \
      --vary stream=on,off          # measured what-if: perceived latency, streamed against whole responses
  tokenpace sweep --url http://127.0.0.1:8000/v1 --concurrency 64,256,512 --workers 4   # 4 client processes a step
  tokenpace sweep --sim --concurrency 1,8,32,128 --vary quant=bf16,fp8 --jobs 4   # steps in 4 processes
  tokenpace sweep --sim --rate auto --slo chat --vary tp=1,2,4 --ray auto         # grid as Ray tasks

Without --url and --sim, the steps run against the built-in simulated server (started once).
--rate auto (the default) first measures the synchronous rate (concurrency 1) and the saturation
rate (closed loops at concurrency 4, 16, 64, ... up to --saturation-concurrency, until throughput
stops growing), then runs --steps rates: up to saturation, denser near it, then 115% and 135% of
it (overload); it stops early once a step misses the SLO by a wide margin (a figure over 2x its
limit, or under half the target attainment), after one rate past saturation. Each step is a full run with its own result file in
<out>.steps/; the sweep file holds every step's summary and the analysis. Failed and invalid steps
are kept, marked, and left out of the analysis. Ctrl-C keeps the completed steps.
Steps last --duration-per-step (default 60 s; 300 virtual s with --sim) unless --requests-per-step
is given; rates count over each step's steady-state window (from the target load reached to the
end of sending), and a step that achieved under 95% of its offered load below saturation is flagged.
--vary KEY=V1,V2 (repeatable, crossed): engine keys with --sim: policy, quant, kv-dtype, tp, gpu,
max-num-seqs (or max-batch), max-batched-tokens, prefix-caching (on/off), spec-decode (on/off);
client keys, measured against --url or the built-in server: stream (on/off), api (chat/completions),
and (also with --sim) output-tokens (a length spec, EOS ignored) and max-tokens (a cap, EOS honoured).
With stream=on,off the report sets the perceived latency side by side at each load: when the first
words appear against when the whole answer has arrived.
Scale-out: --workers N and --ray spread each measured step's load over processes or Ray actors
(records merged exactly, as bench does); the steps still run one after another. With --sim, --jobs N
or --ray runs the steps (with --rate auto: the --vary combinations) in parallel, with the same files
as a serial sweep.
"""


def register(sub: argparse._SubParsersAction) -> None:
    from tokenpace.simulator.args import DEFAULT_MODEL, add_engine_arguments

    p = sub.add_parser("sweep", help="raise the load step by step: the knee, max goodput under an SLO, cost",
                       description="Raise the load step by step against an endpoint or the simulator; find "
                                   "the knee, the max goodput under the SLO and its cost.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("target")
    g.add_argument("--url", metavar="URL", help="base URL ending in /v1 (default: built-in server)")
    g.add_argument("--sim", action="store_true", help="simulate every step in virtual time (engine flags below)")
    g.add_argument("--model", metavar="NAME", help="served model name; with --sim the simulated model "
                   f"(default {DEFAULT_MODEL})")
    g.add_argument("--api", choices=APIS, default="chat", help=API_HELP)
    g.add_argument("--cache-breakpoint", choices=CACHE_BREAKPOINTS, default="none",
                   help="--api anthropic: put cache_control at the end of the shared prefix (prefix) or "
                        "of the system prompt (system); default none")
    g.add_argument("--no-stream", dest="stream", action="store_false", help="non-streaming requests")
    g.add_argument("--api-key-env", metavar="VAR", default=None,
                   help="environment variable holding the API key (never printed or saved; default "
                        "OPENAI_API_KEY, ANTHROPIC_API_KEY with --api anthropic)")
    g.add_argument("--builtin-timing", choices=("sim", "parametric"), default="sim",
                   help="timing of the built-in server (without --url)")
    g = p.add_argument_group("sweep")
    g.add_argument("--steps", type=int, default=8, metavar="N", help="--rate auto: rates to try (default 8)")
    g.add_argument("--saturation-concurrency", type=int, default=256, metavar="N",
                   help="--rate auto: the highest concurrency the saturation probes try (default 256)")
    g.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2",
                   help="cross engine (--sim) or client parameters; one sweep per combination")
    g.add_argument("--shared-prefix-tokens", type=int, default=0, metavar="N",
                   help="with --sim: every prompt starts with the same N tokens")
    options.add_load_workload_slo(p, sweep=True)
    options.add_engine_metrics(p)
    options.add_scale_out(p, sweep=True)
    add_engine_arguments(p, calibration=True)
    options.add_output(p, kind="sweep")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace):  # -> SweepConfig
    from tokenpace.simulator.args import calibration_scope_of, engine_config
    from tokenpace.sweep.spec import DEFAULT_CONCURRENCIES, SweepConfig, parse_loads, parse_vary

    if args.requests is None and args.duration is None:
        args.duration = DEFAULT_SIM_DURATION_PER_STEP_S if args.sim else DEFAULT_DURATION_PER_STEP_S
    conc, rate = args.concurrency_spec, args.rate_spec
    cap = None
    if rate is not None:
        axis = "rate"
        loads = None if rate.strip().lower() == "auto" else parse_loads(rate, "--rate", integer=False)
        if conc is not None:
            caps = parse_loads(conc, "--concurrency", integer=True)
            if len(caps) != 1:
                raise UsageError("with --rate, --concurrency is one number: the cap on requests in flight")
            cap = int(caps[0])
    elif conc is not None:
        axis, loads = "concurrency", parse_loads(conc, "--concurrency", integer=True)
    else:
        axis, loads = "rate", None
    if args.url and args.sim:
        raise UsageError("give --url or --sim, not both")
    values = options.load_workload_slo_values(args, simulated=bool(args.sim))
    values["concurrency"] = cap
    base = BenchConfig(
        url=args.url, model=None if args.sim else args.model, api=args.api, stream=args.stream,
        api_key_env=args.api_key_env or default_api_key_env(args.api),
        cache_breakpoint=args.cache_breakpoint, builtin_timing=args.builtin_timing, **values,
        **options.engine_metrics_values(args),
        max_clock_offset_ms=args.max_clock_offset_ms,
        out=None, **options.progress_values(args)).validate()
    if not args.sim:  # each step's load from workers or actors; each step checks its own count
        base = dataclasses.replace(base, workers=args.workers, ray=args.ray)
    if not args.sim:
        options.warn_unset_key_variable(base.api_key_env, default_api_key_env(base.api))
    sim = None
    if args.sim:
        sim = engine_config(args, model=args.model, max_num_seqs=args.max_num_seqs, seed=base.seed)
    if not args.sim and args.calibration:
        raise UsageError("--calibration describes a simulated engine: it needs --sim")
    if args.sim and args.scrape_metrics is not None:
        raise UsageError("--scrape-metrics reads a real engine's /metrics: it does not apply to --sim")
    if args.sim and args.workers is not None:
        raise UsageError("--workers spreads a measured step's load: a simulated sweep has none "
                         "(run its steps in parallel with --jobs N or --ray)")
    if args.shared_prefix_tokens and not args.sim:
        raise UsageError("--shared-prefix-tokens needs --sim (use --shared-prefix for a measured sweep)")
    if axis == "concurrency" and loads is None:
        loads = list(DEFAULT_CONCURRENCIES)
    return SweepConfig(base=base, axis=axis, loads=loads, auto_steps=args.steps,
                       saturation_concurrency=args.saturation_concurrency, sim=sim,
                       calibration=calibration_scope_of(args) if args.sim else None,
                       shared_prefix_tokens=args.shared_prefix_tokens, vary=parse_vary(args.vary),
                       out=args.out, progress=args.progress_mode != "off",
                       jobs=args.jobs, ray=args.ray if args.sim else None).validate()


def run(args: argparse.Namespace) -> int:
    from tokenpace.cli.streams import stdout_console

    from tokenpace.reports.sweep_console import group_heading, header, headline, render_analysis, step_row
    from tokenpace.sweep import run_sweep
    from tokenpace.sweep.document import sweep_document, sweep_header_document

    config = config_from_args(args)
    console = stdout_console()
    console.print(headline(sweep_header_document(config)))
    console.print(header(config.axis), soft_wrap=True)
    seen = {"group": None}

    def on_start(plan: dict) -> None:
        if plan["group"] and plan["group"] != seen["group"]:
            console.print(group_heading(plan["group"]))
        seen["group"] = plan["group"]

    result = run_sweep(config, on_step=lambda e: console.print(step_row(e), soft_wrap=True), on_start=on_start)
    render_analysis(sweep_document(result), console)
    console.print(f"Sweep: {result.path} · steps: {result.path.name[:-5] if result.path.name.endswith('.json') else result.path.name}.steps/")
    if result.interrupted:
        return ExitCode.INTERRUPTED
    if not any(s["status"] == "ok" for s in result.steps):
        return ExitCode.RUN_FAILED
    return ExitCode.OK
