"""What a step's work costs: ``RooflineParams`` prices a ``StepWork`` (``roofline.RooflinePredictor``
makes it, one operator group at a time).

Each operator group takes the larger of its FLOPs at its compute efficiency and its bytes at its
bandwidth efficiency (the catalog's, or ``mfu`` and ``mbu``).

Then two ring all-reduces per layer under TP (2(t−1)/t × tokens × hidden × 2 bytes over one
direction of the link at the catalog's bus-bandwidth efficiency, plus a latency of base + 2(t−1)
hops each), a fixed per-step host overhead (scheduling, input preparation: the host work a GPU waits
on), a per-sequence overhead for each sequence in the step (sampling over the vocabulary,
detokenization, streaming its token: 0 by default, as GPU engines batch it; a CPU engine such as
llama.cpp pays it per sequence) and a per-token one (0 by default). ``row_group`` > 1 prices the
GEMMs' rows in groups, in one of two ways (``row_remainder``): "pad" (a batch of 5 rows costs what 8
do with groups of 4: a kernel that pads its last group), or "gemv" (ggml's CPU matrix kernels: the
rows in full groups go through a GEMM kernel, which costs ``gemm_step_s`` once per step it runs in
beyond its FLOPs and bytes, and each remaining ``rows % row_group`` row through a matrix-vector
kernel that costs ``gemv_row_s`` beyond its FLOPs: on llama.cpp a decode step of 1 to 3 sequences
is all GEMV, 4 is one GEMM, 6 costs more than 8), or "gemv-pass": the same, each remaining row also
reading the weights once more. That is what ggml's repacked CPU kernels do: a matrix's rows past
the last full group of 4 each go through their own matrix-vector call over the whole matrix, after
one GEMM call for all the full groups (``ggml/src/ggml-cpu/repack.cpp``,
``tensor_traits::forward_mul_mat_one_chunk``: ``gemm(..., nrows - nrows % 4, ...)``, then ``gemv``
per remaining row), so a memory-bound step of k < 4 sequences costs k passes over the weights, not
one (``weight_passes``). Calibration fits the overheads, the row group and its remainder, and one
MFU and MBU.

"gemv-ubatch" is "gemv-pass" with a step's prompts computed in kernel invocations of their own,
after the decode tokens'. That is what llama.cpp does with a KV stream per slot (``-np N`` given,
``--kv-unified`` off): the batch ``update_slots`` builds (every slot's decode token, then prompt
tokens up to ``n_batch``) is split into ubatches by ``llama_batch_allocr::split_equal``
(``src/llama-batch.cpp``; ``llama_kv_cache_iswa::init_batch`` skips the simple split when the
cache is not unified), and a ubatch takes the same number of tokens from each of its sequences:
the decoding sequences' one token each, and the rest of a prompt in a ubatch of its own. So the
decode rows and the prompt rows are priced apart, each at its own bound (the step's time is the
sum): the decode rows as "gemv-pass" prices them (their weight passes, the LM head for each, the
kernel paths ``gemv_row_s``/``gemm_step_s``), the prompts as one more pass over the weights at
their FLOPs, with one LM-head pass per prompt for its one output row and no kernel-path cost. A
GEMM over a prompt's hundred-odd rows has no cost of its own beyond its FLOPs to speak of: on the
test engine (llama-server, Gemma 3 270M, one core) a lone prompt's ``prompt_ms`` is 3.2 ms per
token plus 22 ms, HTTP and its one output row included, where a closed loop's decode steps fit a
``gemm_step_s`` near 70 ms; under "gemv-pass" every prefill paid that. With a unified KV cache
(``--kv-unified``, or one slot) llama.cpp splits a batch simply, prompts and decodes together:
"gemv-pass".
A step of two or more sequences costs ``head_step_s`` more (0 by default): its LM head multiplies
two or more output rows, which ggml hands to a GEMM kernel (llamafile's ``llamafile_sgemm`` takes
``n >= 2`` only, ``ggml/src/ggml-cpu/llamafile/sgemm.cpp``) where one row goes to a dot product; a
lone prompt's many rows have one output row. The kernel switch is the likely cause, not a measured
one: fitted on llama-server it is 8-27 ms a step, and a prompt beside one decode, priced 3.5-5.1%
short without it, comes within 1.6% (medians of 27 runs, RESULTS 7zn).

The decode rows' GEMM efficiency, apart from the prefill's (``decode_mfu``; None: MFU's). Under
ggml's kernels a step of 4g decoding sequences is one pass over the weights plus g row groups'
compute, not g passes: ``forward_mul_mat`` (``repack.cpp``) hands one thread the whole matrix as
one chunk, and the AVX2 GEMM (``arch/x86/repack.cpp``, ``ggml_gemm_q4_K_8x8_q8_K``) runs its row
groups over that chunk one after another (16 rows at a time, then 4), so after the first group
the weights (under a MB per matrix for a small model) come from the core's cache, and each
further group costs its compute. A prefill's MFU (hundreds of rows, with the attention over the prompt, the activations'
quantization and the kernels without a repacked layout) need not price those few rows. (Measured
since: on llama-server a step of 8 decodes costs 1.5-1.6 times one of 4, RESULTS 7n and 7v, the
second group about its rows' FLOPs at a prompt's MFU; the LM head, Gemma's 178 MB embedding, stays
in no cache between groups.) So the decode tokens' share of each GEMM
group's FLOPs (``StepWork.decode_compute_s``) is divided by ``decode_mfu``, the rest by MFU, and
the group then takes the larger of its compute and its bytes as before.
For a fixed decode batch only the attention's work changes from step to step (the contexts grow):
``decode_run_s`` prices a run of such steps as arrays, float for float what ``step_s`` gives each.
The host work of a request's arrival (``arrival_s``; 0 by default). An engine whose HTTP threads
share the compute core pays, for each request that arrives while a step runs, the host time of
taking it in (parsing its JSON, the chat template, tokenizing the prompt): that step ends later
by it (a request that finds the engine idle is not charged: a calibration's fixed costs, measured
from the send, hold that time). llama-server
started with ``-t 1`` and pinned to one core is such an engine: the HTTP handler of a completion
(``handle_completions_impl``, on the HTTP server's thread pool) parses it, applies the chat
template and tokenizes the prompt (``tokenize_input_prompts``) before it queues the task for the
one thread that runs the model, on the same core. A GPU engine does this on other cores
(0). The engine (``engine.Engine``) applies it, as only the event loop knows when requests
arrive; a calibration fits it from the steps' arrival counts (``ObservedStep.arrivals``).
The host time per sequence that overlaps the GPU (``host_seq_s``; 0 by default). An engine whose
scheduler prepares the next step on the host while the GPU runs this one (TensorRT-LLM's PyTorch
backend with its overlap scheduler: scheduling, sampling bookkeeping and request updates in Python,
per request) takes, per step, the longer of the GPU's time and that host time, sequences × this.
The engine (``engine.Engine``) applies it to every step it prices.
The join window (``join_window_s``; 0 by default). After a step during which requests arrived, an
engine that sets up new requests between steps takes in every request that reaches it meanwhile
before it forms the next batch: llama-server streams a step's tokens, then processes its task
queue (launching the waiting requests' slots) and only then builds the next batch, so a client's
next request sent a millisecond after a token can join the prompt of a request that arrived during
the step. The engine (``engine.Engine``) forms such a batch ``join_window_s`` after the step's end
and prices it from that end, as a calibration measures steps from the chunks before them; after a
step with no arrival it forms the batch at once. A calibration measures it from the sends just
after a step ended that joined, or missed, the next one (``calibrate.steps``). ``join_after``
says after which steps the window opens: ``"arrival"`` (the default), only after a step during
which a request arrived; ``"finish"``, also after a step in which a sequence finished, whose client
sends its next request a turnaround later (an engine that always takes requests a moment into a
step, as llama-server did in RESULTS 7q's runs whether or not one was waiting). A decode step
with neither opens no window, so runs of such steps are still jumped.
The stream interval (``stream_interval_s``; 0 by default). An engine that samples and streams a
step's sequences one after another on the core that runs the model, and forms its next batch after
the last, ends a sequence streamed early before the step is over for the engine: llama-server
(one thread, one core) streams a step's chunks 0.5-0.8 ms apart per sequence, in slot order, so
the k-th of n sequences ends (n - k) intervals before the last, and its closed-loop client's next
request, sent a turnaround (0.9 ms) later, joins the next batch if it reaches the engine in time
(``stream_join_s``: up to that long after the last stream; negative, that long before it), while
the last ones' wait a step: none at 2 sequences, 28-33% at 4, 49-70% at 8 (RESULTS 7zb). The engine
(``engine.Engine``) gives each sequence a slot as llama-server does (the free one used least
recently) and tells a finished sequence's client how much time it has (``Sequence.lead_ns``:
(n - k) intervals plus ``stream_join_s``); a closed loop's client then sends that much sooner
(``load.ClosedLoop``), at the step's end at the earliest, so it joins when its turnaround is
shorter. Tokens are still timestamped at the step's end (the interval is a few ms on steps of
20 ms and more). A calibration measures the interval from the spread of each step's chunks, and
fits ``stream_join_s`` from which places in a step's stream got their client's next request into
the next step (``calibrate.client.stream_join_from_places``, RESULTS 7zj).

The scan of one KV buffer shared by every sequence (``kv_scan_s``; 0 by default): per query row of
the step and per KV cell of the batch that belongs to another sequence than the row's
(``StepWork.scan``). llama.cpp with one KV buffer for all slots (``--kv-unified``) runs a step's
attention over the buffer's cells in use, and each row's kernel visits every cell, skipping the
ones its mask hides (``ggml_compute_forward_flash_attn_ext_f16_one_chunk``: ``if (mv == -INFINITY)
continue``): the skip is cheap, not free. So a prompt computed beside decoding sequences costs more
the longer their contexts (llama-server, Gemma 3 270M, one core: a 160-token prompt 535 ms alone,
567 ms beside one sequence of about 50 tokens, 631 ms beside one of about 1,000; RESULTS 7p), which
the attention's FLOPs and bytes, counted per sequence over its own context, do not show. A row's
own cells are the attention's (the term is 0 for a lone sequence, so a run of one sequence at a
time cannot confuse it with the prompts' FLOPs). Engines with
paged attention per sequence (vLLM, SGLang, TensorRT-LLM) visit only a sequence's own blocks: 0.

Attention in tiles over the shared buffer (``attention_tile_rows``; 0 by default). ggml's CPU flash
attention takes a tiled path when the step's batch has at least ``GGML_FA_TILE_Q`` = 64 query rows
(``ggml_compute_forward_flash_attn_ext_tiled``, ggml/src/ggml-cpu/ops.cpp): 64 rows at a time, it
multiplies them with each 64-cell KV tile of the cells in use, skipping a tile only when every
cell of it is masked for every row of the query tile. In one shared buffer the decoding sequences'
new cells are interleaved step by step, so almost no KV tile is wholly another decoding sequence's:
a query tile that holds a decode row computes every decoding sequence's cells, its prompt rows
included. A prompt's cells lie together (placed in one step), so a query tile of one prompt's rows
skips the tiles of the others. The cells of other sequences that the tiles compute
(``shared_kv.tiled_cells``: with llama-server's batch order, the decode rows first, only the first
query tile's prompt rows compute the decoding sequences' cells) are priced as attention
(query, key) pairs, at the attention's FLOPs and efficiency; a smaller batch takes the per-row
path, which skips a masked cell at a small cost (``kv_scan_s``, which then holds what is left).
Measured on the 2-core VM (RESULTS 7p): a 160-token prompt took 64 ms more beside a decoding
sequence of about 1,000 cells than beside one of about 50; over the ~950 more cells, its first query
tile's 64 rows make 60,800 (query, key) pairs, 1.05 µs each, where Gemma 3 270M's attention FLOPs
per pair at a fitted MFU take 1.75 µs (every one of its ~165 rows over them, the count before
RESULTS 7za, would make it 0.41 µs). The engine computes more than this count: whole 64 x 64 tiles
(padding, the causal diagonal's masked cells), and from 8 clients up prompts that llama.cpp's
``find_slot`` placed in the free cells between the decoding sequences' cells. Counted from its
logged cell maps (``benchmarks/llama_kv_layout.py``), 1.7-2.2 times this count in every mixed step
from 4 to 16 clients, about the same ratio at every load, which a fitted MFU takes up. A count of
whole tiles with prompts placed side by side (within 0.7-1.1 of what such placement computes) fitted
worse (RESULTS 7za).

How a decode step reads a grouped-query model's KV cache (``decode_kv_reads``). "shared" (the
default): each KV head is read once for all the query heads it serves, as every current kernel
does (FlashAttention, FlashInfer, TensorRT-LLM's XQA). "per-query-head": once for each query head,
so a model with G query heads per KV head reads its KV G times a step, at the efficiency of
multi-head attention's reads (the catalog's figure at one query head per KV head). That is
TensorRT-LLM's masked multi-head attention kernel up to v0.6: it "will load kv-cache num_heads /
num_heads_kv times from the global memory" (NVIDIA/TensorRT-LLM issue #407, 2023-11-16; the
maintainers answered that part may come from L2), optimized on the main branch after the v0.6
release (PR #524, 2023-12-01: "MMHA optimization for MQA and GQA"), and served by the XQA kernels
from v0.8 (issue #1240). Prompts' KV reads are scaled too; their steps are compute-bound, so it
rarely shows there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

# The step overhead: engines that replay CUDA graphs (vLLM V1, SGLang, TRT-LLM) spend 1–2 ms of host
# time per step; engines without them spend several ms more (the 2024 13 ms/token point). The
# efficiencies come from the catalog (data/efficiency.json), unless ``mfu``/``mbu`` replace them.
DEFAULT_STEP_OVERHEAD_S = 0.00175
ROW_REMAINDERS = ("pad", "gemv", "gemv-pass", "gemv-ubatch")
GEMV_REMAINDERS = ("gemv", "gemv-pass", "gemv-ubatch")
PASS_REMAINDERS = ("gemv-pass", "gemv-ubatch")  # a weight pass per remaining row
JOIN_AFTER = ("arrival", "finish")  # the steps after which a join window opens (see the docstring)
DECODE_KV_READS = ("shared", "per-query-head")  # how a decode step reads a GQA model's KV (see the docstring)
# The highest MBU accepted: a fraction of the hardware's stated bandwidth, above 1 where weights stream
# from a cache faster than from the memory the figure describes (a CPU's last-level cache).
MBU_MAX = 4.0


@dataclass(frozen=True, slots=True)
class RooflineParams:
    mfu: float | None = None  # replaces every compute efficiency of the catalog; None: the catalog's
    mbu: float | None = None  # replaces every bandwidth efficiency of the catalog; None: the catalog's
    step_overhead_s: float = DEFAULT_STEP_OVERHEAD_S
    allreduce_latency_s: float | None = None  # per all-reduce; None: the catalog's base + 2(t−1) hops
    seq_overhead_s: float = 0.0  # per sequence in a step (each decode, each prompt chunk)
    token_overhead_s: float = 0.0  # per token computed in a step
    row_group: int = 1  # GEMM rows are priced in groups of this many (1: each row)
    row_remainder: str = "pad"  # the rows past the last full group: one of ROW_REMAINDERS (see the module docstring)
    gemv_row_s: float = 0.0  # "gemv": per row outside the full groups, beyond its FLOPs and bytes
    gemm_step_s: float = 0.0  # "gemv": per step with at least one full group, beyond its FLOPs and bytes
    head_step_s: float = 0.0  # per step of two or more sequences (an LM head over 2+ output rows): see the docstring
    decode_mfu: float | None = None  # the decode tokens' GEMM FLOPs at this efficiency; None: at ``mfu``'s
    arrival_s: float = 0.0  # host time per request arriving while a step runs: see the docstring
    host_seq_s: float = 0.0  # host time per sequence a step overlaps with the GPU: see the docstring
    join_window_s: float = 0.0  # after a step during which requests arrived, new ones taken in this long: see the docstring
    join_after: str = "arrival"  # the steps after which the window opens: one of JOIN_AFTER (see the docstring)
    stream_interval_s: float = 0.0  # a step's sequences streamed this far apart, in slot order: see the docstring
    stream_join_s: float = 0.0  # with it: a send joins the next batch up to this long after the step's last stream (< 0: before)
    kv_scan_s: float = 0.0  # per query row and KV cell of another sequence in the step (one shared KV buffer): see the docstring
    # A step of at least this many query rows computes attention in tiles over every KV cell in use (one
    # shared KV buffer): the other sequences' cells cost attention FLOPs; 0: never. See the docstring.
    attention_tile_rows: int = 0
    # Each KV head read once for its query heads ("shared"), or once per query head: one of
    # DECODE_KV_READS (see the docstring).
    decode_kv_reads: str = "shared"
    # Per decode batch size k (index k - 1), seconds added to a decode-only step's price; None or past the
    # end: nothing. A calibration's measured correction where the model cannot express the engine: see
    # ``decode_delta``.
    decode_delta_s: tuple[float | None, ...] = ()

    def __post_init__(self) -> None:
        if self.row_group < 1:
            raise ValueError("row_group must be >= 1")
        if self.row_remainder not in ROW_REMAINDERS:
            raise ValueError(f"row_remainder must be one of {ROW_REMAINDERS}, not {self.row_remainder!r}")
        if self.decode_mfu is not None and not self.decode_mfu > 0:
            raise ValueError("decode_mfu must be > 0")
        if not 0 <= self.arrival_s < float("inf"):
            raise ValueError("arrival_s must be >= 0")
        if not 0 <= self.host_seq_s < float("inf"):
            raise ValueError("host_seq_s must be >= 0")
        if not 0 <= self.join_window_s < 1.0:
            raise ValueError("join_window_s must lie in [0, 1) seconds")
        if not 0 <= self.stream_interval_s < 1.0:
            raise ValueError("stream_interval_s must lie in [0, 1) seconds")
        if not -1.0 < self.stream_join_s < 1.0:
            raise ValueError("stream_join_s must lie in (-1, 1) seconds")
        if self.join_after not in JOIN_AFTER:
            raise ValueError(f"join_after must be one of {JOIN_AFTER}, not {self.join_after!r}")
        if not 0 <= self.kv_scan_s < float("inf"):
            raise ValueError("kv_scan_s must be >= 0")
        if not 0 <= self.head_step_s < float("inf"):
            raise ValueError("head_step_s must be >= 0")
        if self.attention_tile_rows < 0:
            raise ValueError("attention_tile_rows must be >= 0")
        if self.decode_kv_reads not in DECODE_KV_READS:
            raise ValueError(f"decode_kv_reads must be one of {DECODE_KV_READS}, not {self.decode_kv_reads!r}")
        if not all(d is None or abs(d) < float("inf") for d in self.decode_delta_s):
            raise ValueError("decode_delta_s must hold finite seconds or None")

    def to_dict(self) -> dict[str, Any]:
        return {"mfu": self.mfu, "mbu": self.mbu, "step_overhead_s": self.step_overhead_s,
                "allreduce_latency_s": self.allreduce_latency_s, "seq_overhead_s": self.seq_overhead_s,
                "token_overhead_s": self.token_overhead_s, "row_group": self.row_group,
                "row_remainder": self.row_remainder, "gemv_row_s": self.gemv_row_s, "gemm_step_s": self.gemm_step_s,
                **({"head_step_s": self.head_step_s} if self.head_step_s else {}),
                "decode_mfu": self.decode_mfu, "arrival_s": self.arrival_s,
                **({"kv_scan_s": self.kv_scan_s} if self.kv_scan_s else {}),
                **({"host_seq_s": self.host_seq_s} if self.host_seq_s else {}),
                **({"attention_tile_rows": self.attention_tile_rows} if self.attention_tile_rows else {}),
                **({"decode_kv_reads": self.decode_kv_reads} if self.decode_kv_reads != "shared" else {}),
                **({"join_window_s": self.join_window_s} if self.join_window_s else {}),
                **({"join_after": self.join_after} if self.join_after != "arrival" else {}),
                **({"stream_interval_s": self.stream_interval_s, "stream_join_s": self.stream_join_s}
                   if self.stream_interval_s else {}),
                **({"decode_delta_s": list(self.decode_delta_s)} if self.decode_delta_s else {})}

    def decode_delta(self, sequences: int, tokens_per_seq: int = 1) -> float:
        """What a calibration measured a decode-only step of ``sequences`` sequences to cost beyond
        the model's price, on average over the run's steps of that size (0 where it saw too few, and
        for speculative verification steps, which it never saw). This is a measured efficiency curve
        by batch size, for an engine whose step time the roofline's terms cannot follow: on
        llama.cpp's CPU kernels a step of 3 decodes costs more than one of 4, and one of 5 more than
        one of 6 (RESULTS 7n). The model still prices each step's own contexts; the correction is
        the run's mean residual at that batch size."""
        if tokens_per_seq != 1 or not 0 < sequences <= len(self.decode_delta_s):
            return 0.0
        return self.decode_delta_s[sequences - 1] or 0.0

    def kernel_paths_s(self, tokens: int) -> float:
        """The "gemv" remainder's costs for a step of ``tokens`` GEMM rows (0 under "pad")."""
        if self.row_remainder not in GEMV_REMAINDERS or not tokens:
            return 0.0
        rg = self.row_group
        return (tokens % rg) * self.gemv_row_s + (self.gemm_step_s if tokens >= rg else 0.0)

    def _fixed_s(self, link_s, allreduces, sequences, ar_latency, tokens, kernel_rows):
        """A step's seconds outside its operator groups: overheads, kernel paths (for its
        ``kernel_rows``: see ``StepWork``), communication (``price`` and ``price_run``: floats, or
        arrays of one value per step)."""
        t = self.step_overhead_s + sequences * self.seq_overhead_s + tokens * self.token_overhead_s
        if self.row_remainder in GEMV_REMAINDERS:
            t += self.kernel_paths_s(kernel_rows)
        if self.head_step_s:
            t = t + self.head_step_s * (sequences >= 2)
        if allreduces:
            lat = ar_latency if self.allreduce_latency_s is None else self.allreduce_latency_s
            t += link_s + allreduces * lat
        return t

    def price(self, work: StepWork | tuple) -> float:
        """Seconds for a step of this ``work`` (a StepWork, or a plain tuple in its order): each
        operator group at its bound, plus overheads."""
        compute_s, memory_s, _, _, _, compute_eff, memory_eff, _, _, decode_compute_s, _, memory_latency_s, scan = work
        t = self.fixed_s(work)
        group_s, mfu, mbu, dmfu = self.group_s, self.mfu, self.mbu, self.decode_mfu
        for i, (c, m) in enumerate(zip(compute_s, memory_s)):  # (a figure that mfu/mbu replace is not read)
            t += group_s(c, m, compute_eff[i] if mfu is None else mfu, memory_eff[i] if mbu is None else mbu,
                         0.0 if dmfu is None else decode_compute_s[i], 0.0 if mbu is not None else memory_latency_s[i])
        if self.kv_scan_s:  # last, as ``RooflinePredictor.step_s`` adds it
            t += self.kv_scan_s * scan
        return t

    def fixed_s(self, work: StepWork | tuple) -> float:
        """``price``'s seconds outside the operator groups (overheads, kernel paths, communication)."""
        return self._fixed_s(work[2], work[3], work[4], work[7], work[8], work[10])

    def group_s(self, compute_s: Any, memory_s: Any, compute_eff: float, memory_eff: float,
                decode_compute_s: float = 0.0, memory_latency_s: float = 0.0) -> Any:
        """One operator group's seconds in ``price``: the larger of its FLOPs at its compute
        efficiency (the decode tokens' share at ``decode_mfu`` where set) and its bytes at its
        bandwidth efficiency plus its GEMM calls' fixed seconds (``mfu``/``mbu`` replace the
        efficiencies where set, and ``mbu`` the fixed seconds too). Floats, or for ``price_run``
        arrays of one value per step, element by element the same floats."""
        eff = compute_eff if self.mfu is None else self.mfu
        if self.decode_mfu is None:
            c = compute_s / eff
        else:
            c = (compute_s - decode_compute_s) / eff + decode_compute_s / self.decode_mfu
        m = memory_s / memory_eff + memory_latency_s if self.mbu is None else memory_s / self.mbu
        if isinstance(c, np.ndarray) or isinstance(m, np.ndarray):  # ``price_run``'s: one value per step
            return np.where(c > m, c, m)
        return c if c > m else m

    def price_run(self, work: tuple) -> np.ndarray:
        """``price`` for many steps at once: ``work`` as ``price`` takes it, where a group's compute
        and memory seconds may be arrays (one value per step). The same operations in the same
        order as ``price``, element by element, so each step's seconds are the very float ``price``
        gives it (the engine's jump over decode steps relies on that)."""
        compute_s, memory_s, _, _, _, compute_eff, memory_eff, _, _, decode_compute_s, _, memory_latency_s, scan = work
        t = self.fixed_s(work)
        group_s, mfu, mbu, dmfu = self.group_s, self.mfu, self.mbu, self.decode_mfu
        for i, (c, m) in enumerate(zip(compute_s, memory_s)):  # as in ``price``
            t = t + group_s(c, m, compute_eff[i] if mfu is None else mfu, memory_eff[i] if mbu is None else mbu,
                            0.0 if dmfu is None else decode_compute_s[i], 0.0 if mbu is not None else memory_latency_s[i])
        if self.kv_scan_s:
            t = t + self.kv_scan_s * scan
        return t


