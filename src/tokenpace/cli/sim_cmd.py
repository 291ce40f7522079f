"""`tokenpace sim`: bench's load and workload options plus an engine → run_sim → the same console
summary and result files as a measured run."""

from __future__ import annotations

import argparse

from tokenpace.cli import options
from tokenpace.config import BenchConfig
from tokenpace.errors import ExitCode, UsageError

EPILOG = """\
examples:
  tokenpace sim --model llama-3.1-8b --gpu h100-sxm --quant fp8 --tp 1 \\
      --policy chunked-prefill --max-num-seqs 256 --max-batched-tokens 8192 \\
      --concurrency 64 --requests 5000 --input-tokens 1024 --output-tokens 256 --out sim.json
  tokenpace sim --rate 12 --arrival poisson --duration 600            # open loop, virtual time
  tokenpace sim --prefix-caching --shared-prefix-tokens 2048          # cache what-if
  tokenpace sim --spec-decode --draft-tokens 4 --acceptance 0.7 --draft-cost 0.1
  tokenpace sim --trace trace.jsonl --prefix-caching                  # replay a trace's times and blocks
  tokenpace sim --model path/to/config.json --gpu a100-80gb --quant int4
  tokenpace sim --calibration cal.json --concurrency 8                # a calibrated engine (tokenpace calibrate)
  tokenpace sim --predictor kernels --engine trtllm --quant fp8       # measured kernel tables (tokenpace[kernels])
  tokenpace sim --concurrency 8 --step-noise 0.05 --members 8       # how far each figure moves run to run
  tokenpace sim --list                                                # GPUs, models, precisions, policies,
                                                                      # engines, predictors, measured tables

Load, workload, SLO and output options mean what they mean for `tokenpace bench`, in virtual time
from t = 0. Every request generates exactly its output
length (--no-ignore-eos, --extra-body, --retries have no effect). Same seed, same files: nothing in
a simulation's output reads a clock.
"""


def register(sub: argparse._SubParsersAction) -> None:
    from tokenpace.simulator.args import DEFAULT_MODEL, add_engine_arguments  # numpy: only for sim

    p = sub.add_parser("sim", help="simulate an LLM serving engine under the same load, in virtual time",
                       description="Simulate an LLM serving engine (continuous batching, paged KV cache, "
                                   "prefix caching, speculative decoding) under bench's load; report "
                                   "the same metrics from the same records.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("what to simulate")
    g.add_argument("--model", metavar="NAME|PATH",
                   help="catalog name, catalog JSON, a Hugging Face config.json or a .gguf file "
                        f"(default {DEFAULT_MODEL})")
    g.add_argument("--shared-prefix-tokens", type=int, default=0, metavar="N",
                   help="every prompt starts with the same N tokens, added to --input-tokens")
    g.add_argument("--list", action="store_true", help="print the catalogs (GPUs, models, precisions, "
                   "policies, engines, step-time predictors, GPUs with measured kernel tables) and exit")
    add_engine_arguments(p, calibration=True, members=True)
    options.add_load_workload_slo(p)
    options.add_output(p, kind="sim")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace):  # -> SimRunConfig
    from tokenpace.runner.simulate import SimRunConfig
    from tokenpace.simulator.args import calibration_scope_of, engine_config

    if args.shared_prefix_tokens < 0:
        raise UsageError(f"--shared-prefix-tokens must be >= 0, not {args.shared_prefix_tokens}")
    values = options.load_workload_slo_values(args, simulated=True)
    load = BenchConfig(**values, out=args.out, **options.progress_values(args)).validate()
    engine = engine_config(args, model=args.model, max_num_seqs=args.max_num_seqs, seed=load.seed)
    if args.members is not None:
        if not 1 <= args.members <= 1000:
            raise UsageError(f"--members must lie in [1, 1000], not {args.members}")
        if not engine.step_noise:
            raise UsageError("--members needs --step-noise: without noise every member is the same run")
    return SimRunConfig(load=load, engine=engine, shared_prefix_tokens=args.shared_prefix_tokens,
                        calibration=calibration_scope_of(args)).validate()


def run(args: argparse.Namespace) -> int:
    from tokenpace.cli.streams import stdout_console

    console = stdout_console()
    if args.list:
        from tokenpace.reports.catalogs import render_catalogs

        render_catalogs(console)
        _render_predictors(console)
        return ExitCode.OK

    from tokenpace.reports.console import render_run
    from tokenpace.results import result_document
    from tokenpace.runner.simulate import run_sim

    config = config_from_args(args)
    others = None
    if args.members is not None:
        from tokenpace.runner.sim_members import other_members

        others = other_members(config, args.members)  # the same run under the next noise seeds, no files
    result = run_sim(config, hold_records=False, members=others)  # records to disk, then out of memory
    render_run(result_document(result), console)  # with the members' table under --members
    sim_s = result.sim.duration_s if result.sim else 0.0
    speed = f" ({sim_s / result.wall_s:,.0f}× real time)" if result.wall_s > 0 else ""
    console.print(f"Simulated {sim_s:,.1f} s of engine time in {result.wall_s:.2f} s{speed}")
    console.print(f"Results: {result.result_path} · records: {result.records_path} · "
                  f"engine timeline: {result.timeline_path}")
    return result.status.exit_code  # the one rule: tokenpace.results.status


def _render_predictors(console) -> None:
    """The step-time predictors, and the GPUs and engines the kernel predictor has tables for."""
    from rich.markup import escape

    from tokenpace.reports.catalogs import _table
    from tokenpace.reports.validated import band_text
    from tokenpace.simulator.config import PREDICTORS
    from tokenpace.simulator.error_band import error_band
    from tokenpace.simulator.kernels import kernel_table_sets, tables_available

    table = _table("Step-time predictors (--predictor)", "id", "what it does")
    for name, summary in PREDICTORS.items():
        table.add_row(name, escape(summary))
    console.print(table)
    validated = _table("Their validated error on published measurements (benchmarks/sim_fidelity.py)", "id", "error")
    for name in PREDICTORS:
        validated.add_row(name, escape(band_text(error_band(name), worst=False)))
    console.print(validated)
    if not tables_available():
        console.print(escape("Measured kernel tables: not installed (pip install 'tokenpace[kernels]')"))
        return
    measured = _table("Measured kernel tables (--predictor kernels; aiconfigurator-core)", "GPU", "engine",
                      "version", "tables")
    for s in kernel_table_sets():
        measured.add_row(s.gpu, s.backend, s.version, s.system)
    console.print(measured)
