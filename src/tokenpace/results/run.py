"""``RunResult``: what every run produces, measured (``bench``), simulated (``sim``) or, coming,
observed from a production log. One type, so that the result document, the sweep and the reports
never ask which runner made it.

Sections a kind does not have stay None: a simulation has no load generator to judge (``load``),
no preflight and no wall-clock start; a measured run has no simulated ``engine`` section and no
engine timeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenpace.metrics.window import Window
from tokenpace.record import RequestRecord
from tokenpace.results.status import RunStatus, run_status

KINDS = ("bench", "sim")  # "observed" (records from a production log) is planned


@dataclass
class RunResult:
    config: Any  # BenchConfig (bench) or SimRunConfig (sim): both have to_dict(); see load_config
    target: dict[str, Any]
    # bench: a JournalRecords (read from the JSONL when iterated; results.records), in the order the
    # requests ended; sim: a list in request order (a JournalRecords with run_sim(hold_records=False))
    records: Sequence[RequestRecord]
    summary: dict[str, Any]
    result_path: Path
    records_path: Path
    kind: str = "bench"
    load: dict[str, Any] | None = None  # the load generator's report; None: no generator (sim)
    window_ns: Window | None = None  # the steady-state window; None: the default one
    interrupted: bool = False
    started_utc: str | None = None  # None: a simulation reads no clock
    workload_info: dict[str, Any] | None = None  # what the workload was (the document's `workload`)
    preflight: dict[str, Any] | None = None  # the preflight request, reported apart (bench)
    engine_metrics: dict[str, Any] | None = None  # --scrape-metrics: tokenpace.observe's section
    engine: dict[str, Any] | None = None  # sim: the resolved engine, its memory, what it did
    timeline_path: Path | None = None  # sim: the engine timeline JSONL beside the result
    wall_s: float = 0.0  # how long a simulation took; printed, never saved (not deterministic)
    sim: Any = None  # sim: the simulator's in-memory SimResult (timeline rows, stats)
    # Figures a sweep's step entry takes from the records (goodput under each preset, achieved
    # load), kept where the records were: a step simulated in a fan-out's worker arrives without them.
    record_figures: dict[str, Any] | None = None

    @property
    def load_config(self) -> Any:
        """The BenchConfig holding the load and workload options (a SimRunConfig keeps it in ``load``)."""
        return self.config.load if self.kind == "sim" else self.config

    @property
    def status(self) -> RunStatus:
        """ok, failed, invalid or interrupted, and why (``results.status``: the one rule)."""
        return run_status(self.summary, interrupted=self.interrupted, load=self.load)
