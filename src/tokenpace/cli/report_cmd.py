"""`tokenpace report`: the console summary of a saved run: a result JSON, or a records JSONL
(also the partial one a killed run leaves behind). SLO and cost can be judged again."""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenpace.errors import UsageError

EPILOG = """\
examples:
  tokenpace report run.json
  tokenpace report run.records.jsonl            # e.g. what a killed run left behind
  tokenpace report run.json --slo code --gpu-hour-usd 2.5
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="summarize a saved run (result JSON or records JSONL)",
                       description="Console summary of a saved run.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", metavar="RUN", help="a result .json or a records .jsonl")
    p.add_argument("--slo", metavar="PRESET|EXPR", help="judge goodput against this SLO instead")
    p.add_argument("--gpu-hour-usd", type=float, metavar="USD", help="price of one GPU-hour")
    p.add_argument("--gpus", type=int, metavar="N", help="GPUs behind the endpoint")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tokenpace.reports.console import render_run
    from tokenpace.reports.reload import load_run

    path = Path(args.path)
    if not path.exists():
        raise UsageError(f"no such file: {path}")
    doc = load_run(path, slo=args.slo, gpu_hour_usd=args.gpu_hour_usd, gpus=args.gpus)
    console = Console()
    render_run(doc, console)
    if doc.get("skipped_lines"):
        console.print(f"[yellow]{doc['skipped_lines']} unreadable line(s) skipped "
                      "(a run killed mid-write leaves at most one)[/]")
    return 0
