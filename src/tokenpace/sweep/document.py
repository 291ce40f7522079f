"""The sweep file: one JSON document (``kind: "sweep"``, the result family's schema version) with
the configuration, every step (its whole summary and its own result file's path), how the rates
were chosen, and the analysis. Written atomically after every step.

Everything the sweep report plots is in it: per step ``load.value`` (the offered load),
``summary`` (throughput, latency percentiles, goodput, cost), ``status``, ``group`` (the --vary
combination) and per combination ``analysis[group].knee`` / ``max_goodput`` / ``recommendations``;
with ``--vary stream=on,off``, ``perceived``: streamed against not streamed, load by load (``sweep.perceived``).
"""

from __future__ import annotations

from typing import Any

import orjson

from tokenpace._version import __version__
from tokenpace.files import write_whole

SWEEP_KIND = "sweep"


def sweep_document(result: Any) -> dict[str, Any]:
    from tokenpace.results import SCHEMA_VERSION  # the one version of the result family

    c = result.config
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": SWEEP_KIND,
        "tool": {"name": "tokenpace", "version": __version__},
        "started_utc": result.started_utc,
        "interrupted": result.interrupted,
        "config": c.to_dict(),
        "slo": c.base.slo,
        "rate_choice": result.rate_choice,
        "steps": result.steps,
        "analysis": result.analysis,
        "comparison": result.comparison,
        "perceived": result.perceived,
    }


def sweep_header_document(config: Any) -> dict[str, Any]:
    """What the sweep file will say of its configuration, before any step has run (the console's
    header): the date is now for a measured sweep, none for a simulated one (it reads no clock)."""
    from datetime import datetime, timezone

    return {"tool": {"name": "tokenpace", "version": __version__}, "config": config.to_dict(),
            "slo": config.base.slo, "interrupted": False,
            "started_utc": None if config.sim is not None
            else datetime.now(timezone.utc).isoformat(timespec="seconds")}


def write_sweep(result: Any) -> None:
    write_whole(result.path, orjson.dumps(sweep_document(result), option=orjson.OPT_INDENT_2) + b"\n",
                what="the sweep file")
