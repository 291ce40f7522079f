"""Why benchmarks/calibrate_llama.py's measured figures move between repeats: read from its saved runs.

Reads the measured runs that ``calibrate_llama.py --out-dir DIR`` keeps (``DIR/repeat-N/measured-cC
.records.jsonl``) and prints, for every repeat and level, two things the simulator does not model
and that change from one repeat to the next on the same engine:

1. **The closed loop's phase**: how many prompts each step that computed prompts held. Clients whose
   requests end apart send their next prompts apart (one per step: shorter TTFT, and every prompt
   stalls the others' decodes, so longer TPOT); clients that fall into step send them together.
2. **The decode steps of two sequences at c=2**, which come in two modes (below and above
   ``--split-ms``; by default each repeat's own split, Otsu's). ``benchmarks/llama_ubatch_layout.py``
   measures why: two sequences on adjacent slots run as one ubatch, on slots apart as two, and one
   ubatch of two costs more. Which slots a run used is not in its records: they are reconstructed
   the way llama-server assigns them
   (the least recently used idle slot, ties to the highest id; bench's preflight request takes
   one before each level; one server serves every level of a repeat, in order), and the report
   says how often "adjacent" agrees with "the slow mode" under each rotation of the slot labels
   (the server's slot state is known only up to such a shift: a prompt that shares a tenth of its
   tokens with a slot's cached prompt is given that slot instead, ``--slot-prompt-similarity``).

3. **A prompt's step at each level**: a step that computed one prompt costs more the more sequences
   decode beside it; per level, a line through those steps' times against the prompt's tokens, read
   at the runs' median prompt length. A level whose prompt steps sit off the other levels' trend is
   one whose fitted or predicted TTFT and TPOT inherit it (RESULTS 7zc).
4. **The first wave**: how many of a closed loop's first requests (up to the engine's slots) the
   engine computed in its first step, and whether the first one sent was among them. The simulated
   clients send the first wave as far apart as the measured ones, and the simulated engine computes
   the first request alone.

    .venv/bin/python benchmarks/calibrate_llama.py --out-dir runs/cal      # measure (16 minutes)
    .venv/bin/python benchmarks/calibrate_llama_steps.py --out-dir runs/cal
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from tokenpace.results import read_records
from tokenpace.simulator.calibrate.steps import observe_steps

SLOTS = 8
LEVELS = (1, 2, 4, 8, 16)
FIRST_STEP_NS = 20_000_000


@functools.cache
def records(run: Path) -> list:
    return [r for r in read_records(run) if r.status == "ok" and r.chunk_ns]


@functools.cache
def steps(run: Path) -> list:
    """The run's engine steps, reconstructed once (every section reads them)."""
    return observe_steps(records(run)).steps


def first_step(wave: list) -> list:
    """Of a first wave's requests (in send order), those whose first token came in the engine's
    first step: within FIRST_STEP_NS of the earliest (one step's tokens go out ~1 ms apart)."""
    start = min(r.first_token_ns for r in wave)
    return [r for r in wave if r.first_token_ns - start < FIRST_STEP_NS]


def slots_by_request(repeat: Path) -> dict[int, dict[str, int]]:
    """Each level's request id -> slot, by llama-server's LRU rule, over the repeat's levels in order."""
    last_used = [-1] * SLOTS
    busy: dict[str, int] = {}
    waiting: list = []
    out: dict[int, dict[str, int]] = {}

    def lru() -> int:
        best = None
        for i in range(SLOTS):
            if i not in busy.values() and (best is None or last_used[i] <= last_used[best]):
                best = i
        return best

    for c in LEVELS:
        path = repeat / f"measured-c{c}.records.jsonl"
        if not path.exists():
            continue
        recs = records(path)
        first_send = min(r.sent_ns for r in recs)
        last_used[lru()] = first_send - 1  # bench's preflight request
        slot_of: dict[str, int] = {}
        events = sorted([(r.sent_ns, 1, r) for r in recs] + [(r.chunk_ns[-1], 0, r) for r in recs],
                        key=lambda e: (e[0], e[1]))
        for t, arrive, r in events:
            if arrive:
                if len(busy) < SLOTS:
                    busy[r.request_id] = slot_of[r.request_id] = lru()
                else:
                    waiting.append(r)
            elif r.request_id in busy:
                last_used[busy.pop(r.request_id)] = t
                if waiting:
                    nxt = waiting.pop(0)
                    busy[nxt.request_id] = slot_of[nxt.request_id] = lru()
            else:  # ended before its turn as the client saw it: sends that raced at a level's start
                waiting.remove(r)
        out[c] = slot_of
    return out


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ms" if values else "-"


