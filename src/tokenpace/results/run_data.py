"""A saved run with everything a rich report needs: the document, its records and, for a
simulation, the engine timeline. ``load_run`` (reload.py) stays the loader of the document; this
adds the files that sit beside it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tokenpace.record import RequestRecord
from tokenpace.recordtable import RecordTable
from tokenpace.results.columnar import columns_path
from tokenpace.results.columnar_read import is_complete, read_table
from tokenpace.results.records import read_records_counted
from tokenpace.results.reload import load_run_and_records


@dataclass
class RunData:
    path: Path
    doc: dict[str, Any]
    # The records: a ``RecordTable`` when the run wrote a whole columnar file, else from the JSONL.
    records: list[RequestRecord] | RecordTable = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)  # engine timeline rows (sim)
    notes: list[str] = field(default_factory=list)  # what could not be read, in plain words

    @property
    def label(self) -> str:
        return self.path.name


def load_run_data(path: str | Path, *, slo: str | None = None, gpu_hour_usd: float | None = None,
                  gpus: int | None = None, token_prices: dict | None = None, table: bool = False) -> RunData:
    """The document (re-judged when slo/cost are given), its records and engine timeline.

    A missing records or timeline file is not an error: the report says what it could not show.
    ``table``: the records as a ``RecordTable`` from the columnar file when the run wrote a whole
    one (what the HTML report draws from: seconds at a million requests), else from the JSONL."""
    path = Path(path)
    doc, summarized = load_run_and_records(path, slo=slo, gpu_hour_usd=gpu_hour_usd, gpus=gpus,
                                           token_prices=token_prices)
    data = RunData(path=path, doc=doc)
    records_file = path if path.suffix == ".jsonl" else path.parent / str(doc.get("records_path") or "")
    columnar = columns_path(records_file) if path.suffix != ".jsonl" and doc.get("records_path") else None
    if table and columnar is not None and is_complete(columnar):
        # A large run's plots without its objects (the table just summarized, when it was).
        data.records = (summarized if isinstance(summarized, RecordTable)
                        else read_table(columnar, chunks=False))
    elif path.suffix == ".jsonl" or (doc.get("records_path") and records_file.is_file()):
        data.records = summarized if isinstance(summarized, list) else read_records_counted(records_file)[0]
    else:
        data.notes.append(f"records file {records_file.name} not found: per-request plots are missing")
    engine = doc.get("engine") or {}
    if engine.get("timeline_path"):
        timeline_file = path.parent / engine["timeline_path"]
        if timeline_file.is_file():
            data.timeline = read_timeline(timeline_file)
        else:
            data.notes.append(f"engine timeline {timeline_file.name} not found")
    return data


def read_timeline(path: Path) -> list[dict[str, Any]]:
    """Engine timeline rows; a torn last line (killed run) is skipped."""
    rows = []
    for line in path.read_bytes().splitlines():
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows
