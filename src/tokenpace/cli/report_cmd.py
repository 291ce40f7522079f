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
  tokenpace report run.json --input-usd-per-mtok 3 --output-usd-per-mtok 15   # a hosted API's prices
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
    p.add_argument("--input-usd-per-mtok", type=float, metavar="USD",
                   help="price the run's tokens at this input price per 1M tokens (with --output-usd-per-mtok)")
    p.add_argument("--output-usd-per-mtok", type=float, metavar="USD", help="output price per 1M tokens")
    p.add_argument("--cache-price-multipliers", metavar="write=W,read=R",
                   help="cache prices as multiples of the input price (default write=1.25,read=0.1)")
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
    prices = _token_prices(args)
    if path.suffix != ".jsonl":
        from tokenpace.results import load_document

        doc = load_document(path)
        if doc.get("kind") == "sweep":
            if prices is not None:
                raise UsageError("token prices re-price one run: give a step's result file (in the sweep's "
                                 ".steps folder), or run the sweep with them")
            return _sweep(doc, path, args, judge)
    # Records (and the engine timeline) are read only when the HTML report needs them.
    data = load_run_data(path, **judge, token_prices=prices, table=True) if args.html else None
    doc = data.doc if data else load_run(path, **judge, token_prices=prices)
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


def _token_prices(args: argparse.Namespace) -> dict | None:
    """The price flags as config fields, checked; None when none is given."""
    from tokenpace.cli.options import parse_multipliers
    from tokenpace.config import token_prices_of

    if args.input_usd_per_mtok is None and args.output_usd_per_mtok is None:
        if args.cache_price_multipliers is not None:
            raise UsageError("--cache-price-multipliers needs --input-usd-per-mtok and --output-usd-per-mtok")
        return None
    if args.input_usd_per_mtok is None or args.output_usd_per_mtok is None:
        raise UsageError("give --input-usd-per-mtok and --output-usd-per-mtok together")
    prices = {"input_usd_per_mtok": args.input_usd_per_mtok, "output_usd_per_mtok": args.output_usd_per_mtok,
              "cache_price_multipliers": parse_multipliers(args.cache_price_multipliers)}
    try:
        token_prices_of(prices)
    except ValueError as exc:
        raise UsageError(f"token prices: {exc}") from None
    return prices


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
