"""Write the sample datasets shipped in tokenpace/workload/data (deterministic; our own synthetic text).

    python scripts/make_sample_datasets.py          # rewrites the files in place

- sample_sharegpt.json: 100 ShareGPT-format conversations (1 to 3 exchanges) whose questions and
  answers are sentences assembled from small word lists below, with lognormal lengths, so that
  prompt and reply lengths vary as in chat traffic;
- sample_trace.jsonl: 200 Mooncake-style trace lines (timestamp ms, input_length, output_length,
  hash_ids over 512-token blocks): Poisson arrivals at about 4 req/s, 8 shared system prompts
  (1 to 4 blocks each) followed by unique blocks.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "src" / "tokenpace" / "workload" / "data"
SUBJECTS = ("the garden|the river|the old bridge|a small bakery|the night train|our team|the market|"
            "the library|a red kite|the harbor|the mountain road|my neighbor|the school band").split("|")
VERBS = "builds repairs paints visits measures plans describes follows counts opens closes " \
        "crosses waters studies".split()
OBJECTS = ("a wooden fence|the morning schedule|three new windows|the long table|a stone wall|the "
           "weekly budget|the summer festival|a blue boat|the field notes|the kitchen shelves").split("|")
PLACES = ("near the station|before noon|after the rain|along the coast|in the north field|during "
          "the holidays|behind the museum|at the end of the street").split("|")
ASKS = ("How would you plan", "Can you explain", "What is a good way to describe",
        "Write a short note about", "Give me three ideas for", "Summarize")


def sentence(rng: np.random.Generator) -> str:
    pick = lambda words: words[int(rng.integers(len(words)))]  # noqa: E731
    return f"{pick(SUBJECTS).capitalize()} {pick(VERBS)} {pick(OBJECTS)} {pick(PLACES)}."


def paragraph(rng: np.random.Generator, words: int) -> str:
    out: list[str] = []
    while sum(len(s.split()) for s in out) < words:
        out.append(sentence(rng))
    return " ".join(out)


def sharegpt(rng: np.random.Generator, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        turns = []
        for _ in range(int(rng.integers(1, 4))):
            q_words = int(np.clip(rng.lognormal(np.log(30), 0.7), 5, 300))
            a_words = int(np.clip(rng.lognormal(np.log(70), 0.6), 5, 400))
            ask = ASKS[int(rng.integers(len(ASKS)))]
            turns.append({"from": "human", "value": f"{ask} this: {paragraph(rng, q_words)}"})
            turns.append({"from": "gpt", "value": paragraph(rng, a_words)})
        rows.append({"id": f"sample-{i:04d}", "conversations": turns})
    return rows


def trace(rng: np.random.Generator, n: int) -> list[dict]:
    groups = [list(range(g * 100, g * 100 + int(rng.integers(1, 5)))) for g in range(8)]
    t, next_id, rows = 0.0, 10_000, []
    for _ in range(n):
        prefix = groups[int(rng.integers(len(groups)))]
        input_length = int(np.clip(rng.lognormal(np.log(2500), 0.5), 600, 12_000))
        blocks = -(-input_length // 512)
        own = list(range(next_id, next_id + max(blocks - len(prefix), 0)))
        next_id += len(own)
        rows.append({"timestamp": int(t), "input_length": max(input_length, 512 * len(prefix)),
                     "output_length": int(np.clip(rng.lognormal(np.log(200), 0.6), 1, 2000)),
                     "hash_ids": (prefix + own)[: max(blocks, len(prefix))]})
        t += float(rng.exponential(250.0))
    return rows


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261122)
    (OUT / "sample_sharegpt.json").write_text("[\n" + ",\n".join(json.dumps(r) for r in sharegpt(rng, 100)) + "\n]\n")
    (OUT / "sample_trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trace(rng, 200)))
    for f in sorted(OUT.iterdir()):
        print(f"{f.name}: {f.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
