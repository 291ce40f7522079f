"""The result file: one versioned JSON document per run, beside its per-request JSONL.

Schema (version 1) is documented in the README; ``kind`` is "bench" or "sim". Readers accept any
version up to SCHEMA_VERSION and refuse newer ones with a clear message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from tokenpace._version import __version__
from tokenpace.errors import UsageError
from tokenpace.files import write_whole

SCHEMA_VERSION = 1


def result_document(result: Any) -> dict[str, Any]:
    """The JSON document for a BenchResult or a SimRunResult (records stay in the JSONL).

    Both share every section; a simulation (``kind: "sim"``) has ``started_utc`` null (nothing in it
    reads a clock, so the same inputs give the same bytes), ``load_generator`` null (no client to
    judge), a ``target`` that says ``simulated: true`` with the model, GPU, precisions, TP and
    policy, and an ``engine`` section: the resolved engine, its memory and what it did, with the
    engine timeline in a JSONL beside the result (``engine.timeline_path``).
    """
    kind = getattr(result, "kind", "bench")
    records_rel = os.path.relpath(result.records_path, result.result_path.parent)
    workload = getattr(result, "workload_info", None)
    if workload is None:  # a simulation names its own source
        workload = {"input_tokens": _load_config(result).input_tokens,
                    "output_tokens": _load_config(result).output_tokens,
                    "shared_prefix_tokens": result.config.shared_prefix_tokens,
                    "input_length_source": result.input_length_source}
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "tool": {"name": "tokenpace", "version": __version__},
        "started_utc": result.started_utc,
        "interrupted": result.interrupted,
        "config": result.config.to_dict(),
        "target": result.target,
        "workload": workload,
        "summary": result.summary,
        "load_generator": result.load,
        "preflight": getattr(result, "preflight", None),
        "engine_metrics": getattr(result, "engine_metrics", None),  # --scrape-metrics (tokenpace.observe)
        "records_path": records_rel,
    }
    if kind == "sim":
        doc["engine"] = result.engine
    return doc


def _load_config(result: Any) -> Any:
    """The BenchConfig holding the load and workload options (a SimRunConfig keeps it in ``load``)."""
    return getattr(result.config, "load", result.config)


def write_result(result: Any) -> Path:
    document = orjson.dumps(result_document(result), option=orjson.OPT_INDENT_2) + b"\n"
    return write_whole(result.result_path, document, what="the result file")


def load_document(path: str | Path) -> dict[str, Any]:
    """Read a result JSON file, checking its schema version."""
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory: give a result .json or a records .jsonl") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise UsageError(f"{path} is not a tokenpace result file (no schema_version)")
    version = doc["schema_version"]
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise UsageError(f"{path} has schema_version {version!r}; this tokenpace "
                         f"({__version__}) reads up to {SCHEMA_VERSION}: upgrade tokenpace")
    return doc
