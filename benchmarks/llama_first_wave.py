"""The order in which llama-server queues a closed loop's first wave, against the order it was sent.

`tokenpace bench` sends a closed loop's first requests one after another (0.3-0.5 ms apart here).
On llama-server pinned to one core, as `calibrate_llama.py` runs it, every request's HTTP handler
(parse, chat template, tokenize, post the task) shares that core with the loop that runs the model,
and the loop starts a step as soon as it finds a task queued. So which requests the first step
holds depends on the order the handlers finish, which the client cannot see. This script sends
first waves only (`--requests` equal to the concurrency) with the same bench options as
`calibrate_llama.py`, reads llama-server's own log (a handler takes its task's id once it has
tokenized the prompt, just before it posts the task, so the ids give the handlers' order up to that
moment; each task's prompt length names its request), and prints per wave:

- each request, in the order sent: its send offset, its first token (ms after the first send) and
  its place in the server's queue;
- how many prompts the engine's first step held, and whether the first request sent was among them.

RESULTS 7zc: from 4 clients the engine's first step held most of the wave and seldom the first
request sent, whose task was often queued last.

    .venv/bin/python benchmarks/llama_first_wave.py                       # about 1 minute
    .venv/bin/python benchmarks/llama_first_wave.py --trials 5 --levels 2,4,8,16

Needs the engine: `python3 scripts/llama_engine.py ensure`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_llama import CLIENT_CPU, KV_CACHE, llama_server, load_args, ready_engine, tokenpace  # noqa: E402
from calibrate_llama_steps import first_step  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
from tokenpace.results.records import read_records  # noqa: E402

NEW_PROMPT = re.compile(r"\| task (\d+) \| new prompt, .*task\.n_tokens = (\d+)")


def queued_order(log_text: str) -> dict[int, int]:
    """Prompt length -> task id, for the tasks the log shows starting (the handlers number tasks in
    the order they post them)."""
    return {int(n): int(t) for t, n in NEW_PROMPT.findall(log_text)}


def wave(url: str, log: Path, c: int, out: Path) -> str:
    """One first wave at concurrency ``c``: a line per request, and the first step's summary."""
    start = log.stat().st_size
    args = load_args(c)
    args[args.index("--requests") + 1] = str(c)
    args[args.index("--warmup") + 1] = "0req"
    tokenpace("bench", "--url", url, *args, "--out", str(out), "--no-progress", cpus={CLIENT_CPU})
    with open(log, "rb") as f:
        f.seek(start)
        tasks = queued_order(f.read().decode(errors="replace"))
    recs = sorted((r for r in read_records(out.with_suffix(".records.jsonl")) if r.first_token_ns),
                  key=lambda r: r.sent_ns)
    t0 = recs[0].sent_ns
    ids = sorted(tasks[r.prompt_tokens] for r in recs if r.prompt_tokens in tasks)
    cells = []
    for r in recs:
        place = ids.index(tasks[r.prompt_tokens]) + 1 if r.prompt_tokens in tasks else None
        cells.append(f"{(r.sent_ns - t0) / 1e6:4.1f}/{(r.first_token_ns - t0) / 1e6:5.0f}"
                     f" q{place if place else '?'}")
    in_first = first_step(recs)
    return (f"{' · '.join(cells)}\n      first step: {len(in_first)} of {len(recs)} prompts; "
            f"the first sent {'in it' if recs[0] in in_first else 'not in it'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3, metavar="N", help="waves per level (default 3)")
    parser.add_argument("--levels", default="2,4,8", metavar="C,C,...", help="concurrencies (default 2,4,8)")
    args = parser.parse_args()
    levels = [int(c) for c in args.levels.split(",")]
    engine = ready_engine()
    if engine is None:
        return 2
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("per request, in the order sent: send ms / first token ms (after the first send), q = its place "
          "in the server's queue")
    with tempfile.TemporaryDirectory(prefix="tokenpace-first-wave-") as tmp:
        log = Path(tmp) / "llama-server.log"
        with llama_server(engine, (*KV_CACHE["unified"], "--log-timestamps", "-lv", "4"), log_path=log) as url:
            for trial in range(args.trials):
                for c in levels:
                    print(f"  c={c:<2} wave {trial + 1}: " + wave(url, log, c, Path(tmp) / f"w{trial}-c{c}.json"))
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"reproduce: .venv/bin/python benchmarks/llama_first_wave.py --trials {args.trials} --levels {args.levels}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
