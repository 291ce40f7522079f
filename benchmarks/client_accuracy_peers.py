"""tokenpace, guidellm, aiperf and inference-perf against the same built-in server in one run,
each tool's TTFT, TPOT and ITL set beside the server's own send log (the truth).

Each tool in turn drives a fresh built-in server (its own process, pinned to CPU 1, real-time
priority when allowed; the tool pinned to CPU 0) that logs ``time.monotonic_ns()`` just before it
writes each chunk: prefill 50 ms, decode step 40 ms, 64 tokens a request, 5% jitter, one token per
chunk (as client_accuracy.py). Load: closed loop, N streams, N x --waves requests, streaming
/v1/completions, prompts of 128 tokens, exactly 64 output tokens (``ignore_eos``).

Truth, per request, from the send log: TTFT = first token chunk written - request received;
TPOT = (last token - first token) / (tokens - 1); ITL = every gap between two token chunks. Each
tool's own figure minus the truth's, at p50 and p99 (distributions: the peers send no request id
that the log could join on; tokenpace's records are also joined request by request, as
client_accuracy.py does: "TTFT err joined"). A tool's TTFT includes what it spends between
stamping the start and the request reaching the server, which the server cannot see; so a
difference is the tool's overhead plus its lateness in reading, never negative by more than noise.

Also per tool: the mean requests the server held in flight while all N should have been (from the
N-th arrival to the last), the token chunks the server wrote per second, and per CPU-second of the
tool's whole process tree (start-up, imports and tokenizer included: the peers' cannot be told
apart; tokenpace's load-only figure is printed beside it).

The peers are never project dependencies; install them with benchmarks/peers/install.py (each in
its own venv under /tmp/tokenpace-peers) and pass the flags it prints, or have them on PATH. A
missing tool is skipped with the line that installs it. Loopback only; every run is bounded in
requests and time. The tokenizer every tool uses is built offline from the cached Gemma GGUF
(scripts/llama_engine.py downloads it once).

    .venv/bin/python benchmarks/client_accuracy_peers.py --concurrency 256 \\
        $(python3 benchmarks/peers/install.py)      # all four tools, ~20 s of load each
    .venv/bin/python benchmarks/client_accuracy_peers.py --tools tokenpace,aiperf --concurrency 64
    .venv/bin/python benchmarks/client_accuracy_peers.py --tools tokenpace,inference-perf \\
        --ramp 32,64,128,256 --waves 3 $(python3 benchmarks/peers/install.py)
        # the highest chunk rate each tool sustains with its per-chunk timing error p99 <= 1 ms

--ramp: each tool at each stream count of the list (tools alternating which goes first), then the
highest server chunk rate at which the tool's per-chunk timing error p99 stayed within
--max-error-ms (1 ms). The per-chunk error of a peer is read from its ITL p99 minus the server's ITL
p99 over the same requests (the peers send no id to join on: a chunk stamped late lengthens one
gap, so the gaps' tail grows by the lateness); tokenpace's must also pass joined chunk by chunk.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (SERVER_CPU, machine_line, mean_in_flight, pcts, read_truth, table,  # noqa: E402
                      truth_server)
from _peers import aiperf, guidellm, inference_perf, tokenpace_run  # noqa: E402
from _peers.common import Row, Target, Workload, peer_env, shell_line  # noqa: E402
from _peers.isolation import HubCanary, affinity, children_cpu_s, cpus, stop_group  # noqa: E402
from client_accuracy import PREFILL_S, STEP_S, analyze  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"tokenpace": tokenpace_run, "guidellm": guidellm, "aiperf": aiperf, "inference-perf": inference_perf}
COMMANDS = {"tokenpace": "tokenpace", "guidellm": "guidellm", "aiperf": "aiperf", "inference-perf": "inference-perf"}
CLIENT_CPU = 0
OUTPUT_TOKENS, INPUT_TOKENS = 64, 128


def find_bin(tool: str, given: dict[str, str]) -> Path | None:
    if tool in given:
        return Path(given[tool])
    if tool == "tokenpace":  # this checkout's
        return Path(sys.executable).with_name("tokenpace")
    found = shutil.which(COMMANDS[tool])
    return Path(found) if found else None


def tokenizer_dir(gguf: Path, cache: Path) -> Path:
    from _peers.hf_tokenizer import write_tokenizer_dir

    folder = cache / f"{gguf.stem}-{gguf.stat().st_size}"
    if not (folder / "tokenizer_config.json").exists():
        write_tokenizer_dir(gguf, folder)
    return folder


def truth_figures(truth: dict, ids: set[str] | None = None) -> dict:
    """The server's own TTFT, TPOT and ITL (ms) over the requests in ``ids`` (None: all)."""
    ttft, tpot, itl = [], [], []
    chunks = 0
    for rid, t in truth.items():
        if (ids is not None and rid not in ids) or not t.token_ns:
            continue
        ttft.append((t.token_ns[0] - t.received_ns) / 1e6)
        gaps = [(b - a) / 1e6 for a, b in zip(t.token_ns, t.token_ns[1:])]
        itl.extend(gaps)
        tokens = sum(t.token_counts)
        if tokens > 1:
            tpot.append((t.token_ns[-1] - t.token_ns[0]) / 1e6 / (tokens - 1))
        chunks += len(t.token_ns)
    return {"ttft": pcts(ttft), "tpot": pcts(tpot), "itl": pcts(itl), "requests": len(ttft), "chunks": chunks}


