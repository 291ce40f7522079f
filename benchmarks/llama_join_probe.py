"""When does llama-server take a new request into its next step? Sends at controlled offsets.

Starts llama-server exactly as benchmarks/calibrate_llama.py does (one thread, 8 slots, pinned to
CPU 1, ``-ctxcp 0``, one KV buffer). One long request X decodes throughout, and its tokens mark the
steps' ends as the client sees them. A trial sends a short request B ``delta`` ms after one of X's
tokens and reads whether B's prompt ran in the very next step (its first token comes with X's next
token) or waited a step (it comes with the one after). Two cases:

  none waiting   B alone: the next step was formed as soon as the engine finished sending X's token,
                 or up to ``delta`` later;
  one waiting    a request A was sent in the middle of the step before (so it waits for the next
                 step's batch): does the server take A's slot launch as a window in which B can
                 still join? (issue 25: the join window of RESULTS 7q-7x, measured directly instead of
                 inferred from the few sends of a closed-loop run)

The result is the fraction of trials that joined, per case and offset. The client is pinned to CPU 0
and sends on connections opened beforehand; offsets are from the client's receipt of X's token.
With ``--decoders N``, N-1 more requests decode beside X, started before it, so that X holds the
lowest slot of them and its token is the first of each step's tokens (llama-server sends them one by
one in slot order): B is then sent while the step's other tokens are still going out.

    .venv/bin/python benchmarks/llama_join_probe.py                       # about 1-2 minutes
    .venv/bin/python benchmarks/llama_join_probe.py --trials 10 --deltas 0,1,2,4,8
    .venv/bin/python benchmarks/llama_join_probe.py --words 64 --decoders 6

Needs the engine: `python3 scripts/llama_engine.py ensure`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_llama import CLIENT_CPU, KV_CACHE, llama_server, ready_engine  # noqa: E402
from llama_lone_step import prompt  # noqa: E402

DELTAS_MS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)


def now_ms() -> float:
    return time.perf_counter_ns() / 1e6


def wait_until(t_ms: float) -> None:
    """Sleep, then spin for the last millisecond (time.sleep alone overshoots by ~0.1 ms)."""
    left = t_ms - now_ms()
    if left > 1.5:
        time.sleep((left - 1.0) / 1e3)
    while now_ms() < t_ms:
        pass


class Stream:
    """One streamed /completion on its own connection, opened at construction; ``send`` posts it,
    and a thread records when each token arrives (client clock, ms)."""

    def __init__(self, host: str, port: int, body: dict, on_token=None) -> None:
        self.conn = http.client.HTTPConnection(host, port, timeout=120)
        self.conn.connect()
        self.body = json.dumps({**body, "stream": True}).encode()
        self.times: list[float] = []
        self.sent_ms: float | None = None
        self.on_token = on_token
        self.thread = threading.Thread(target=self._read, daemon=True)

    def send(self) -> None:
        self.sent_ms = now_ms()
        self.conn.request("POST", "/completion", body=self.body, headers={"Content-Type": "application/json"})
        self.thread.start()

    def _read(self) -> None:
        resp = self.conn.getresponse()
        for line in resp:
            if not line.startswith(b"data: "):
                continue
            t = now_ms()
            doc = json.loads(line[6:])
            if doc.get("content") or doc.get("tokens"):
                self.times.append(t)
                if self.on_token is not None:
                    self.on_token(t)
            if doc.get("stop"):
                break
        self.conn.close()

    def join(self) -> None:
        self.thread.join(timeout=120)


class Clock:
    """X's token arrivals, and a way to wait for the next one."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.times: list[float] = []

    def tick(self, t: float) -> None:
        with self.cond:
            self.times.append(t)
            self.cond.notify_all()

    def next_after(self, n: int) -> float:
        """Wait until X has more than ``n`` tokens; the arrival time of token ``n``."""
        with self.cond:
            self.cond.wait_for(lambda: len(self.times) > n, timeout=30)
            return self.times[n]


