"""`tokenpace export`: a run's per-request records as CSV or Parquet (one documented column set)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenpace.errors import UsageError

EPILOG = """\
examples:
  tokenpace export run.json --csv records.csv
  tokenpace export run.json --parquet records.parquet        # needs: pip install 'tokenpace[parquet]'
  tokenpace export run.records.jsonl --csv records.csv        # a partial run works too

Every record is exported (warmup and retried attempts too; the `measured` column marks those that
count). Columns: every record field, then measured, ttft_ms, ttft_from_scheduled_ms, ttfc_ms,
tpot_ms, e2e_ms, e2e_from_scheduled_ms, schedule_lag_ms, output_tokens_used, chunk_count (README).
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export a run's per-request records as CSV or Parquet",
                       description="Per-request records of a saved run as a table.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", metavar="RUN", help="a result .json or a records .jsonl")
    p.add_argument("--csv", metavar="PATH", help="write CSV here")
    p.add_argument("--parquet", metavar="PATH", help="write Parquet here (needs pyarrow)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tokenpace.reports import export
    from tokenpace.results import load_run_data

    if not (args.csv or args.parquet):
        raise UsageError("say where to write: --csv PATH and/or --parquet PATH")
    if args.parquet:
        export.parquet_schema()  # fail on a missing pyarrow before reading anything
    path = Path(args.path)
    if not path.exists():
        raise UsageError(f"no such file: {path}")
    data = load_run_data(path)
    if not data.records:
        raise UsageError(f"{path}: no records to export ({'; '.join(data.notes) or 'empty'})")
    for target, writer in ((args.csv, export.write_csv), (args.parquet, export.write_parquet)):
        if target:
            written = writer(data.records, target)
            print(f"{len(data.records)} records, {len(export.COLUMNS)} columns → {written}")
    return 0