def run_tool(tool: str, exe: Path, w: Workload, target: Target, run_dir: Path, env: dict[str, str]
             ) -> tuple[Row, dict]:
    """Run one tool to its end (its own session, pinned to CLIENT_CPU, killed past its time)."""
    module = TOOLS[tool]
    run_dir.mkdir(parents=True, exist_ok=True)
    venv = exe.parent.parent  # the peers' command() take the venv the tool is in
    argv = (module.command(exe, w, target, run_dir) if tool == "tokenpace"
            else module.command(venv, w, target, run_dir))
    if tool != "tokenpace":
        argv[0] = str(exe)
    cpu_before, load_before, started = children_cpu_s(), os.getloadavg()[0], time.monotonic()
    with open(run_dir / "stdout.log", "wb") as out:
        with affinity(CLIENT_CPU if len(cpus()) > 1 else None):
            proc = subprocess.Popen(argv, cwd=run_dir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = proc.wait(timeout=w.timeout_s + 120)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            rc = 124
        except BaseException:
            stop_group(proc)
            raise
    wall_s, cpu_s = time.monotonic() - started, children_cpu_s() - cpu_before
    if rc != 0:
        tail = (run_dir / "stdout.log").read_text(errors="replace")[-1200:]
        raise RuntimeError(f"{tool} exited with {rc} after {wall_s:.0f} s; its output ends:\n{tail}")
    row = module.parse(run_dir, "")
    row.command = shell_line(argv)
    return row, {"wall_s": wall_s, "cpu_s": cpu_s, "load_avg": [load_before, os.getloadavg()[0]]}


def tokenpace_joined(run_dir: Path, truth: dict, concurrency: int) -> tuple[dict, set[str], float | None]:
    """tokenpace's records joined to the send log (client_accuracy.analyze), the ids it sent,
    and its load-only CPU seconds (the load generator's own figure)."""
    from tokenpace.results.records import read_records

    records = read_records(run_dir / "run.records.jsonl")
    doc = json.loads((run_dir / "run.json").read_text())
    load = doc.get("load_generator") or {}
    cpu = load.get("client_cpu_s")
    return analyze(records, truth, concurrency), {r.request_id for r in records}, cpu


def measure(tool: str, given: dict[str, str], w: Workload, run_dir: Path, tok: Path, env: dict[str, str]
            ) -> dict | None:
    """One tool at one load against a fresh truth server: its row, the truth over the same requests,
    tokenpace's joined errors, cost and load held. None (and a line) when it is missing or failed."""
    n = w.concurrency
    exe = find_bin(tool, given)
    if exe is None or not exe.exists():
        print(f"{tool}: skipped, not found (install: python3 benchmarks/peers/install.py --tools {tool}, "
              f"then --peer-bin {tool}=/tmp/tokenpace-peers/peers/{tool}-<version>/bin/{COMMANDS[tool]})")
        return None
    log = run_dir / "sends.jsonl"
    run_dir.mkdir(parents=True, exist_ok=True)
    print(f"{tool}: running {n} streams ...", flush=True)
    with truth_server(log, max_num_seqs=n, prefill_s=PREFILL_S, step_s=STEP_S) as server:
        model = json.load(urllib.request.urlopen(f"{server.url}/models", timeout=10))["data"][0]["id"]
        try:
            row, cost = run_tool(tool, exe, w, Target(server.url, model, tok), run_dir, env)
        except Exception as exc:  # noqa: BLE001 - one tool failing is a line, not the end
            print(f"  {tool} FAILED: {str(exc)[:1500]}")
            return None
    truth = read_truth(log)
    joined, ids, load_cpu = (tokenpace_joined(run_dir, truth, n) if tool == "tokenpace" else (None, None, None))
    t = truth_figures(truth, ids)
    arrivals = sorted(x.received_ns for x in truth.values())
    spans = [(x.received_ns, x.done_ns) for x in truth.values() if x.done_ns]
    held = mean_in_flight(spans, arrivals[n - 1], arrivals[-1]) if len(arrivals) > n else None
    window_s = (max(e for _, e in spans) - arrivals[0]) / 1e9 if spans else None
    print(f"  {tool}: ok {row.ok}, failed {row.failed}; server saw {t['requests']} requests; "
          f"{cost['wall_s']:.0f} s wall, {cost['cpu_s']:.1f} CPU s", flush=True)
    return {"row": row.as_dict(), "truth": t, "joined": joined, "cost": cost, "held": held,
            "window_s": window_s, "load_cpu_s": load_cpu}


def ramp(tools: list[str], given: dict[str, str], levels: list[int], args: argparse.Namespace, out_dir: Path,
         tok: Path, env: dict[str, str], canary: HubCanary) -> int:
    """Each tool at each load of the ramp (tools alternating which goes first); the highest chunk
    rate each sustained with its per-chunk timing error p99 within --max-error-ms."""
    bound = args.max_error_ms
    results: dict[tuple[str, int], dict] = {}
    for i, n in enumerate(levels):
        w = Workload(concurrency=n, requests=n * args.waves, input_tokens=INPUT_TOKENS,
                     output_tokens=OUTPUT_TOKENS, seed=42, timeout_s=args.timeout)
        for tool in (tools if i % 2 == 0 else tools[::-1]):
            x = measure(tool, given, w, out_dir / f"{tool}-{n}", tok, env)
            if x is not None:
                results[(tool, n)] = x
    print("\nPer-chunk timing error p99 at each load, ms. For every tool: its ITL p99 minus the server's over the"
          " same requests (a chunk stamped late lengthens one gap and shortens the next, so the tail of the gaps"
          " grows by the lateness); tokenpace also joined chunk by chunk to the send log\n")
    rows, best = [], {}
    for (tool, n), x in sorted(results.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        got, true = (x["row"]["itl_ms"] or {}).get("p99"), x["truth"]["itl"].get("p99")
        err = got - true if got is not None and true is not None else None
        rate = x["truth"]["chunks"] / x["window_s"] if x["window_s"] else None
        joined = x["joined"]["chunk"]["p99"] if x["joined"] else None
        ok = err is not None and abs(err) <= bound and (joined is None or joined <= bound)
        if ok and rate is not None and rate > best.get(tool, 0.0):
            best[tool] = rate
        rows.append([tool, n, f"{rate:,.0f}" if rate else "—", f"{x['held']:.1f}" if x["held"] is not None else "—",
                     f"{err:+.2f}" if err is not None else "—", f"{joined:.2f}" if joined is not None else "—",
                     f"{x['cost']['cpu_s']:.1f}", "{:.1f} → {:.1f}".format(*x["cost"]["load_avg"]),
                     "yes" if ok else "no"])
    print(table(["tool", "streams", "chunks/s (server)", "in flight", "ITL p99 - truth", "joined chunk err p99",
                 "tool CPU s", "load avg", f"within {bound:g} ms"], rows))
    print(f"\nHighest chunk rate sustained within {bound:g} ms (p99):")
    for tool in tools:
        print(f"  {tool}: " + (f"{best[tool]:,.0f} chunks/s" if tool in best else "none of the loads"))
    if "tokenpace" in best and "inference-perf" in best:
        print(f"  tokenpace / inference-perf: {best['tokenpace'] / best['inference-perf']:.2f}x")
    print(f"\nHub canary connections: {len(canary.connections)} (any would mean a tool tried to reach a hub)")
    (out_dir / "client_accuracy_peers_ramp.json").write_text(json.dumps(
        {f"{tool}@{n}": x for (tool, n), x in results.items()}, indent=1, default=str))
    print(f"Figures: {out_dir / 'client_accuracy_peers_ramp.json'}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tools", default=",".join(TOOLS), metavar="LIST", help="default: all four")
    ap.add_argument("--concurrency", type=int, default=256, metavar="N", help="streams (default 256)")
    ap.add_argument("--waves", type=int, default=6, metavar="N",
                    help="requests per stream (default 6: about 16 s of load at 2.6 s a request)")
    ap.add_argument("--peer-bin", action="append", default=[], metavar="NAME=PATH",
                    help="where a tool's command is (repeatable; default: on PATH)")
    ap.add_argument("--gguf", default=None, metavar="PATH",
                    help="GGUF whose vocabulary every tool tokenizes with (default: the cached Gemma 3 270M)")
    ap.add_argument("--timeout", type=int, default=120, metavar="S", help="each tool's own time limit")
    ap.add_argument("--out-dir", default=None, metavar="DIR", help="default: a temporary folder")
    ap.add_argument("--ramp", metavar="N,N,...",
                    help="run each tool at each of these stream counts instead of --concurrency, and report "
                         "the highest chunk rate each sustains with its per-chunk timing error p99 within "
                         "--max-error-ms")
    ap.add_argument("--max-error-ms", type=float, default=1.0, metavar="MS",
                    help="the per-chunk timing error bound of --ramp (default 1 ms, issue 18's)")
    args = ap.parse_args()
    given = {}
    for item in args.peer_bin:
        name, sep, path = item.partition("=")
        if not sep or name not in TOOLS:
            ap.error(f"--peer-bin takes NAME=PATH with NAME one of {', '.join(TOOLS)}, not {item!r}")
        given[name] = path
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if any(t not in TOOLS for t in tools):
        ap.error(f"--tools: known tools are {', '.join(TOOLS)}")
    gguf = Path(args.gguf) if args.gguf else Path.home() / ".cache/tokenpace/models/gemma-3-270m-q4_k_m.gguf"
    if not gguf.exists():
        print(f"no tokenizer model at {gguf}: fetch it once with `python scripts/llama_engine.py` "
              "or pass --gguf", file=sys.stderr)
        return 2
    out_dir = Path(args.out_dir or tempfile.mkdtemp(prefix="tp-peers-acc-")).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    n = args.concurrency
    w = Workload(concurrency=n, requests=n * args.waves, input_tokens=INPUT_TOKENS,
                 output_tokens=OUTPUT_TOKENS, seed=42, timeout_s=args.timeout)
    print(machine_line() + f"; tools on CPU {CLIENT_CPU}, server on CPU {SERVER_CPU}")
    print("Command: .venv/bin/python benchmarks/client_accuracy_peers.py " + shlex.join(sys.argv[1:]))
    print(f"Server: prefill {PREFILL_S * 1e3:g} ms, decode step {STEP_S * 1e3:g} ms, {OUTPUT_TOKENS} tokens, "
          f"jitter 5%, 1 token per chunk; closed loop, "
          f"{f'streams {args.ramp}, {args.waves} requests a stream' if args.ramp else f'{n} streams'}, "
          f"{'' if args.ramp else f'{w.requests} requests a tool, '}"
          f"/v1/completions streamed\n")
    tok = tokenizer_dir(gguf, out_dir.parent / "tp-peers-tokenizers")
    hf_home = out_dir / "hf-home"  # private: no tool sees a user's hub cache or token
    from _peers.hf_tokenizer import write_hub_cache_mirror

    write_hub_cache_mirror(tok, hf_home / "hub", aiperf.REPO_ID)
    canary = HubCanary()  # any attempt to reach a model hub shows up here
    env = peer_env({"HF_HOME": str(hf_home), "HF_HUB_CACHE": str(hf_home / "hub"), "HF_ENDPOINT": canary.url})
    env.pop("HF_TOKEN", None)

    if args.ramp:
        return ramp(tools, given, [int(x) for x in args.ramp.split(",")], args, out_dir, tok, env, canary)
    rows, results = [], {}
    for tool in tools:
        x = measure(tool, given, w, out_dir / tool, tok, env)
        if x is not None:
            results[tool] = x
            rows.append(tool)

    def d(tool: str, fig: str, stat: str) -> str:
        r, t = results[tool]["row"], results[tool]["truth"]
        got = (r[f"{fig}_ms"] or {}).get(stat)
        true = t[fig].get(stat)
        if got is None or true is None:
            return "—"
        return f"{got:.1f} / {true:.1f} ({got - true:+.1f})"

    print("\nEach tool's figure / the server's truth over the same requests (difference), ms\n")
    print(table(["tool", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "ITL p50", "ITL p99"],
                [[tool] + [d(tool, f, s) for f, s in (("ttft", "p50"), ("ttft", "p99"), ("tpot", "p50"),
                                                       ("tpot", "p99"), ("itl", "p50"), ("itl", "p99"))]
                 for tool in rows]))
    if "tokenpace" in results:
        j = results["tokenpace"]["joined"]
        print(f"\ntokenpace joined request by request (client stamp - server write): TTFT err p50 "
              f"{j['ttft']['p50']:.2f} ms, p99 {j['ttft']['p99']:.2f} ms; every chunk p99 {j['chunk']['p99']:.2f} ms; "
              f"tokens exact {j['exact']}/{j['compared']}")
    print("\nLoad held and cost\n")
    out_rows = []
    for tool in rows:
        x = results[tool]
        chunks, cpu = x["truth"]["chunks"], x["cost"]["cpu_s"]
        rate = chunks / x["window_s"] if x["window_s"] else None
        load_only = (f"{chunks / x['load_cpu_s']:,.0f}" if x["load_cpu_s"] else "—")
        out_rows.append([tool, f"{x['held']:.1f}" if x["held"] is not None else "—", x["truth"]["requests"],
                         f"{rate:,.0f}" if rate else "—", f"{cpu:.1f}", f"{chunks / cpu:,.0f}" if cpu else "—",
                         load_only, f"{x['cost']['wall_s']:.0f}",
                         "{:.1f} → {:.1f}".format(*x["cost"]["load_avg"])])
    print(table(["tool", f"in flight (of {n})", "requests", "chunks/s", "tool CPU s", "chunks per CPU-s",
                 "per load CPU-s", "wall s", "load avg"], out_rows))
    print(f"\nHub canary connections: {len(canary.connections)} (any would mean a tool tried to reach a hub)")
    (out_dir / "client_accuracy_peers.json").write_text(json.dumps(results, indent=1, default=str))
    print(f"Figures: {out_dir / 'client_accuracy_peers.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
