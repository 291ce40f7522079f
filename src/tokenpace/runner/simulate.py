"""`run_sim`: a benchmark run in virtual time, from bench's load and workload options to result files.

The same ``WorkloadSpec`` and ``plan_requests`` that feed ``tokenpace bench`` produce the requests
(lengths and arrival offsets; the prompt text is unused), the engine simulator serves them, and the
records go through the same ``summarize`` and result-file writer as a measured run. What bench's
load generator does around the requests is mirrored in virtual time, from t = 0:

- closed loop (no ``rate``): ``concurrency`` clients, bounded by count or by duration;
- open loop (``rate``): the plan's arrival offsets, capped by ``concurrency`` when given; a
  duration run issues the arrivals before ``warmup + duration``;
- warmup: the first ``warmup_requests`` requests, or those scheduled before ``warmup_s``, sent in
  addition to the measured ones and marked ``warmup``;
- sending ends when the count is reached (closed loop: when the last request ends; open loop: at
  the last send) or at the deadline; requests still in flight ``grace_s`` later are cancelled, and
  a request running past ``timeout_s`` times out: their records keep the tokens delivered until
  then. These two are applied to the records after the run: exact for the grace cut (everything
  in flight ends at that one instant), an approximation for timeouts (the simulated engine keeps
  serving a timed-out request instead of aborting it, so later requests see slightly more load);
- window: as bench's, ``[warmup_s, min(warmup_s + duration, end of sending)]`` for duration runs,
  the default (first sent to last done) for count runs.

Nothing here reads a clock: the same configuration gives the same files, byte for byte.
"""

from __future__ import annotations

import dataclasses
import os
import time
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import orjson

from tokenpace.config import BenchConfig
from tokenpace.errors import UsageError
from tokenpace.metrics import parse_slo, summarize
from tokenpace.record import RequestRecord
from tokenpace.runner.paths import result_paths
from tokenpace.runner.sink import RecordSink
from tokenpace.simulator import SimConfig, SimRequest, SimResult, simulate
from tokenpace.workload import WorkloadSpec, parse_length, plan_requests

NS = 1_000_000_000
SHARED_PREFIX_GROUP = "shared-prefix"
# BenchConfig fields that describe a measured target; a simulation has none.
_TARGET_FIELDS = ("url", "model", "api", "stream", "api_key_env", "server_tokens_per_chunk")


@dataclass
class SimRunConfig:
    """``load``: bench's load, workload, SLO and output options (its target fields are unused).
    ``engine``: what is simulated; its load fields (concurrency, max_in_flight, stop_issuing_s,
    seed) are filled in from ``load``. ``shared_prefix_tokens``: every prompt starts with the same
    this-many tokens, prepended to the workload's input length (as vLLM's ``--random-prefix-len``)."""

    load: BenchConfig = field(default_factory=BenchConfig)
    engine: SimConfig = field(default_factory=SimConfig)
    shared_prefix_tokens: int = 0

    def validate(self) -> SimRunConfig:
        self.load.validate()
        if self.shared_prefix_tokens < 0:
            raise UsageError(f"--shared-prefix-tokens must be >= 0, not {self.shared_prefix_tokens}")
        return self

    def engine_for_run(self) -> SimConfig:
        c = self.load
        if c.rate is None:
            load = dict(concurrency=c.effective_concurrency(), max_in_flight=None)
        else:
            load = dict(concurrency=None, max_in_flight=c.concurrency)
        stop = None if c.duration_s is None else c.warmup_s + c.duration_s
        try:
            return dataclasses.replace(self.engine, **load, stop_issuing_s=stop, seed=c.seed, timeline=True)
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    def to_dict(self) -> dict[str, Any]:
        load = {k: v for k, v in self.load.to_dict().items() if k not in _TARGET_FIELDS}
        return {**load, "shared_prefix_tokens": self.shared_prefix_tokens, "engine": self.engine.to_dict()}


