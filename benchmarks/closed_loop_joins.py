"""How a closed loop's next requests reach the engine's steps, measured against simulated.

Reads the runs a `calibrate_llama.py` run saved (`--out-dir`: each repeat's `measured-cN` and
`pred-cN-from-F` records) and prints, per concurrency, the measured run beside the simulator's
prediction of it:

- **chunk spread**: how far apart in time a step's chunks reach the client, per sequence after the
  first (the median over steps of (last chunk − first chunk) / (sequences − 1):
  `StepObservations.stream_interval_s`, what `tokenpace calibrate --stream-interval` measures). llama-server
  samples and streams a step's sequences one after another on the core that runs the model, so a
  sequence streamed early ends that long before the engine forms its next batch. The simulator
  delivers every token of a step at the step's end.
- **next requests joined / waited**: of the requests sent just after a step began (a closed-loop
  client's next request, a turnaround after its previous one ended), how many got their first token
  at the end of that very step (joined) and how many one step later (waited: a step more of TTFT).
  The same count `tokenpace calibrate` prints (`StepObservations.joins_after_start`).
- **prompts sharing a step**: the share of requests whose first token came in the same burst as
  another request's (within 5 ms): the steps that compute two prompts at once, which cost about 1.5
  times a step with one at 8 clients on the test engine.
- **TTFT p50** of the run, and in the summary its quartiles (every record, the warm-up wave's too).
- **a finished sequence's lead** (summary, measured runs): in bursts of at least c chunks with one
  request's last chunk among them, how long before the burst's last chunk that one reached the
  client, by how many chunks came after it: what its client has to get the next request into the
  next batch. `--stream-interval measured` prices it as that many stream intervals (RESULTS 7zd).
- **in time by chunks after it** (summary, measured runs): in the same steps, whether its client's
  next request got into the very next step, by how many chunks came after its last: the engine's
  join share by the finished sequence's place in the stream (RESULTS 7ze). Simulated runs stamp a
  step's chunks at one instant, so their order within a step is not the stream's: measured only.
  The same is counted in steps during which a request was sent that the next step took in: the
  engine sets that one up before it forms the batch, and the next requests of clients streamed
  last got in too (RESULTS 7ze).
- **after a step in which two requests ended** (summary): how often their clients' next prompts were
  computed in one step, and how often in the very next one (both joined the step begun).
- **steps of next prompts by how they got in** (summary): the steps that computed next requests'
  prompts, by whether each came in the step begun after its send (F) or a step later (W, it waited to
  be taken in), and which came together: "FW" is a fresh one beside one that waited. The engine
  computes more of c=8's next prompts beside another than the simulation does (RESULTS 7zj).
- **same request** (summary): every simulated request has a measured one with the same index and
  prompt. How many of them got their first token later in the simulation than on the engine, and
  the median of (simulated − measured) TTFT. A p50 that agrees can hide a simulation that is a
  step late for most requests while its distribution is narrower (RESULTS 7zd).

    .venv/bin/python benchmarks/calibrate_llama.py --out-dir runs/cal   # measure and predict first
    .venv/bin/python benchmarks/closed_loop_joins.py runs/cal           # then this (seconds)
    .venv/bin/python benchmarks/closed_loop_joins.py runs/cal --fit 4 --levels 4,8,16
"""

from __future__ import annotations

import argparse
import statistics
import sys
from bisect import bisect_left, bisect_right
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
from tokenpace.results.records import read_records  # noqa: E402
from tokenpace.simulator.calibrate.steps import observe_steps  # noqa: E402

SHARED_NS = 5_000_000  # first tokens closer than this came in one step
BURST_NS = 15_000_000  # chunks closer than this came from one step (a step here takes 20 ms or more)
SLOTS, N_BATCH = 8, 2048  # as calibrate_llama.py starts llama-server


def shared_share(records) -> float:
    """The share of requests whose first token came within SHARED_NS of another's."""
    ft = np.sort(np.array([r.first_token_ns for r in records if r.first_token_ns], dtype=np.int64))
    close = np.zeros(len(ft), bool)
    near = np.diff(ft) < SHARED_NS
    close[1:] |= near
    close[:-1] |= near
    return float(close.mean()) if len(ft) else 0.0


def describe(path: Path) -> dict:
    records = list(read_records(path))
    obs = observe_steps(records, max_batched_tokens=N_BATCH, max_num_seqs=SLOTS)
    # (``is not None``: a simulated run sends its first request at 0 ns)
    by_index = {r.index: (r.first_token_ns - r.sent_ns) / 1e6 for r in records
                if r.first_token_ns is not None and r.sent_ns is not None}
    quartiles = tuple(np.percentile(list(by_index.values()), [25, 50, 75])) if by_index else None
    spread = obs.stream_interval_s if obs.stream_spreads else None  # as `tokenpace calibrate` measures it
    chunks = bursts(records)
    sends = sorted((r.sent_ns, r.index) for r in records if r.sent_ns is not None)
    first: dict[int, int] = {}  # request → the burst of its first token
    for n, b in enumerate(chunks):
        for _, i, _ in b:
            first.setdefault(i, n)
    return {"spread_ms": None if spread is None else spread * 1e3, "joins": obs.joins_after_start,
            "shared": shared_share(records), "ttft_p50_ms": quartiles[1] if quartiles else None,
            "ttft_quartiles_ms": quartiles, "ttft_ms": by_index, "bursts": chunks, "first_burst": first,
            "sends": sends, "send_times": [t for t, _ in sends]}


