"""Calibrate the simulator on a real engine and check its predictions at other loads.

llama.cpp's llama-server serves Gemma 3 270M (Q4_K_M GGUF) on this machine's CPU with one thread
(`-t 1`, 8 slots, pinned to CPU 1); `tokenpace bench` (pinned to CPU 0) measures it closed loop at
each concurrency. `tokenpace calibrate` fits MFU, MBU and the step overhead to ONE of those runs
(the hardware: examples/hardware/cpu-2core-x86.json; the model and its measured bits per weight: the
GGUF file itself), then `tokenpace sim --calibration` predicts every concurrency, and the table
compares TTFT p50, TPOT p50 and output tokens/s with what was measured.

    .venv/bin/python benchmarks/calibrate_llama.py                  # ~6 min; fits from c=4, c=1, both
    .venv/bin/python benchmarks/calibrate_llama.py --fit-from 4 --json

Needs the engine: `python3 scripts/llama_engine.py ensure` (builds llama-server, ~10+ minutes once).

The simulator is given the prompt lengths the server saw: bench asks for N words and llama.cpp's
Gemma chat template adds a few tokens, so the sim's --input-tokens is the bench's spec shifted by
the mean difference measured (server prompt_tokens − requested), printed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARDWARE = ROOT / "examples" / "hardware" / "cpu-2core-x86.json"
CLIENT_CPU, SERVER_CPU = 0, 1
SLOTS = 8
N_BATCH = 2048  # llama-server's default --batch-size: the token budget of one step
INPUT = (64, 192)  # uniform prompt lengths (words): mean 128, varied so that prefill's slope shows
OUTPUT = (24, 40)  # uniform output lengths: mean 32
REQUESTS = {1: 16, 2: 24, 4: 32, 8: 40}
WARMUP = 2  # requests; the first ones pay for cold caches
SEED = 7  # the same lengths at every concurrency (the first N draws), so only the load differs


def load_engine():
    spec = importlib.util.spec_from_file_location("llama_engine", ROOT / "scripts" / "llama_engine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tokenpace(*args: str, cpus: set[int] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tokenpace", *args]

    def pin() -> None:
        if cpus is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, cpus)

    proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=pin, cwd=ROOT,
                          env=dict(os.environ, COLUMNS="120"))
    if proc.returncode not in (0, 5):  # 5: load generator flagged; reported, not fatal
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def load_args(concurrency: int, input_shift: int = 0) -> list[str]:
    return ["--concurrency", str(concurrency), "--requests", str(REQUESTS[concurrency]),
            "--warmup", f"{WARMUP}req",
            "--input-tokens", f"uniform:min={INPUT[0] + input_shift},max={INPUT[1] + input_shift}",
            "--output-tokens", f"uniform:min={OUTPUT[0]},max={OUTPUT[1]}", "--seed", str(SEED)]


@contextlib.contextmanager
def llama_server(engine):
    """llama-server pinned to SERVER_CPU (a child inherits this process's affinity at start)."""
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {SERVER_CPU})
    except OSError:
        pass
    try:
        # -ctxcp 0: no context checkpoints. For a sliding-window model (Gemma 3) llama-server splits
        # every prompt into three steps so that it can checkpoint the cache for reuse (the template's
        # prefix, the message, its last 4 tokens: tools/server/server-context.cpp); with
        # --no-cache-prompt nothing is reused, and the simulator computes a prompt in one step.
        extra = ("-ctxcp", "0")
        cm = engine.running_llama_server(slots=SLOTS, threads=1, extra=extra)
        url = cm.__enter__()
    finally:
        os.sched_setaffinity(0, before)
    try:
        yield url
    finally:
        cm.__exit__(None, None, None)


def figures(doc: dict) -> dict[str, float]:
    s = doc["summary"]
    return {"ttft_p50_ms": s["latency_ms"]["ttft"]["p50"], "tpot_p50_ms": s["latency_ms"]["tpot"]["p50"],
            "output_tok_s": s["throughput"]["output_tokens_s"]}