def trial(host: str, port: int, clock: Clock, delta_ms: float, waiting: bool, seed: int, words: int) -> dict:
    short = {"n_predict": 1, "cache_prompt": False, "temperature": 0}
    a = Stream(host, port, {**short, "prompt": prompt(words, 1000 + seed)}) if waiting else None
    b = Stream(host, port, {**short, "prompt": prompt(words, 2000 + seed)})
    n = len(clock.times) + 2  # let X run a clean step or two first
    t_j = clock.next_after(n)
    if a is not None:  # mid-step: it waits for the next step's batch
        step_ms = t_j - clock.times[n - 1]
        wait_until(t_j + step_ms / 2)
        a.send()
    t_k = clock.next_after(n + 1)  # the step A waited through ends; B goes delta after it
    wait_until(t_k + delta_ms)
    b.send()
    b.join()
    if a is not None:
        a.join()
    clock.next_after(n + 3)  # X's tokens of the two steps after t_k are in
    ends = clock.times[n + 2: n + 4]  # the ends of the 1st and 2nd steps after t_k, as X saw them
    fb = b.times[0]
    joined = abs(fb - ends[0]) < abs(fb - ends[1])
    out = {"delta_ms": delta_ms, "waiting": waiting, "joined": joined, "b_first_minus_next_ms": fb - ends[0],
           "sent_after_token_ms": b.sent_ms - t_k}
    if a is not None:
        out["a_with_next_step"] = abs(a.times[0] - ends[0]) < abs(a.times[0] - ends[1])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=6, metavar="N", help="trials per case and offset (default 6)")
    parser.add_argument("--deltas", default=",".join(f"{d:g}" for d in DELTAS_MS), metavar="MS,MS,...",
                        help="offsets after X's token, ms")
    parser.add_argument("--words", type=int, default=12, metavar="N",
                        help="words in A's and B's prompts (default 12; calibrate_llama.py's are 64-192)")
    parser.add_argument("--decoders", type=int, default=1, metavar="N",
                        help="requests decoding throughout, X first (default 1; up to 6 leave two slots for A and B): "
                             "with several, a step's tokens go out one by one, and B is sent after X's")
    parser.add_argument("--json", action="store_true", help="print every trial as JSON too")
    args = parser.parse_args()
    deltas = [float(d) for d in args.deltas.split(",")]
    if not 1 <= args.decoders <= 6:
        parser.error("--decoders: 1 to 6 (the server has 8 slots; A and B need two)")
    engine = ready_engine()
    if engine is None:
        return 2
    try:
        os.sched_setaffinity(0, {CLIENT_CPU})
    except OSError:
        pass
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    trials = []
    with llama_server(engine, KV_CACHE["unified"]) as url:
        host, port = url.split("//")[1].split("/")[0].split(":")
        port = int(port)
        clock = Clock()
        x, others = None, []
        long = {"n_predict": 1800, "ignore_eos": True, "cache_prompt": False, "temperature": 0}
        plan = [(d, w, i) for i in range(args.trials) for w in (False, True) for d in deltas]
        for d, w, i in plan:
            if x is None or not x.thread.is_alive() or len(clock.times) > 1500:
                for s in [x, *others]:
                    if s is not None:
                        s.join()
                # The other decoders first, X last: llama-server gives a new request the least recently
                # used slot, the highest-numbered of equals, and sends a step's tokens in slot order; so
                # X's token is the first of each step's tokens and the others' follow it.
                others = [Stream(host, port, {**long, "prompt": prompt(16, 8 + k)}) for k in range(args.decoders - 1)]
                for s in others:
                    s.send()
                    while not s.times:
                        time.sleep(0.001)
                clock = Clock()
                x = Stream(host, port, {**long, "prompt": prompt(16, 7)}, on_token=clock.tick)
                x.send()
                clock.next_after(8)
            trials.append(trial(host, port, clock, d, w, len(trials), args.words))
    print(f"\n{args.trials} trials per cell; a trial joined when B's first token came with the first step "
          "after the token it was sent after (X's next token), not the one after\n")
    print(f"{'offset ms':>10} {'none waiting: joined':>22} {'one waiting: joined':>21}   (B sent, median ms after X's token)")
    for d in deltas:
        cells = []
        for w in (False, True):
            sel = [t for t in trials if t["delta_ms"] == d and t["waiting"] == w]
            cells.append(f"{sum(t['joined'] for t in sel)}/{len(sel)}")
        sent = statistics.median(t["sent_after_token_ms"] for t in trials if t["delta_ms"] == d)
        print(f"{d:>10g} {cells[0]:>22} {cells[1]:>21}   ({sent:.2f})")
    a_ok = [t["a_with_next_step"] for t in trials if t["waiting"]]
    print(f"\nA (sent mid-step) ran in the next step in {sum(a_ok)}/{len(a_ok)} trials")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("reproduce: .venv/bin/python benchmarks/llama_join_probe.py "
          f"--trials {args.trials} --deltas {args.deltas} --words {args.words} --decoders {args.decoders}")
    if args.json:
        print(json.dumps(trials, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
