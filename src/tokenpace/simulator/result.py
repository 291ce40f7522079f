"""What a simulation returns: the per-request records, the engine timeline and run statistics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenpace.record import RequestRecord
from tokenpace.simulator.timeline import TimelineRow


@dataclass
class SimResult:
    records: list[RequestRecord]  # in request order; the same type a measured run produces
    timeline: list[TimelineRow]
    stats: dict[str, Any] = field(default_factory=dict)  # engine counters and capacity
    config: dict[str, Any] = field(default_factory=dict)  # the SimConfig and predictor, resolved

    @property
    def duration_s(self) -> float:
        return self.stats.get("sim_end_ns", 0) / 1e9

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "stats": self.stats,
            "records": [r.to_dict() for r in self.records],
            "timeline": [row.to_dict() for row in self.timeline],
        }
