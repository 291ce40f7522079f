"""What a prompt costs llama-server beside a decoding sequence, by that sequence's context length.

With one KV buffer for all slots (``--kv-unified``, as benchmarks/calibrate_llama.py starts the
server) every row of a step's attention visits every KV cell in use, the other sequences' cells
too, which its mask hides (ggml's CPU flash attention loops over all cells and skips the masked
ones one by one). If that costs time, a prompt computed in the same step as a decoding sequence
costs more the longer that sequence's context. The simulator prices it as ``kv_scan_s`` (per query
row and KV cell of another sequence in the step), which ``tokenpace calibrate`` fits.

Three cases, interleaved over the rounds, the same prompts (about 160 tokens, one output token) in
each: the prompt alone; beside a streaming chat request of a short prompt (20 words) decoding 40
tokens; beside one of a long prompt (900 words, about 1,000 tokens of context). The neighbour is
sent first and the prompt once the neighbour decodes (0.7 s after a short neighbour, 4 s after a
long one, whose own prompt takes about 3 s). Each line is the server's own ``prompt_ms`` for the
measured prompt (from its timings), median and spread over the rounds.

    .venv/bin/python benchmarks/llama_kv_scan.py              # about 3 minutes
    .venv/bin/python benchmarks/llama_kv_scan.py --rounds 8 --per-slot

Needs the engine: `python3 scripts/llama_engine.py ensure`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_llama import KV_CACHE, llama_server, ready_engine  # noqa: E402
from llama_lone_step import prompt  # noqa: E402

PROMPT_WORDS = 150
NEIGHBOURS = {"short": (20, 0.7), "long": (900, 4.0)}  # words of the neighbour's prompt, seconds before the prompt
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only, never via a proxy


def chat(base: str, words: int, seed: int, tokens: int) -> dict:
    """A streaming chat completion of exactly ``tokens`` tokens; the server's timings."""
    body = {"messages": [{"role": "user", "content": prompt(words, seed)}], "max_tokens": tokens,
            "ignore_eos": True, "stream": True}
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    timings = {}
    with _HTTP.open(req, timeout=120) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: ") and '"timings"' in line:
                timings = json.loads(line[6:]).get("timings") or timings
    return timings


def measure(base: str, case: str, seed: int) -> float:
    if case == "alone":
        return chat(base, PROMPT_WORDS, seed, 1)["prompt_ms"]
    words, wait_s = NEIGHBOURS[case]
    neighbour = threading.Thread(target=chat, args=(base, words, 1000 + seed, 40))
    neighbour.start()
    time.sleep(wait_s)
    try:
        return chat(base, PROMPT_WORDS, seed, 1)["prompt_ms"]
    finally:
        neighbour.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=16, help="prompts per case (default 16)")
    parser.add_argument("--per-slot", action="store_true", help="a KV stream per slot (--no-kv-unified)")
    args = parser.parse_args()
    engine = ready_engine()
    if engine is None:
        return 2
    kv = "per-slot" if args.per_slot else "unified"
    cases = ("alone", *NEIGHBOURS)
    got: dict[str, list[float]] = {c: [] for c in cases}
    with llama_server(engine, KV_CACHE[kv]) as url:
        base = url.removesuffix("/v1")
        chat(base, 50, 1, 1)  # warm
        for r in range(args.rounds):
            for case in cases:
                got[case].append(measure(base, case, 10 + r % 4))
    print(f"llama-server -t 1 -np 8 ({kv} KV), Gemma 3 270M: prompt_ms of a {PROMPT_WORDS}-word prompt "
          f"(about 160 tokens), {args.rounds} rounds")
    alone = statistics.median(got["alone"])
    for case in cases:
        v = got[case]
        print(f"  {case:>5}: median {statistics.median(v):6.1f} ms  [{min(v):.1f}, {max(v):.1f}]  "
              f"{statistics.median(v) / alone - 1:+.1%} vs alone")
    print(f"reproduce: .venv/bin/python benchmarks/llama_kv_scan.py --rounds {args.rounds}"
          + (" --per-slot" if args.per_slot else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
