"""What a llama-server decode step costs by the slots its sequences sit in, not only by how many.

With a KV stream per slot (``-np 8``, ``--kv-unified`` off) llama.cpp splits a step's batch with
``split_equal(sequential=true)`` (``src/llama-batch.cpp``): one ubatch holds only sequences of
consecutive ids, so k decoding sequences on adjacent slots run as one ubatch and the same k on
scattered slots as several. The simulator has no slots: it prices k decodes alike wherever they sit.

This pins k concurrent requests to chosen slots (``id_slot`` on the native ``/completion``), all
with the same prompt length and the same number of tokens, started together so that their decode
steps hold all k, and reads each request's decode time per token from the server's own timings
(``predicted_per_token_ms``: the step time, as every step holds the k). Layouts are measured in
turn, interleaved over the repeats. The server is started exactly as benchmarks/calibrate_llama.py
starts it (one thread, 8 slots, pinned to CPU 1, ``-ctxcp 0``).

    .venv/bin/python benchmarks/llama_ubatch_layout.py             # about 4 minutes
    .venv/bin/python benchmarks/llama_ubatch_layout.py --repeats 5 --tokens 64
    .venv/bin/python benchmarks/llama_ubatch_layout.py --kv-unified     # one KV buffer: no layout effect?

Needs the engine: `python3 scripts/llama_engine.py ensure`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_llama import llama_server, ready_engine, server_cpu_s  # noqa: E402
from llama_lone_step import post, prompt  # noqa: E402

# Slot sets, by how many sequences decode together: adjacent (one ubatch) beside scattered ones.
LAYOUTS = (
    (3,),
    (3, 4), (2, 5),
    (2, 3, 4), (1, 3, 5), (2, 3, 5),
    (2, 3, 4, 5), (0, 1, 4, 5), (0, 1, 2, 5), (0, 2, 4, 6),
    (0, 1, 2, 3, 4), (0, 1, 2, 3, 5), (0, 2, 4, 5, 6),
    (0, 1, 2, 3, 4, 5), (0, 1, 2, 4, 5, 6),
    (0, 1, 2, 3, 4, 5, 6), (0, 1, 2, 3, 5, 6, 7),
    (0, 1, 2, 3, 4, 5, 6, 7),
)
PROMPT_WORDS = 128  # about the calibration benchmark's mean prompt


def runs(slots: tuple[int, ...]) -> tuple[int, ...]:
    """The ubatches split_equal makes of these decoding slots: lengths of runs of consecutive ids."""
    out: list[int] = []
    prev = None
    for s in sorted(slots):
        if prev is not None and s == prev + 1:
            out[-1] += 1
        else:
            out.append(1)
        prev = s
    return tuple(sorted(out, reverse=True))


def layout_step_ms(base: str, slots: tuple[int, ...], tokens: int, seed: int) -> float:
    """k requests pinned to ``slots``, started together; the median of their decode ms per token."""
    barrier = threading.Barrier(len(slots))
    per_token: list[float] = []

    def one(i: int, slot: int) -> None:
        body = {"prompt": prompt(PROMPT_WORDS, seed + i), "n_predict": tokens, "ignore_eos": True,
                "cache_prompt": False, "temperature": 0, "id_slot": slot}
        barrier.wait()
        per_token.append(post(base, "/completion", body)["timings"]["predicted_per_token_ms"])

    threads = [threading.Thread(target=one, args=(i, s)) for i, s in enumerate(slots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statistics.median(per_token)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, metavar="N", help="rounds over every layout (default 3)")
    parser.add_argument("--tokens", type=int, default=48, metavar="N", help="tokens each request decodes (default 48)")
    parser.add_argument("--kv-unified", action="store_true",
                        help="start the server with one KV buffer for all slots (--kv-unified): llama.cpp then "
                             "splits a batch simply, every sequence in one ubatch")
    args = parser.parse_args()
    engine = ready_engine()
    if engine is None:
        return 2
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results: dict[tuple[int, ...], list[float]] = {layout: [] for layout in LAYOUTS}
    with llama_server(engine, ("--kv-unified",) if args.kv_unified else ()) as url:
        base = url.removesuffix("/v1")
        layout_step_ms(base, (3,), 4, 0)  # warm-up
        cpu0 = server_cpu_s(url)
        for r in range(args.repeats):
            for j, layout in enumerate(LAYOUTS):
                results[layout].append(layout_step_ms(base, layout, args.tokens, 1000 * r + 10 * j))
        cpu1 = server_cpu_s(url)
    one = statistics.median(results[LAYOUTS[0]])
    print(f"\ndecode step time (ms) by the slots of its k sequences; median [min, max] over {args.repeats} rounds, "
          f"{args.tokens} tokens each; runs: the runs of adjacent slots (the ubatches, with a KV stream per slot)"
          + (" (--kv-unified: one ubatch whatever the runs)" if args.kv_unified else "") + ":")
    print(f"  {'k':>2}  {'slots':<26} {'runs':<12} {'step ms':>8}  {'range':<16} {'/ k x one':>9}")
    for layout in LAYOUTS:
        v = results[layout]
        med = statistics.median(v)
        print(f"  {len(layout):>2}  {','.join(map(str, layout)):<26} {'+'.join(map(str, runs(layout))):<12} "
              f"{med:8.1f}  [{min(v):6.1f}, {max(v):6.1f}] {med / (len(layout) * one):9.2f}")
    print(f"server CPU {cpu1 - cpu0:.1f} s; load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"reproduce: .venv/bin/python benchmarks/llama_ubatch_layout.py --repeats {args.repeats} --tokens {args.tokens}"
          + (" --kv-unified" if args.kv_unified else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
