"""``simulate(config, requests)``: build the parts from the config, run the events, collect results."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from collections.abc import Sequence as _Seq
from itertools import chain, islice

from tokenpace.simulator.catalog import get_gpu, get_model, get_precision
from tokenpace.simulator.config import SimConfig
from tokenpace.simulator.engine import Engine
from tokenpace.simulator.kv_cache import KVCache
from tokenpace.simulator.load import ClosedLoop, OpenLoop, Requests, SessionLoop, to_ns
from tokenpace.simulator.engines import needs_workload_limits, with_workload_limits
from tokenpace.simulator.memory import KVCapacity, engine_kv_capacity, kv_capacity
from tokenpace.simulator.prefix_cache import PrefixCache
from tokenpace.simulator.policies import SchedulerLimits, make_scheduler
from tokenpace.simulator.request import SimRequest
from tokenpace.simulator.result import SimResult
from tokenpace.simulator.roofline import RooflinePredictor
from tokenpace.simulator.step import StepPredictor
from tokenpace.simulator.timeline import TimelineRow, timeline_stats
from tokenpace.simulator.world import World


def build_predictor(config: SimConfig) -> StepPredictor:
    """The step-time model ``config`` names (default: the roofline) for its model, GPU, precisions
    and TP."""
    parts = (get_model(config.model), get_gpu(config.gpu), get_precision(config.weights),
             get_precision(config.kv_cache_dtype), config.tp, config.roofline, config.efficiency_file)
    if config.predictor == "kernels":
        from tokenpace.simulator.kernels.predictor import KernelPredictor

        return KernelPredictor(*parts, engine=config.engine)
    return RooflinePredictor(*parts, engine=config.engine)


def build_engine(config: SimConfig, predictor: StepPredictor, *, jump: bool | None = None,
                 timeline: list[TimelineRow] | None = None, cohort: bool = False) -> tuple[Engine, KVCapacity]:
    """The engine ``config`` describes (KV cache sized from memory, scheduler, step pricing), and
    how its GPU memory is spent. ``jump``: jump over identical decode steps (default: the config's;
    a real-time driver steps one by one). ``cohort``: advance plain decodes as one cohort, their
    fields written back only when they leave it (not for a driver that reads them after each step)."""
    model, gpu = get_model(config.model), get_gpu(config.gpu)
    weights, kv_dtype = get_precision(config.weights), get_precision(config.kv_cache_dtype)
    if config.memory_model == "nominal":
        capacity = kv_capacity(model, gpu, weights, kv_dtype, tp=config.tp,
                               gpu_memory_utilization=config.gpu_memory_utilization,
                               reserve_gib=config.kv_reserve_gib)
    else:
        capacity = engine_kv_capacity(model, gpu, weights, kv_dtype, memory_model=config.memory_model,
                                      fraction=config.gpu_memory_utilization, tp=config.tp,
                                      max_batched_tokens=config.max_batched_tokens,
                                      max_num_seqs=config.max_num_seqs)
    num_blocks = config.num_gpu_blocks or capacity.blocks(config.block_size)
    if num_blocks < 1:
        raise ValueError(f"no room for a KV cache: weights {capacity.weight_bytes / 2**30:.1f} GiB per "
                         f"GPU leave nothing of {capacity.usable_bytes / 2**30:.1f} GiB usable")
    kv = (PrefixCache if config.prefix_caching else KVCache)(num_blocks, config.block_size)
    spec = config.spec_decode
    limits = SchedulerLimits(
        max_num_seqs=config.max_num_seqs, max_batched_tokens=config.max_batched_tokens,
        decode_tokens=1 + (spec.num_draft_tokens if spec else 0),
        waiting_served_ratio=config.waiting_served_ratio, max_waiting_steps=config.max_waiting_steps,
        admission=config.admission, chunked_prompts=config.chunked_prompts,
    )
    scheduler = make_scheduler(config.policy, limits, kv)
    engine = Engine(scheduler, predictor, spec=spec, seed=config.seed,
                    jump=config.jump_decode_steps if jump is None else jump, timeline=timeline, cohort=cohort,
                    arrival_s=getattr(getattr(predictor, "params", None), "arrival_s", 0.0),
                    join_window_s=getattr(getattr(predictor, "params", None), "join_window_s", 0.0),
                    join_after=getattr(getattr(predictor, "params", None), "join_after", "arrival"),
                    host_seq_s=getattr(getattr(predictor, "params", None), "host_seq_s", 0.0),
                    stream_interval_s=getattr(getattr(predictor, "params", None), "stream_interval_s", 0.0),
                    stream_join_s=getattr(getattr(predictor, "params", None), "stream_join_s", 0.0),
                    step_noise=config.step_noise, noise_seed=config.noise_seed)
    return engine, capacity


def simulate(config: SimConfig, requests: Iterable[SimRequest],
             predictor: StepPredictor | None = None, *, max_requests: int | None = None,
             on_world: Callable[[World], None] | None = None) -> SimResult:
    """Serve ``requests`` on the engine ``config`` describes, in virtual time.

    Closed loop when ``config.concurrency`` is set (requests are issued in order, a new one when one
    ends), open loop otherwise (every request needs ``arrival_s``; ``config.max_in_flight`` caps
    them). ``requests`` may be an endless iterator when ``config.stop_issuing_s`` bounds the run.
    Conversations when the requests carry ``session`` and ``turn`` (each session's turns in order;
    turn 1 at its ``arrival_s``, turn k+1 ``think_time_s`` after turn k ended; ``concurrency`` and
    ``max_in_flight`` must be None, as bench's sessions are not capped). ``max_requests``: send at
    most this many (for conversations, which turns those are depends on the timing).
    ``predictor`` replaces the roofline step-time model. ``on_world`` is given the run's state
    before it starts (a progress view reads its counters). Deterministic: the same inputs give the
    same result, byte for byte. Requests never sent (time ran out while they waited under the
    in-flight cap) have no record.
    """
    requests, first = _peek(requests)
    if needs_workload_limits(config) and isinstance(requests, _Seq):  # trtllm-bench's tuning: the lengths
        if requests and requests[0].session is None:
            config = with_workload_limits(config, sum(r.prompt_tokens for r in requests) / len(requests),
                                          sum(r.output_tokens for r in requests) / len(requests))
    predictor = predictor or build_predictor(config)
    timeline: list[TimelineRow] | None = [] if config.timeline else None
    engine, capacity = build_engine(config, predictor, timeline=timeline, cohort=True)
    scheduler, kv, num_blocks = engine.scheduler, engine.kv, engine.kv.num_blocks
    model, gpu = get_model(config.model), get_gpu(config.gpu)
    weights, kv_dtype = get_precision(config.weights), get_precision(config.kv_cache_dtype)
    sessions = first is not None and first.session is not None
    if sessions:
        requests = list(requests)  # every turn of every session, given up front
    if max_requests is not None and not sessions:
        requests = (requests[:max_requests] if isinstance(requests, _Seq)
                    else islice(requests, max_requests))
    reqs = Requests(requests)
    stop_ns = None if config.stop_issuing_s is None else to_ns(config.stop_issuing_s)
    if sessions:
        if config.concurrency is not None or config.max_in_flight is not None:
            raise ValueError("conversations are not capped: concurrency and max_in_flight must be None")
        load = SessionLoop(reqs, stop_ns, max_requests)
    else:
        turnaround = tuple(map(to_ns, config.turnarounds_s)) or to_ns(config.turnaround_s)
        load = (ClosedLoop(reqs, config.concurrency, stop_ns, turnaround, to_ns(config.ramp_s),
                           to_ns(config.first_wave_gap_s))
                if config.concurrency
                else OpenLoop(reqs, config.max_in_flight, stop_ns))
    world = World(reqs, engine, load,
                  timeout_ns=None if config.timeout_s is None else to_ns(config.timeout_s),
                  ttft_timeout_ns=None if config.ttft_timeout_s is None else to_ns(config.ttft_timeout_s))
    if on_world is not None:
        on_world(world)
    records = _without_gc(world.run)
    describe = getattr(predictor, "describe", None)
    end_ns = world.loop.now_ns
    stats = {
        "sim_end_ns": end_ns,
        "engine_steps": engine.steps,
        "events": world.loop.handled,
        "preemptions": scheduler.preemptions,
        "prefix_cache_queries_tokens": kv.query_tokens,
        "prefix_cache_hits_tokens": kv.hit_tokens,
        "prefix_cache_hit_rate": kv.hit_rate,
        "kv_blocks": num_blocks,
        "kv_capacity_tokens": num_blocks * config.block_size,
        "kv_bytes_per_token_per_gpu": capacity.kv_bytes_per_token,
        "weight_bytes_per_gpu": capacity.weight_bytes,
        "requests": load.planned,  # issued, or planned to be (an open loop's) before the stop time
        "sent": len(records),
        "completed": sum(r.status == "ok" for r in records),
        "failed": sum(r.status != "ok" for r in records),
    }
    if timeline is not None:
        stats["timeline"] = timeline_stats(timeline, end_ns)
    resolved = config.to_dict()
    resolved["predictor"] = describe() if callable(describe) else type(predictor).__name__
    resolved["resolved"] = {
        "model": {**model.to_dict(), "params": model.params, "active_params": model.active_params},
        "gpu": gpu.to_dict(), "weights": weights.to_dict(), "kv_cache_dtype": kv_dtype.to_dict(),
        "memory": {
            "usable_bytes_per_gpu": capacity.usable_bytes, "weight_bytes_per_gpu": capacity.weight_bytes,
            "reserve_bytes_per_gpu": capacity.reserve_bytes, "memory_model": config.memory_model,
            "kv_bytes_per_token_per_gpu": capacity.kv_bytes_per_token,
            "kv_capacity_tokens": num_blocks * config.block_size, "kv_blocks": num_blocks,
            "kv_blocks_overridden": config.num_gpu_blocks is not None,
        },
    }
    return SimResult(records=records, timeline=timeline or [], stats=stats, config=resolved)


def _without_gc(run):
    """``run()`` with Python's cyclic garbage collector paused: a run allocates millions of objects
    (a list of chunk times per request) and none of them in reference cycles, so the collector's
    passes over the growing heap are pure cost (half the wall time of a 20,000-request run).
    Afterwards the run's objects go straight to the oldest generation (``freeze`` then
    ``unfreeze``): re-enabled as they were, the collector's next young pass would scan every one
    of them (0.1–0.2 s of CPU for 20,000 requests); there they stay collectable, in the rare full
    passes."""
    was = gc.isenabled()
    gc.disable()
    try:
        return run()
    finally:
        gc.freeze()
        gc.unfreeze()
        if was:
            gc.enable()


def _peek(requests: Iterable[SimRequest]) -> tuple[Iterable[SimRequest], SimRequest | None]:
    """The requests (an iterator stays lazy) and the first of them, None when there is none."""
    if isinstance(requests, _Seq):
        return requests, (requests[0] if requests else None)
    it = iter(requests)
    first = next(it, None)
    return (it, None) if first is None else (chain([first], it), first)
