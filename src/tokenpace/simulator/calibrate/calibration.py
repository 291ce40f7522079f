"""The calibration file: fitted step-time parameters, the engine they were fitted on, and how well.

One versioned JSON document (``kind: "calibration"``, ``schema_version`` 14). It holds everything
``tokenpace sim --calibration`` needs, resolved, so that it runs without the files it was made from
(the GGUF model, the hardware JSON): the model's shape, the hardware, the weight and KV precisions,
the engine's limits when they were given, the roofline parameters, and a closed-loop client's
measured turnaround and the gap between its first sends (the simulator's clients copy both). Besides: the fit (method,
residuals, how well each parameter is determined) and its source (the run, its load and workload).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tokenpace._version import __version__
from tokenpace.errors import UsageError
from tokenpace.files import write_whole
from tokenpace.simulator.catalog import GPU, ModelSpec, Precision
from tokenpace.simulator.step_price import RooflineParams

# 2: roofline gains token_overhead_s and row_group; 3: row_remainder, gemv_row_s and gemm_step_s;
# 4: row_remainder may be "gemv-pass"; 5: decode_mfu; 6: arrival_s; 7: row_remainder may be "gemv-ubatch";
# 8: decode_delta_s; 9: kv_scan_s; 10: join_window_s; 11: join_after; 12: attention_tile_rows;
# 13: client.first_wave_gap_s; 14: stream_interval_s; 15: head_step_s (older versions are read, without them)
SCHEMA_VERSION = 15
KIND = "calibration"


@dataclass(frozen=True)
class Calibration:
    model: ModelSpec
    hardware: GPU
    weights: Precision
    kv_cache_dtype: Precision
    roofline: RooflineParams
    tp: int = 1
    policy: str | None = None  # None: not stated; the simulator's default applies
    max_num_seqs: int | None = None
    max_batched_tokens: int | None = None
    turnaround_s: float = 0.0  # a closed-loop client's time from an end to its next send
    turnarounds_s: tuple[float, ...] = ()  # its spread (quantiles), copied with a join window
    first_wave_gap_s: float = 0.0  # a closed loop's first requests were sent this far apart
    fit: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION, "kind": KIND,
            "tool": {"name": "tokenpace", "version": __version__},
            "roofline": self.roofline.to_dict(),
            "engine": {"model": self.model.to_dict(), "hardware": self.hardware.to_dict(),
                       "weights": self.weights.to_dict(), "kv_cache_dtype": self.kv_cache_dtype.to_dict(),
                       "tp": self.tp, "policy": self.policy, "max_num_seqs": self.max_num_seqs,
                       "max_batched_tokens": self.max_batched_tokens},
            "client": {"turnaround_s": self.turnaround_s, "first_wave_gap_s": self.first_wave_gap_s,
                       **({"turnarounds_s": list(self.turnarounds_s)} if self.turnarounds_s else {})},
            "fit": self.fit, "source": self.source,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Calibration:
        e = doc["engine"]
        r = doc["roofline"]
        return cls(
            model=ModelSpec.from_dict(e["model"]), hardware=GPU.from_dict(e["hardware"]),
            weights=Precision.from_dict(e["weights"]), kv_cache_dtype=Precision.from_dict(e["kv_cache_dtype"]),
            roofline=RooflineParams(mfu=float(r["mfu"]), mbu=float(r["mbu"]),
                                    step_overhead_s=float(r["step_overhead_s"]),
                                    allreduce_latency_s=_opt_float(r.get("allreduce_latency_s")),
                                    seq_overhead_s=float(r.get("seq_overhead_s", 0.0)),
                                    token_overhead_s=float(r.get("token_overhead_s", 0.0)),
                                    row_group=int(r.get("row_group", 1)),
                                    row_remainder=str(r.get("row_remainder", "pad")),
                                    gemv_row_s=float(r.get("gemv_row_s", 0.0)),
                                    gemm_step_s=float(r.get("gemm_step_s", 0.0)),
                                    head_step_s=float(r.get("head_step_s", 0.0)),
                                    decode_mfu=_opt_float(r.get("decode_mfu")),
                                    arrival_s=float(r.get("arrival_s", 0.0)),
                                    kv_scan_s=float(r.get("kv_scan_s", 0.0)),
                                    attention_tile_rows=int(r.get("attention_tile_rows", 0)),
                                    join_window_s=float(r.get("join_window_s", 0.0)),
                                    join_after=str(r.get("join_after", "arrival")),
                                    stream_interval_s=float(r.get("stream_interval_s", 0.0)),
                                    stream_join_s=float(r.get("stream_join_s", 0.0)),
                                    decode_delta_s=tuple(None if d is None else float(d)
                                                         for d in r.get("decode_delta_s") or ())),
            tp=int(e.get("tp") or 1), policy=e.get("policy"),
            max_num_seqs=_opt_int(e.get("max_num_seqs")), max_batched_tokens=_opt_int(e.get("max_batched_tokens")),
            turnaround_s=float((doc.get("client") or {}).get("turnaround_s", 0.0)),
            turnarounds_s=tuple(float(t) for t in (doc.get("client") or {}).get("turnarounds_s") or ()),
            first_wave_gap_s=float((doc.get("client") or {}).get("first_wave_gap_s", 0.0)),
            fit=doc.get("fit") or {}, source=doc.get("source") or {},
        )


def write_calibration(calibration: Calibration, path: str | Path) -> Path:
    return write_whole(path, orjson.dumps(calibration.to_dict(),
                                          option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")


def load_calibration(path: str | Path) -> Calibration:
    """A calibration file; a one-line UsageError for anything else."""
    label = f"--calibration {path}"
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise UsageError(f"{label}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{label}: cannot read: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{label}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        found = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
        raise UsageError(f"{label}: not a calibration file (kind {found!r}; make one with tokenpace calibrate)")
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise UsageError(f"{label}: schema_version {version!r}; this tokenpace ({__version__}) reads up to "
                         f"{SCHEMA_VERSION}: upgrade tokenpace")
    try:
        cal = Calibration.from_dict(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{label}: invalid calibration ({type(exc).__name__}: {exc})") from None
    r = cal.roofline
    overheads = (r.step_overhead_s, r.seq_overhead_s, r.token_overhead_s, r.gemv_row_s, r.gemm_step_s, r.arrival_s,
                 r.kv_scan_s, r.head_step_s, *cal.turnarounds_s)
    effs = (r.mfu, r.mbu) + (() if r.decode_mfu is None else (r.decode_mfu,))
    if not all(0 < v < float("inf") for v in effs) or \
            not all(0 <= v < float("inf") for v in overheads) or not 0 <= cal.turnaround_s < 60 or \
            not 0 <= cal.first_wave_gap_s < 1:
        raise UsageError(f"{label}: invalid roofline parameters {r.to_dict()}")
    return cal


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)