def summary_figures(run_json: Path) -> tuple[float, float, float]:
    s = json.loads(run_json.read_text())["summary"]
    return s["latency_ms"]["ttft"]["p50"], s["latency_ms"]["tpot"]["p50"], s["throughput"]["output_tokens_s"]


def prompt_steps(repeats: list[Path]) -> None:
    """Section 3: per level and repeat, the steps that computed one prompt, by the decoding sequences
    beside it: a least-squares line of their times against the prompt's tokens, read at the median
    prompt length of all the runs (a level's prompt lengths differ, so the raw medians would too)."""
    points_of: dict[tuple[str, int, int], list[tuple[int, float]]] = {}
    for rep in repeats:
        for c in LEVELS:
            path = rep / f"measured-c{c}.records.jsonl"
            if path.exists():
                for s in steps(path):
                    if len(s.batch.prefill) == 1:
                        key = (rep.name, c, s.batch.num_decode)
                        points_of.setdefault(key, []).append((s.batch.prefill[0][0], s.duration_s * 1e3))
    if not points_of:
        return
    at = statistics.median(n for points in points_of.values() for n, _ in points)
    print(f"\n3. a step with one prompt, by the sequences decoding beside it (d): its ms at {at:g} prompt "
          "tokens (a line per level through the steps' times), and the steps' count")
    for rep in repeats:
        cells = []
        for (name, c, d), points in sorted(points_of.items()):
            if name != rep.name or len(points) < 3 or len({n for n, _ in points}) < 2:
                continue
            slope, icept = np.polyfit([n for n, _ in points], [ms for _, ms in points], 1)
            cells.append(f"c={c} d={d}: {icept + slope * at:5.0f} ({len(points)})")
        print(f"  {rep.name}: " + " · ".join(cells))


def first_wave(repeats: list[Path]) -> None:
    """Section 4: of the first min(c, SLOTS) requests sent, how many got their first token in the
    engine's first step (``first_step``), and whether the first one sent was among them."""
    print("\n4. the first wave: its prompts the engine computed in its first step, of the first "
          "requests sent (the first one sent among them?)")
    for c in LEVELS[1:]:
        cells = []
        for rep in repeats:
            path = rep / f"measured-c{c}.records.jsonl"
            if not path.exists():
                continue
            wave = sorted(records(path), key=lambda r: r.sent_ns)[:min(c, SLOTS)]
            first = first_step(wave)
            cells.append(f"{len(first)}/{len(wave)}" + (" (yes)" if wave[0] in first else " (no)"))
        print(f"  c={c:<2} " + " · ".join(cells))


def two_modes_split(values: list[float]) -> float | None:
    """The split between two modes of ``values`` (Otsu's: the cut that leaves the two groups the most
    between-group variance), or None with fewer than 4 values."""
    v = sorted(values)
    if len(v) < 4:
        return None
    best, split = -1.0, None
    for i in range(1, len(v)):
        lo, hi = v[:i], v[i:]
        between = len(lo) * len(hi) * (statistics.fmean(hi) - statistics.fmean(lo)) ** 2
        if between > best:
            best, split = between, (v[i - 1] + v[i]) / 2
    return split


