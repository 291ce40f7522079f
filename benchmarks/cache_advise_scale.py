"""`tokenpace lint` and `tokenpace workload reuse` on a large synthetic request log: wall time and
peak memory of each command in its own process, and the reuse replay against a peer (a plain
per-block LRU, an ordered dict with one entry per block hash) on the same block hashes.

    .venv/bin/python benchmarks/cache_advise_scale.py --requests 100000 [--words 1500] [--keep LOG]
    .venv/bin/python benchmarks/cache_advise_scale.py --requests 1000000 --log /tmp/requests-1m.jsonl
    git archive COMMIT src | tar -x -C /tmp/base    # an earlier version, to compare in the same run:
    .venv/bin/python benchmarks/cache_advise_scale.py --requests 100000 --baseline-src /tmp/base/src --repeat 3

``--log PATH`` writes the log there once and reuses it on later runs (a 1M log is ~9 GB: keep it
outside the repository). ``--baseline-src DIR`` runs each command also with that source tree first
on PYTHONPATH, alternating with this one, and prints the ratio of the medians.

The log: OpenAI chat bodies of ~--words words each (a word is ~1.3 tokens: 1,500 words is ~2,000
tokens): 40 system prompts of ~90% of the length, a third of them opening with the current time
(what the lint must find), then a unique user message of ~10%; one request per 50 ms.
Figures go to benchmarks/RESULTS.md (section 13).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

_R = random.Random(1)
WORDS = ["".join(_R.choices("abcdefghijklmnopqrstuvwxyz", k=_R.randint(2, 9))) for _ in range(5000)]  # prose-like: no digits


def make_log(path: Path, requests: int, words: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    systems = [" ".join(rng.choices(WORDS, k=int(words * 0.9))) for _ in range(40)]
    size = 0
    t0 = 1_764_000_000.0
    with open(path, "w") as fh:
        for i in range(requests):
            g = rng.randrange(40)
            system = systems[g]
            ts = t0 + i * 0.05
            if g % 3 == 0:
                system = time.strftime("Current time: %Y-%m-%dT%H:%M:%SZ. ", time.gmtime(ts)) + system
            user = " ".join(rng.choices(WORDS, k=words - int(words * 0.9)))
            line = json.dumps({"timestamp": ts, "request": {"model": "m", "messages": [
                {"role": "system", "content": system}, {"role": "user", "content": user}]}}) + "\n"
            size += len(line)
            fh.write(line)
    return size


def timed(cmd: list[str], src: str | None = None) -> tuple[float, float, str, float]:
    """Wall seconds, peak RSS (MiB) of the command's own process, its output, and its CPU seconds
    (user + system: on a shared machine the steadier figure). ``src``: a source tree to run instead."""
    env = dict(os.environ, PYTHONPATH=src) if src else None
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out}")
    return wall, usage.ru_maxrss / 1024, out, usage.ru_utime + usage.ru_stime


def peer_vs_radix(log: Path, limit: int, block: int) -> dict:
    """Replay the first ``limit`` requests' block hashes through both caches, in this process."""
    from tokenpace.advise.logs import read_log
    from tokenpace.advise.radix import RadixTree, brute_force_lru
    from tokenpace.advise.units import Encoder, block_hashes, raw_units

    enc = Encoder()
    seqs = []
    for req in read_log(str(log)):
        seqs.append(block_hashes(raw_units(req, enc), block))
        if len(seqs) >= limit:
            break
    capacity = 20 * len(seqs[0])  # room for half of the 40 system prompts
    t = time.perf_counter()
    tree = RadixTree(capacity)
    radix_hits = [tree.match_insert(s) for s in seqs]
    radix_s = time.perf_counter() - t
    lists = [s.tolist() for s in seqs]
    t = time.perf_counter()
    peer_hits = brute_force_lru(lists, capacity)
    peer_s = time.perf_counter() - t
    assert radix_hits == peer_hits, "the radix LRU and the per-block LRU disagree"
    return {"requests": len(seqs), "blocks_per_request": float(np.mean([len(s) for s in seqs])),
            "radix_s": radix_s, "per_block_lru_s": peer_s, "hits_equal": True}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--words", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each command (median reported)")
    ap.add_argument("--peer-requests", type=int, default=20_000)
    ap.add_argument("--keep", metavar="LOG", help="write the log here and keep it")
    ap.add_argument("--log", metavar="PATH", help="the log: written here if absent, else reused (kept)")
    ap.add_argument("--baseline-src", metavar="DIR", help="also run an earlier source tree (its src/)")
    ap.add_argument("--skip-peer", action="store_true", help="skip the radix-against-ordered-dict replay")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cache-advise-")
    log = Path(args.log or args.keep or Path(tmp) / "requests.jsonl")
    t = time.perf_counter()
    if args.log and log.exists():
        with open(log, "rb") as fh:
            lines = sum(1 for _ in fh)
        if lines != args.requests:
            raise SystemExit(f"{log} holds {lines:,} requests, not --requests {args.requests:,}")
        size = log.stat().st_size
        print(f"log: {log} reused, {lines:,} requests, {size / 2**20:,.0f} MiB")
    else:
        size = make_log(log, args.requests, args.words)
        print(f"log: {args.requests:,} requests, ~{args.words} words each, {size / 2**20:,.0f} MiB, "
              f"written in {time.perf_counter() - t:.1f} s")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    exe = [sys.executable, "-m", "tokenpace"]
    commands = {"lint": exe + ["lint", str(log), "--json"],
                "reuse": exe + ["workload", "reuse", str(log), "--cache-tokens", "500000", "--json"]}
    per_million = 1_000_000 / args.requests
    for name, cmd in commands.items():
        trees = [("this tree", None)] + ([("baseline", args.baseline_src)] if args.baseline_src else [])
        runs: dict[str, list] = {label: [] for label, _ in trees}
        for _ in range(args.repeat):  # alternating, so both see the same machine
            for label, src in trees:
                runs[label].append(timed(cmd, src))
        medians = {}
        for label, rs in runs.items():
            wall = statistics.median(r[0] for r in rs)
            cpu = statistics.median(r[3] for r in rs)
            rss = max(r[1] for r in rs)
            medians[label] = (wall, cpu)
            report = json.loads(rs[-1][2])
            if name == "lint":
                extra = " · findings: " + ", ".join(f"{f['kind']} ×{f['requests']:,}" for f in report["findings"])
            else:
                extra = (f" · ceiling {report['ceiling']['hit_rate']:.1%}, LRU(500k words) "
                         f"{report['lru']['hit_rate']:.1%}")
            print(f"{name} ({label}): wall {wall:.1f} s, CPU {cpu:.1f} s, medians of {len(rs)} "
                  f"({args.requests / wall:,.0f} requests/s wall; per 1M requests: {wall * per_million:.0f} s wall, "
                  f"{cpu * per_million:.0f} s CPU), peak RSS {rss:.0f} MiB · load average "
                  f"{os.getloadavg()[0]:.2f}{extra}")
        if args.baseline_src:
            (w, c), (bw, bc) = medians["this tree"], medians["baseline"]
            print(f"{name}: baseline / this tree = {bc / c:.2f}x CPU, {bw / w:.2f}x wall")
    if args.skip_peer:
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print("command: .venv/bin/python benchmarks/cache_advise_scale.py " + " ".join(sys.argv[1:]))
        return
    peer = peer_vs_radix(log, min(args.peer_requests, args.requests), 16)
    print(f"replay of {peer['requests']:,} requests ({peer['blocks_per_request']:.0f} blocks each) through an "
          f"LRU of 20 system prompts: radix tree {peer['radix_s']:.2f} s, per-block ordered dict "
          f"{peer['per_block_lru_s']:.2f} s ({peer['per_block_lru_s'] / peer['radix_s']:.1f}x), same hits")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("command: .venv/bin/python benchmarks/cache_advise_scale.py " + " ".join(sys.argv[1:]))
    if not args.keep and not args.log:
        log.unlink()
    if not any(Path(tmp).iterdir()):
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
