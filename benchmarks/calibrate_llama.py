"""Calibrate the simulator on a real engine and check its predictions at other loads.

llama.cpp's llama-server serves Gemma 3 270M (Q4_K_M GGUF) on this machine's CPU with one thread
(`-t 1`, 8 slots, pinned to CPU 1, one KV buffer for all slots: `--kv-unified`); `tokenpace bench` (pinned to CPU 0) measures it closed loop at
each concurrency (1, 2, 4, 8, 16: past the 8 slots, requests queue). `tokenpace calibrate` fits the
step model to one run or several pooled (the hardware: examples/hardware/cpu-2core-x86.json; the
model and its measured bits per weight: the GGUF file itself), then `tokenpace sim --calibration`
predicts every concurrency, and the table compares TTFT p50, TPOT p50 and output tokens/s with what
was measured. The whole measurement is repeated (``--repeats``, default 3) and each repeat
calibrated and predicted on its own, so the summary shows the run-to-run spread of each error; every
level's line carries the load average and the CPU seconds the server and the client spent, because
a CPU engine's step times follow the machine's load.

The machine's own speed is measured too: a probe (3 requests one at a time, 128 words in, 32 tokens
out) runs before each level and after the last, and a level's speed is the mean of the probes around
it. The summary then shows each error a second time with that drift taken out: the prediction scaled
by how much slower the probes ran around the level than around the fitted one(s). The raw error is the
target; the adjusted one is a hint only, as a 3-request probe is about as noisy as the drift it would
take out and cannot see a slow minute between two probes (RESULTS 7v: not better overall).

    .venv/bin/python benchmarks/calibrate_llama.py                  # ~17 min: 3 repeats, fits from c=4 and c=1+4+16
    .venv/bin/python benchmarks/calibrate_llama.py --scale 2        # levels twice as long (~30 min)
    .venv/bin/python benchmarks/calibrate_llama.py --fit-from 4 --repeats 1 --json
    .venv/bin/python benchmarks/calibrate_llama.py --reuse          # the sim side again on the runs in --out-dir
    .venv/bin/python benchmarks/calibrate_llama.py --kv-cache per-slot   # as before 2026-11-25 (RESULTS 7a-7n)
    .venv/bin/python benchmarks/calibrate_llama.py --vary-seed      # repeat N's lengths from seed 7 + N - 1

Why `--kv-unified` (the default since RESULTS 7o): with a KV stream per slot (`--no-kv-unified`,
what `-np 8` gave before) llama.cpp runs a step's decoding sequences on adjacent slots as one ubatch
and on slots apart as several, at different costs (two sequences: 46 ms as one ubatch, 38 ms as
two; benchmarks/llama_ubatch_layout.py), and which slots a run's requests land in depends on the
server's history, so the measured TPOT moved by up to 12% between repeats (RESULTS 7n). The
simulator has no slots. With one KV buffer llama.cpp splits a batch simply: every sequence of a
step in one ubatch, whatever its slot, so a step's cost depends on what it computes alone
(`llama_ubatch_layout.py --kv-unified`: each layout of k sequences within a few percent of the
others).

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
import resource
import subprocess
import sys
import time
from pathlib import Path

from tokenpace.results.records import read_records
from tokenpace.simulator.calibrate import load_calibration, step_errors

from _calibrate_report import (print_fit, print_resolution, print_table, prompts_per_step,  # beside this script
                               resampled_errors, resolution, summary, without_resamples)
from _machine_speed import drift_adjusted, speed

ROOT = Path(__file__).resolve().parents[1]
HARDWARE = ROOT / "examples" / "hardware" / "cpu-2core-x86.json"
CLIENT_CPU, SERVER_CPU = 0, 1
SLOTS = 8
KV_CACHE = {"unified": ("--kv-unified",), "per-slot": ("--no-kv-unified",)}  # --kv-cache: llama-server's flag
N_BATCH = 2048  # llama-server's default --batch-size: the token budget of one step
INPUT = (64, 192)  # uniform prompt lengths (words): mean 128, varied so that prefill's slope shows
OUTPUT = (24, 40)  # uniform output lengths: mean 32
# Requests measured per level (before the warmup's); --scale multiplies them. Longer levels average a
# closed loop's phase: its p50 TTFT moves with how many prompts the engine happens to compute together.
REQUESTS = {1: 16, 2: 24, 4: 32, 8: 40, 16: 48}
DEFAULT_FITS = ("4", "1+4+16")  # issue 25's targets: from c=4 alone, and from a sweep of c=1, 4, 16
WARMUP = 2  # requests; the first ones pay for cold caches
SEED = 7  # the same lengths at every concurrency (the first N draws), so only the load differs
# The machine's own speed, measured before each level and after the last: requests one at a time, of
# one fixed shape. A shared VM's speed moves by up to half from one minute to the next (RESULTS 7v: a
# neighbour's memory traffic slows a one-thread decode by 20-80%), and each level is measured minutes
# after the fitted one.
PROBE = ("--concurrency", "1", "--requests", "3", "--warmup", "0req", "--input-tokens", "128",
         "--output-tokens", "32", "--seed", "11")


def load_engine():
    spec = importlib.util.spec_from_file_location("llama_engine", ROOT / "scripts" / "llama_engine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ready_engine():
    """scripts/llama_engine.py as a module when llama-server and its model are built; else None,
    with the command that builds them printed."""
    engine = load_engine()
    missing = engine.missing_parts()
    if missing:
        print(f"{'; '.join(missing)}: run `python3 scripts/llama_engine.py ensure`", file=sys.stderr)
        return None
    return engine


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


def load_args(concurrency: int, input_shift: int = 0, seed: int = SEED) -> list[str]:
    return ["--concurrency", str(concurrency), "--requests", str(REQUESTS[concurrency]),
            "--warmup", f"{WARMUP}req",
            "--input-tokens", f"uniform:min={INPUT[0] + input_shift},max={INPUT[1] + input_shift}",
            "--output-tokens", f"uniform:min={OUTPUT[0]},max={OUTPUT[1]}", "--seed", str(seed)]


def run_seed(result: Path) -> int:
    """The workload seed a measured run was made with (``SEED`` unless ``--vary-seed`` moved it):
    its simulation draws the same lengths."""
    return int(json.loads(result.read_text())["config"].get("seed", SEED))


@contextlib.contextmanager
def llama_server(engine, extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 log_path: Path | None = None):
    """llama-server pinned to SERVER_CPU (a child inherits this process's affinity at start);
    ``extra_args`` are added to its command line, ``env`` to its environment; ``log_path``: where
    its output goes."""
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
        extra = ("-ctxcp", "0", *extra_args)
        cm = engine.running_llama_server(slots=SLOTS, threads=1, extra=extra, env=env, log_path=log_path)
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


def server_cpu_s(url: str) -> float | None:
    """CPU seconds (user + system) the llama-server listening at ``url``'s port has used so far:
    found by its command line in /proc (Linux); None where that cannot be read."""
    port = url.rsplit(":", 1)[1].split("/")[0]
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"--port" in argv and argv[argv.index(b"--port") + 1].decode() == port:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            continue
    return None


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def probe(url: str, path: Path, reuse: bool) -> dict[str, float] | None:
    """The machine's speed now (``PROBE``'s TTFT and TPOT p50), into ``path``; None where a reused
    directory has no probe (measured before 2026-12-03)."""
    if not reuse:
        tokenpace("bench", "--url", url, *PROBE, "--out", str(path), "--no-progress", cpus={CLIENT_CPU})
    return figures(json.loads(path.read_text())) if path.exists() else None


def measure(url: str, out: Path, reuse: bool, server: str = "", seed: int = SEED) -> dict[int, dict]:
    """Every level once, into ``out``, its lengths drawn with ``seed``; with each, the load average
    and CPU seconds around it, and the machine's speed (``probe``) just before and just after it."""
    measured: dict[int, dict] = {}
    levels = sorted(REQUESTS)
    probes = [probe(url, out / f"probe-before-c{c}.json", reuse) for c in levels[:1]]
    for i, c in enumerate(levels):
        run = out / f"measured-c{c}.json"
        info = out / f"measured-c{c}.machine.json"
        if not reuse:
            load0, wall0, cpu0, srv0 = os.getloadavg()[0], time.monotonic(), children_cpu_s(), server_cpu_s(url)
            tokenpace("bench", "--url", url, *load_args(c, seed=seed), "--out", str(run), "--no-progress",
                      cpus={CLIENT_CPU})
            srv1 = server_cpu_s(url)
            info.write_text(json.dumps({
                "load_average_start": round(load0, 2), "load_average_end": round(os.getloadavg()[0], 2),
                "wall_s": round(time.monotonic() - wall0, 1), "client_cpu_s": round(children_cpu_s() - cpu0, 1),
                "server": server,
                "server_cpu_s": round(srv1 - srv0, 1) if srv0 is not None and srv1 is not None else None}))
        after = out / (f"probe-before-c{levels[i + 1]}.json" if i + 1 < len(levels) else "probe-after.json")
        probes.append(probe(url, after, reuse))
        doc = json.loads(run.read_text())
        machine = json.loads(info.read_text()) if info.exists() else {}
        measured[c] = {"figures": figures(doc), "path": run, "valid": doc["load_generator"].get("valid", True),
                       "machine": machine, "started_utc": doc.get("started_utc"), "speed": speed(probes[i:i + 2])}
        m = machine
        print(f"  measured c={c:<2} TTFT p50 {measured[c]['figures']['ttft_p50_ms']:7.1f} ms · TPOT p50 "
              f"{measured[c]['figures']['tpot_p50_ms']:6.1f} ms · {measured[c]['figures']['output_tok_s']:5.1f} tok/s"
              f" · load {m.get('load_average_start', '?')}→{m.get('load_average_end', '?')} · wall "
              f"{m.get('wall_s', '?')} s, server CPU {m.get('server_cpu_s', '?')} s, client CPU "
              f"{m.get('client_cpu_s', '?')} s ({doc.get('started_utc')})"
              + ("" if measured[c]["speed"] is None else " · probe TTFT {ttft_p50_ms:.0f} ms, TPOT {tpot_p50_ms:.1f} ms"
                 .format(**measured[c]["speed"])))
    return measured


