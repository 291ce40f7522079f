"""Load a saved run for reporting: a result document, or records alone (a partial JSONL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenpace.config import token_prices_of
from tokenpace.errors import UsageError
from tokenpace.record import RequestRecord
from tokenpace.metrics import summarize
from tokenpace.recordtable import RecordTable
from tokenpace.results.columnar import columns_path
from tokenpace.results.columnar_read import is_complete, read_table
from tokenpace.results.document import load_document
from tokenpace.results.records import read_records_counted
from tokenpace.results.window import saved_window


def load_run(path: Path, *, slo: str | None = None, gpu_hour_usd: float | None = None,
             gpus: int | None = None, token_prices: dict[str, Any] | None = None) -> dict[str, Any]:
    """A result document ready for the console renderer. With slo/cost given, or for a bare
    JSONL, the summary is computed again from the records. ``token_prices``: the config's price
    fields (``input_usd_per_mtok``, ``output_usd_per_mtok``, ``cache_price_multipliers``) to price
    the run at instead of the ones it was run with."""
    return load_run_and_records(path, slo=slo, gpu_hour_usd=gpu_hour_usd, gpus=gpus,
                                token_prices=token_prices)[0]


def load_run_and_records(path: Path, *, slo: str | None = None, gpu_hour_usd: float | None = None,
                         gpus: int | None = None, token_prices: dict[str, Any] | None = None
                         ) -> tuple[dict[str, Any], list[RequestRecord] | RecordTable | None]:
    """``load_run``, and the records it summarized again (None when it did not read them), so that
    a report drawing them does not read a million requests twice."""
    if path.suffix == ".jsonl":
        records, skipped = read_records_counted(path)
        if not records:
            raise UsageError(f"{path}: no records yet (an empty file)")
        doc: dict[str, Any] = {"kind": "records", "target": {"url": str(path)}, "config": {},
                               "skipped_lines": skipped, "live": is_live(records)}
        config: dict[str, Any] = {}
    else:
        doc = load_document(path)
        _check_is_run(doc, path)
        config = doc.get("config") or {}
        if slo is None and gpu_hour_usd is None and gpus is None and token_prices is None:
            return doc, None
        records, doc["skipped_lines"] = _records_of(path.parent / doc["records_path"])
    window = (doc.get("summary") or {}).get("window") or {}
    doc["summary"] = summarize(
        records, slo=slo if slo is not None else config.get("slo"),
        gpu_hour_usd=gpu_hour_usd if gpu_hour_usd is not None else config.get("gpu_hour_usd"),
        gpus=gpus if gpus is not None else config.get("gpus", 1),
        window=saved_window(window, config), token_prices=token_prices_of({**config, **(token_prices or {})}))
    return doc, records


def is_live(records: list) -> bool:
    """Records of live traffic (``tokenpace.instrument``, ``tokenpace proxy``): no load schedule
    sent them, so no record has a scheduled time. Their window is the default one: first request
    sent to last done."""
    return all(r.scheduled_ns is None for r in records)


def _records_of(records_path: Path) -> tuple[list[RequestRecord] | RecordTable, int]:
    """A finished run's records for a new summary: the columnar file when the run wrote one (fast,
    and no Python object per request), else the JSONL (with how many lines could not be read)."""
    columnar = columns_path(records_path)
    if is_complete(columnar):
        return read_table(columnar, chunks=False), 0  # the summary reads the chunks part by part
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
