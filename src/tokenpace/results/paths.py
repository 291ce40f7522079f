"""Where a run's files go: the result JSON and, beside it, the per-request JSONL."""

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