def ubatch_modes(repeats: list[Path], split_ms: float | None) -> None:
    """Section 2: c=2's decode steps of two sequences, cut into a slow and a fast mode, against the
    slots' adjacency (llama_ubatch_layout.py: adjacent slots run as one ubatch, which costs more)."""
    print("\n2. c=2 decode steps of two sequences (no arrival during the step): the two modes, split at "
          + (f"{split_ms:g} ms" if split_ms is not None else "each repeat's own gap (Otsu)")
          + ", and the slots' adjacency")
    for rep in repeats:
        path = rep / "measured-c2.records.jsonl"
        if not path.exists():
            continue
        recs = records(path)
        slot_of = slots_by_request(rep)[2]
        points = []
        for s in steps(path):
            if s.batch.prefill or s.arrivals or s.batch.num_decode != 2:
                continue
            pair = [slot_of[r.request_id] for r in recs if r.chunk_ns[0] < s.end_ns <= r.chunk_ns[-1]]
            if len(pair) == 2:
                points.append((pair, s.duration_s * 1e3))
        split = split_ms if split_ms is not None else two_modes_split([ms for _, ms in points])
        if split is None:
            print(f"  {rep.name}: {len(points)} steps, too few to split")
            continue
        slow = [ms for _, ms in points if ms >= split]
        fast = [ms for _, ms in points if ms < split]
        agree = []
        for shift in range(SLOTS):
            agree.append(sum((abs((a + shift) % SLOTS - (b + shift) % SLOTS) == 1) == (ms >= split)
                             for (a, b), ms in points))
        best = max(range(SLOTS), key=agree.__getitem__)
        print(f"  {rep.name}: {len(points)} steps, split at {split:.1f} ms; slow mode {len(slow)} (median "
              f"{median_ms(slow)}), fast mode {len(fast)} (median {median_ms(fast)}); adjacent slots = slow "
              f"mode in {agree[best]}/{len(points)} with the labels shifted by {best} (unshifted {agree[0]}; "
              f"the worst shift {min(agree)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", required=True, metavar="DIR", help="calibrate_llama.py's --out-dir")
    parser.add_argument("--split-ms", type=float, metavar="MS",
                        help="between the two modes of a 2-sequence decode step (default: each repeat's "
                             "own, the cut into two groups that differ most, Otsu's method; 41 was "
                             "between llama_ubatch_layout.py's 1+1 and 2 on the machine of RESULTS 7n)")
    args = parser.parse_args()
    repeats = sorted(Path(args.out_dir).glob("repeat-*"))
    if not repeats:
        print(f"no repeat-*/ folders in {args.out_dir}: run benchmarks/calibrate_llama.py --out-dir first",
              file=sys.stderr)
        return 2
    print("1. the closed loop's phase: prompts per step that computed prompts (count of such steps)")
    for c in LEVELS:
        for rep in repeats:
            path = rep / f"measured-c{c}.records.jsonl"
            if not path.exists():
                continue
            sizes = Counter(len(s.batch.prefill) for s in steps(path) if s.batch.prefill)
            ttft, tpot, tok_s = summary_figures(rep / f"measured-c{c}.json")
            print(f"  c={c:<2} {rep.name}: {' '.join(f'{k}x{n}' for k, n in sorted(sizes.items())) or '(none unambiguous)':<24} "
                  f"TTFT p50 {ttft:7.1f} ms  TPOT p50 {tpot:6.1f} ms  {tok_s:5.1f} tok/s")
    ubatch_modes(repeats, args.split_ms)
    prompt_steps(repeats)
    first_wave(repeats)
    print(f"\nreproduce: .venv/bin/python benchmarks/calibrate_llama_steps.py --out-dir {args.out_dir}"
          + (f" --split-ms {args.split_ms:g}" if args.split_ms is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
