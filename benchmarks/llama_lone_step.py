"""What makes llama-server's one-sequence decode step slower inside a loaded run than in a c=1 run.

Starts llama-server exactly as benchmarks/calibrate_llama.py does (one thread, 8 slots, pinned to
CPU 1, ``-ctxcp 0``) and times one request's decode (the server's own ``timings``:
``predicted_per_token_ms``) in three situations, each a few times:

  fresh     the request alone on a fresh server (what a c=1 run sees)
  occupied  the same request alone after 3 other slots served long prompts (their KV cells kept
            or not: the slots' state is printed): does a lone sequence's step depend on the KV
            cells other slots hold?
  arrivals  the same request alone while another client posts a prompt of the benchmark's size to
            the server's /tokenize endpoint every ``--every-ms`` ms: HTTP parsing and tokenization
            on the server's HTTP thread, which shares the pinned core with the compute thread.
            What a new request costs the step it arrives in, without entering the batch.

    .venv/bin/python benchmarks/llama_lone_step.py            # about 1 minute
    .venv/bin/python benchmarks/llama_lone_step.py --repeats 5 --every-ms 20

Needs the engine: `python3 scripts/llama_engine.py ensure`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_llama import llama_server, ready_engine, server_cpu_s  # noqa: E402

_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only, never a proxy
WORDS = ("time year people way day man thing woman life child world school state family student group "
         "country problem hand part place case week company system program question work government "
         "number night point home water room mother area money story fact month lot right study book "
         "eye job word business issue side kind head house service friend father power hour game").split()


def prompt(words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def post(base: str, path: str, body: dict, timeout_s: float = 60.0) -> dict:
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with _HTTP.open(req, timeout=timeout_s) as resp:
        return json.loads(resp.read())


def get(base: str, path: str) -> object:
    with _HTTP.open(base + path, timeout=10) as resp:
        return json.loads(resp.read())


def timed_request(base: str, text: str, tokens: int) -> dict:
    """One completion of exactly ``tokens`` tokens (EOS ignored); the server's timings."""
    doc = post(base, "/completion", {"prompt": text, "n_predict": tokens, "ignore_eos": True,
                                     "cache_prompt": False, "temperature": 0})
    return doc["timings"]


def per_token(base: str, text: str, tokens: int, repeats: int) -> list[float]:
    return [timed_request(base, text, tokens)["predicted_per_token_ms"] for _ in range(repeats)]


def slots_state(base: str) -> str:
    try:
        slots = get(base, "/slots")
    except Exception as exc:  # /slots may be off in some builds
        return f"/slots unavailable ({exc})"
    return ", ".join(f"slot {s.get('id')}: n_ctx {s.get('n_ctx')}" for s in slots[:3]) + " ..."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=4, metavar="N", help="requests per situation (default 4)")
    parser.add_argument("--tokens", type=int, default=48, metavar="N", help="tokens each timed request decodes")
    parser.add_argument("--every-ms", type=float, default=25.0, metavar="MS",
                        help="the /tokenize client's period in the 'arrivals' situation (default 25)")
    args = parser.parse_args()
    engine = ready_engine()
    if engine is None:
        return 2
    text = prompt(160, 1)  # about the benchmark's median prompt (64-192 words)
    long_texts = [prompt(700, 10 + i) for i in range(3)]
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with llama_server(engine) as url:
        base = url.removesuffix("/v1")
        props = get(base, "/props")
        print(f"server: {props.get('total_slots')} slots, n_ctx per slot "
              f"{props.get('default_generation_settings', {}).get('n_ctx')}; {slots_state(base)}")
        timed_request(base, text, 4)  # warm-up
        results = {}
        cpu0 = server_cpu_s(url)
        results["fresh"] = per_token(base, text, args.tokens, args.repeats)
        # Three slots serve long prompts at once (so three different slots), then stay idle.
        with ThreadPoolExecutor(3) as pool:
            longs = list(pool.map(lambda t: post(base, "/completion", {"prompt": t, "n_predict": 8,
                                                                        "ignore_eos": True, "cache_prompt": False}),
                                  long_texts))
        print(f"occupying prompts: {[d['tokens_evaluated'] for d in longs]} tokens + 8 generated each")
        results["occupied"] = per_token(base, text, args.tokens, args.repeats)
        stop, calls, latencies = threading.Event(), [0], []

        def tokenizer_client() -> None:
            i = 0
            while not stop.is_set():
                t0 = time.perf_counter()
                post(base, "/tokenize", {"content": prompt(128, 100 + i)})
                latencies.append(time.perf_counter() - t0)
                calls[0] += 1
                i += 1
                time.sleep(max(0.0, args.every_ms / 1e3 - (time.perf_counter() - t0)))

        th = threading.Thread(target=tokenizer_client, daemon=True)
        calls_before = 0
        th.start()
        time.sleep(0.2)
        t0, calls_before = time.perf_counter(), calls[0]
        results["arrivals"] = per_token(base, text, args.tokens, args.repeats)
        span_s, n_calls = time.perf_counter() - t0, calls[0] - calls_before
        stop.set()
        th.join()
        cpu1 = server_cpu_s(url)
    fresh = statistics.median(results["fresh"])
    print(f"\nper-token decode time of one lone sequence (server timings, ms), {args.repeats} requests of "
          f"{args.tokens} tokens each:")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"  {name:<9} median {med:6.2f}  [{min(values):.2f}, {max(values):.2f}]  vs fresh {med / fresh - 1:+.1%}")
    rate = n_calls / span_s
    extra_ms = statistics.median(results["arrivals"]) - fresh
    print(f"  /tokenize calls during 'arrivals': {n_calls} in {span_s:.1f} s ({rate:.1f}/s), latency median "
          f"{statistics.median(latencies) * 1e3:.2f} ms; the step's extra time per call: "
          f"{extra_ms / (rate * statistics.median(results['arrivals']) / 1e3):.2f} ms")
    print(f"server CPU {cpu1 - cpu0:.1f} s; load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("reproduce: .venv/bin/python benchmarks/llama_lone_step.py"
          f" --repeats {args.repeats} --tokens {args.tokens} --every-ms {args.every_ms:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
