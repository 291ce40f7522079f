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
long one, whose own prompt takes about 3 s; with ``--neighbours K``, K such streams sent together, each
decoding 20 + 20K tokens, and K times the wait). Each line is the server's own ``prompt_ms`` for the
measured prompt (from its timings), median and spread over the rounds.

    .venv/bin/python benchmarks/llama_kv_scan.py              # about 3 minutes
    .venv/bin/python benchmarks/llama_kv_scan.py --rounds 8 --per-slot
    .venv/bin/python benchmarks/llama_kv_scan.py --prompt-words 150,450   # two prompt lengths, interleaved
    .venv/bin/python benchmarks/llama_kv_scan.py --neighbours 3           # three decoding streams beside it

With two or more prompt lengths, the last lines compare what the long neighbour costs each length
more than the short one (the other sequence's ~950 more cells) with what two counts of the cells a
step computes predict: every prompt row over every other cell (the extra grows with the prompt's
rows), or ggml's tiled flash attention, where only the query tile holding the decode row computes
the decoding sequence's cells (the same extra for every prompt of at least 64 rows; RESULTS 7za).

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


def measure(base: str, case: str, seed: int, prompt_words: int = PROMPT_WORDS,
            neighbours: int = 1) -> tuple[float, int]:
    """The measured prompt's ``prompt_ms`` and its prompt tokens (``prompt_n``), beside ``neighbours``
    streams of the case's kind sent together (their prompts computed first, then the measured one
    beside their decodes: the wait and the tokens they decode grow with their number)."""
    threads = []
    if case != "alone":
        words, wait_s = NEIGHBOURS[case]
        threads = [threading.Thread(target=chat, args=(base, words, 1000 + 97 * k + seed, 20 + 20 * neighbours))
                   for k in range(neighbours)]
        for thread in threads:
            thread.start()
        time.sleep(wait_s * neighbours)
    try:
        t = chat(base, prompt_words, seed, 1)
        return t["prompt_ms"], t["prompt_n"]
    finally:
        for thread in threads:
            thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=16, help="prompts per case (default 16)")
    parser.add_argument("--per-slot", action="store_true", help="a KV stream per slot (--no-kv-unified)")
    parser.add_argument("--prompt-words", default=str(PROMPT_WORDS),
                        help=f"the measured prompt's length in words, or several, comma-separated, measured "
                             f"interleaved (default {PROMPT_WORDS}: about 160 tokens)")
    parser.add_argument("--neighbours", type=int, default=1,
                        help="decoding streams beside the measured prompt in the short and long cases (default 1)")
    args = parser.parse_args()
    if not 1 <= args.neighbours <= 7:
        parser.error("--neighbours takes 1 to 7 (the server has 8 slots)")
    try:
        lengths = [int(w) for w in args.prompt_words.split(",")]
    except ValueError:
        parser.error(f"--prompt-words takes word counts, comma-separated, not {args.prompt_words!r}")
    if not lengths or min(lengths) < 1:
        parser.error("--prompt-words takes word counts of at least 1")
    engine = ready_engine()
    if engine is None:
        return 2
    kv = "per-slot" if args.per_slot else "unified"
    cases = ("alone", *NEIGHBOURS)
    got = {(w, c): [] for w in lengths for c in cases}
    tokens: dict[int, list[int]] = {w: [] for w in lengths}
    with llama_server(engine, KV_CACHE[kv]) as url:
        base = url.removesuffix("/v1")
        chat(base, 50, 1, 1)  # warm
        for r in range(args.rounds):
            for w in lengths:
                for case in cases:
                    ms, n = measure(base, case, 10 + r % 4, w, args.neighbours)
                    got[w, case].append(ms)
                    tokens[w].append(n)
    extra = {}
    for w in lengths:
        n = statistics.median(tokens[w])
        print(f"llama-server -t 1 -np 8 ({kv} KV), Gemma 3 270M: prompt_ms of a {w}-word prompt "
              f"({n:g} tokens), {args.rounds} rounds, {args.neighbours} neighbour(s)")
        alone = statistics.median(got[w, "alone"])
        for case in cases:
            v = got[w, case]
            print(f"  {case:>5}: median {statistics.median(v):6.1f} ms  [{min(v):.1f}, {max(v):.1f}]  "
                  f"{statistics.median(v) / alone - 1:+.1%} vs alone")
        extra[w] = (statistics.median(got[w, "long"]) - statistics.median(got[w, "short"]), n)
    if len(lengths) > 1:
        first = lengths[0]
        print("the long neighbour's cost beyond the short one's, by prompt length (ms), against each count's "
              f"prediction from the {first}-word prompt's:")
        for w in lengths:
            ms, n = extra[w]
            rows = extra[first][0] * n / extra[first][1]  # every prompt row over every other cell
            print(f"  {w:>5} words ({n:g} tokens): {ms:6.1f} ms measured; every row over every cell {rows:6.1f}; "
                  f"tiles (the decode row's query tile only) {extra[first][0]:6.1f}")
    print(f"reproduce: .venv/bin/python benchmarks/llama_kv_scan.py --rounds {args.rounds}"
          + (" --per-slot" if args.per_slot else "")
          + (f" --neighbours {args.neighbours}" if args.neighbours != 1 else "")
          + (f" --prompt-words {args.prompt_words}" if lengths != [PROMPT_WORDS] else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
