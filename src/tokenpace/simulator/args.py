"""The engine's command-line flags, shared by `tokenpace sim` and `tokenpace serve --sim`: one
definition, one meaning. ``engine_config`` turns them into a ``SimConfig`` (UsageError naming the
flag on a bad value); ``engine_argv`` turns a ``SimConfig`` back into flags (for a child process).

The caller owns ``--model`` (`sim`: the simulated model; `serve`: also the served name) and
``--max-num-seqs`` (`serve` already has it), and passes their values in.

``--calibration FILE`` (where the command offers it) takes the hardware, the model, the precisions,
the roofline's efficiencies and overheads, the engine limits and the measured client's closed-loop
turnaround from a ``tokenpace calibrate`` file;
a flag given explicitly still wins. So the flags it covers default to None here, and
``engine_config`` applies the defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import math

from tokenpace.errors import UsageError
from tokenpace.simulator.catalog import is_gguf_file
from tokenpace.simulator.config import PREDICTORS, SimConfig
from tokenpace.simulator.policies import POLICIES
from tokenpace.simulator.step_price import DECODE_KV_READS, MBU_MAX, ROW_REMAINDERS, RooflineParams
from tokenpace.simulator.spec_decode import SpecDecodeConfig

_E, _R, _S = SimConfig(), RooflineParams(), SpecDecodeConfig()
DEFAULT_MODEL = "llama-3.1-8b"


def add_engine_arguments(parser: argparse.ArgumentParser, *, max_num_seqs: bool = True,
                         calibration: bool = False, members: bool = False) -> None:
    g = parser.add_argument_group("engine (simulated)")
    if calibration:
        g.add_argument("--calibration", metavar="FILE",
                       help="hardware, model, precisions, efficiencies and engine limits from a "
                            "`tokenpace calibrate` file (flags given explicitly win)")
    g.add_argument("--engine", metavar="NAME|PATH",
                   help="engine preset: vllm, sglang, trtllm, or a JSON file of presets: admission and "
                        "preemption, default limits, KV sizing, host time per step (flags given win; "
                        "default: none, the simulator's own defaults)")
    g.add_argument("--gpu", metavar="NAME|PATH",
                   help=f"GPU, or any hardware as a JSON file of peak FLOP/s and bandwidth (default {_E.gpu})")
    g.add_argument("--quant", metavar="PRECISION|PATH",
                   help="weights: bf16, fp8, int8, int4, or a .gguf file's measured mix (default bf16)")
    g.add_argument("--kv-dtype", metavar="PRECISION",
                   help="KV cache: bf16 or fp8 (default fp8 for FP8 weights, else bf16)")
    g.add_argument("--tp", type=int, metavar="N", help="tensor-parallel GPUs (default 1)")
    g.add_argument("--policy", choices=list(POLICIES), help=f"scheduling policy (default {_E.policy})")
    if max_num_seqs:
        g.add_argument("--max-num-seqs", type=int, metavar="N",
                       help=f"running sequences at most (default {_E.max_num_seqs})")
    g.add_argument("--max-batched-tokens", type=int, metavar="N",
                   help=f"tokens per step at most (default {_E.max_batched_tokens})")
    g.add_argument("--block-size", type=int, default=_E.block_size, metavar="TOKENS",
                   help=f"KV block size (default {_E.block_size})")
    g.add_argument("--gpu-memory-utilization", type=float, metavar="F",
                   help="fraction of GPU memory for weights and KV cache (TensorRT-LLM preset: of the "
                        f"memory free after weights) (default {_E.gpu_memory_utilization}; SGLang preset 0.88)")
    g.add_argument("--num-gpu-blocks", type=int, metavar="N", help="KV blocks, overriding the capacity from memory")
    g.add_argument("--prefix-caching", action="store_true", help="automatic prefix caching (hashed full blocks, LRU)")
    g = parser.add_argument_group("speculative decoding (simulated)")
    g.add_argument("--spec-decode", action="store_true", help="a draft model proposes, the target verifies")
    g.add_argument("--draft-tokens", type=int, metavar="N",
                   help=f"draft tokens per step, γ (default {_S.num_draft_tokens})")
    g.add_argument("--acceptance", type=float, metavar="F",
                   help=f"per-token acceptance rate, α (default {_S.acceptance_rate})")
    g.add_argument("--draft-cost", type=float, metavar="F",
                   help=f"draft step / target decode step time, c (default {_S.draft_cost})")
    g.add_argument("--acceptance-mode", choices=("expected", "sampled"),
                   help="every step yields the mean (default), or seeded random draws")
    g = parser.add_argument_group("run-to-run spread (simulated)")
    g.add_argument("--step-noise", type=float, metavar="SD",
                   help="every step's time times a random factor of mean 1 (lognormal; SD: its log's standard "
                        "deviation, 0.05 spreads steps by about 5%%), drawn per step from --noise-seed: runs with "
                        "other seeds show how far each figure moves from run to run on an engine whose steps vary "
                        "that much (a calibration reports its run's spread, fit.step_noise; default 0)")
    g.add_argument("--noise-seed", type=int, metavar="K", help="the --step-noise draws' seed (default 0)")
    if members:
        g.add_argument("--members", type=int, metavar="N",
                       help="with --step-noise: simulate the run N times, with noise seeds K..K+N-1, write the "
                            "first's files, and report each headline figure's min, median and max over them")
    g = parser.add_argument_group("efficiency (roofline step-time model)")
    g.add_argument("--predictor", choices=list(PREDICTORS),
                   help="step-time model: roofline (default), or kernels: measured kernel tables of the "
                        "--engine (vLLM's without one) for the GPU, where they exist (pip install "
                        "'tokenpace[kernels]'; see sim --list)")
    g.add_argument("--mfu", type=float, metavar="F",
                   help="fraction of peak FLOP/s every matmul and attention kernel reaches, replacing the efficiency "
                        "catalog's figures by GPU, precision and operator (default: the catalog)")
    g.add_argument("--mbu", type=float, metavar="F",
                   help="fraction of HBM bandwidth streaming weights, KV and activations reaches, replacing the "
                        f"catalog's figures (default: the catalog; up to {MBU_MAX:g}: above 1 where a cache "
                        "beats the stated bandwidth)")
    g.add_argument("--step-overhead-ms", type=float, metavar="MS",
                   help=f"host time per engine step (default {_R.step_overhead_s * 1e3:g})")
    g.add_argument("--seq-overhead-ms", type=float, metavar="MS",
                   help="host time per sequence in a step: sampling, detokenizing (default 0)")
    g.add_argument("--efficiency", metavar="PATH",
                   help="efficiency catalog JSON (data/efficiency.json's layout) whose entries win over the built-in")
    g.add_argument("--token-overhead-ms", type=float, metavar="MS",
                   help="time per token computed in a step, beyond the roofline (default 0)")
    g.add_argument("--row-group", type=int, metavar="N",
                   help="price GEMM rows in groups of N, as CPU kernels compute them (default 1)")
    g.add_argument("--row-remainder", choices=ROW_REMAINDERS,
                   help="the rows past the last full group: padded to a group, or computed one by one (ggml's "
                        "GEMV) at --gemv-row-ms each (gemv-pass: each also a pass over the weights; gemv-ubatch: as "
                        "gemv-pass, with a step's prompts in ubatches of their own, as llama.cpp runs them with a KV "
                        "stream per slot), with --gemm-step-ms per step that runs the GEMM on decode rows "
                        "(default pad)")
    g.add_argument("--gemv-row-ms", type=float, metavar="MS",
                   help="with --row-remainder gemv, gemv-pass or gemv-ubatch: time per row outside the full groups, beyond its "
                        "FLOPs (default 0)")
    g.add_argument("--gemm-step-ms", type=float, metavar="MS",
                   help="with --row-remainder gemv, gemv-pass or gemv-ubatch: time per step with a full row group, beyond its "
                        "FLOPs (default 0)")
    g.add_argument("--head-step-ms", type=float, metavar="MS",
                   help="time per step of two or more sequences (an LM head over two or more output rows, as "
                        "ggml runs it in a GEMM kernel; default 0)")
    g.add_argument("--arrival-ms", type=float, metavar="MS",
                   help="host time a request's arrival takes from the engine's core, added to the step it arrives "
                        "during (an engine whose HTTP threads share the compute core, e.g. llama-server on one "
                        "pinned core; default 0)")
    g.add_argument("--host-seq-us", type=float, metavar="US",
                   help="host time per sequence that a step overlaps with the GPU (an overlap scheduler): a step "
                        "takes at least sequences x this (default 0; TensorRT-LLM preset 29.4)")
    g.add_argument("--join-window-ms", type=float, metavar="MS",
                   help="after a step during which requests arrived, form the next batch this long after its end, "
                        "taking in the requests that arrive meanwhile (an engine that sets up new requests between "
                        "steps, e.g. llama-server; default 0)")
    g.add_argument("--join-after", choices=("arrival", "finish"), metavar="arrival|finish",
                   help="with --join-window-ms: the steps after which the window opens: 'arrival', after a step "
                        "during which a request arrived (default); 'finish', also after a step in which a sequence "
                        "finished, whose client sends its next request a turnaround later")
    g.add_argument("--stream-interval-ms", type=float, metavar="MS",
                   help="the engine streams a step's sequences this far apart, in slot order, and forms its next "
                        "batch after the last: a closed-loop client whose sequence came early sends its next "
                        "request that much sooner, at the step's end at the earliest (llama-server on one core: "
                        "about 0.6; default 0)")
    g.add_argument("--stream-join-ms", type=float, metavar="MS",
                   help="with --stream-interval-ms: the engine takes in a request that reaches it up to this long "
                        "after it streamed a step's last sequence (negative: this long before; default 0)")
    g.add_argument("--kv-scan-ns", type=float, metavar="NS",
                   help="time per query row and KV cell of another sequence in the step: attention over one KV "
                        "buffer shared by every sequence, each row visiting every cell in use (llama.cpp's "
                        "--kv-unified; default 0)")
    g.add_argument("--attention-tile-rows", type=int, metavar="N",
                   help="a step of at least N query rows computes attention in tiles of N rows over the KV cells in "
                        "use: a tile with decode rows computes every decoding sequence's cells, a prompt's tile its "
                        "own, at the attention's FLOPs (llama.cpp's CPU flash attention with --kv-unified: 64); "
                        "default 0, never")
    g.add_argument("--decode-kv-reads", choices=DECODE_KV_READS,
                   help="how decode attention reads a grouped-query model's KV cache: 'shared', each KV head once "
                        "for all its query heads (every current kernel; default), or 'per-query-head', once for "
                        "each (TensorRT-LLM up to v0.6's masked multi-head attention kernel)")


def engine_config(ns: argparse.Namespace, *, model: str | None, max_num_seqs: int | None,
                  seed: int = 0) -> SimConfig:
    """The SimConfig the flags describe; catalog names are resolved now, so a typo fails early.
    ``model`` and ``max_num_seqs``: the caller's values (None: the calibration's, else the default)."""
    cal = _calibration(ns)
    e = _engine_defaults(cal)
    model = model if model is not None else (cal.model if cal else DEFAULT_MODEL)
    seqs_given = max_num_seqs
    max_num_seqs = _given(max_num_seqs, e.max_num_seqs)
    tp, max_batched_tokens = _given(ns.tp, e.tp), _given(ns.max_batched_tokens, e.max_batched_tokens)
    for flag, value in (("--tp", tp), ("--max-num-seqs", max_num_seqs),
                        ("--max-batched-tokens", max_batched_tokens), ("--block-size", ns.block_size),
                        ("--num-gpu-blocks", ns.num_gpu_blocks), ("--draft-tokens", ns.draft_tokens)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be >= 1, not {value}")
    r = cal.roofline if cal else _R
    for flag, value in (("--gpu-memory-utilization", ns.gpu_memory_utilization), ("--mfu", ns.mfu)):
        if value is not None and not (math.isfinite(value) and 0 < value <= 1):
            raise UsageError(f"{flag} must lie in (0, 1], not {value}")
    if ns.mbu is not None and not (math.isfinite(ns.mbu) and 0 < ns.mbu <= MBU_MAX):
        raise UsageError(f"--mbu must lie in (0, {MBU_MAX:g}], not {ns.mbu}")
    for flag, value in (("--step-overhead-ms", ns.step_overhead_ms), ("--seq-overhead-ms", ns.seq_overhead_ms)):
        if value is not None:
            _at_least_zero(flag, value)
    if ns.row_group is not None and ns.row_group < 1:
        raise UsageError(f"--row-group must be >= 1, not {ns.row_group}")
    host_seq_us = getattr(ns, "host_seq_us", None)
    for flag, value in (("--token-overhead-ms", ns.token_overhead_ms), ("--gemv-row-ms", ns.gemv_row_ms),
                        ("--gemm-step-ms", ns.gemm_step_ms), ("--head-step-ms", ns.head_step_ms),
                        ("--arrival-ms", ns.arrival_ms),
                        ("--kv-scan-ns", ns.kv_scan_ns), ("--join-window-ms", ns.join_window_ms),
                        ("--host-seq-us", host_seq_us), ("--stream-interval-ms", getattr(ns, "stream_interval_ms", None))):
        if value is not None:
            _at_least_zero(flag, value)
    tile_rows = getattr(ns, "attention_tile_rows", None)
    if tile_rows is not None and tile_rows < 0:
        raise UsageError(f"--attention-tile-rows must be >= 0, not {tile_rows}")
    if ns.join_window_ms is not None and not ns.join_window_ms < 1000:
        raise UsageError(f"--join-window-ms must be below 1000, not {ns.join_window_ms}")
    stream_ms, stream_join_ms = getattr(ns, "stream_interval_ms", None), getattr(ns, "stream_join_ms", None)
    if stream_ms is not None and not stream_ms < 1000:
        raise UsageError(f"--stream-interval-ms must be below 1000, not {stream_ms}")
    if stream_join_ms is not None and not -1000 < stream_join_ms < 1000:
        raise UsageError(f"--stream-join-ms must lie between -1000 and 1000, not {stream_join_ms}")
    roofline = dataclasses.replace(
        r, mfu=_given(ns.mfu, r.mfu), mbu=_given(ns.mbu, r.mbu),
        step_overhead_s=r.step_overhead_s if ns.step_overhead_ms is None else ns.step_overhead_ms / 1e3,
        seq_overhead_s=r.seq_overhead_s if ns.seq_overhead_ms is None else ns.seq_overhead_ms / 1e3,
        token_overhead_s=r.token_overhead_s if ns.token_overhead_ms is None else ns.token_overhead_ms / 1e3,
        row_group=_given(ns.row_group, r.row_group), row_remainder=_given(ns.row_remainder, r.row_remainder),
        gemv_row_s=r.gemv_row_s if ns.gemv_row_ms is None else ns.gemv_row_ms / 1e3,
        gemm_step_s=r.gemm_step_s if ns.gemm_step_ms is None else ns.gemm_step_ms / 1e3,
        head_step_s=r.head_step_s if ns.head_step_ms is None else ns.head_step_ms / 1e3,
        arrival_s=r.arrival_s if ns.arrival_ms is None else ns.arrival_ms / 1e3,
        host_seq_s=r.host_seq_s if host_seq_us is None else host_seq_us / 1e6,
        kv_scan_s=r.kv_scan_s if ns.kv_scan_ns is None else ns.kv_scan_ns / 1e9,
        attention_tile_rows=_given(tile_rows, r.attention_tile_rows),
        decode_kv_reads=_given(getattr(ns, "decode_kv_reads", None), r.decode_kv_reads),
        join_window_s=r.join_window_s if ns.join_window_ms is None else ns.join_window_ms / 1e3,
        join_after=_given(getattr(ns, "join_after", None), r.join_after),
        stream_interval_s=r.stream_interval_s if stream_ms is None else stream_ms / 1e3,
        stream_join_s=r.stream_join_s if stream_join_ms is None else stream_join_ms / 1e3)
    step_noise, noise_seed = getattr(ns, "step_noise", None), getattr(ns, "noise_seed", None)
    if step_noise is not None and not (math.isfinite(step_noise) and 0 <= step_noise < 1):
        raise UsageError(f"--step-noise must lie in [0, 1), not {step_noise}")
    if noise_seed is not None and noise_seed < 0:
        raise UsageError(f"--noise-seed must be >= 0, not {noise_seed}")
    spec = _spec(ns)
    try:
        config = SimConfig(
            model=model, gpu=_given(ns.gpu, e.gpu), weights=_weights(ns.quant, model, cal),
            kv_cache_dtype=_given(ns.kv_dtype, cal.kv_cache_dtype if cal else None), tp=tp, roofline=roofline,
            efficiency_file=ns.efficiency, predictor=getattr(ns, "predictor", None) or _E.predictor,
            policy=_given(ns.policy, e.policy), max_num_seqs=max_num_seqs, max_batched_tokens=max_batched_tokens,
            block_size=ns.block_size,
            gpu_memory_utilization=_given(ns.gpu_memory_utilization, _E.gpu_memory_utilization),
            num_gpu_blocks=ns.num_gpu_blocks, prefix_caching=ns.prefix_caching, spec_decode=spec, seed=seed,
            turnaround_s=cal.turnaround_s if cal else _E.turnaround_s,
            turnarounds_s=cal.turnarounds_s if cal else _E.turnarounds_s,
            first_wave_gap_s=cal.first_wave_gap_s if cal else _E.first_wave_gap_s,
            step_noise=step_noise or 0.0, noise_seed=noise_seed or 0)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    check_catalogs(config)
    engine = getattr(ns, "engine", None)
    if engine:
        from tokenpace.simulator.engines import with_engine

        flags = {"policy": ns.policy, "max_num_seqs": seqs_given,
                 "max_batched_tokens": ns.max_batched_tokens, "gpu_memory_utilization": ns.gpu_memory_utilization,
                 "step_overhead_s": ns.step_overhead_ms, "host_seq_s": host_seq_us}
        given = {k for k, v in flags.items() if v is not None}
        if cal is not None:  # what a calibration states counts as given
            given |= {k for k in ("policy", "max_num_seqs", "max_batched_tokens", "step_overhead_s", "host_seq_s")
                      if getattr(cal, k, None) is not None or k in ("step_overhead_s", "host_seq_s")}
        config = with_engine(config, engine, given=given)
    if config.predictor != "roofline":  # a missing extra or table fails now, in one line
        from tokenpace.simulator.simulate import build_predictor

        build_predictor(config)
    return config


def _given(value, fallback):
    return fallback if value is None else value


def calibration_scope_of(ns: argparse.Namespace) -> dict | None:
    """The scope of ``--calibration`` (the decode batches it saw, what it was fitted on), for the
    run to say whether it stayed within it; None without one."""
    cal = _calibration(ns)
    if cal is None:
        return None
    from tokenpace.simulator.calibrate.coverage import calibration_scope

    return calibration_scope(cal, ns.calibration)


def _calibration(ns: argparse.Namespace):  # -> Calibration | None
    path = getattr(ns, "calibration", None)
    if not path:
        return None
    from tokenpace.simulator.calibrate.calibration import load_calibration

    return load_calibration(path)


def _engine_defaults(cal) -> SimConfig:
    """The simulator's defaults, with what a calibration states in their place."""
    if cal is None:
        return _E
    stated = {"gpu": cal.hardware, "kv_cache_dtype": cal.kv_cache_dtype, "tp": cal.tp, "policy": cal.policy,
              "max_num_seqs": cal.max_num_seqs, "max_batched_tokens": cal.max_batched_tokens}
    return dataclasses.replace(_E, **{k: v for k, v in stated.items() if v is not None})


