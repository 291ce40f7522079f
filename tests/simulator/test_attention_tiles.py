"""Attention in tiles over one shared KV buffer (``RooflineParams.attention_tile_rows``, issue 25).

ggml's CPU flash attention computes a batch of at least 64 query rows in 64 x 64 tiles over every
KV cell in use: with one KV buffer for all sequences, a prompt's rows compute the other sequences'
cells as attention, while a smaller batch (a few decodes) skips them. The model prices the other
sequences' cells (``StepWork.scan``) as attention (query, key) pairs in steps that reach the tile.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tokenpace.simulator import RooflineParams, StepBatch
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