@dataclass
class SimRunResult:
    config: SimRunConfig
    target: dict[str, Any]
    records: list[RequestRecord]
    summary: dict[str, Any]
    engine: dict[str, Any]  # the resolved engine, its memory, and what it did
    result_path: Path
    records_path: Path
    timeline_path: Path
    window_ns: tuple[int, int] | None = None
    wall_s: float = 0.0  # how long the simulation took; printed, never saved (it is not deterministic)
    sim: SimResult | None = None
    kind: str = "sim"
    interrupted: bool = False
    started_utc: str | None = None  # a simulation has no wall-clock start
    load: dict[str, Any] | None = None  # no load generator to judge


def run_sim(config: SimRunConfig) -> SimRunResult:
    config.validate()
    c = config.load
    slo = parse_slo(c.slo) if c.slo else None
    workload = WorkloadSpec(parse_length(c.input_tokens, flag="--input-tokens"),
                            parse_length(c.output_tokens, flag="--output-tokens"),
                            seed=c.seed, rate=c.rate, arrival=c.arrival, burstiness=c.burstiness)
    engine = config.engine_for_run()
    result_path, records_path = result_paths(c.out, kind="sim")
    timeline_path = records_path.with_name(records_path.name.replace(".records.jsonl", ".timeline.jsonl"))

    requests = _sim_requests(workload, config.shared_prefix_tokens, open_loop=c.rate is not None)
    measured = c.effective_requests()
    if measured is not None:
        requests = islice(requests, measured + c.warmup_requests)
    t0 = time.perf_counter()
    try:
        sim = simulate(engine, requests)
    except ValueError as exc:  # UsageError is one: the message names the bad part
        raise UsageError(str(exc)) from None
    wall_s = time.perf_counter() - t0

    records = sim.records
    for r in records:
        r.warmup = r.index < c.warmup_requests or (c.warmup_s > 0 and r.scheduled_ns < c.warmup_s * NS)
    send_end_ns = _send_end_ns(config, sim)
    cancel_at_ns = None if send_end_ns is None else send_end_ns + round(c.grace_s * NS)
    for r in records:
        apply_client_limits(r, timeout_s=c.timeout_s, cancel_at_ns=cancel_at_ns)
    window = _window(c, send_end_ns)
    gpus = c.gpus if c.gpus != 1 else engine.tp  # one engine of tp GPUs unless told otherwise
    summary = summarize(records, slo=slo, gpu_hour_usd=c.gpu_hour_usd, gpus=gpus, window=window)
    result = SimRunResult(config=config, target=target_of(sim), records=records, summary=summary,
                          engine=engine_section(sim, timeline_path, result_path), result_path=result_path,
                          records_path=records_path, timeline_path=timeline_path, window_ns=window,
                          wall_s=wall_s, sim=sim)
    write_sim_files(result)
    return result


def _sim_requests(workload: WorkloadSpec, prefix: int, *, open_loop: bool) -> Iterator[SimRequest]:
    for p in plan_requests(workload):
        yield SimRequest(prompt_tokens=prefix + p.input_tokens, output_tokens=p.output_tokens,
                         arrival_s=p.offset_s if open_loop else None,
                         prefix_group=SHARED_PREFIX_GROUP if prefix else None, prefix_tokens=prefix)


def _send_end_ns(config: SimRunConfig, sim: SimResult) -> int | None:
    """When bench's load generator would stop sending; None when every request is awaited."""
    c, stop_s = config.load, config.engine_for_run().stop_issuing_s
    if c.rate is None:
        return None if stop_s is None else round(stop_s * NS)  # count-bounded workers await theirs
    never_sent = sim.stats["requests"] - sim.stats["sent"]
    if never_sent and stop_s is not None:
        return round(stop_s * NS)  # still waiting for a slot under the cap at the deadline
    sends = [r.sent_ns for r in sim.records if r.sent_ns is not None]
    return max(sends) if sends else None


def _window(c: BenchConfig, send_end_ns: int | None) -> tuple[int, int] | None:
    if c.duration_s is None:
        return None
    start = round(c.warmup_s * NS)
    end = min(start + round(c.duration_s * NS), send_end_ns if send_end_ns is not None else start)
    return (start, end) if end > start else None


