"""`tokenpace calibrate`: a measured run (result JSON or records JSONL) + the model and hardware →
the simulator's fitted efficiencies and overhead, in a calibration file for `sim --calibration`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tokenpace.errors import UsageError

EPILOG = """\
examples:
  tokenpace calibrate run.json --model-config gemma-3-270m-q4_k_m.gguf \\
      --hardware examples/hardware/cpu-2core-x86.json --max-num-seqs 8 --out cal.json
  tokenpace calibrate run.json --model-config llama-3.1-8b --hardware h100-sxm --quant fp8
  tokenpace calibrate c1.json c4.json c16.json --model-config ... --hardware ...   # jointly
  tokenpace calibrate sweep.json --model-config ... --hardware ...                 # a sweep's steps
  tokenpace sim --calibration cal.json --concurrency 8 --input-tokens 128 --output-tokens 32

The run must be streamed. Its records are turned into the engine steps it went through (bursts of
chunks, one per step); MFU, MBU, the per-step, per-sequence and per-token overheads and the GEMM
row group of the roofline step-time model (its last rows padded, or computed one by one at a cost
of their own as ggml's CPU kernels do) are fitted to their durations by least squares. Several
runs, or a sweep file (tokenpace sweep --out), are fitted jointly. The file says how well, from
what, which parameters the runs could not determine and what was assumed for them. Give the
engine's limits (--max-num-seqs: llama.cpp's slots; --max-batched-tokens: its batch size) so
that sim --calibration reproduces them and steps that hit them are recognized.
"""


def register(sub: argparse._SubParsersAction) -> None:
    from tokenpace.simulator.policies import POLICIES

    p = sub.add_parser("calibrate", help="fit the simulator's efficiencies and overheads to a measured run",
                       description="Fit the engine simulator's step-time model (MFU, MBU, per-step "
                                   "and per-sequence overheads) to a measured run; write a calibration "
                                   "file for `tokenpace sim --calibration`.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", metavar="RUN", nargs="+",
                   help="result .json or records .jsonl of a streamed run, or a sweep file (its steps' "
                        "results); several: fitted jointly, their steps pooled")
    g = p.add_argument_group("what was measured")
    g.add_argument("--model-config", required=True, metavar="NAME|PATH",
                   help="catalog model, catalog JSON, Hugging Face config.json, or a .gguf file")
    g.add_argument("--hardware", required=True, metavar="NAME|PATH",
                   help="catalog GPU, or a JSON file of any hardware's peak FLOP/s and memory bandwidth")
    g.add_argument("--quant", metavar="PRECISION|PATH",
                   help="weight precision (default: a .gguf model's measured mix, else bf16)")
    g.add_argument("--kv-dtype", default="bf16", metavar="PRECISION", help="KV cache (default bf16; fp16 alike)")
    g.add_argument("--tp", type=int, default=1, metavar="N", help="tensor-parallel GPUs (default 1)")
    g.add_argument("--policy", choices=list(POLICIES), help="the engine's scheduling, recorded for sim")
    g.add_argument("--max-num-seqs", type=int, metavar="N", help="the engine's running-sequence limit (slots)")
    g.add_argument("--max-batched-tokens", type=int, metavar="N", help="the engine's tokens per step at most")
    g.add_argument("--shared-kv", action="store_true",
                   help="the engine ran one KV buffer for all sequences (llama.cpp's --kv-unified): fit the cost "
                        "of every prompt row visiting the other sequences' KV cells (kv_scan_s; default: 0)")
    g.add_argument("--attention-tile-rows", type=int, metavar="N",
                   help="with --shared-kv: a step of at least N query rows computes attention in tiles of N rows over "
                        "the KV cells in use, a tile with decode rows every decoding sequence's cells, at the "
                        "attention's FLOPs (default 64, llama.cpp's CPU flash attention tile; 0: never)")
    g.add_argument("--join-window", nargs="?", const="arrival", default="arrival", choices=("arrival", "finish", "none"),
                   metavar="arrival|finish|none",
                   help="closed loop: give the simulated engine the join window the run shows (sends after a step "
                        "that still joined the next one while another request waited to be taken in) and its clients "
                        "the measured spread of turnarounds (default: arrival, where the run shows one); 'finish': the "
                        "window also opens after a step in which a sequence finished, measured from every send just "
                        "after a step (see sim --join-after); 'none': measured and reported only")
    g.add_argument("--stream-interval", default="measured", choices=("measured", "none"), metavar="measured|none",
                   help="closed loop: the simulated engine streams a step's sequences as far apart as the run's chunks "
                        "came and takes in a next request that reaches it in time, the cutoff fitted from which places "
                        "in the stream got their client's next request into the next step (the join window applying "
                        "too): a client whose sequence came early gets its next request into the next batch (default: "
                        "measured, where the turnaround is copied and the run shows both outcomes); 'none': measured "
                        "and reported only")
    p.add_argument("--out", metavar="PATH", help="calibration file (default: beside the run, <run>.calibration.json)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tokenpace.cli.streams import stdout_console

    from tokenpace.simulator.calibrate import calibrate, write_calibration

    for flag, value in (("--tp", args.tp), ("--max-num-seqs", args.max_num_seqs),
                        ("--max-batched-tokens", args.max_batched_tokens)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be >= 1, not {value}")
    runs, sources = [], []
    for path in (p for given in map(Path, args.paths) for p in _expand_sweep(given)):
        records, source = _read_run(path)
        runs.append(records)
        sources.append(source)
    cal = calibrate(runs, model=args.model_config, hardware=args.hardware, weights=args.quant,
                    kv_cache_dtype=args.kv_dtype, tp=args.tp, policy=args.policy, max_num_seqs=args.max_num_seqs,
                    max_batched_tokens=args.max_batched_tokens,
                    closed_loop_concurrency=_closed_loop_concurrency(sources), shared_kv=args.shared_kv,
                    attention_tile_rows=args.attention_tile_rows, apply_join_window=args.join_window,
                    apply_stream_interval=args.stream_interval == "measured",
                    source={"runs": sources, "model_config": args.model_config, "hardware": args.hardware})
    out = Path(args.out) if args.out else _default_out(Path(args.paths[0]))
    write_calibration(cal, out)
    _render(cal, out, stdout_console())
    return 0


def _expand_sweep(path: Path) -> list[Path]:
    """A sweep file's steps' result files (relative to it), in step order; any other file itself."""
    import json

    if path.suffix != ".json" or not path.is_file():
        return [path]
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [path]  # _read_run says what is wrong with it
    if not isinstance(doc, dict) or doc.get("kind") != "sweep":
        return [path]
    found = [path.parent / s["result_path"] for s in doc.get("steps") or [] if s.get("result_path")]
    if not found:
        raise UsageError(f"{path}: a sweep file with no step result files to calibrate from")
    return found


def _read_run(path: Path) -> tuple[list, dict[str, Any]]:
    from tokenpace.results import load_run_data

    if not path.is_file():
        raise UsageError(f"no such file: {path}")
    data = load_run_data(path)
    doc = data.doc
    kind = doc.get("kind")
    if kind not in ("bench", "sim", "records"):
        raise UsageError(f"{path} is a {kind!r} document, not a run (give a bench or sim result, or its records)")
    if not data.records:
        raise UsageError(f"{path}: no records to calibrate from ({'; '.join(data.notes) or 'empty'})")
    config = doc.get("config") or {}
    return data.records, {
        "path": str(path), "kind": kind, "started_utc": doc.get("started_utc"),
        "target": {k: (doc.get("target") or {}).get(k) for k in ("url", "model")},
        "load": {k: config.get(k) for k in ("concurrency", "rate", "requests", "duration_s", "input_tokens",
                                            "output_tokens", "api", "seed") if k in config},
        "records": len(data.records),
    }


def _closed_loop_concurrency(sources: list[dict[str, Any]]) -> int | None:
    """The clients of closed-loop runs (the most, over several: the turnaround is measured after
    each run's first wave); None when a run is not a closed loop, or not known to be one."""
    loads = [s["load"] for s in sources]
    if any(s["kind"] == "records" or load.get("rate") is not None or not load.get("concurrency")
           for s, load in zip(sources, loads)):
        return None
    return max(load["concurrency"] for load in loads)


def _default_out(run_path: Path) -> Path:
    stem = run_path.name
    for suffix in (".records.jsonl", ".jsonl", ".json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return run_path.with_name(f"{stem}.calibration.json")


def _render(cal, out: Path, console) -> None:
    from rich.table import Table

    from tokenpace.simulator.calibrate.coverage import span_text

    fit, r = cal.fit, cal.roofline
    obs = fit["observations"]
    console.print(f"[bold]Calibration[/] of {cal.model.id} ({cal.weights.name}) on {cal.hardware.name}: "
                  f"{obs['steps']} engine steps from {obs['records']} requests "
                  f"({obs['prefill_steps']} prefill, {obs['mixed_steps']} mixed, {obs['decode_steps']} decode; "
                  f"decode batches {span_text(obs['decode_batch_sizes'])})")
    params = Table(title="fitted (range: RMS error within 10% of the best)", title_justify="left")
    for col in ("parameter", "value", "range"):
        params.add_column(col, justify="right" if col != "parameter" else "left")
    ranges = fit["ranges"]
    params.add_row("MFU", f"{r.mfu:.3f}", f"{ranges['mfu'][0]:.3f} – {ranges['mfu'][1]:.3f}")
    params.add_row("MBU", f"{r.mbu:.3f}", f"{ranges['mbu'][0]:.3f} – {ranges['mbu'][1]:.3f}")
    undetermined = fit.get("undetermined") or {}
    if r.decode_mfu is not None and "decode_mfu" in ranges:
        lo, hi = ranges["decode_mfu"]
        held = "decode_mfu" in undetermined
        params.add_row("decode GEMM MFU", f"{r.decode_mfu:.3f}",
                       f"{'not determined: assumed its prior; steps allow ' if held else ''}{lo:.3f} – {hi:.3f}")
    for label, key in (("step overhead", "step_overhead_s"), ("sequence overhead", "seq_overhead_s"),
                       ("token overhead", "token_overhead_s"), ("GEMV row (past the groups)", "gemv_row_s"),
                       ("GEMM kernel, per step", "gemm_step_s"), ("step of 2+ sequences (LM head)", "head_step_s"),
                       ("request arrival (host)", "arrival_s"), ("KV cell of another sequence, per row", "kv_scan_s")):
        if key not in ranges:
            continue
        lo, hi = ranges[key]
        scale, unit = (1e9, "ns") if key == "kv_scan_s" else (1e3, "ms")  # a KV cell's visit: well under 1 µs
        span = (f"{lo * scale:.3f} – {hi * scale:.3f} {unit}" if hi is not None and key not in undetermined
                else f"not determined: assumed {getattr(r, key) * scale:.3g} {unit}")
        params.add_row(label, f"{getattr(r, key) * scale:.3f} {unit}", span)
    if "row_group" in ranges:
        lo, hi = ranges["row_group"]
        remainder = {"pad": "remainder padded", "gemv": "remainder row by row",
                     "gemv-pass": "remainder row by row, a weight pass each",
                     "gemv-ubatch": "remainder row by row, a weight pass each; prompts in ubatches of their own"
                     }[r.row_remainder]
        params.add_row("GEMM row group", f"{r.row_group} ({remainder})", f"{lo:g} – {hi:g}")
    console.print(params)
    corrections = fit.get("decode_corrections") or {}
    corrected = [c for c in corrections.get("by_batch", []) if c["corrected"]]
    if corrected:
        console.print("correction by decode batch size (the mean residual of its decode-only steps, added to the "
                      "model's price): " + ", ".join(f"{c['decode_seqs']}: {c['mean_residual_ms']:+.1f} ms "
                                                      f"({c['steps']} steps)" for c in corrected)
                      + f"; RMS step error {corrections['rms_relative_error_before'] * 100:.1f}% -> "
                        f"{corrections['rms_relative_error_after'] * 100:.1f}%")
    for key, why in undetermined.items():
        console.print(f"[yellow]{key}[/]: {why}")
    for warning in fit.get("warnings") or ():
        console.print(f"[yellow]warning[/]: {warning}")
    for key, what in (fit.get("assumed") or {}).items():
        console.print(f"assumed {key}: {what}")
    contexts = obs.get("decode_context_tokens")
    console.print(f"seen: decode batches {span_text(obs['decode_batch_sizes'])}; prompts "
                  f"{obs['prompt_tokens'][0] if obs['prompt_tokens'] else '-'}–"
                  f"{obs['prompt_tokens'][1] if obs['prompt_tokens'] else '-'} tokens; decode contexts "
                  f"{f'{contexts[0]}–{contexts[1]}' if contexts else '-'} tokens; "
                  f"from {obs.get('runs', 1)} run(s)")
    res = Table(title="residuals, predicted vs measured step time (%)", title_justify="left")
    for col in ("steps", "n", "mean", "RMS", "p90 |err|"):
        res.add_column(col, justify="right" if col != "steps" else "left")
    for kind, st in fit["residuals_pct"].items():
        res.add_row(kind, str(st["steps"]), f"{st['mean']:+.1f}", f"{st['rms']:.1f}", f"{st['p90_abs']:.1f}")
    console.print(res)
    if "step_noise" in fit:  # (absent from calibrations made before 2026-12-07)
        n = fit["step_noise"]
        console.print(f"step-time spread around the fit: {n['sd']:.3f} (robust SD of log measured/fitted; "
                      + ", ".join(f"{k} {v:.3f}" for k, v in n["by_kind"].items())
                      + f"): tokenpace sim --step-noise {n['sd']:g} --noise-seed K shows how far each figure "
                        "moves from run to run")
    if fit["decode_step_by_batch"]:
        batch = Table(title="decode step time by batch size (median)", title_justify="left")
        for col in ("sequences", "steps", "measured ms", "p10–p90 ms", "predicted ms", "error"):
            batch.add_column(col, justify="right")
        for row in fit["decode_step_by_batch"]:
            spread = (f"{row['measured_p10_ms']:.2f}–{row['measured_p90_ms']:.2f}"
                      if "measured_p10_ms" in row else "")
            batch.add_row(str(row["decode_seqs"]), str(row["steps"]), f"{row['measured_ms']:.2f}", spread,
                          f"{row['predicted_ms']:.2f}", f"{row['error_pct']:+.1f}%")
        console.print(batch)
    if "client_turnaround" in fit:
        t = fit["client_turnaround"]
        copied = ("sim --calibration's clients wait as long" if t["simulated_turnaround_ms"] else
                  "not copied: the engine took most next requests into the step already begun")
        console.print(f"closed-loop client turnaround (end → next send, median of {t['sends']}): "
                      f"{t['median_ms']:.2f} ms; next requests waited a step {t['next_requests_waited_a_step']}× "
                      f"and joined it {t['next_requests_joined_the_step_begun']}×: {copied}")
        if t.get("first_wave_gaps"):
            console.print(f"closed-loop first wave: sent {t['first_wave_gap_ms']:.2f} ms apart (median of "
                          f"{t['first_wave_gaps']} gaps); " + ("sim --calibration's clients send theirs as far apart"
                                                                 if t["simulated_first_wave_gap_ms"] else "not copied"))
        if t.get("join_window_ms"):
            w = t["while_another_waited"]
            used = ("applied: the simulated clients wait the measured spread of turnarounds (--join-window none: not)"
                    if t["join_window_applied"] else "not applied (sim --join-window-ms tries it)")
            basis = ("from every send just after a step; it opens after a step with an arrival or a finish"
                     if t.get("join_window_after") == "finish" else "")
            console.print(f"join window {t['join_window_ms']:.2f} ms{f' ({basis})' if basis else ''}: sends while "
                          f"another request waited to be taken in joined the next step {w['joined']}× (delays "
                          f"{w['joined_delay_ms']} ms) and waited {w['waited']}× ({w['waited_delay_ms']} ms); {used}")
        if t.get("stream_interval_ms"):
            places = " ".join(f"{a}:{j}/{n}" for a, (j, n) in (t.get("next_request_in_time_by_chunks_after") or {}).items())
            line = (f"stream interval {t['stream_interval_ms']:.2f} ms per sequence (a step's chunks, median); next "
                    f"requests in time by chunks streamed after their previous one's last: {places or 'none seen'}")
            if t.get("stream_join_fitted"):
                join_ms = t["stream_join_ms"]
                when = f"{join_ms:.2f} ms after" if join_ms >= 0 else f"{-join_ms:.2f} ms before"
                line += (f"; fitted: taken in if sent up to {when} a step's last chunk: "
                         + ("applied: a client whose sequence was streamed early gets its next request into the next "
                            "batch" if t.get("stream_interval_applied") else "not applied (--stream-interval none)"))
            else:
                line += "; not applied: the run shows no place both in time and late"
            console.print(line)
    if fit["at_bound"]:
        console.print(f"[yellow]at the bound of its search range: {', '.join(fit['at_bound'])} "
                      "(check the hardware's peak figures)[/]")
    if obs["skipped_bursts"]:
        console.print("skipped bursts: " + ", ".join(f"{k} ({n})" for k, n in obs["skipped_bursts"].items()))
    console.print(f"Calibration: {out}  ·  predict other loads: tokenpace sim --calibration {out} --concurrency N ...")
