"""Does a change to what `tokenpace sim` does around the simulator change any file it writes? Runs
the whole command on a few configurations against two (or more) source trees and compares every
file of the run, byte for byte: the result JSON, the records and timeline JSONL, every member of
the columnar records, and the console (without its wall-time line).

``sim_same_output.py`` checks the simulator's result (records, stats, timeline) in process; this
script checks the command's writers, summary and console too.

    OLD=$(mktemp -d) && git archive main src | tar -x -C "$OLD"
    .venv/bin/python benchmarks/sim_same_files.py --src "$OLD/src" --src src
    .venv/bin/python benchmarks/sim_same_files.py --src "$OLD/src" --src src --only c64,timeouts

Each configuration runs in a fresh process per tree (``PYTHONPATH=<tree>``), into a directory of
its own. Printed per configuration: the files compared and whether every tree wrote the same bytes;
for a difference, the first file that differs. Exit status 1 when any configuration differs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BASE = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "1024", "--output-tokens", "256"]
CASES = {
    "c64": [*BASE, "--requests", "2000", "--concurrency", "64"],
    "c1024": [*BASE, "--requests", "2000", "--concurrency", "1024", "--max-num-seqs", "1024"],
    "timeouts": [*BASE, "--requests", "1500", "--concurrency", "512", "--max-num-seqs", "512",
                 "--num-gpu-blocks", "6000", "--timeout", "20", "--warmup", "50req"],
    "duration": [*BASE, "--duration", "30", "--grace", "2", "--concurrency", "128", "--idle-timeout", "1"],
    "open-prefix": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--rate", "40", "--requests", "1500",
                    "--input-tokens", "uniform:min=600,max=2500", "--output-tokens", "uniform:min=1,max=600",
                    "--shared-prefix-tokens", "512",
                    "--prefix-caching", "--ttft-timeout", "1"],
    "open-varied": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--rate", "30", "--requests", "1500",
                    "--arrival", "gamma", "--burstiness", "0.5", "--ramp", "10", "--seed", "7",
                    "--input-tokens", "uniform:min=100,max=3000", "--output-tokens", "lognormal:mean=300,sigma=0.6"],
    "closed-varied": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--concurrency", "96", "--requests", "1500",
                      "--input-tokens", "normal:mean=1500,std=400", "--output-tokens", "uniform:min=10,max=500",
                      "--warmup", "5s"],
    "conversations": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--conversations",
                      "sessions=60,turns=10", "--prefix-caching"],
    "vllm-slo-cost": [*BASE, "--engine", "vllm", "--requests", "1500", "--concurrency", "256",
                      "--slo", "chat", "--gpu-hour-usd", "2.5"],
}


def run(src: Path, name: str, out_dir: Path) -> dict[str, str]:
    """The SHA-256 of every file the command wrote, and of its console, by name."""
    out_dir.mkdir(parents=True)
    # Run from the directory, "--out run.json": the result names its path as given.
    argv = [sys.executable, "-m", "tokenpace", "sim", *CASES[name], "--no-progress", "--out", "run.json"]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=out_dir,
                          env={**os.environ, "PYTHONPATH": str(src)})
    if proc.returncode:
        sys.exit(f"{name} failed under {src}:\n{proc.stderr[-2000:]}")
    digests = {}
    for path in sorted(p for p in out_dir.rglob("*") if p.is_file()):
        rel = str(path.relative_to(out_dir))
        if zipfile.is_zipfile(path):  # each member, so a difference names it
            with zipfile.ZipFile(path) as z:
                for member in z.namelist():
                    digests[f"{rel}:{member}"] = hashlib.sha256(z.read(member)).hexdigest()
        digests[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    console = re.sub(r"Simulated .* of engine time in .*\n?", "", proc.stdout + proc.stderr)  # the one line that reads a clock
    digests["console"] = hashlib.sha256(console.encode()).hexdigest()
    return digests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", action="append", type=Path, help="a tree's src/ directory (give two or more)")
    ap.add_argument("--only", help="comma-separated configuration names: " + ", ".join(CASES))
    args = ap.parse_args()
    srcs = [s.resolve() for s in (args.src or [ROOT / "src"])]
    names = [n for n in CASES if not args.only or n in args.only.split(",")]
    print("trees: " + ", ".join(str(s) for s in srcs))
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            rows = [run(s, name, Path(tmp) / f"{name}-{i}") for i, s in enumerate(srcs)]
            bad = sorted(k for k in set().union(*rows) if len({r.get(k) for r in rows}) > 1)
            differ += bool(bad)
            print(f"{name:<15} {len(rows[0]):>5} files and members  " + ("same" if not bad else f"DIFFER: {bad[:3]}"),
                  flush=True)
    print("every configuration identical" if not differ else f"{differ} configuration(s) differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