def apply_client_limits(r: RequestRecord, *, timeout_s: float, cancel_at_ns: int | None) -> None:
    """What bench's client would have recorded: a request still streaming at ``sent + timeout_s``
    times out; one still in flight at ``cancel_at_ns`` (end of the grace period) is cancelled. Its
    record keeps the chunks delivered until then."""
    if r.done_ns is None or r.sent_ns is None or r.status != "ok":
        return
    timeout_ns = r.sent_ns + round(timeout_s * NS)
    if cancel_at_ns is not None and cancel_at_ns < timeout_ns and r.done_ns > cancel_at_ns:
        _cut(r, cancel_at_ns, "cancelled", None, None)
    elif r.done_ns > timeout_ns:
        _cut(r, timeout_ns, "timeout", "total_timeout", f"no complete response within timeout_s={timeout_s:g}")


def _cut(r: RequestRecord, at_ns: int, status: str, kind: str | None, message: str | None) -> None:
    keep = bisect_right(r.chunk_ns, at_ns)
    r.chunk_ns, r.chunk_tokens = r.chunk_ns[:keep], r.chunk_tokens[:keep]
    if keep == 0:
        r.first_token_ns = r.first_content_ns = r.last_token_ns = None
    else:
        r.last_token_ns = r.chunk_ns[-1]
    r.output_tokens = sum(r.chunk_tokens)
    r.done_ns, r.status, r.error_kind, r.error_message = at_ns, status, kind, message  # type: ignore[assignment]
    r.finish_reason = None


def target_of(sim: SimResult) -> dict[str, Any]:
    cfg, res = sim.config, sim.config["resolved"]
    return {
        "simulated": True, "builtin": False, "url": None,
        "model": res["model"]["id"], "gpu": res["gpu"]["id"], "weights": res["weights"]["id"],
        "kv_cache_dtype": res["kv_cache_dtype"]["id"], "tp": cfg["tp"], "policy": cfg["policy"],
        "prefix_caching": cfg["prefix_caching"], "spec_decode": cfg["spec_decode"] is not None,
    }


def engine_section(sim: SimResult, timeline_path: Path, result_path: Path) -> dict[str, Any]:
    """The resolved engine (catalog entries, memory, predictor) and what it did over the run."""
    cfg = dict(sim.config)
    resolved = cfg.pop("resolved")
    stats = dict(sim.stats)
    timeline = stats.pop("timeline", None)
    spec = cfg.get("spec_decode")
    if spec is not None:
        from tokenpace.simulator import SpecDecodeConfig

        s = SpecDecodeConfig(**spec)
        spec = {**spec, "expected_tokens_per_step": s.expected_tokens_per_step,
                "low_load_speedup": s.low_load_speedup}
    return {
        "config": {**cfg, "spec_decode": spec, "model": resolved["model"], "gpu": resolved["gpu"],
                   "weights": resolved["weights"], "kv_cache_dtype": resolved["kv_cache_dtype"]},
        "memory": resolved["memory"],
        "stats": {**stats, **(timeline or {})},
        "timeline_path": os.path.relpath(timeline_path, result_path.parent),
        "timeline_columns": "one row per scheduled batch (a row may cover several identical decode steps): "
                            "see tokenpace.simulator.TimelineRow",
    }


def write_sim_files(result: SimRunResult) -> None:
    """Records and timeline JSONL beside the result JSON (written last, as bench does)."""
    from tokenpace.reports.result_file import write_result  # reports sit above the runner

    with RecordSink(result.records_path) as sink:
        for r in result.records:
            sink.write(r)
    result.timeline_path.parent.mkdir(parents=True, exist_ok=True)
    with open(result.timeline_path, "wb") as fh:
        for row in result.sim.timeline if result.sim else ():
            fh.write(orjson.dumps(row.to_dict()) + b"\n")
    write_result(result)