class StepWork(NamedTuple):
    """One step's work before any efficiency applies: per operator group (``GROUPS``; whole model),
    the seconds its FLOPs take at the peak of its precision (``compute_s``) and its bytes at the full
    HBM bandwidth (``memory_s``), with the catalog's efficiency for each (``compute_eff``,
    ``memory_eff``); the all-reduce bytes at the link's bus bandwidth (``link_s``), their count and
    the catalog's latency of one; the sequences in the step (each decode and each prompt chunk) and
    its tokens; and of ``compute_s``, the share of the decoding sequences' tokens
    (``decode_compute_s``: the GEMMs' and the LM head's, not the attention's), which ``decode_mfu``
    prices where set; and per group the fixed seconds of its GEMM calls (``memory_latency_s``: the
    catalog's per-GEMM latency where it gives weight streaming by rows), added to the memory side
    after its efficiency, and left out where ``mbu`` replaces the catalog (a calibration's
    overheads hold such costs); and ``scan``, over the step's query rows, the KV cells of the batch
    that belong to other sequences than the row's (``kv_scan_s`` prices it). ``RooflineParams.price`` turns it into seconds; a calibration fits
    the params to measured steps through it."""

    compute_s: tuple[float, ...] = ()
    memory_s: tuple[float, ...] = ()
    link_s: float = 0.0
    allreduces: int = 0
    sequences: int = 0
    compute_eff: tuple[float, ...] = ()
    memory_eff: tuple[float, ...] = ()
    allreduce_latency_s: float = 0.0
    tokens: int = 0
    decode_compute_s: tuple[float, ...] = ()
    kernel_rows: int = 0  # rows whose kernel paths the "gemv" remainders price: all; "gemv-ubatch": the decode rows
    memory_latency_s: tuple[float, ...] = ()  # per group, the GEMM calls' fixed seconds (see below)
    scan: int = 0  # Σ over query rows of the batch's KV cells of other sequences (``kv_scan_s``)


def weight_passes(rows: int, row_group: int) -> int:
    """How many times a "gemv-pass" step reads a weight matrix for ``rows`` rows: once per row past
    the last full row group (each a matrix-vector product over the whole matrix), and once more for
    the full groups' GEMM kernel if it runs."""
    return rows % row_group + (1 if rows >= row_group else 0)
