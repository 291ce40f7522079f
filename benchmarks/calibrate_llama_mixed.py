"""What a prompt's step costs beside decoding sequences, measured and as a calibration prices it.

Reads the runs and fits that ``calibrate_llama.py --out-dir DIR`` keeps (``DIR/repeat-N/measured-cC
.records.jsonl`` and ``DIR/repeat-N/cal-FIT.json``), reconstructs each level's engine steps as
``tokenpace calibrate`` does, and takes the steps that computed one whole prompt (no cached part) beside
d decoding sequences. For each it sets the step's time, measured and priced by the fit (the host time
of the requests that arrived during it included, as ``calibrate`` prices it), against the fit's price
of the same prompt computed alone: the increment that the d decodes cost. Printed per repeat and level
(by d): the steps, the median increment measured and priced, and their difference; then, over every
level's steps with d >= 1, a least-squares line of each increment on

    1 (a cost of any decode beside the prompt), d (per decode), n x other / 1000 (the prompt's rows
    times the other sequences' KV cells, in thousands: the shared KV buffer's scan) and arrivals,

measured beside priced. A step model whose lines match prices a prompt beside any number of decodes
alike; RESULTS 7zm reads them for the fourteenth set.

    .venv/bin/python benchmarks/calibrate_llama.py --out-dir runs/cal         # measure and fit first
    .venv/bin/python benchmarks/calibrate_llama_mixed.py --out-dir runs/cal --fit c1+4+16
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from tokenpace.results import read_records
from tokenpace.simulator.calibrate.calibration import load_calibration
from tokenpace.simulator.calibrate.heldout import priced_steps
from tokenpace.simulator.step import StepBatch

LEVELS = (1, 2, 4, 8, 16)
TERMS = ("any decode", "per decode", "per 1k row-cells", "per arrival")


def increments(repeat: Path, fit: str) -> np.ndarray:
    """(level, d, prompt tokens, other cells, arrivals, measured ms, priced ms) over the prompt priced
    alone, one row per step that computed one whole prompt, every level of ``repeat``."""
    cal = load_calibration(repeat / f"cal-{fit}.json")
    rows = []
    for c in LEVELS:
        path = repeat / f"measured-c{c}.records.jsonl"
        if not path.exists():
            continue
        predictor, steps = priced_steps(cal, read_records(path))
        for step, priced in steps:
            if len(step.batch.prefill) != 1 or step.batch.prefill[0][1]:
                continue
            alone = predictor.step_s(StepBatch(prefill=step.batch.prefill))
            d = step.batch.num_decode
            rows.append((c, d, step.batch.prefill[0][0], sum(step.batch.decode_context) if d else 0,
                         step.arrivals, (step.duration_s - alone) * 1e3, (priced - alone) * 1e3))
    return np.array(rows, dtype=float).reshape(-1, 7)


def line(rows: np.ndarray, column: int) -> np.ndarray | None:
    """Least-squares coefficients of ``column`` on TERMS over the steps with decodes (None: too few)."""
    mixed = rows[rows[:, 1] > 0]
    if len(mixed) < 2 * len(TERMS):
        return None
    x = np.column_stack([np.ones(len(mixed)), mixed[:, 1], mixed[:, 2] * mixed[:, 3] / 1e3, mixed[:, 4]])
    return np.linalg.lstsq(x, mixed[:, column], rcond=None)[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", required=True, metavar="DIR", help="calibrate_llama.py's --out-dir")
    parser.add_argument("--fit", default="c1+4+16", help="which fit prices the steps: cal-FIT.json (default: %(default)s)")
    parser.add_argument("--min-steps", type=int, default=5, help="levels and d with fewer steps are not printed")
    args = parser.parse_args()
    repeats = sorted(p for p in Path(args.out_dir).glob("repeat-*") if (p / f"cal-{args.fit}.json").exists())
    if not repeats:
        print(f"no repeat-*/cal-{args.fit}.json in {args.out_dir}: run benchmarks/calibrate_llama.py --out-dir first",
              file=sys.stderr)
        return 2
    print(f"a step with one prompt beside d decodes: ms over the prompt priced alone by the fit from {args.fit}")
    for repeat in repeats:
        rows = increments(repeat, args.fit)
        print(f"  {repeat.name}")
        for c, d in sorted({(int(c), int(d)) for c, d in rows[:, :2]}):
            pick = rows[(rows[:, 0] == c) & (rows[:, 1] == d)]
            if len(pick) < args.min_steps:
                continue
            measured, priced = np.median(pick[:, 5]), np.median(pick[:, 6])
            print(f"    c={c:<2} d={d}: {len(pick):4d} steps, prompt {np.median(pick[:, 2]):4.0f} tokens, other cells "
                  f"{np.median(pick[:, 3]):5.0f}: measured {measured:+7.1f}, priced {priced:+7.1f}, "
                  f"priced - measured {np.median(pick[:, 6] - pick[:, 5]):+6.1f} ms")
        for name, column in (("measured", 5), ("priced", 6)):
            coef = line(rows, column)
            if coef is not None:
                print(f"    {name:>8}: " + " · ".join(f"{t} {v:+.2f} ms" for t, v in zip(TERMS, coef)))
    print(f"\nreproduce: .venv/bin/python benchmarks/calibrate_llama_mixed.py --out-dir {args.out_dir} --fit {args.fit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