def bursts(records) -> list[list[tuple[int, int, bool]]]:
    """Every chunk as (time, request index, whether it is the request's last), in bursts: chunks less
    than BURST_NS apart, one engine step's."""
    events = sorted((t, r.index, k == len(r.chunk_ns) - 1) for r in records for k, t in enumerate(r.chunk_ns or ()))
    out: list[list[tuple[int, int, bool]]] = []
    for e in events:
        if out and e[0] - out[-1][-1][0] <= BURST_NS:
            out[-1].append(e)
        else:
            out.append([e])
    return out


def finish_leads(run: dict, c: int) -> list[tuple[int, float]]:
    """(chunks after it, ms before the burst's last chunk) of each request's last chunk, in the run's
    (``describe``) bursts of at least ``c`` chunks holding exactly one request's last chunk."""
    out = []
    for b in run["bursts"]:
        ends = [i for i, e in enumerate(b) if e[2]]
        if len(b) >= c and len(ends) == 1:
            out.append((len(b) - 1 - ends[0], (b[-1][0] - b[ends[0]][0]) / 1e6))
    return out


def in_time_by_after(run: dict, c: int, waiting: bool = False) -> list[tuple[int, bool]]:
    """(chunks after it, whether the next send joined the next step) for each request's last chunk in
    the run's (``describe``) bursts of at least ``c`` chunks holding exactly one: the first send
    after that chunk and before the next burst (its client's next request), where its first token
    came in the next burst (True) or the one after (False). ``waiting``: instead in bursts of two or
    more during which a request was sent that the next step took in (it waited to be taken in: the
    engine sets it up before it forms that step's batch)."""
    bs, sends, first, times = run["bursts"], run["sends"], run["first_burst"], run["send_times"]
    out = []
    for n, b in enumerate(bs[:-1]):
        ends = [j for j, e in enumerate(b) if e[2]]
        if len(ends) != 1 or (len(b) < 2 if waiting else len(b) < c):
            continue
        if waiting:  # a request sent during this step that the next one took in
            during = sends[bisect_right(times, bs[n - 1][0][0]):bisect_left(times, b[0][0])] if n else []
            if not any(first.get(i) == n + 1 for _, i in during):
                continue
        k = bisect_left(times, b[ends[0]][0])
        if k == len(sends) or sends[k][0] >= bs[n + 1][0][0] or first.get(sends[k][1]) not in (n + 1, n + 2):
            continue
        out.append((len(b) - 1 - ends[0], first[sends[k][1]] == n + 1))
    return out


def two_finished(run: dict, c: int) -> tuple[int, int, int]:
    """After each of the run's (``describe``) bursts of at least ``c`` chunks in which two requests
    ended: (such bursts whose next two sends were found, those whose two next requests got their first
    tokens in one burst, those in the very next burst). A closed loop's two clients send their next
    requests just after such a step."""
    bs, sends, first, times = run["bursts"], run["sends"], run["first_burst"], run["send_times"]
    seen = together = next_step = 0
    for n, b in enumerate(bs):
        ends = [t for t, _, last in b if last]
        if len(b) < c or len(ends) != 2:
            continue
        nxt = [i for _, i in sends[bisect_left(times, min(ends) - 1_000_000):
                                  bisect_right(times, b[-1][0] + 12_000_000)]][:2]
        if len(nxt) < 2 or nxt[0] not in first or nxt[1] not in first:
            continue
        seen += 1
        together += first[nxt[0]] == first[nxt[1]]
        next_step += first[nxt[0]] == first[nxt[1]] == n + 1
    return seen, together, next_step


def step_company(run: dict, c: int) -> Counter:
    """The steps that computed next requests' prompts (the closed loop's sends after the first wave's
    ``c``), by how each reached its step and with whom: "F" for one whose first token came in the
    step begun after its send, "W" for one a step later (it waited to be taken in), sorted and joined
    ("FW": a fresh one beside one that waited; RESULTS 7zj)."""
    starts = [b[0][0] for b in run["bursts"]]
    first = run["first_burst"]
    kinds: dict[int, list[str]] = {}
    for t, i in run["sends"]:
        if i < c or i not in first:
            continue
        waited = first[i] - (bisect_right(starts, t) - 1)
        kinds.setdefault(first[i], []).append({1: "F", 2: "W"}.get(waited, "L"))
    return Counter("".join(sorted(k)) for k in kinds.values())


def same_requests(measured: dict, simulated: dict) -> list[float]:
    """Simulated − measured TTFT (ms) of each request both runs have (by index: the same prompt)."""
    return [simulated["ttft_ms"][i] - t for i, t in measured["ttft_ms"].items() if i in simulated["ttft_ms"]]