def _weights(quant: str | None, model, cal):
    """--quant if given; else the calibration's (for its own model); else a GGUF model's own mix;
    else BF16."""
    if quant is not None:
        return quant
    if cal is not None and model is cal.model:
        return cal.weights
    if isinstance(model, str) and is_gguf_file(model):
        return model  # get_precision reads the file's measured bits per weight
    return _E.weights


def _spec(ns: argparse.Namespace) -> SpecDecodeConfig | None:
    given = {"--draft-tokens": ns.draft_tokens, "--acceptance": ns.acceptance, "--draft-cost": ns.draft_cost,
             "--acceptance-mode": ns.acceptance_mode}
    if not ns.spec_decode:
        named = [flag for flag, value in given.items() if value is not None]
        if named:
            raise UsageError(f"{', '.join(named)} needs --spec-decode")
        return None
    if ns.acceptance is not None and not 0 <= ns.acceptance <= 1:
        raise UsageError(f"--acceptance must lie in [0, 1], not {ns.acceptance}")
    if ns.draft_cost is not None:
        _at_least_zero("--draft-cost", ns.draft_cost)
    return SpecDecodeConfig(
        num_draft_tokens=ns.draft_tokens or _S.num_draft_tokens,
        acceptance_rate=_S.acceptance_rate if ns.acceptance is None else ns.acceptance,
        draft_cost=_S.draft_cost if ns.draft_cost is None else ns.draft_cost,
        acceptance=ns.acceptance_mode or _S.acceptance)


