"""The KV cells of other sequences that a step's query rows visit in one KV buffer shared by every
sequence (llama.cpp's ``--kv-unified``): every cell in use for each row on ggml's per-row path
(``other_cells``, what ``RooflineParams.kv_scan_s`` prices), and the cells the tiles of its flash
attention compute (``tiled_cells``, what ``attention_tile_rows`` prices as attention pairs).
Engines with paged attention per sequence visit only a sequence's own blocks."""

from __future__ import annotations


def other_cells(nd: int, g: int, d_kv, p_tokens: int, p_kv: int, p_own: int):
    """``StepWork.scan``: over the step's query rows, the KV cells of the batch that belong to other
    sequences than the row's (what ``kv_scan_s`` prices: one shared KV buffer, every row visiting every
    cell in use). ``nd`` decoding sequences of ``g`` rows each, holding ``d_kv`` cells together; prompts
    of ``p_tokens`` rows holding ``p_kv`` cells, and Σ rows × own cells over the prompts (``p_own``).
    ``d_kv`` may be an array (``decode_run_s``: one value per step)."""
    total = d_kv + p_kv
    return g * (nd * total - d_kv) + p_tokens * total - p_own


def tiled_cells(nd: int, g: int, d_kv: int, prefill: tuple[tuple[int, int], ...], tile: int) -> int:
    """What the tiles of ggml's flash attention compute of other sequences' cells (``attention_tile_rows``):
    Σ over query rows of the cells of other sequences than the row's in the KV tiles its query tile
    does not skip. The step's rows in batch order (llama-server's: the ``nd`` decoding sequences'
    ``g`` rows each, then each prompt's) are cut into tiles of ``tile`` rows, and a query tile computes
    every KV tile holding a cell that one of its rows may see (``ggml_compute_forward_flash_attn_ext_tiled``
    skips a KV tile only when the mask hides all of it from every row of the query tile). A decoding
    sequence's cells are spread over the whole buffer (each step places every decoding sequence's new
    cell side by side), so a query tile with a decode row computes all ``d_kv`` of them; a prompt's
    cells lie together (placed in one step), so a query tile of one prompt's rows computes little
    beyond its own, and of the prompts only those with rows in the tile. Equal to ``other_cells``
    for a decode-only step (every tile holds decode rows). ``prefill``: each prompt's (rows, cells
    cached before the step). What it leaves out (whole tiles' padding and causal diagonal, prompts
    that llama.cpp placed between the decoding sequences' cells) makes the engine compute 1.7-2.2
    times this count plus the own pairs in a mixed step, about the same at every load (RESULTS 7za:
    ``benchmarks/llama_kv_layout.py``)."""
    dt = nd * g
    rows = dt + sum(n for n, _ in prefill)
    pairs = -g * d_kv  # the decode rows' own cells, taken out of what their tiles compute
    for start in range(0, rows, tile):
        end = min(start + tile, rows)
        decode_rows = max(0, min(dt, end) - start)
        members, at = [], dt  # the prompts with rows in this tile: (rows here, cells)
        for n, c in prefill:
            if at < end and at + n > start:
                members.append((min(at + n, end) - max(at, start), c + n))
            at += n
        computed = (d_kv if decode_rows else 0) + sum(cells for _, cells in members)
        pairs += decode_rows * computed + sum(r * (computed - cells) for r, cells in members)
    return pairs
