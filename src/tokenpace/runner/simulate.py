"""`run_sim`: a benchmark run in virtual time, from bench's load and workload options to result files.

The same ``workload_from_config`` and ``plan_requests`` that feed ``tokenpace bench`` produce the
requests (lengths, arrival offsets, shared-prefix groups, a trace's block ids; the prompt text is
unused), the engine simulator serves them, and the records go through the same ``summarize`` and
result-file writer as a measured run. What bench's load generator does around the requests is
mirrored in virtual time, from t = 0:

- closed loop (no ``rate``, no trace): ``concurrency`` clients, bounded by count or by duration;
- open loop (``rate``, or a trace's times): the plan's arrival offsets, capped by ``concurrency``
  when given; a duration run issues the arrivals before ``warmup + duration``;
- conversations: every session's turns, turn 1 at the session's start (0, or its arrival with
  ``rate``), turn k+1 at turn k's end plus its think time, uncapped (as bench's sessions); a
  count-bounded run sends that many turns in all (default: every turn), a duration run no turn due
  at or after ``warmup + duration``; records are numbered in send order and carry session and turn;
  a turn's prompt begins with the previous turn's prompt and reply, which prefix caching reuses;
- warmup: the first ``warmup_requests`` requests, or those scheduled before ``warmup_s``, sent in
  addition to the measured ones and marked ``warmup``;
- sending ends when the count is reached (closed loop: when the last request ends; open loop: at
  the last send) or at the deadline; requests still in flight ``grace_s`` later are cancelled
  (a count-bounded run with no --timeout awaits every request);
- the client's total and TTFT timeouts apply only when given (bench's 600 s default does not), in
  virtual time: the engine cancels the request at that moment and frees its KV cache, so the
  others get its place; the idle timeout and the grace cut apply to the records after the run
  (``virtual_client.py``; connect timeouts and retries have nothing to act on);
- window: as bench's, the steady-state window of ``tokenpace.runner.steady`` (the same function).

Nothing written reads a clock (the wall time a run took is only returned, to be printed): the same
configuration gives the same files, byte for byte.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from tokenpace.config import BenchConfig
from tokenpace.errors import UsageError
from tokenpace.files import write_whole
from tokenpace.heap import release_freed_memory
from tokenpace.metrics import parse_slo, summarize
from tokenpace.metrics.summary import ROW_BLOCKS_ABOVE
from tokenpace.recordtable import RecordTable
from tokenpace.results import RunResult, result_paths, timeline_path as timeline_path_of, write_result
from tokenpace.results.columnar import columns_path, write_records_table, write_table
from tokenpace.results.columnar_read import read_table
from tokenpace.results.records import JournalRecords
from tokenpace.results.records_jsonl import record_lines
from tokenpace.runner.counting import request_count
from tokenpace.runner.warmup import is_warmup, issuing_s
from tokenpace.runner.sim_progress import SimProgress
from tokenpace.runner.steady import steady_window
from tokenpace.runner.virtual_client import ClientLimits, apply_client_limits
from tokenpace.simulator import SimConfig, SimRequest, SimResult, SpecDecodeConfig, simulate
from tokenpace.simulator.error_band import error_band
from tokenpace.workload import WorkloadSpec, conversations_for, plan_requests
from tokenpace.workload.build import workload_from_config
from tokenpace.workload.plan import engine_block_hashes, planned_lengths
from tokenpace.workload.ramp import ramped_offset_s

NS = 1_000_000_000
# BenchConfig fields that describe a measured target; a simulation has none.
_TARGET_FIELDS = ("url", "model", "api", "stream", "api_key_env", "server_tokens_per_chunk")
_IN_MEMORY_SECTION = ("kv_blocks", "kv_capacity_tokens", "kv_bytes_per_token_per_gpu", "weight_bytes_per_gpu")


@dataclass
class SimRunConfig:
    """``load``: bench's load, workload, SLO and output options (its target fields are unused).
    ``engine``: what is simulated; its load fields (concurrency, max_in_flight, stop_issuing_s,
    seed) are filled in from ``load``. ``shared_prefix_tokens``: every prompt starts with the same
    this-many tokens, before the workload's input length: shorthand for bench's
    ``--shared-prefix groups=1,prefix-tokens=N``. ``calibration``: when ``engine`` came from a
    calibration file, its scope (``calibrate.coverage.calibration_scope``): the run then says
    whether it stayed within the decode batches the calibration saw."""

    load: BenchConfig = field(default_factory=BenchConfig)
    engine: SimConfig = field(default_factory=SimConfig)
    shared_prefix_tokens: int = 0
    calibration: dict[str, Any] | None = None

    def validate(self) -> SimRunConfig:
        self.load.validate()
        if self.shared_prefix_tokens < 0:
            raise UsageError(f"--shared-prefix-tokens must be >= 0, not {self.shared_prefix_tokens}")
        if self.shared_prefix_tokens and self.load.shared_prefix:
            raise UsageError("give --shared-prefix-tokens or --shared-prefix, not both")
        return self

    def workload_config(self) -> BenchConfig:
        """``load`` with the shared-prefix shorthand spelled out."""
        if not self.shared_prefix_tokens:
            return self.load
        return dataclasses.replace(self.load, shared_prefix=f"groups=1,prefix-tokens={self.shared_prefix_tokens}")

    def engine_for_run(self, open_loop: bool | None = None) -> SimConfig:
        c = self.load
        if open_loop is None:
            open_loop = c.rate is not None or bool(c.trace)
        if c.conversations:  # sessions are not capped, as in bench
            load = dict(concurrency=None, max_in_flight=None)
        elif open_loop:
            load = dict(concurrency=None, max_in_flight=c.concurrency)
        else:
            load = dict(concurrency=c.effective_concurrency(), max_in_flight=None)
        stop = issuing_s(c)
        ramp = c.ramp_s if load["concurrency"] is not None else 0.0  # an open loop's ramp is in its arrivals
        try:
            return dataclasses.replace(self.engine, **load, stop_issuing_s=stop, ramp_s=ramp, seed=c.seed,
                                       timeline=True, timeout_s=c.timeout_s, ttft_timeout_s=c.ttft_timeout_s)
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    def to_dict(self) -> dict[str, Any]:
        load = {k: v for k, v in self.load.to_dict().items() if k not in _TARGET_FIELDS}
        return {**load, "shared_prefix_tokens": self.shared_prefix_tokens,
                "engine": self.engine_for_run().to_dict()}


SimRunResult = RunResult  # the name before runs of every kind shared one type (kept for callers)


def run_sim(config: SimRunConfig, *, write: bool = True, hold_records: bool = True,
            members: list[dict[str, Any]] | None = None) -> RunResult:
    """Simulate the run and write its files (``write=False``: only return it, for a process that
    computes a sweep's step and hands it back to be saved by ``moved`` and ``write_sim_files``).

    ``hold_records=False`` (with ``write``; what ``tokenpace sim`` does): the records are written
    (JSONL and columnar file) as soon as the simulation ends and dropped, the summary is made from
    the columnar file (its chunks read part by part from disk), and ``RunResult.records`` reads
    the JSONL when asked (``results.records.JournalRecords``): the records and the summary's arrays
    are then never in memory at once. The files and the summary are the same either way.
    ``members``: the figures of the same run's other step-noise members (``sim_members``): the result
    then says how far each figure moved between them (``engine.members``)."""
    config.validate()
    c = config.load
    slo = parse_slo(c.slo) if c.slo else None
    workload = workload_from_config(config.workload_config())
    engine = config.engine_for_run(workload.open_loop)
    result_path, records_path = result_paths(c.out, kind="sim")
    timeline_path = timeline_path_of(records_path)

    max_requests = None
    if workload.conversations is not None:
        requests: Iterable[SimRequest] = _session_requests(workload)
        measured = _conversation_count(c, workload.conversations.total_requests)
        max_requests = None if measured is None else measured + c.warmup_requests
    else:
        requests = _sim_requests(workload, engine.block_size, c.ramp_s)
        measured = request_count(c, workload)  # the same rule as bench: a trace or dataset is sent whole
        if measured is not None:  # bounded by count (or by a finite plan); otherwise drawn until the stop time
            requests = list(islice(requests, measured + c.warmup_requests))
        elif workload.finite_requests is not None:
            requests = list(requests)
    t0 = time.perf_counter()
    total = (None if measured is None else measured + c.warmup_requests) if max_requests is None else max_requests
    progress = SimProgress(mode=c.progress_mode if c.progress else "off", total=total,
                           duration_s=issuing_s(c))
    try:
        with progress:
            sim = simulate(engine, requests, max_requests=max_requests, on_world=progress.watch)
    except ValueError as exc:  # UsageError is one: the message names the bad part
        raise UsageError(str(exc)) from None
    wall_s = time.perf_counter() - t0
    del progress, requests  # the progress view holds the simulation's world (every record by index)

    records = sim.records
    for r in records:
        r.warmup = is_warmup(r.index, r.scheduled_ns, c.warmup_requests, c.warmup_s)  # virtual time starts at 0
    turns = None if workload.conversations is None else workload.conversations.total_requests
    send_end_ns = _send_end_ns(engine, sim, turns)
    grace_s = c.end_grace_s(by_count=c.duration_s is None)  # the same rule as bench
    cancel_at_ns = None if send_end_ns is None or grace_s is None else send_end_ns + round(grace_s * NS)
    limits = ClientLimits.of(c)
    if not limits.unset or cancel_at_ns is not None:  # else no record is cut: no call per record
        for r in records:
            apply_client_limits(r, limits, cancel_at_ns)
    closed = engine.concurrency is not None
    window = steady_window(records, closed_loop=closed, concurrency=engine.concurrency if closed else None,
                           start_ns=0, warmup_s=c.warmup_s, ramp_s=c.ramp_s, duration_s=c.duration_s,
                           send_end_ns=send_end_ns)
    gpus = c.gpus if c.gpus != 1 else engine.tp  # one engine of tp GPUs unless told otherwise
    lean = write and not hold_records
    if lean:
        # The records to disk now, then out of memory: the summary reads the columnar file.
        _write_jsonl(records_path, records)
        columns = columns_path(records_path)
        # Part by part, ColumnarWriter's batches; up to a size the summary takes whole, the columns
        # made for the parts are kept for it (and the chunks read back from the parts as it goes).
        whole = len(records) <= ROW_BLOCKS_ABOVE
        table = write_records_table(columns, records) if whole else write_table(columns, records)
        kept: Any = JournalRecords(records_path, len(records))
        sim.records = []
        del records
        gc.collect()  # the records' lists are freed now, before the summary's arrays are made
        release_freed_memory()
        if not whole:
            table = read_table(columns, chunks=False)  # by row blocks
    else:
        # The records as columns, made once: the summary works on whole arrays (the same figures as
        # from the records: a property test holds them to it) and the columnar file is these arrays.
        kept = records
        table = RecordTable.from_records(records)
    summary = summarize(table, slo=slo, gpu_hour_usd=c.gpu_hour_usd, gpus=gpus, window=window,
                        token_prices=c.token_prices())
    engine_doc = engine_section(sim, timeline_path, result_path, calibrated=config.calibration is not None)
    if members is not None:
        from tokenpace.runner.sim_members import figures, members_section

        engine_doc["members"] = members_section(figures(summary), members, engine.step_noise, engine.noise_seed)
    if config.calibration is not None:
        from tokenpace.simulator.calibrate.coverage import coverage  # numpy, only when calibrated

        engine_doc["calibration"] = coverage(config.calibration, sim.timeline)
    workload_info = {"input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
                     "shared_prefix_tokens": config.shared_prefix_tokens,
                     "input_length_source": f"{workload.input_length_source}; the simulator takes "
                                            "these counts as exact"}
    result = RunResult(kind="sim", config=config, target=target_of(sim), records=kept,
                       summary=summary, engine=engine_doc, result_path=result_path,
                       records_path=records_path, timeline_path=timeline_path, window_ns=window,
                       wall_s=wall_s, sim=sim, workload_info=workload_info)
    if lean:
        _write_jsonl(result.timeline_path, sim.timeline)
        write_result(result)
    elif write:
        write_sim_files(result, table)
    return result


def moved(result: RunResult, load: BenchConfig) -> RunResult:
    """``result`` as if it had been run with ``load``, which differs from its own only in where it
    is saved and how it shows progress (``out``, ``progress``, ``progress_step``): a sweep step
    computed in another process or on another node, saved under the name the serial sweep gives it."""
    def how(c: BenchConfig) -> BenchConfig:
        return dataclasses.replace(c, out=None, progress=False, progress_step=None, progress_mode="auto")

    if how(load) != how(result.config.load):
        raise ValueError("moved: the run was made with other load settings than the ones it is saved under")
    result_path, records_path = result_paths(load.out, kind="sim")
    timeline_path = timeline_path_of(records_path)
    engine = dict(result.engine or {}, timeline_path=os.path.relpath(timeline_path, result_path.parent))
    return dataclasses.replace(result, config=dataclasses.replace(result.config, load=load),
                               result_path=result_path, records_path=records_path,
                               timeline_path=timeline_path, engine=engine)


def _sim_requests(workload: WorkloadSpec, block_size: int, ramp_s: float = 0.0) -> Iterator[SimRequest]:
    """The plan's requests as the engine sees them: lengths, arrival (open loop, ramped as bench
    ramps it), shared prefix. In a closed loop the requests of one shape are one object (a
    ``SimRequest`` is frozen; 20,000 of them took 0.03 CPU-s to build). A synthetic workload's
    lengths and arrivals are drawn without planning its requests (``planned_lengths``)."""
    lengths = planned_lengths(workload)
    if lengths is None:
        return _planned_sim_requests(workload, block_size, ramp_s)
    if workload.open_loop:
        return (SimRequest(prompt_tokens=n_in, output_tokens=n_out, arrival_s=ramped_offset_s(offset, ramp_s))
                for n_in, n_out, offset in lengths)
    shapes: dict[tuple[int, int], SimRequest] = {}

    def shaped(n_in: int, n_out: int) -> SimRequest:
        request = shapes.get((n_in, n_out))
        if request is None:
            request = shapes[n_in, n_out] = SimRequest(prompt_tokens=n_in, output_tokens=n_out)
        return request

    return (shaped(n_in, n_out) for n_in, n_out, _ in lengths)


def _planned_sim_requests(workload: WorkloadSpec, block_size: int, ramp_s: float) -> Iterator[SimRequest]:
    shapes: dict[tuple, SimRequest] = {}
    for p in plan_requests(workload, text=False):
        hashes = engine_block_hashes(p, block_size)
        if workload.open_loop or hashes is not None:
            yield SimRequest(prompt_tokens=p.input_tokens, output_tokens=p.output_tokens,
                             arrival_s=ramped_offset_s(p.offset_s, ramp_s) if workload.open_loop else None,
                             prefix_group=p.prefix_group, prefix_tokens=p.prefix_tokens,
                             prompt_block_hashes=hashes)
            continue
        shape = (p.input_tokens, p.output_tokens, p.prefix_group, p.prefix_tokens)
        request = shapes.get(shape)
        if request is None:
            request = shapes[shape] = SimRequest(prompt_tokens=p.input_tokens, output_tokens=p.output_tokens,
                                                 prefix_group=p.prefix_group, prefix_tokens=p.prefix_tokens)
        yield request


def _session_requests(workload: WorkloadSpec) -> list[SimRequest]:
    """Every turn of every session, session by session. A turn's prompt is the session's history
    (earlier prompts and replies) plus its new message; the simulator shares the history through
    the session itself (see SimRequest), so no prefix group is given."""
    out = []
    for conv in conversations_for(workload):
        while not conv.done:
            turn = conv.next_turn(None)  # replies: their planned lengths, as bench's history
            out.append(SimRequest(prompt_tokens=turn.input_tokens, output_tokens=turn.output_tokens,
                                  arrival_s=conv.start_offset_s if turn.turn == 1 else None,
                                  session=turn.session, turn=turn.turn, think_time_s=turn.think_time_s))
    return out


def _conversation_count(c: BenchConfig, finite: int) -> int | None:
    """Measured turns, as bench counts them: --requests, else (no --duration) every turn after
    warmup; never more than the sessions hold."""
    wanted = finite - c.warmup_requests if c.requests is None and c.duration_s is None else c.requests
    if wanted is not None:
        wanted = min(wanted, finite - c.warmup_requests)
        if wanted < 1:
            raise UsageError(f"the workload holds {finite} requests: nothing left to measure after "
                             f"--warmup {c.warmup_requests}")
    return wanted


def _send_end_ns(engine: SimConfig, sim: SimResult, turns: int | None = None) -> int | None:
    """When bench's load generator would stop sending; None when every request is awaited.
    ``turns``: a conversation run's turns in all."""
    stop_s = engine.stop_issuing_s
    if turns is not None:  # sessions: at the deadline, unless every turn of every one ended before
        if stop_s is None:
            return None
        stop_ns = round(stop_s * NS)
        return min(stop_ns, sim.stats["sim_end_ns"]) if sim.stats["sent"] >= turns else stop_ns
    if engine.concurrency is not None:  # closed loop
        return None if stop_s is None else round(stop_s * NS)  # count-bounded workers await theirs
    never_sent = sim.stats["requests"] - sim.stats["sent"]
    if never_sent and stop_s is not None:
        return round(stop_s * NS)  # still waiting for a slot under the cap at the deadline
    sends = [r.sent_ns for r in sim.records if r.sent_ns is not None]
    return max(sends) if sends else None


