"""Where llama-server puts a step's KV cells in its one shared buffer, and what its tiled flash
attention then computes, against what the simulator's count (``shared_kv.tiled_cells``) assumes.

The simulator prices a step of at least 64 query rows on one shared KV buffer (llama.cpp's
``--kv-unified``) by the KV tiles ggml's tiled flash attention computes: only the query tile that
holds the decode rows computes the decoding sequences' cells, and a prompt's own tiles compute
little beyond its own cells, because a prompt's cells are assumed to lie together. llama.cpp places
a ubatch's cells one free cell at a time from its head (``llama_kv_cache::find_slot``), starting
again from the buffer's start when enough cells are free before the head. So a prompt may fill
the single cells that finished requests' outputs left among the decoding sequences' cells, and
then its query tiles compute those sequences' tiles too.

This runs a closed loop of the calibration benchmark's workload against llama-server started with
``LLAMA_KV_CACHE_DEBUG=3 -v``. At every placement the engine then logs each cache's cell map (one
character per cell: the sequence that holds it, or '.'). Gemma 3 keeps two caches: the global
layers' (8,192 cells) and the sliding-window layers' (4,608 cells; 15 of its 18 layers). Two
consecutive maps of a cache give the cells a step placed, by sequence. The step's rows are rebuilt
in llama-server's order (the decoding sequences' rows, one new cell each, then each prompt's), and
each 64-row query tile's computed KV tiles are counted as the kernel decides
(``ggml_compute_forward_flash_attn_ext_tiled`` skips a 64-cell KV tile only when the mask hides all
of it from every row of the query tile). A row sees its sequence's earlier cells and its new cells
up to its own position.

For every step with a prompt and at least 64 rows, by kind (decoding sequences + prompts), the
script prints three counts, each in (query row, KV cell) pairs:
- computed: 64 × 64 × the KV tiles the query tiles compute;
- model: what the simulator prices, each row's own causal pairs plus ``tiled_cells``;
- contiguous: the computed count if each prompt's new cells had been placed side by side.

    .venv/bin/python benchmarks/llama_kv_layout.py                    # c=8, 40 requests: about 2 minutes
    .venv/bin/python benchmarks/llama_kv_layout.py --concurrency 16 --requests 48

Needs the engine: `python3 scripts/llama_engine.py ensure`.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_llama import CLIENT_CPU, KV_CACHE, REQUESTS, llama_server, load_args, ready_engine, tokenpace  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
from tokenpace.simulator.shared_kv import tiled_cells  # noqa: E402

TILE = 64  # GGML_FA_TILE_Q and the KV tile (ggml/src/ggml-cpu/common.h)
HEADER = re.compile(r"find_slot: stream\[0\], n = +(\d+), used = +(\d+), head = +(\d+), size = +(\d+), n_swa = +(\d+)")


def maps(log: Path) -> dict[int, list[str]]:
    """Each cache's cell maps in log order, keyed by the cache's size: one string per placement,
    a character per cell ('.' free, a digit the sequence, 'M' shared)."""
    out: dict[int, list[str]] = defaultdict(list)
    lines = log.read_text(errors="replace").splitlines()
    i = 0
    while i < len(lines):
        m = HEADER.search(lines[i])
        i += 1
        if not m:
            continue
        size = int(m.group(4))
        cells = []
        while i < len(lines) and len("".join(cells)) < size:
            text = lines[i].split(" D ", 1)[-1].strip()
            i += 1
            if not text:
                continue
            if HEADER.search(text):  # a map cut short: drop it
                i -= 1
                break
            cells.append(text.replace(" *", ""))
        row = "".join(cells)
        if len(row) == size:
            out[size].append(row)
    return out


def step_counts(before: str, after: str) -> tuple[tuple[int, int], int, int, int] | None:
    """For the step that turned map ``before`` into ``after``: (decoding sequences, prompts), and
    the computed, modeled and contiguous pair counts; None when the step had no prompt or fewer
    than 64 rows, or the maps do not tell (a sequence whose cells moved)."""
    new: dict[str, list[int]] = defaultdict(list)
    old: dict[str, list[int]] = defaultdict(list)
    for j, (a, b) in enumerate(zip(before, after)):
        if b not in ".M" and a != b:
            new[b].append(j)
        if a not in ".M" and a == b:
            old[a].append(j)
    if not new:
        return None
    decodes = sorted(s for s, c in new.items() if len(c) == 1 and old[s])
    prompts = sorted((s for s in new if s not in decodes), key=lambda s: min(new[s]))
    rows_total = len(decodes) + sum(len(new[s]) for s in prompts)
    if not prompts or rows_total < TILE:
        return None
    n_kv = max(j for j, b in enumerate(after) if b != ".") + 1
    # rows in llama-server's order: (sequence, index of its visible cells' limit); a row sees the
    # sequence's old cells and its new cells up to its own.
    rows = [(s, 1) for s in decodes] + [(s, k + 1) for s in prompts for k in range(len(new[s]))]

    def computed(new_cells: dict[str, list[int]]) -> int:
        total = 0
        for start in range(0, len(rows), TILE):
            tiles = set()
            for s, upto in rows[start:start + TILE]:
                for j in old[s]:
                    tiles.add(j // TILE)
                for j in new_cells[s][:upto]:
                    tiles.add(j // TILE)
            total += TILE * TILE * len(tiles)
        return total

    actual = computed(new)
    together = dict(new)
    at = n_kv  # each prompt's new cells side by side past the cells in use
    for s in prompts:
        together[s] = list(range(at, at + len(new[s])))
        at += len(new[s])
    contiguous = computed(together)
    d_kv = sum(len(old[s]) + 1 for s in decodes)
    prefill = tuple((len(new[s]), len(old[s])) for s in prompts)
    own = d_kv + sum(n * c + n * (n + 1) // 2 for n, c in prefill)  # each decode row sees its own cells
    modeled = own + tiled_cells(len(decodes), 1, d_kv, prefill, TILE)
    return (len(decodes), len(prompts)), actual, modeled, contiguous


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=8, choices=sorted(REQUESTS))
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--keep-log", type=Path, help="write the engine's log here (kept)")
    parser.add_argument("--from-log", type=Path, help="count from a log --keep-log kept instead of running the engine")
    args = parser.parse_args()
    if args.from_log:
        report(maps(args.from_log), f"the engine's log {args.from_log}")
        return 0
    engine = ready_engine()
    if engine is None:
        return 2
    load = load_args(args.concurrency)
    load[load.index("--requests") + 1] = str(args.requests)
    with tempfile.TemporaryDirectory(prefix="tokenpace-kv-layout-") as tmp:
        log = args.keep_log or Path(tmp) / "llama-server.log"
        with llama_server(engine, (*KV_CACHE["unified"], "-v"), env={"LLAMA_KV_CACHE_DEBUG": "3"},
                          log_path=log) as url:
            tokenpace("bench", "--url", url, *load, "--out", str(Path(tmp) / "run.json"), "--no-progress",
                      cpus={CLIENT_CPU})
        by_cache = maps(log)
    report(by_cache, f"tokenpace bench {' '.join(load)}")
    print(f"reproduce: .venv/bin/python benchmarks/llama_kv_layout.py --concurrency {args.concurrency} "
          f"--requests {args.requests}")
    return 0


def report(by_cache: dict[int, list[str]], load: str) -> None:
    print(f"llama-server -t 1 -np 8 --kv-unified, Gemma 3 270M; {load}")
    for size, seq in sorted(by_cache.items()):
        kinds: dict[tuple[int, int], list[tuple[int, int, int]]] = defaultdict(list)
        for a, b in zip(seq, seq[1:]):
            got = step_counts(a, b)
            if got:
                kinds[got[0]].append(got[1:])
        name = "sliding-window layers' cache" if size < max(by_cache) else "global layers' cache"
        print(f"{name} ({size:,} cells, {len(seq)} placements): steps with a prompt and >= {TILE} rows")
        print("  kind (decodes+prompts): steps; medians of computed / model / contiguous pairs; "
              "medians of computed/model and computed/contiguous")
        for (nd, npr), counts in sorted(kinds.items()):
            comp, model, cont = (statistics.median(c[k] for c in counts) for k in range(3))
            ratio = statistics.median(c[0] / c[1] for c in counts)
            spread = statistics.median(c[0] / c[2] for c in counts)
            print(f"  {nd}+{npr}p: {len(counts):3d}; {comp:9,.0f} / {model:9,.0f} / {cont:9,.0f}; {ratio:.2f}; {spread:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
