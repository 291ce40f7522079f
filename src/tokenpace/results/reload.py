"""Load a saved run for reporting: a result document, or records alone (a partial JSONL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.record import RequestRecord
from tokenpace.metrics import summarize
from tokenpace.recordtable import RecordTable
from tokenpace.results.columnar import columns_path, is_complete, read_table
from tokenpace.results.document import load_document
from tokenpace.results.records import read_records_counted
from tokenpace.results.window import saved_window


def load_run(path: Path, *, slo: str | None = None, gpu_hour_usd: float | None = None,
             gpus: int | None = None) -> dict[str, Any]:
    """A result document ready for the console renderer. With slo/cost given, or for a bare
    JSONL, the summary is computed again from the records."""
    if path.suffix == ".jsonl":
        records, skipped = read_records_counted(path)
        doc: dict[str, Any] = {"kind": "records", "target": {"url": str(path)}, "config": {},
                               "skipped_lines": skipped}
        config: dict[str, Any] = {}
    else:
        doc = load_document(path)
        _check_is_run(doc, path)
        config = doc.get("config") or {}
        if slo is None and gpu_hour_usd is None and gpus is None:
            return doc
        records, doc["skipped_lines"] = _records_of(path.parent / doc["records_path"])
    window = (doc.get("summary") or {}).get("window") or {}
    doc["summary"] = summarize(
        records, slo=slo if slo is not None else config.get("slo"),
        gpu_hour_usd=gpu_hour_usd if gpu_hour_usd is not None else config.get("gpu_hour_usd"),
        gpus=gpus if gpus is not None else config.get("gpus", 1),
        window=saved_window(window, config))
    return doc


def _records_of(records_path: Path) -> tuple[list[RequestRecord] | RecordTable, int]:
    """A finished run's records for a new summary: the columnar file when the run wrote one (fast,
    and no Python object per request), else the JSONL (with how many lines could not be read)."""
    columnar = columns_path(records_path)
    if is_complete(columnar):
        return read_table(columnar), 0
    return read_records_counted(records_path)


def _check_is_run(doc: dict[str, Any], path: Path) -> None:
    """Other tokenpace files share the schema but are not one run: say what they are for."""
    kind = doc.get("kind", "bench")
    if kind == "sweep":
        steps = path.with_name(path.name.removesuffix(".json") + ".steps")
        raise UsageError(f"{path} is a sweep, not a run: `tokenpace report {path}` shows it; its "
                         f"steps are runs (in {steps}/)")
    if kind == "calibration":
        raise UsageError(f"{path} is a calibration file, not a run: use it with "
                         f"`tokenpace sim --calibration {path}`")
    if kind not in ("bench", "sim"):
        raise UsageError(f"{path} is not a run (kind {kind!r})")