def calibrate_and_predict(measured: dict[int, dict], srcs: list[int], out: Path, model: str, shift: int,
                          kv_cache: str, join_window: str | None = None, tile_rows: int | None = None,
                          stream_interval: str | None = None, resample_seed: int = 0) -> dict:
    """Calibrate from the runs at ``srcs`` (``--shared-kv`` with one KV buffer: its scan is fitted)
    and predict every level; each level's latency errors also over resampled request pairs
    (``resampled_errors``, drawn with ``resample_seed``)."""
    name = "+".join(map(str, srcs))
    cal = out / f"cal-c{name}.json"
    cmd = ["calibrate", *(str(measured[c]["path"]) for c in srcs), "--model-config", model, "--hardware",
           str(HARDWARE), "--policy", "chunked-prefill", "--max-num-seqs", str(SLOTS), "--max-batched-tokens",
           str(N_BATCH), "--out", str(cal), *(("--shared-kv",) if kv_cache == "unified" else ()),
           *(("--join-window", join_window) if join_window else ()),
           *(("--attention-tile-rows", str(tile_rows)) if tile_rows is not None else ()),
           *(("--stream-interval", stream_interval) if stream_interval else ())]
    tokenpace(*cmd)
    c_doc = json.loads(cal.read_text())
    calibration = load_calibration(cal)
    rows = []
    for c in sorted(REQUESTS):
        pred_path = out / f"pred-c{c}-from-c{name}.json"
        tokenpace("sim", "--calibration", str(cal), *load_args(c, shift, run_seed(measured[c]["path"])),
                  "--out", str(pred_path))
        pred = figures(json.loads(pred_path.read_text()))
        steps = step_errors(calibration, read_records(measured[c]["path"].with_suffix(".records.jsonl")))
        meas = measured[c]["figures"]
        rows.append({"concurrency": c, "fitted_here": c in srcs, "measured": meas, "predicted": pred,
                     "error_pct": {k: round((pred[k] / meas[k] - 1) * 100, 1) for k in meas},
                     "drift_adjusted": drift_adjusted(pred, meas, measured[c]["speed"],
                                                      [measured[s]["speed"] for s in srcs]),
                     "steps": steps,
                     "prompts_per_step": {"measured": prompts_per_step(steps),
                                          "simulated": prompts_per_step(step_errors(calibration, read_records(
                                              pred_path.with_suffix(".records.jsonl"))))},
                     "_resampled": resampled_errors(measured[c]["path"].with_suffix(".records.jsonl"),
                                                    pred_path.with_suffix(".records.jsonl"), resample_seed)})
    fit = c_doc["fit"]
    return {"fit_from": name, "roofline": c_doc["roofline"], "ranges": fit["ranges"],
            "undetermined": sorted(fit.get("undetermined", {})), "rms_step_error": fit["rms_relative_error"],
            "steps": fit["observations"]["steps"], "decode_step_by_batch": fit["decode_step_by_batch"],
            "rows": rows, "command": f".venv/bin/tokenpace {' '.join(cmd)}"}


