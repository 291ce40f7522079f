"""`tokenpace compare`: runs side by side against a base run, with noise judged from the records,
and `--fail-if` regression gates for CI."""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenpace.errors import UsageError

EPILOG = """\
examples:
  tokenpace compare base.json new.json
  tokenpace compare base.json new.json other.json          # each against the base
  tokenpace compare measured.json sim.json                 # a simulation against a measurement
  tokenpace compare base.json new.json --fail-if "ttft.p99 > +10%" --fail-if "goodput.requests_s < -5%"

--fail-if PATH OP CHANGE (repeatable): PATH is a summary figure (ttft.p99, tpot.p50, itl.mean,
throughput.output_tokens_s, goodput.requests_s, goodput.fraction, cost.usd_per_1m_output_tokens,
counts.error); OP is > < >= <=; CHANGE is a signed change from the base: +10% (relative), +20ms or
+0.5s (latency figures), or a bare signed number in the figure's unit.

exit codes: 0 no gate failed · 2 bad usage, file or expression · 6 a --fail-if gate failed
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare runs against a base run; gate regressions in CI",
                       description="Key figures of runs side by side against the first (base) run.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", metavar="RUN", nargs="+", help="result .json or records .jsonl; the first is the base")
    p.add_argument("--fail-if", metavar="EXPR", action="append", default=[],
                   help="exit 6 when a run's change from the base satisfies EXPR, e.g. \"ttft.p99 > +10%%\"")
    p.add_argument("--slo", metavar="PRESET|EXPR", help="judge every run against this SLO")
    p.add_argument("--gpu-hour-usd", type=float, metavar="USD", help="price every run at this GPU-hour")
    p.add_argument("--gpus", type=int, metavar="N", help="GPUs behind every run")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tokenpace.reports.compare import compare_runs
    from tokenpace.cli.streams import stdout_console
    from tokenpace.reports.compare_console import render_comparison
    from tokenpace.reports.gates import GATE_FAILED_EXIT, parse_gate
    from tokenpace.results import load_run_data

    if len(args.paths) < 2:
        raise UsageError("compare needs a base run and at least one more")
    gates = [parse_gate(text) for text in args.fail_if]  # bad expressions fail before any file is read
    runs = []
    for path in map(Path, args.paths):
        if not path.exists():
            raise UsageError(f"no such file: {path}")
        runs.append(load_run_data(path, slo=args.slo, gpu_hour_usd=args.gpu_hour_usd, gpus=args.gpus))
    comparison = compare_runs(runs, gates)
    render_comparison(comparison, stdout_console())
    return GATE_FAILED_EXIT if comparison.failed_gates else 0
