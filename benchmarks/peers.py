"""tokenpace and its peers (guidellm, aiperf, inference-perf) on one workload against llama-server.

Each peer is installed at run time into its own virtual environment under
``$TOKENPACE_CACHE/peers/<tool>-<version>/`` (default ``~/.cache/tokenpace``), never as a project
dependency, and reused. Every tool then runs the same bounded load against a real engine:
llama.cpp's ``llama-server`` serving Gemma 3 270M (Q4_K_M), built and cached by
``scripts/llama_engine.py``. Workload: closed loop, concurrency 4, 40 requests, prompts of 128
tokens, exactly 32 output tokens (``ignore_eos``), streaming ``/v1/completions`` (the one API all
four can drive with exact lengths: inference-perf's synthetic data is completions-only).

Fairness: one tool at a time; a fresh server for every run (``--no-cache-prompt`` too), warmed by
one unmeasured request so no tool pays for the first use of the model; the server pinned to one
CPU and the tool under test to the other (``--server-cpu``, ``--client-cpu``; on a shared machine
give the server the idler one). tokenpace runs 3 times, spread among the peers, so its run-to-run
noise can be read beside the differences.

Offline: every tool gets the same Hugging Face tokenizer folder, built here from the GGUF
file's own vocabulary (no hub), and runs with HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1,
HF_DATASETS_OFFLINE=1, a private HF_HOME, and HF_ENDPOINT pointing at a loopback port we listen on
and count connections to (a "hub canary": any attempt to reach a hub would show up there).

    .venv/bin/python benchmarks/peers.py                       # everything: ~17 min, +13 min of installs once
    .venv/bin/python benchmarks/peers.py --tools tokenpace,aiperf --tokenpace-runs 1
    .venv/bin/python benchmarks/peers.py --url http://127.0.0.1:8123/v1 --model tokenpace-sim \\
        --gguf ~/.cache/tokenpace/models/gemma-3-270m-q4_k_m.gguf   # any server; no restarts

Writes ``peers.json`` (every row, parsed from each tool's own result files, the same records under
our definitions, and the commands) and each tool's raw output under ``--out-dir``; prints the
tables (``--report peers.json`` prints them again).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peers import aiperf, guidellm, inference_perf, tokenpace_run  # noqa: E402
from _peers.common import Row, Target, Workload, peer_env, shell_line  # noqa: E402
from _peers.hf_tokenizer import write_hub_cache_mirror, write_tokenizer_dir  # noqa: E402
from _peers.install import PEERS, cache_root, ensure_peer, install_note  # noqa: E402
from _peers.isolation import HubCanary, affinity, children_cpu_s, cpus, stop_group  # noqa: E402
from _peers.ours import RECOMPUTE  # noqa: E402
from _peers.report import report  # noqa: E402

TOOLS = {"tokenpace": tokenpace_run, "guidellm": guidellm, "aiperf": aiperf,
         "inference-perf": inference_perf}
CPUS = {"server": 1, "client": 0}  # --server-cpu / --client-cpu


def load_llama_engine():
    spec = importlib.util.spec_from_file_location("llama_engine", ROOT / "scripts" / "llama_engine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def warm_up(url: str, model: str) -> None:
    """One unmeasured completion, so the first measured request meets a warm engine."""
    body = json.dumps({"model": model, "prompt": "Warm up the engine.", "max_tokens": 4,
                       "stream": False}).encode()
    request = urllib.request.Request(f"{url}/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()


# --- one run -----------------------------------------------------------------------------------

def run_tool(tool: str, run_dir: Path, w: Workload, target: Target, env: dict[str, str],
             log: Callable[[str], None]) -> Row:
    module = TOOLS[tool]
    run_dir.mkdir(parents=True, exist_ok=True)
    if tool == "tokenpace":
        exe = Path(sys.executable).with_name("tokenpace")
        argv = module.command(exe, w, target, run_dir)
        version = ""
    else:
        argv = module.command(ensure_peer(tool, log), w, target, run_dir)
        version = PEERS[tool].version
    shown_env = {k: env[k] for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                                     "HF_DATASETS_OFFLINE") if k in env}
    if tool == "aiperf":
        shown_env["HF_HUB_CACHE"] = env["HF_HUB_CACHE"]
    load_before = os.getloadavg()[0]
    cpu_before = children_cpu_s()
    started = time.monotonic()
    with open(run_dir / "stdout.log", "wb") as out:
        with affinity(CPUS["client"] if len(cpus()) > 1 else None):  # the child inherits it
            # Its own process group, so that a run past its time is stopped with every helper
            # process it started (aiperf runs a dozen).
            proc = subprocess.Popen(argv, cwd=run_dir, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        try:
            rc = proc.wait(timeout=w.timeout_s + 240)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            rc = 124
        except BaseException:  # Ctrl-C: the tool is in its own session, stop it too
            stop_group(proc)
            raise
    took_s = time.monotonic() - started
    tool_cpu_s = children_cpu_s() - cpu_before  # the tool and the helpers it waited for
    if rc != 0:
        tail = (run_dir / "stdout.log").read_text(errors="replace")[-1500:]
        raise RuntimeError(f"{tool} exited with {rc} after {took_s:.0f} s; its output ends:\n{tail}")
    row = module.parse(run_dir, version)
    row.command = shell_line(argv, shown_env)
    row.raw["wall_s"] = round(took_s, 1)
    row.raw["run_dir"] = str(run_dir)
    row.raw["load_avg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    row.raw["tool_cpu_s"] = round(tool_cpu_s, 1)  # includes its start-up (imports, tokenizer)
    log(f"  {tool}: done in {took_s:.0f} s (ok {row.ok}, failed {row.failed}; "
        f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after)")
    return row


def recompute(rows: list[Row]) -> list[Row]:
    """tokenpace's rows as they are; each peer's per-request records under our definitions."""
    out = []
    for r in rows:
        if r.tool in RECOMPUTE:
            out.append(RECOMPUTE[r.tool](Path(r.raw["run_dir"]), r.version))
        else:
            out.append(r)
    return out


def schedule(tools: list[str], tokenpace_runs: int) -> list[str]:
    """Spread tokenpace's repeats among the peers: tp, peer, peer, tp, peer, tp (for 3 peers)."""
    peers = [t for t in tools if t != "tokenpace"]
    if "tokenpace" not in tools or tokenpace_runs <= 0:
        return peers
    order: list[str] = []
    per_gap = max(1, -(-len(peers) // max(1, tokenpace_runs - 1))) if tokenpace_runs > 1 else len(peers)
    for i in range(tokenpace_runs):
        order.append("tokenpace")
        order += peers[i * per_gap:(i + 1) * per_gap]
    order += peers[tokenpace_runs * per_gap:]
    return order


# --- main ------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tools", default="tokenpace,guidellm,aiperf,inference-perf", metavar="LIST")
    p.add_argument("--tokenpace-runs", type=int, default=3, metavar="N")
    p.add_argument("--concurrency", type=int, default=4, metavar="N")
    p.add_argument("--requests", type=int, default=40, metavar="N")
    p.add_argument("--input-tokens", type=int, default=128, metavar="N")
    p.add_argument("--output-tokens", type=int, default=32, metavar="N")
    p.add_argument("--seed", type=int, default=42, metavar="N")
    p.add_argument("--timeout", type=int, default=300, metavar="SECONDS",
                   help="each tool's own per-request/run limit; we kill a run at this + 240 s")
    p.add_argument("--url", default=None, metavar="URL",
                   help="use this running server instead of starting llama-server (no restarts)")
    p.add_argument("--model", default=None, metavar="NAME", help="model name for --url")
    p.add_argument("--gguf", default=None, metavar="PATH",
                   help="GGUF file whose vocabulary becomes the tokenizer (default: the cached model)")
    p.add_argument("--threads", type=int, default=1, metavar="N", help="llama-server threads")
    p.add_argument("--slots", type=int, default=8, metavar="N", help="llama-server parallel slots")
    p.add_argument("--server-cpu", type=int, default=1, metavar="CPU",
                   help="pin llama-server here (default 1; pick the idler CPU on a shared machine)")
    p.add_argument("--client-cpu", type=int, default=0, metavar="CPU",
                   help="pin the tool under test here (default 0)")
    p.add_argument("--out-dir", default=None, metavar="DIR",
                   help="default tokenpace-runs/peers-<UTC time>")
    p.add_argument("--report", default=None, metavar="PEERS_JSON",
                   help="print the tables of a saved peers.json and exit (runs nothing)")
    args = p.parse_args(argv)
    if args.report:
        report(json.loads(Path(args.report).read_text()))
        return 0

    CPUS.update(server=args.server_cpu, client=args.client_cpu)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        p.error(f"unknown tool(s) {unknown}; known: {', '.join(TOOLS)}")
    w = Workload(args.concurrency, args.requests, args.input_tokens, args.output_tokens,
                 args.seed, args.timeout)
    out_dir = Path(args.out_dir or ROOT / "tokenpace-runs" /
                   time.strftime("peers-%Y%m%dT%H%M%SZ", time.gmtime())).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    engine = load_llama_engine()
    if args.url is None:
        log("llama-server and model: " + str(engine.ensure_llama_server()) + ", "
            + str(engine.ensure_model()))
    gguf = Path(args.gguf) if args.gguf else engine.model_path()

    # Peers first (network-bound, once), then the tokenizer (offline, once per model file).
    for tool in tools:
        if tool != "tokenpace":
            ensure_peer(tool, log)
    tok_root = cache_root() / "peers" / "tokenizers" / f"{gguf.stem}-{gguf.stat().st_size}-{_code_hash()}"
    if not (tok_root / "tokenizer_config.json").exists():
        log(f"building the tokenizer folder from {gguf} ...")
        write_tokenizer_dir(gguf, tok_root)
    hf_home = out_dir / "hf-home"  # private: no tool sees a user's hub cache or token
    write_hub_cache_mirror(tok_root, hf_home / "hub", aiperf.REPO_ID)

    canary = HubCanary()
    env = peer_env({"HF_HOME": str(hf_home), "HF_HUB_CACHE": str(hf_home / "hub"),
                    "HF_ENDPOINT": canary.url})
    env.pop("HF_TOKEN", None)

    rows: list[Row] = []
    failures: dict[str, str] = {}
    counts: dict[str, int] = {}
    for tool in schedule(tools, args.tokenpace_runs):
        counts[tool] = counts.get(tool, 0) + 1
        run_dir = out_dir / (f"{tool}-{counts[tool]}" if tool == "tokenpace" else tool)
        log(f"{tool} ({run_dir.name}) ...")
        try:
            with server(engine, args) as (url, model):
                target = Target(url, model, tok_root)
                rows.append(run_tool(tool, run_dir, w, target, env, log))
        except Exception as exc:  # a failed tool is a line in the report, not the end of the run
            failures[run_dir.name] = f"{type(exc).__name__}: {exc}"
            log(f"  {tool} FAILED: {failures[run_dir.name][:2000]}")

    ours = []
    try:
        ours = recompute(rows)
    except Exception as exc:  # a format we did not foresee: say so, keep the main table
        failures["recompute"] = f"{type(exc).__name__}: {exc}"
    result = {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "workload": asdict(w), "api": "/v1/completions, streaming",
        "server": "llama-server (llama.cpp from llama-cpp-python "
                  f"{engine.LLAMA_CPP_PYTHON_VERSION}), {gguf.name}, slots {args.slots}, "
                  f"threads {args.threads}, --no-cache-prompt, restarted per run, on CPU "
                  f"{CPUS['server']} (tools on CPU {CPUS['client']})"
                  if args.url is None else args.url,
        "tokenizer": str(tok_root), "peers": {t: install_note(t) for t in PEERS if t in tools},
        "hub_canary_connections": len(canary.connections),
        "rows": [r.as_dict() for r in rows], "failures": failures,
        "rows_our_definitions": [r.as_dict() for r in ours],
        "command": shell_line([sys.executable, *sys.argv]),
        "git": _git_state(),
    }
    (out_dir / "peers.json").write_text(json.dumps(result, indent=1, default=str))
    report(result)
    print(f"\nParsed results: {out_dir / 'peers.json'}")
    return 1 if failures else 0


def _code_hash() -> str:
    """Of the code that turns a GGUF vocabulary into a tokenizer: a fix there rebuilds the folder."""
    import hashlib
    digest = hashlib.sha1()
    for path in (ROOT / "src/tokenpace/workload/tokenizer.py", ROOT / "src/tokenpace/gguf.py",
                 Path(__file__).with_name("_peers") / "hf_tokenizer.py"):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def _git_state() -> str:
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@contextlib.contextmanager
def server(engine, args) -> Iterator[tuple[str, str]]:
    """A fresh llama-server on CPU 1 (or the given --url as is), warmed up."""
    if args.url:
        model = args.model or json.load(urllib.request.urlopen(f"{args.url}/models"))["data"][0]["id"]
        yield args.url, model
        return
    with affinity(CPUS["server"] if len(cpus()) > 1 else None):
        cm = engine.running_llama_server(slots=args.slots, threads=args.threads)
        url = cm.__enter__()
    try:
        warm_up(url, engine.MODEL_ALIAS)
        yield url, engine.MODEL_ALIAS
    finally:
        cm.__exit__(None, None, None)


if __name__ == "__main__":
    sys.exit(main())