def template_tokens(records_path: Path) -> float:
    """Mean (server prompt_tokens − requested) over the run: what the chat template adds."""
    diffs = []
    for line in records_path.read_text().splitlines():
        r = json.loads(line)
        if r.get("prompt_tokens") is not None and r.get("requested_input_tokens") is not None:
            diffs.append(r["prompt_tokens"] - r["requested_input_tokens"])
    return sum(diffs) / len(diffs) if diffs else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit-from", action="append", metavar="C[+C...]",
                        help="run(s) to calibrate from, by concurrency; 1+4 pools two runs (repeatable; "
                             "default: 4, 1 and 1+4)")
    parser.add_argument("--reuse", action="store_true",
                        help="calibrate and predict from the measured runs already in --out-dir")
    parser.add_argument("--out-dir", default="tokenpace-runs/calibrate-llama", metavar="DIR")
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    parser.add_argument("--url", metavar="URL", help="measure a llama-server already running there (started "
                        f"like scripts/llama_engine.py's, with -np {SLOTS}) instead of starting one")
    args = parser.parse_args()
    fit_from = [[int(c) for c in spec.split("+")] for spec in (args.fit_from or ["4", "1", "1+4"])]
    if any(c not in REQUESTS for spec in fit_from for c in spec):
        parser.error(f"--fit-from: concurrencies are {sorted(REQUESTS)}")
    out = ROOT / args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    engine = load_engine()
    missing = [] if args.url or args.reuse else engine.missing_parts()
    if missing:
        print(f"{'; '.join(missing)}: run `python3 scripts/llama_engine.py ensure`", file=sys.stderr)
        return 2
    model = str(engine.model_path())
    print(f"load average at start: {os.getloadavg()[0]:.2f} · llama-server -t 1 -np {SLOTS} on CPU {SERVER_CPU}, "
          f"bench on CPU {CLIENT_CPU} · model {model}")

    measured: dict[int, dict] = {}
    started = time.monotonic()
    with (contextlib.nullcontext(args.url or "(reused)") if args.url or args.reuse else llama_server(engine)) as url:
        for c in sorted(REQUESTS):
            run = out / f"measured-c{c}.json"
            if not args.reuse:
                tokenpace("bench", "--url", url, *load_args(c), "--out", str(run), "--no-progress",
                          cpus={CLIENT_CPU})
            doc = json.loads(run.read_text())
            measured[c] = {"figures": figures(doc), "path": run, "valid": doc["load_generator"].get("valid", True),
                           "client_cpu": doc["load_generator"].get("client_cpu_cores")}
            print(f"measured c={c}: {measured[c]['figures']} (started {doc.get('started_utc')})")
    print(f"measurements took {time.monotonic() - started:.0f} s; load average now {os.getloadavg()[0]:.2f}")
    shift = round(template_tokens(out / "measured-c4.records.jsonl"))
    print(f"the chat template adds {shift} prompt tokens on average: the simulation's prompts are shifted by it")

    results = []
    for srcs in fit_from:
        name = "+".join(map(str, srcs))
        cal = out / f"cal-c{name}.json"
        cmd = ["calibrate", *(str(measured[c]["path"]) for c in srcs), "--model-config", model, "--hardware", str(HARDWARE),
               "--policy", "chunked-prefill", "--max-num-seqs", str(SLOTS), "--max-batched-tokens", str(N_BATCH),
               "--out", str(cal)]
        tokenpace(*cmd)
        c_doc = json.loads(cal.read_text())
        r, fit = c_doc["roofline"], c_doc["fit"]
        def ms(key: str) -> str:
            lo, hi = fit["ranges"][key]
            span = f"{lo * 1e3:.1f}–{hi * 1e3:.1f}" if hi is not None else "undetermined"
            return f"{r[key] * 1e3:.2f} ms [{span}]"

        print(f"\nfit from c={name}: MFU {r['mfu']:.3f} {fit['ranges']['mfu']} · MBU {r['mbu']:.3f} "
              f"{fit['ranges']['mbu']} · step overhead {ms('step_overhead_s')} · sequence overhead "
              f"{ms('seq_overhead_s')} · RMS step error {fit['rms_relative_error'] * 100:.1f}% over "
              f"{fit['observations']['steps']} steps")
        print(f"  command: .venv/bin/tokenpace {' '.join(cmd)}")
        rows = []
        for c in sorted(REQUESTS):
            pred_path = out / f"pred-c{c}-from-c{name}.json"
            tokenpace("sim", "--calibration", str(cal), *load_args(c, shift), "--out", str(pred_path))
            pred = figures(json.loads(pred_path.read_text()))
            meas = measured[c]["figures"]
            rows.append({"concurrency": c, "fitted_here": c in srcs, "measured": meas, "predicted": pred,
                         "error_pct": {k: round((pred[k] / meas[k] - 1) * 100, 1) for k in meas}})
        print(f"  {'c':>3} {'TTFT p50 ms meas/pred (err)':>30} {'TPOT p50 ms meas/pred (err)':>30} "
              f"{'output tok/s meas/pred (err)':>30}")
        for row in rows:
            cells = [f"{row['measured'][k]:.1f} / {row['predicted'][k]:.1f} ({row['error_pct'][k]:+.1f}%)"
                     for k in ("ttft_p50_ms", "tpot_p50_ms", "output_tok_s")]
            mark = "*" if row["fitted_here"] else " "
            print(f"  {row['concurrency']:>2}{mark} {cells[0]:>30} {cells[1]:>30} {cells[2]:>30}")
        results.append({"fit_from": name, "roofline": r, "ranges": fit["ranges"],
                        "rms_step_error": fit["rms_relative_error"], "steps": fit["observations"]["steps"],
                        "decode_step_by_batch": fit["decode_step_by_batch"], "rows": rows})
    print("\n(* a run the calibration was fitted to)")
    print("reproduce: .venv/bin/python benchmarks/calibrate_llama.py")
    if args.json:
        print(json.dumps({"results": results, "template_tokens": shift,
                          "load_average_start": os.getloadavg()[0]}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