def cpu_model() -> str:
    """The CPU's model name (Linux): a VM may land on another host between runs."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "cpu MHz")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main() -> int:
    global REQUESTS  # --levels narrows it
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit-from", action="append", metavar="C[+C...]",
                        help="run(s) to calibrate from, by concurrency; 1+4+16 pools three runs (repeatable; "
                             f"default: {' and '.join(DEFAULT_FITS)})")
    parser.add_argument("--repeats", type=int, default=3, metavar="N",
                        help="measure every level N times, each repeat calibrated on its own (default 3)")
    parser.add_argument("--levels", metavar="C,C,...", default=",".join(map(str, REQUESTS)),
                        help=f"concurrencies to measure and predict (default {','.join(map(str, REQUESTS))})")
    parser.add_argument("--scale", type=float, default=1.0, metavar="F",
                        help="requests per level times F (default 1: "
                             f"{', '.join(f'c={c}: {n}' for c, n in REQUESTS.items())}), at least 4")
    parser.add_argument("--reuse", action="store_true",
                        help="calibrate and predict from the measured runs already in --out-dir")
    parser.add_argument("--out-dir", default="tokenpace-runs/calibrate-llama", metavar="DIR")
    parser.add_argument("--kv-cache", choices=sorted(KV_CACHE), default="unified",
                        help="llama-server's KV cache: one buffer for all slots (default), or a stream per "
                             "slot, where a step's cost depends on which slots its sequences sit in")
    parser.add_argument("--join-window", choices=("arrival", "finish", "none"),
                        help="calibrate with `tokenpace calibrate --join-window MODE` (default: calibrate's, arrival)")
    parser.add_argument("--attention-tile-rows", type=int, metavar="N",
                        help="calibrate with `tokenpace calibrate --attention-tile-rows N` (default: calibrate's, 64 "
                             "with one KV buffer; 0: as before 2026-12-03, RESULTS 7u)")
    parser.add_argument("--stream-interval", choices=("measured", "none"),
                        help="calibrate with `tokenpace calibrate --stream-interval MODE` (default: calibrate's, measured; "
                             "RESULTS 7zb, 7zj)")
    parser.add_argument("--vary-seed", action="store_true",
                        help=f"draw repeat N's lengths with seed {SEED} + N - 1 (default: seed {SEED} in every "
                             "repeat), so that the repeats' medians do not all rest on one draw's closed-loop "
                             "phase (RESULTS 7zi)")
    parser.add_argument("--seed", type=int, default=SEED, metavar="S",
                        help=f"draw the lengths with seed S (default {SEED}; with --vary-seed, repeat N's with S + N - 1)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    parser.add_argument("--url", metavar="URL", help="measure a llama-server already running there (started "
                        f"like scripts/llama_engine.py's, with -np {SLOTS}) instead of starting one")
    args = parser.parse_args()
    try:
        REQUESTS = {int(c): REQUESTS[int(c)] for c in args.levels.split(",")}
    except (KeyError, ValueError):
        parser.error(f"--levels: a comma-separated subset of {','.join(map(str, REQUESTS))}")
    if not 0 < args.scale <= 10:
        parser.error("--scale must lie in (0, 10]")
    REQUESTS = {c: max(4, round(n * args.scale)) for c, n in REQUESTS.items()}
    fit_from = [[int(c) for c in spec.split("+")] for spec in (args.fit_from or DEFAULT_FITS)]
    if any(c not in REQUESTS for spec in fit_from for c in spec):
        parser.error(f"--fit-from: concurrencies are {sorted(REQUESTS)}")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    root = ROOT / args.out_dir
    engine = load_engine()
    missing = [] if args.url or args.reuse else engine.missing_parts()
    if missing:
        print(f"{'; '.join(missing)}: run `python3 scripts/llama_engine.py ensure`", file=sys.stderr)
        return 2
    model = str(engine.model_path())
    server = "(the one at --url)" if args.url else f"-t 1 -np {SLOTS} {' '.join(KV_CACHE[args.kv_cache])}"
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs: "
          f"{cpu_model()}) · "
          f"llama-server {server} on CPU {SERVER_CPU}, bench on CPU {CLIENT_CPU} · model {model}")

    results: list[list[dict]] = []
    machines = []
    for rep in range(args.repeats):
        out = root / f"repeat-{rep + 1}"
        out.mkdir(parents=True, exist_ok=True)
        print(f"\nrepeat {rep + 1} of {args.repeats} ({out.relative_to(ROOT) if out.is_relative_to(ROOT) else out})")
        started = time.monotonic()
        with (contextlib.nullcontext(args.url or "(reused)") if args.url or args.reuse
              else llama_server(engine, KV_CACHE[args.kv_cache])) as url:
            measured = measure(url, out, args.reuse, server, args.seed + rep if args.vary_seed else args.seed)
        machines.append({c: m["machine"] for c, m in measured.items()})
        print(f"  measurements took {time.monotonic() - started:.0f} s")
        shift = round(template_tokens(out / "measured-c4.records.jsonl"))
        print(f"  the chat template adds {shift} prompt tokens on average: the simulation's prompts are shifted by it")
        results.append([calibrate_and_predict(measured, srcs, out, model, shift, args.kv_cache, args.join_window,
                                              args.attention_tile_rows, args.stream_interval, rep)
                        for srcs in fit_from])
        for result in results[-1]:
            print_fit(result)
    table = summary(results, fit_from, sorted(REQUESTS))
    print(f"\nerror = predicted / measured − 1: median [min, max] over {args.repeats} repeat(s); * fitted")
    print_table(table)
    if all(row["drift_adjusted"] for row in table):
        print("\nthe same once the machine's drift is taken out (each prediction scaled by the probes' speed "
              "around its level against the fitted level's)")
        print_table(table, "drift_adjusted")
    print_resolution(resolution(results, fit_from, sorted(REQUESTS)), table)
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("reproduce: .venv/bin/python benchmarks/calibrate_llama.py"
          + "".join(f" --fit-from {'+'.join(map(str, s))}" for s in fit_from) + f" --repeats {args.repeats}"
          + f" --levels {','.join(map(str, REQUESTS))} --kv-cache {args.kv_cache}"
          + (f" --join-window {args.join_window}" if args.join_window else "")
          + (f" --attention-tile-rows {args.attention_tile_rows}" if args.attention_tile_rows is not None else "")
          + (f" --stream-interval {args.stream_interval}" if args.stream_interval else "")
          + (" --vary-seed" if args.vary_seed else "") + (f" --seed {args.seed}" if args.seed != SEED else "")
          + (f" --scale {args.scale:g}" if args.scale != 1 else ""))
    print(f"requests per level: {', '.join(f'c={c}: {n}' for c, n in REQUESTS.items())}")
    if args.json:
        print(json.dumps({"summary": table, "repeats": without_resamples(results), "machine": machines}, indent=2,
                         default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
