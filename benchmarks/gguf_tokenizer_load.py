"""Loading a tokenizer from a GGUF file: built from the vocabulary (a cache miss) vs read back from
tokenpace's tokenizer cache (a hit), each in a fresh process, median of --repeat runs.

    .venv/bin/python benchmarks/gguf_tokenizer_load.py [MODEL.gguf] [--repeat 5]

Default model: the Gemma 3 270M GGUF that `python3 scripts/llama_engine.py ensure` assembles
(a 262,144-token SentencePiece vocabulary: about half a million merges).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = Path.home() / ".cache" / "tokenpace" / "models" / "gemma-3-270m-q4_k_m.gguf"
PROBE = ("import time; t = time.perf_counter(); from tokenpace.workload import load_tokenizer; "
         "tok = load_tokenizer({path!r}); n = tok.count('The quick brown fox'); "
         "print(time.perf_counter() - t)")


def timed_load(model: Path, cache: str) -> float:
    out = subprocess.run([sys.executable, "-c", PROBE.format(path=str(model))], check=True, capture_output=True,
                         text=True, cwd=ROOT, env=dict(os.environ, TOKENPACE_TOKENIZER_CACHE=cache))
    return float(out.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=str(DEFAULT_MODEL))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    model = Path(args.model)
    if not model.is_file():
        print(f"{model}: no such file (python3 scripts/llama_engine.py ensure makes the default one)", file=sys.stderr)
        return 2
    cold, warm = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(timed_load(model, cache))  # empty cache: built from the vocabulary, then saved
            warm.append(timed_load(model, cache))  # the entry just written
    print(f"command: .venv/bin/python benchmarks/gguf_tokenizer_load.py {model} --repeat {args.repeat}")
    print(f"load average {os.getloadavg()[0]:.2f}; seconds per load (import and one count included), "
          f"median of {args.repeat} (min–max):")
    for name, xs in (("built from the GGUF (cache miss, saved)", cold), ("from the cache (hit)", warm)):
        print(f"  {name:42s} {statistics.median(xs):6.2f}  ({min(xs):.2f}–{max(xs):.2f})")
    print(f"  hit / miss: {statistics.median(warm) / statistics.median(cold):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
