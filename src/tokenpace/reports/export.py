"""Per-request records as a table: CSV, or Parquet when pyarrow is installed (``[parquet]`` extra).

One column set for both (README, "Exports"): every ``RequestRecord`` field in record order, then
the derived columns below. Timestamps stay integer nanoseconds as recorded; the derived latencies
are milliseconds, computed by ``tokenpace.metrics`` (so they match the summary). In CSV an empty
cell is null, booleans are ``true``/``false`` and the chunk lists are JSON arrays; in Parquet the
lists are list<int64>. ``read_export`` reads either back into records (the derived columns are
ignored), so an export round-trips.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.files import write_whole
from tokenpace.metrics.chunks import output_token_count
from tokenpace.metrics.latency import PER_REQUEST
from tokenpace.record import RequestRecord

# Derived columns: name -> (type, function of the record).
DERIVED: dict[str, tuple[str, Callable[[RequestRecord], Any]]] = {
    "measured": ("bool", lambda r: r.measured),
    **{f"{name}_ms": ("float", metric) for name, metric in PER_REQUEST.items()},
    "output_tokens_used": ("int", output_token_count),
    "chunk_count": ("int", lambda r: len(r.chunk_ns)),
}


def _record_type(annotation: str) -> str:
    """Column type of a record field, from its annotation text."""
    if annotation.startswith("dict"):
        return "json"  # an object, kept as JSON text in both formats
    for name in ("list", "bool", "float", "int"):
        if annotation.startswith(name) or f"[{name}" in annotation:
            return name
    return "str"  # str, and the Literal kinds (status, count sources)


RECORD_TYPES: dict[str, str] = {f.name: _record_type(str(f.type)) for f in fields(RequestRecord)}
COLUMNS: dict[str, str] = {**RECORD_TYPES, **{name: kind for name, (kind, _) in DERIVED.items()}}


def rows(records: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    out = []
    for record in records:
        row = {name: _json_text(getattr(record, name)) if kind == "json" else
               _as_list(getattr(record, name)) if kind == "list" else getattr(record, name)
               for name, kind in RECORD_TYPES.items()}
        row.update({name: fn(record) for name, (_, fn) in DERIVED.items()})
        out.append(row)
    return out


def _as_list(value: Any) -> Any:
    """A list field as a list (a simulated record's chunk times are a ``ChunkRuns``, read-only)."""
    return value if value is None or type(value) is list else list(value)


def write_csv(records: Sequence[RequestRecord], path: str | Path) -> Path:
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for row in rows(records):
        writer.writerow([_csv_cell(row[name]) for name in COLUMNS])
    return write_whole(path, out.getvalue().encode("utf-8"), what="the CSV export")


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, float):
        return repr(value)  # shortest text that reads back to the same float
    return str(value)


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise UsageError("Parquet export needs pyarrow: pip install 'tokenpace[parquet]' "
                         "(or use --csv)") from None
    return pyarrow


def parquet_schema() -> Any:
    pa = _pyarrow()
    types = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string(), "json": pa.string(),
             "list": pa.list_(pa.int64())}
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS.items()])


def write_parquet(records: Sequence[RequestRecord], path: str | Path) -> Path:
    pa = _pyarrow()
    table = pa.Table.from_pylist(rows(records), schema=parquet_schema())
    sink = pa.BufferOutputStream()
    pa.parquet.write_table(table, sink)
    return write_whole(path, sink.getvalue().to_pybytes(), what="the Parquet export")


def read_export(path: str | Path) -> list[RequestRecord]:
    """Records from a CSV or Parquet export (by suffix)."""
    path = Path(path)
    if path.suffix == ".parquet":
        table = _pyarrow().parquet.read_table(path)
        return [RequestRecord.from_dict({name: json.loads(value) if RECORD_TYPES.get(name) == "json" and value
                                         is not None else value for name, value in row.items()})
                for row in table.to_pylist()]
    with open(path, newline="", encoding="utf-8") as fh:
        return [RequestRecord.from_dict({name: _from_csv(RECORD_TYPES[name], text)
                                         for name, text in row.items() if name in RECORD_TYPES})
                for row in csv.DictReader(fh)]


def _from_csv(kind: str, text: str) -> Any:
    if text == "":
        return [] if kind == "list" else None
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "bool":
        return text == "true"
    if kind in ("list", "json"):
        return json.loads(text)
    return text


def _json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), sort_keys=True)
