"""Where a run's files go: the result JSON and, beside it, the per-request JSONL (and a
simulation's engine timeline)."""

from __future__ import annotations

import time
from pathlib import Path

DEFAULT_DIR = "tokenpace-runs"


def result_paths(out: str | None, *, kind: str = "bench") -> tuple[Path, Path]:
    """(result.json, result.records.jsonl). Without --out: ./tokenpace-runs/<kind>-<UTC time>.json."""
    if out is None:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        result = Path(DEFAULT_DIR) / f"{kind}-{stamp}.json"
    else:
        result = Path(out)
    stem = result.name[:-5] if result.name.endswith(".json") else result.name
    return result, result.with_name(stem + ".records.jsonl")


def timeline_path(records_path: Path) -> Path:
    """A simulation's engine timeline JSONL, beside its records: ``<stem>.timeline.jsonl``."""
    return records_path.with_name(records_path.name.replace(".records.jsonl", ".timeline.jsonl"))