def line(label: str, d: dict) -> str:
    spread = "-" if d["spread_ms"] is None else f"{d['spread_ms']:.2f} ms"
    joined, waited = d["joins"]
    return (f"{label:>9}: chunk spread {spread:>8}/seq · next requests joined {joined:3d} waited {waited:3d}"
            f" · prompts sharing a step {d['shared']:4.0%} · TTFT p50 {d['ttft_p50_ms']:7.0f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path, help="a calibrate_llama.py --out-dir")
    ap.add_argument("--fit", default="1+4+16", help="the fit whose predictions to compare (default 1+4+16)")
    ap.add_argument("--levels", default="2,4,8,16", help="concurrencies (default 2,4,8,16)")
    args = ap.parse_args()
    if not args.out_dir.is_dir():
        print(f"closed_loop_joins: {args.out_dir} is not a directory (give a calibrate_llama.py --out-dir)",
              file=sys.stderr)
        return 2
    repeats = sorted(p for p in args.out_dir.glob("repeat-*") if p.is_dir()) or [args.out_dir]
    totals: dict[int, dict[str, list]] = {}
    for rep in repeats:
        print(rep)
        for c in (int(x) for x in args.levels.split(",")):
            meas, pred = rep / f"measured-c{c}.records.jsonl", rep / f"pred-c{c}-from-c{args.fit}.records.jsonl"
            if not meas.exists() or not pred.exists():
                print(f"  c={c}: no {meas.name if not meas.exists() else pred.name}")
                continue
            m, p = describe(meas), describe(pred)
            print(f"  c={c}\n  {line('measured', m)}\n  {line('simulated', p)}")
            t = totals.setdefault(c, {"m": [], "p": []})
            t["m"].append(m)
            t["p"].append(p)
    print(f"\nover {len(repeats)} repeat(s), predictions from c={args.fit}: sums of joined/waited, medians of the rest")
    for c, t in sorted(totals.items()):
        for label, ds in (("measured", t["m"]), ("simulated", t["p"])):
            spreads = [d["spread_ms"] for d in ds if d["spread_ms"] is not None]
            agg = {"spread_ms": statistics.median(spreads) if spreads else None,
                   "joins": tuple(sum(d["joins"][k] for d in ds) for k in (0, 1)),
                   "shared": statistics.median(d["shared"] for d in ds),
                   "ttft_p50_ms": statistics.median(d["ttft_p50_ms"] for d in ds)}
            print(f"  c={c:<2} {line(label, agg)}")
        leads = [x for m in t["m"] for x in finish_leads(m, c)]
        if leads:
            by_after = {a: statistics.median(v for k, v in leads if k == a) for a in sorted({k for k, _ in leads})}
            print(f"  c={c:<2} a finished sequence's lead, measured ({len(leads)} steps), ms by chunks after it: "
                  + " ".join(f"{a}:{v:.2f}" for a, v in by_after.items()))
        for waiting, label in ((False, "its client's next request in time for the next step, measured, by chunks "
                                       "after it"), (True, "the same while another request waited to be taken in")):
            outcomes = [x for m in t["m"] for x in in_time_by_after(m, c, waiting)]
            if outcomes:
                print(f"  c={c:<2} {label}: " + " ".join(
                    f"{a}:{sum(j for k, j in outcomes if k == a)}/{sum(k == a for k, _ in outcomes)}"
                    for a in sorted({k for k, _ in outcomes})))
        for label, ds in (("measured", t["m"]), ("simulated", t["p"])):
            seen, together, next_step = (sum(x) for x in zip(*(two_finished(d, c) for d in ds)))
            if seen:
                print(f"  c={c:<2} after a step in which two requests ended, {label}: their clients' next prompts "
                      f"together after {together} of {seen}, in the very next step after {next_step}")
        for label, ds in (("measured", t["m"]), ("simulated", t["p"])):
            company = sum((step_company(d, c) for d in ds), Counter())
            print(f"  c={c:<2} steps of next prompts by how they got in (F: the step begun after the send, W: the "
                  f"next) and with whom, {label}: " + " ".join(f"{k}:{n}" for k, n in company.most_common()))
        diffs = [x for m, p in zip(t["m"], t["p"]) for x in same_requests(m, p)]
        if diffs:
            q = [np.median([d["ttft_quartiles_ms"][k] for d in ds]) for ds in (t["m"], t["p"]) for k in range(3)]
            print(f"  c={c:<2} same request: simulated later in {sum(x > 0 for x in diffs)} of {len(diffs)}, median "
                  f"simulated − measured {statistics.median(diffs):+.0f} ms · TTFT p25/p50/p75 measured "
                  f"{q[0]:.0f}/{q[1]:.0f}/{q[2]:.0f}, simulated {q[3]:.0f}/{q[4]:.0f}/{q[5]:.0f} ms")
    print(f"reproduce: .venv/bin/python benchmarks/closed_loop_joins.py {args.out_dir} --fit {args.fit} "
          f"--levels {args.levels}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