def target_of(sim: SimResult) -> dict[str, Any]:
    cfg, res = sim.config, sim.config["resolved"]
    return {
        "simulated": True, "builtin": False, "url": None,
        "model": res["model"]["id"], "gpu": res["gpu"]["id"], "weights": res["weights"]["id"],
        "kv_cache_dtype": res["kv_cache_dtype"]["id"], "tp": cfg["tp"], "policy": cfg["policy"],
        "prefix_caching": cfg["prefix_caching"], "spec_decode": cfg["spec_decode"] is not None,
        "kv_dtype_implied": cfg.get("kv_dtype_implied", False),
        "engine_preset": (cfg.get("engine") or {}).get("preset"),
    }


def engine_section(sim: SimResult, timeline_path: Path, result_path: Path, calibrated: bool = False) -> dict[str, Any]:
    """The resolved engine (catalog entries, memory, predictor) and what it did over the run, with
    the predictor's validated error on published measurements (``simulator.error_band``)."""
    cfg = dict(sim.config)
    resolved = cfg.pop("resolved")
    stats = {k: v for k, v in sim.stats.items() if k not in _IN_MEMORY_SECTION}
    timeline = {k: v for k, v in (stats.pop("timeline", None) or {}).items() if k != "steps"}  # = engine_steps
    spec = cfg.get("spec_decode")
    if spec is not None:
        s = SpecDecodeConfig(**spec)
        spec = {**spec, "expected_tokens_per_step": s.expected_tokens_per_step,
                "low_load_speedup": s.low_load_speedup}
    return {
        "config": {**cfg, "spec_decode": spec, "model": resolved["model"], "gpu": resolved["gpu"],
                   "weights": resolved["weights"], "kv_cache_dtype": resolved["kv_cache_dtype"]},
        "memory": resolved["memory"],
        "validated_error": error_band(cfg["step_predictor"], calibrated),
        "stats": {**stats, **timeline},
        "timeline_path": os.path.relpath(timeline_path, result_path.parent),
        "timeline_columns": "one row per scheduled batch (a row may cover several identical decode steps): "
                            "see tokenpace.simulator.TimelineRow",
    }


def write_sim_files(result: RunResult, table: RecordTable | None = None) -> None:
    """Records and timeline JSONL beside the result JSON (written last, as bench does); ``table``:
    the records as columns, when already made."""
    # orjson serializes dataclasses itself: the same bytes as RecordSink's to_dict(), much faster
    # for records of thousands of chunks (asdict deep-copies every list).
    _write_jsonl(result.records_path, result.records)
    # Always from one table (one part), so a step written in a fan-out's parent is the serial step's bytes.
    write_table(columns_path(result.records_path), RecordTable.from_records(result.records) if table is None else table)
    _write_jsonl(result.timeline_path, result.sim.timeline if result.sim else [])
    write_result(result)


def _write_jsonl(path: Path, rows: list[Any]) -> None:
    # Line by line into the temporary file: a 100,000-request run's JSONL is never whole in memory.
    # A record's chunk times may be runs of the engine's steps (``ChunkRuns``): written as their list,
    # cut from the step ends' text made once (``record_lines``).
    write_whole(path, record_lines(rows))
