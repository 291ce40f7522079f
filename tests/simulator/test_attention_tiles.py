"""Attention in tiles over one shared KV buffer (``RooflineParams.attention_tile_rows``, issue 25).

ggml's CPU flash attention computes a batch of at least 64 query rows in 64 x 64 tiles over every
KV cell in use: with one KV buffer for all sequences, a prompt's rows compute the other sequences'
cells as attention, while a smaller batch (a few decodes) skips them. The model prices the other
sequences' cells (``StepWork.scan``) as attention (query, key) pairs in steps that reach the tile.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tokenpace.simulator import RooflineParams, StepBatch
from tokenpace.simulator.shared_kv import tiled_cells
from tokenpace.simulator.step import decode_run_s

from sim_helpers import cpu_predictor

BASE = RooflineParams(mfu=0.2, mbu=0.6, step_overhead_s=0.002, seq_overhead_s=0.0015)
TILED = dataclasses.replace(BASE, attention_tile_rows=64)


def test_a_prompt_beside_long_decodes_pays_their_cells_as_attention_and_small_batches_do_not():
    plain, tiled = cpu_predictor(BASE), cpu_predictor(TILED)
    # The extra time of a 100-row prompt beside 7 decodes grows with their contexts (the cells its
    # rows compute), where without tiles only the decodes' own KV reads grow.
    extra = [tiled.step_s(StepBatch(prefill=((100, 0),), decode_context=(ctx,) * 7))
             - plain.step_s(StepBatch(prefill=((100, 0),), decode_context=(ctx,) * 7)) for ctx in (100, 400, 1600)]
    assert 0 < extra[0] < extra[1] < extra[2]
    assert extra[2] / extra[1] > 3  # about linear in the others' cells (16x the cells from 100 to 1600)
    # Below the tile: 8 decodes, and a 40-token prompt beside 7 decodes, are priced as without tiles.
    for small in (StepBatch(decode_context=(500,) * 8), StepBatch(prefill=((40, 0),), decode_context=(300,) * 7)):
        assert tiled.step_s(small) == plain.step_s(small)
    # A lone prompt has no other sequence's cells to compute.
    lone = StepBatch(prefill=((500, 0),))
    assert tiled.step_s(lone) == plain.step_s(lone)


def test_price_step_and_a_decode_run_give_the_same_floats_with_tiles():
    p = cpu_predictor(TILED)
    mixed = StepBatch(prefill=((90, 13),), decode_context=(120, 340, 5))
    assert p.step_s(mixed) == p.params.price(p.work(mixed))
    # 64 decodes reach the tile: a decode run matches its steps one by one, and costs more than untiled.
    ctx = tuple(range(30, 30 + 64 * 5, 5))
    run = decode_run_s(p, StepBatch(decode_context=ctx), 12)
    one_by_one = [p.step_s(StepBatch(decode_context=tuple(c + i for c in ctx))) for i in range(12)]
    assert list(np.asarray(run)) == one_by_one
    assert one_by_one[0] > cpu_predictor(BASE).step_s(StepBatch(decode_context=ctx))


def test_only_the_query_tile_with_decode_rows_computes_the_decoding_sequences_cells():
    # Rows in llama-server's order: 2 decode rows (300 cells together), a 100-row prompt, a 50-row one.
    # Tile 0 (2 decode rows, 62 of the first prompt's) computes the 300 decode cells and the first
    # prompt's 100: 2 x 400 + 62 x 300. Tile 1 (38 rows of the first prompt, 26 of the second)
    # computes both prompts' cells: 38 x 50 + 26 x 100. Tile 2 (24 rows of the second) only its own.
    # Less the decode rows' own 300 cells: 23,600, against 55,600 for every row over every other cell.
    assert tiled_cells(2, 1, 300, ((100, 0), (50, 0)), 64) == 19_400 + 4_500 + 0 - 300
    # A decode-only step: every tile holds decode rows, so every row computes every other cell.
    assert tiled_cells(64, 1, 64 * 30, (), 64) == 64 * 64 * 30 - 64 * 30


def test_a_long_prompt_pays_the_decoding_sequences_cells_once_per_tile_not_per_row():
    # The decoding sequences' longer contexts cost a 1,000-row prompt what they cost a 100-row one:
    # only the first query tile (the 7 decode rows and 57 prompt rows) computes their cells.
    tiled = cpu_predictor(TILED)

    def growth(prompt: int) -> float:
        at = [tiled.step_s(StepBatch(prefill=((prompt, 0),), decode_context=(ctx,) * 7)) for ctx in (100, 1600)]
        return at[1] - at[0]

    assert growth(1000) == pytest.approx(growth(100), rel=1e-9)
    assert growth(100) > 0
