"""The result file: one versioned JSON document per run, beside its per-request JSONL.

Schema (version 1) is documented in the README; ``kind`` is "bench" or "sim". The version field says
how a file reads: readers accept any version up to SCHEMA_VERSION and refuse newer ones with a clear
message. The sweep document shares the version (one family of files).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tokenpace._version import __version__
from tokenpace.errors import UsageError
from tokenpace.files import open_run_file, write_whole

if TYPE_CHECKING:
    from tokenpace.results.run import RunResult

SCHEMA_VERSION = 1


def result_document(result: RunResult) -> dict[str, Any]:
    """The JSON document of a run (records stay in the JSONL).

    Every kind shares every section; a simulation (``kind: "sim"``) has ``started_utc`` null
    (nothing in it reads a clock, so the same inputs give the same bytes), ``load_generator`` null
    (no client to judge), a ``target`` that says ``simulated: true`` with the model, GPU,
    precisions, TP and policy, and an ``engine`` section: the resolved engine, its memory and what
    it did, with the engine timeline in a JSONL beside the result (``engine.timeline_path``).
    """
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": result.kind,
        "tool": {"name": "tokenpace", "version": __version__},
        "started_utc": result.started_utc,
        "interrupted": result.interrupted,
        "config": result.config.to_dict(),
        "target": result.target,
        "workload": result.workload_info,
        "summary": result.summary,
        "load_generator": result.load,
        "preflight": result.preflight,
        "engine_metrics": result.engine_metrics,  # --scrape-metrics (tokenpace.observe)
        "records_path": os.path.relpath(result.records_path, result.result_path.parent),
    }
    if result.engine is not None:
        doc["engine"] = result.engine
    return doc


def write_result(result: RunResult) -> Path:
    document = orjson.dumps(result_document(result), option=orjson.OPT_INDENT_2) + b"\n"
    return write_whole(result.result_path, document, what="the result file")


def load_document(path: str | Path) -> dict[str, Any]:
    """Read a result JSON file, checking its schema version."""
    with open_run_file(path) as fh:
        try:
            data = fh.read()
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise UsageError(f"{path} is not a tokenpace result file (no schema_version)")
    version = doc["schema_version"]
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise UsageError(f"{path} has schema_version {version!r}; this tokenpace "
                         f"({__version__}) reads up to {SCHEMA_VERSION}: upgrade tokenpace")
    return doc
