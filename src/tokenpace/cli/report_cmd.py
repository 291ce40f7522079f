"""`tokenpace report`: the console summary of a saved run: a result JSON, or a records JSONL
(also the partial one a killed run leaves behind). SLO and cost can be judged again; `--html`
also writes a self-contained HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenpace.errors import UsageError

EPILOG = """\
examples:
  tokenpace report run.json
  tokenpace report run.records.jsonl            # e.g. what a killed run left behind
  tokenpace report run.json --slo code --gpu-hour-usd 2.5
  tokenpace report run.json --html run.html     # one self-contained file, opens offline
  tokenpace report sweep.json --html sweep.html # a sweep: its steps, analysis and curves
  tokenpace report sweep.json --slo code        # judge a sweep again against another SLO
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="summarize a saved run or sweep (result JSON or records JSONL)",
                       description="Console summary of a saved run, and optionally an HTML report.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", metavar="RUN", help="a result .json or a records .jsonl")
    p.add_argument("--slo", metavar="PRESET|EXPR", help="judge goodput against this SLO instead")
    p.add_argument("--gpu-hour-usd", type=float, metavar="USD", help="price of one GPU-hour")
    p.add_argument("--gpus", type=int, metavar="N", help="GPUs behind the endpoint")
    p.add_argument("--html", metavar="PATH", help="also write a self-contained HTML report (plots inline)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tokenpace.cli.streams import stdout_console

    from tokenpace.reports.console import render_run
    from tokenpace.results import load_run
    from tokenpace.results import load_run_data

    path = Path(args.path)
    if not path.exists():
        raise UsageError(f"no such file: {path}")
    judge = {"slo": args.slo, "gpu_hour_usd": args.gpu_hour_usd, "gpus": args.gpus}
    if path.suffix != ".jsonl":
        from tokenpace.results import load_document

        doc = load_document(path)
        if doc.get("kind") == "sweep":
            return _sweep(doc, path, args, judge)
    # Records (and the engine timeline) are read only when the HTML report needs them.
    data = load_run_data(path, **judge) if args.html else None
    doc = data.doc if data else load_run(path, **judge)
    console = stdout_console()
    render_run(doc, console)
    if doc.get("skipped_lines"):
        console.print(f"[yellow]{doc['skipped_lines']} unreadable line(s) skipped "
                      "(a run killed mid-write leaves at most one)[/]")
    if args.html:
        from tokenpace.reports.html import write_run_html

        written = write_run_html(data, args.html)
        console.print(f"HTML report: {written} ({written.stat().st_size / 1024:,.0f} KiB)")
    return 0


def _sweep(doc: dict, path: Path, args: argparse.Namespace, judge: dict) -> int:
    from tokenpace.cli.streams import stdout_console

    from tokenpace.reports.sweep_console import render_sweep
    from tokenpace.reports.sweep_reload import rejudge_sweep

    doc = rejudge_sweep(doc, path, **judge)
    console = stdout_console()
    render_sweep(doc, console)
    if args.html:
        from tokenpace.reports.html.sweep_document import write_sweep_html

        written = write_sweep_html(doc, args.html)
        console.print(f"HTML report: {written} ({written.stat().st_size / 1024:,.0f} KiB)")
    return 0
