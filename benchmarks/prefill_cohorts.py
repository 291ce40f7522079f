"""How the streams of a measured run lined up on the engine: prefill cohorts and stalls.

A closed loop keeps the grouping its first requests fall into. On an engine that prefills
whole prompts in one step (llama-server here), streams in lockstep prefill together (high TTFT,
smooth decode), while streams that drifted apart interrupt each other's decode with their
prefills (lower TTFT, long mid-stream gaps). This prints which of the two a run was, from its
records, so that two runs of the same load can be told apart (RESULTS.md section 6b).

    .venv/bin/python benchmarks/prefill_cohorts.py RUN.records.jsonl [RUN2.records.jsonl ...]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tokenpace.results import read_records  # noqa: E402


def describe(path: str, window_ms: float, stall_ms: float) -> str:
    records = [r for r in read_records(path) if r.status == "ok" and r.first_token_ns]
    if not records:
        return f"{path}: no successful request"
    firsts = sorted(r.first_token_ns for r in records)
    cohorts, current = [], [firsts[0]]
    for t in firsts[1:]:
        if (t - current[-1]) / 1e6 < window_ms:
            current.append(t)
        else:
            cohorts.append(len(current))
            current = [t]
    cohorts.append(len(current))
    stalled = sum(
        1 for r in records
        if any((b - a) / 1e6 > stall_ms for a, b in zip(r.chunk_ns, r.chunk_ns[1:]))
    )
    ttft = statistics.mean((r.first_token_ns - r.sent_ns) / 1e6 for r in records)
    waits = [
        (r.first_token_ns - r.sent_ns) / 1e6 - r.server_timing["prompt_ms"]
        for r in records
        if r.server_timing and "prompt_ms" in r.server_timing
    ]
    sizes = ", ".join(f"{n} of {size}" for size, n in sorted(Counter(cohorts).items()))
    line = (
        f"{path}: {len(records)} requests; prefill cohorts (first tokens within {window_ms:g} ms) "
        f"{sizes}; {stalled} with a gap over {stall_ms:g} ms; TTFT mean {ttft:,.0f} ms"
    )
    if waits:
        line += f"; client TTFT − server prompt_ms p50 {statistics.median(waits):,.0f} ms"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+")
    parser.add_argument("--window-ms", type=float, default=50.0)
    parser.add_argument("--stall-ms", type=float, default=1000.0)
    args = parser.parse_args()
    print("command: .venv/bin/python benchmarks/prefill_cohorts.py " + " ".join(args.records))
    for path in args.records:
        print(describe(path, args.window_ms, args.stall_ms))


if __name__ == "__main__":
    main()