def _at_least_zero(flag: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(f"{flag} must be a finite number >= 0, not {value}")


def check_catalogs(config: SimConfig) -> None:
    """Resolve every catalog name, so a typo fails before anything runs (naming the choices)."""
    from tokenpace.simulator.catalog import get_gpu, get_model, get_precision

    get_model(config.model)
    get_gpu(config.gpu)
    get_precision(config.weights)
    get_precision(config.kv_cache_dtype)


def engine_argv(config: SimConfig) -> list[str]:
    """Flags that rebuild ``config``'s engine (not its model, max_num_seqs or seed: the caller's)."""
    def name(x: object) -> str:
        return x if isinstance(x, str) else x.id  # type: ignore[attr-defined]

    r = config.roofline
    argv = ["--engine", config.engine] if config.engine else []
    argv += ["--gpu", name(config.gpu), "--quant", name(config.weights), "--kv-dtype", name(config.kv_cache_dtype),
            "--tp", str(config.tp), "--policy", config.policy, "--max-batched-tokens", str(config.max_batched_tokens),
            "--block-size", str(config.block_size), "--gpu-memory-utilization", repr(config.gpu_memory_utilization),
            "--step-overhead-ms", repr(r.step_overhead_s * 1e3)]
    for flag, value in (("--mfu", r.mfu), ("--mbu", r.mbu)):
        if value is not None:
            argv += [flag, repr(value)]
    if r.seq_overhead_s:
        argv += ["--seq-overhead-ms", repr(r.seq_overhead_s * 1e3)]
    if config.efficiency_file:
        argv += ["--efficiency", config.efficiency_file]
    if config.predictor != _E.predictor:
        argv += ["--predictor", config.predictor]
    if r.token_overhead_s:
        argv += ["--token-overhead-ms", repr(r.token_overhead_s * 1e3)]
    if r.row_group != 1:
        argv += ["--row-group", str(r.row_group)]
    if r.row_remainder != _R.row_remainder:
        argv += ["--row-remainder", r.row_remainder, "--gemv-row-ms", repr(r.gemv_row_s * 1e3),
                 "--gemm-step-ms", repr(r.gemm_step_s * 1e3)]
    if r.head_step_s:
        argv += ["--head-step-ms", repr(r.head_step_s * 1e3)]
    if r.arrival_s:
        argv += ["--arrival-ms", repr(r.arrival_s * 1e3)]
    if r.host_seq_s or config.engine:  # 0 stated too under a preset, whose own figure would apply
        argv += ["--host-seq-us", repr(r.host_seq_s * 1e6)]
    if r.kv_scan_s:
        argv += ["--kv-scan-ns", repr(r.kv_scan_s * 1e9)]
    if r.attention_tile_rows:
        argv += ["--attention-tile-rows", str(r.attention_tile_rows)]
    if r.decode_kv_reads != _R.decode_kv_reads:
        argv += ["--decode-kv-reads", r.decode_kv_reads]
    if r.join_window_s:
        argv += ["--join-window-ms", repr(r.join_window_s * 1e3)]
    if r.join_after != _R.join_after:
        argv += ["--join-after", r.join_after]
    if r.stream_interval_s:
        argv += ["--stream-interval-ms", repr(r.stream_interval_s * 1e3), "--stream-join-ms", repr(r.stream_join_s * 1e3)]
    if config.step_noise:
        argv += ["--step-noise", repr(config.step_noise), "--noise-seed", str(config.noise_seed)]
    if config.num_gpu_blocks is not None:
        argv += ["--num-gpu-blocks", str(config.num_gpu_blocks)]
    if config.prefix_caching:
        argv.append("--prefix-caching")
    s = config.spec_decode
    if s is not None:
        argv += ["--spec-decode", "--draft-tokens", str(s.num_draft_tokens), "--acceptance", repr(s.acceptance_rate),
                 "--draft-cost", repr(s.draft_cost), "--acceptance-mode", s.acceptance]
    return argv
