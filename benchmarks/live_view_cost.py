"""What the live view costs the event loop that stamps chunks: per refresh and per ended request.

A refresh runs on the event loop between chunk reads, so for as long as it takes, chunks that
arrive wait to be stamped. This measures, for a run with ``--streams`` requests in flight (each
with ``--chunks`` chunks so far) and a full ring of ended requests:

- ``add``: one ended request queued for the rolling figures (once per request, never per chunk);
- ``frame``: the figures of one refresh (percentiles over the ring, a walk over those in flight),
  and one that first takes a whole wave of ``--streams`` ended requests into the ring;
- each output drawn whole: the rich view (to a terminal console writing to /dev/null), the plain
  line and the JSON object (each to /dev/null);

and the share of the loop's time each takes at its refresh rate (live: 4 per second; plain and
json: one per 5 s). Medians of ``--repeat`` timings; the machine's load is printed first.

    .venv/bin/python benchmarks/live_view_cost.py
    .venv/bin/python benchmarks/live_view_cost.py --streams 1024 --chunks 512
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import statistics
import sys
import time

from rich.console import Console

from _harness import machine_line, table

from tokenpace.metrics import parse_slo
from tokenpace.record import RequestRecord
from tokenpace.runner import progress as progress_module
from tokenpace.runner.live_stats import RING_CAPACITY, LiveStats
from tokenpace.runner.progress import LiveProgress


def ended(i: int, now: int) -> RequestRecord:
    return RequestRecord(request_id=f"tp-{i}", index=i, scheduled_ns=now - 900_000_000, sent_ns=now - 900_000_000,
                         first_token_ns=now - 850_000_000 + i % 97 * 100_000, last_token_ns=now, done_ns=now,
                         output_tokens=64, chunk_ns=[now] * 64, output_tokens_source="usage")


def timings_ms(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


async def measure(args) -> list[list[object]]:
    now = time.monotonic_ns()
    flying = [RequestRecord(request_id=f"f{i}", index=i, sent_ns=now, first_token_ns=now,
                            chunk_ns=[now] * args.chunks) for i in range(args.streams)]
    rows = []
    with open(os.devnull, "w") as sink:
        views = {
            "live": LiveProgress(LiveStats(total=None, duration_s=600.0, target=f"concurrency {args.streams}",
                                           judge_lag=False, slo=parse_slo("chat")),
                                 mode="live", console=Console(file=sink, force_terminal=True, width=160)),
            "plain": LiveProgress(LiveStats(total=None, duration_s=600.0, target="x", judge_lag=False,
                                            slo=parse_slo("chat")), mode="plain", file=sink),
            "json": LiveProgress(LiveStats(total=None, duration_s=600.0, target="x", judge_lag=False,
                                           slo=parse_slo("chat")), mode="json", file=sink),
        }
        adds: list[float] = []
        for name, view in views.items():
            view.stats.in_flight = lambda: flying
            view.stats.sent = lambda: RING_CAPACITY + args.streams
            with view:
                for i in range(RING_CAPACITY):
                    t = time.perf_counter()
                    view.add(ended(i, time.monotonic_ns()))
                    adds.append((time.perf_counter() - t) * 1e3)
                view.frame()  # takes them into the ring: full from here on
                frame = timings_ms(view.frame, args.repeat)
                draw = timings_ms(view.draw, args.repeat)

                def wave() -> None:  # a closed loop's wave: every stream ends at once
                    for i in range(args.streams):
                        view.add(ended(i, time.monotonic_ns()))
                    t = time.perf_counter()
                    view.frame()
                    wave_ms.append((time.perf_counter() - t) * 1e3)

                wave_ms: list[float] = []
                timings_ms(wave, max(5, args.repeat // 10))
            per_s = 1 / progress_module.LIVE_REFRESH_S if name == "live" else 1 / progress_module.PLAIN_EVERY_S
            rows.append([name, statistics.median(frame), statistics.median(wave_ms), statistics.median(draw),
                         max(draw), per_s, f"{statistics.median(draw) * per_s / 1e3:.3%}"])
    print(f"add (one ended request, queued): median {statistics.median(adds) * 1e3:.2f} µs, "
          f"max {max(adds) * 1e3:.0f} µs over {len(adds)} requests\n")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=256, metavar="N", help="requests in flight (default 256)")
    ap.add_argument("--chunks", type=int, default=64, metavar="N", help="chunks each has so far (default 64)")
    ap.add_argument("--repeat", type=int, default=200, metavar="N", help="timings per figure (default 200)")
    args = ap.parse_args()
    print(machine_line())
    print("Command: .venv/bin/python benchmarks/live_view_cost.py " + shlex.join(sys.argv[1:]))
    print(f"{args.streams} requests in flight with {args.chunks} chunks each; a full ring of {RING_CAPACITY} "
          "ended requests\n")
    rows = asyncio.run(measure(args))
    print(table(["output", "frame ms (median)", f"frame after {args.streams} ended ms", "frame + draw ms (median)",
                 "frame + draw ms (max)", "refreshes/s", "share of the loop"], rows))


if __name__ == "__main__":
    main()
