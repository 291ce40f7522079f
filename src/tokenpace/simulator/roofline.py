"""The default step-time model: a roofline per operator group, plus TP all-reduce and host overhead.

Each operator group takes max(FLOPs / (peak × its compute efficiency), bytes / (bandwidth × its
bandwidth efficiency)), per layer, with efficiencies by GPU, precision and operator class from the
efficiency catalog (data/efficiency.json, with the source of each figure; ``mfu`` and ``mbu``
replace them all where given, as a calibration does):

- attention projections (QKV, O) and the MLP: GEMMs at the weights' compute precision; their weights
  streamed once per step at the weight-streaming efficiency; 2 FLOPs per weight per token. For MoE
  the experts the batch touches: with top-k routing over E experts a batch of T tokens touches
  E·(1 − (1 − k/E)^T) distinct experts on average (uniform routing), and each token pays for k
  experts' FLOPs;
- attention over the KV history: reads each sequence's KV once (and writes its new tokens) at the
  KV-streaming efficiency; 4·heads·head_dim FLOPs per (query, key) pair, causal within a chunk, at
  the peak of the attention kernel's precision (FP8 where the KV cache is FP8 and the GPU has FP8
  units, as FlashAttention-3 and TensorRT-LLM's FP8 context attention do; else BF16);
- the LM head (kept in 16 bits) for the tokens that need logits;
- elementwise passes, memory-bound: two fused residual-add + RMSNorms per layer, rotary on Q and K,
  the MLP activation, and with FP8 weights the per-token quantization of every GEMM's input.

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

The decode rows' GEMM efficiency, apart from the prefill's (``decode_mfu``; None: MFU's). Under
ggml's kernels a step of 4g decoding sequences is one pass over the weights plus g row groups'
compute, not g passes: ``forward_mul_mat`` (``repack.cpp``) hands one thread the whole matrix as
one chunk, and the AVX2 GEMM (``arch/x86/repack.cpp``, ``ggml_gemm_q4_K_8x8_q8_K``) runs its row
groups over that chunk one after another (16 rows at a time, then 4), so after the first group
the weights (under a MB per matrix for a small model) come from the core's cache, and each
further group costs its compute. A prefill's MFU (hundreds of rows, with the attention over the prompt, the activations'
quantization and the kernels without a repacked layout) does not price those few rows: on
llama.cpp a step of 8 decodes costs about what one of 4 does, where the prefills' MFU charges
the 4 more rows (and their LM-head rows) some 30 ms. So the decode tokens' share of each GEMM
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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from tokenpace.simulator.catalog import GPU, ModelSpec, Precision
from tokenpace.simulator.catalog.efficiency import get_efficiency
from tokenpace.simulator.memory import kv_heads_per_gpu
from tokenpace.simulator.step import StepBatch, context_total

# The step overhead: engines that replay CUDA graphs (vLLM V1, SGLang, TRT-LLM) spend 1–2 ms of host
# time per step; engines without them spend several ms more (the 2024 13 ms/token point). The
# efficiencies come from the catalog (data/efficiency.json), unless ``mfu``/``mbu`` replace them.
DEFAULT_STEP_OVERHEAD_S = 0.00175
GROUPS = ("attention_projections", "mlp", "attention", "lm_head", "elementwise")
ROW_REMAINDERS = ("pad", "gemv", "gemv-pass", "gemv-ubatch")
GEMV_REMAINDERS = ("gemv", "gemv-pass", "gemv-ubatch")
PASS_REMAINDERS = ("gemv-pass", "gemv-ubatch")  # a weight pass per remaining row
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
    decode_mfu: float | None = None  # the decode tokens' GEMM FLOPs at this efficiency; None: at ``mfu``'s
    arrival_s: float = 0.0  # host time per request arriving while a step runs: see the docstring

    def __post_init__(self) -> None:
        if self.row_group < 1:
            raise ValueError("row_group must be >= 1")
        if self.row_remainder not in ROW_REMAINDERS:
            raise ValueError(f"row_remainder must be one of {ROW_REMAINDERS}, not {self.row_remainder!r}")
        if self.decode_mfu is not None and not self.decode_mfu > 0:
            raise ValueError("decode_mfu must be > 0")
        if not 0 <= self.arrival_s < float("inf"):
            raise ValueError("arrival_s must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        return {"mfu": self.mfu, "mbu": self.mbu, "step_overhead_s": self.step_overhead_s,
                "allreduce_latency_s": self.allreduce_latency_s, "seq_overhead_s": self.seq_overhead_s,
                "token_overhead_s": self.token_overhead_s, "row_group": self.row_group,
                "row_remainder": self.row_remainder, "gemv_row_s": self.gemv_row_s, "gemm_step_s": self.gemm_step_s,
                "decode_mfu": self.decode_mfu, "arrival_s": self.arrival_s}

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
        if allreduces:
            lat = ar_latency if self.allreduce_latency_s is None else self.allreduce_latency_s
            t += link_s + allreduces * lat
        return t

    def price(self, work: StepWork | tuple) -> float:
        """Seconds for a step of this ``work`` (a StepWork, or a plain tuple in its order): each
        operator group at its bound, plus overheads."""
        compute_s, memory_s, link_s, allreduces, sequences, compute_eff, memory_eff, ar_latency, tokens, \
            decode_compute_s, kernel_rows = work
        t = self._fixed_s(link_s, allreduces, sequences, ar_latency, tokens, kernel_rows)
        mfu, mbu, dmfu = self.mfu, self.mbu, self.decode_mfu
        for i, (c, m) in enumerate(zip(compute_s, memory_s)):
            eff = compute_eff[i] if mfu is None else mfu
            if dmfu is None:
                c /= eff
            else:
                d = decode_compute_s[i]
                c = (c - d) / eff + d / dmfu
            m /= memory_eff[i] if mbu is None else mbu
            t += c if c > m else m
        return t

    def price_run(self, work: tuple) -> np.ndarray:
        """``price`` for many steps at once: ``work`` as ``price`` takes it, where a group's compute
        and memory seconds may be arrays (one value per step). The same operations in the same
        order as ``price``, element by element, so each step's seconds are the very float ``price``
        gives it (the engine's jump over decode steps relies on that)."""
        compute_s, memory_s, link_s, allreduces, sequences, compute_eff, memory_eff, ar_latency, tokens, \
            decode_compute_s, kernel_rows = work
        t = self._fixed_s(link_s, allreduces, sequences, ar_latency, tokens, kernel_rows)
        mfu, mbu, dmfu = self.mfu, self.mbu, self.decode_mfu
        for i, (c, m) in enumerate(zip(compute_s, memory_s)):
            eff = compute_eff[i] if mfu is None else mfu
            if dmfu is None:
                c = c / eff
            else:
                d = decode_compute_s[i]
                c = (c - d) / eff + d / dmfu
            m = m / (memory_eff[i] if mbu is None else mbu)
            t = t + (np.where(c > m, c, m) if isinstance(c, np.ndarray) or isinstance(m, np.ndarray)
                     else (c if c > m else m))
        return t


class StepWork(NamedTuple):
    """One step's work before any efficiency applies: per operator group (``GROUPS``; whole model),
    the seconds its FLOPs take at the peak of its precision (``compute_s``) and its bytes at the full
    HBM bandwidth (``memory_s``), with the catalog's efficiency for each (``compute_eff``,
    ``memory_eff``); the all-reduce bytes at the link's bus bandwidth (``link_s``), their count and
    the catalog's latency of one; the sequences in the step (each decode and each prompt chunk) and
    its tokens; and of ``compute_s``, the share of the decoding sequences' tokens
    (``decode_compute_s``: the GEMMs' and the LM head's, not the attention's), which ``decode_mfu``
    prices where set. ``RooflineParams.price`` turns it into seconds; a calibration fits the params to
    measured steps through it."""

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


def compute_precision(gpu: GPU, compute: str) -> str:
    """The tensor-core format a kernel runs in: FP8 only where the GPU has FP8 units."""
    return "fp8" if compute == "fp8" and gpu.fp8_tflops else "bf16"


class RooflinePredictor:
    """Step time of ``model`` in ``weights`` precision with a ``kv`` cache on ``tp`` × ``gpu``;
    ``efficiency``: a user's efficiency catalog file, added to the built-in one."""

    def __init__(self, model: ModelSpec, gpu: GPU, weights: Precision, kv: Precision,
                 tp: int = 1, params: RooflineParams | None = None, efficiency: str | None = None) -> None:
        if tp < 1:
            raise ValueError("tp must be >= 1")
        self.model, self.gpu, self.weights, self.kv, self.tp = model, gpu, weights, kv, tp
        self.params = params or RooflineParams()
        self.efficiency_file = efficiency
        self.gemm_precision = compute_precision(gpu, weights.compute)
        self.attention_precision = compute_precision(gpu, "fp8" if kv.compute == "fp8" else "bf16")
        gemm = get_efficiency(gpu.id, self.gemm_precision, efficiency)
        attn = get_efficiency(gpu.id, self.attention_precision, efficiency)
        head = get_efficiency(gpu.id, "bf16", efficiency)
        self.efficiency = {"gemm": gemm, "attention": attn, "lm_head": head}
        self._compute_eff = (gemm.gemm_flops, gemm.gemm_flops, attn.attention_prefill_flops, head.gemm_flops, 1.0)
        self._memory_eff = (gemm.weight_bandwidth, gemm.weight_bandwidth, attn.attention_decode_bandwidth,
                            head.weight_bandwidth, gemm.elementwise_bandwidth)
        bpw = weights.bytes_per_value
        layers = model.num_layers
        lin = gpu.peak_flops(self.gemm_precision)
        attn_peak = gpu.peak_flops(self.attention_precision)
        bf16 = gpu.peak_flops("bf16")
        bw = gpu.hbm_bytes_s
        heads, kv_heads, hd = model.num_heads / tp, kv_heads_per_gpu(model, tp), model.head_dim
        # Seconds at peak, per token / per pair / per step, for all layers on one GPU.
        self._attn_proj_mem = layers * model.attn_params_per_layer / tp * bpw / bw
        self._attn_proj_cmp_tok = layers * 2 * model.attn_params_per_layer / tp / lin
        self._expert_mem = layers * model.expert_params / tp * bpw / bw
        self._expert_cmp_tok = layers * 2 * model.expert_params / tp / lin
        self._router_cmp_tok = layers * 2 * model.router_params_per_layer / lin  # replicated, tiny
        self._attn_cmp_pair = layers * 4 * heads * hd / attn_peak
        self._kv_mem_tok = layers * 2 * kv_heads * hd * kv.bytes_per_value / bw
        # The LM head (the embedding matrix when tied).
        self._lm_mem = model.vocab_size * model.hidden_size / tp * weights.embedding_bytes_per_value / bw
        self._lm_cmp_tok = 2 * model.vocab_size * model.hidden_size / tp / bf16
        fp8_in = self.gemm_precision == "fp8"
        self._elementwise_mem_tok = layers * _elementwise_bytes(model, tp, heads, kv_heads, fp8_in) / bw
        self._elementwise_fused_mem_tok = {
            rope: layers * _elementwise_bytes(model, tp, heads, kv_heads, fp8_in, kernel_fusions=True,
                                              rotary_in_attention=rope) / bw for rope in (False, True)}
        ring = 2 * (tp - 1) / tp
        comm = gemm
        self._ar_s_tok = (ring * model.hidden_size * 2 / (gpu.link_bytes_s_per_direction * comm.allreduce_bus_bandwidth)
                          if tp > 1 else 0.0)
        self._ar_count = 2 * model.num_layers if tp > 1 else 0
        self._ar_latency = comm.allreduce_base_latency_s + 2 * (tp - 1) * comm.allreduce_hop_latency_s

    def elementwise_s_per_token(self, kernel_fusions: bool = False, rotary_in_attention: bool = False) -> float:
        """Seconds one token's memory-bound elementwise passes take (all layers, at the catalog's
        elementwise bandwidth efficiency, or ``mbu``). ``kernel_fusions``: only the passes a
        kernel-table predictor adds (see ``_elementwise_bytes``)."""
        mem = self._elementwise_fused_mem_tok[rotary_in_attention] if kernel_fusions else self._elementwise_mem_tok
        return mem / (self._memory_eff[4] if self.params.mbu is None else self.params.mbu)

    def work(self, batch: StepBatch) -> StepWork:
        """What ``batch`` asks of the hardware, before efficiencies (empty for an empty batch)."""
        return StepWork(*self._work(batch))

    def step_s(self, batch: StepBatch) -> float:
        return self.params.price(self._work(batch))

    def decode_run_s(self, batch: StepBatch, steps: int) -> np.ndarray:
        """``step_s`` of each of ``steps`` pure decode steps from ``batch`` (in step i every context
        has grown by i × ``decode_tokens_per_seq``), as one array: the same floats. Only the
        attention's (query, key) pairs and KV tokens change from step to step; the rest of the
        work is the first step's."""
        if batch.prefill or not batch.decode_context:
            raise ValueError("decode_run_s prices runs of pure decode steps")
        compute, memory, *rest = self._work(batch)
        g, nd = batch.decode_tokens_per_seq, len(batch.decode_context)
        ctx = context_total(batch.decode_context) + np.arange(steps, dtype=np.int64) * (nd * g)
        pairs = g * ctx + nd * g * (g + 1) // 2  # as in _work, with an array of totals
        kv_tokens = ctx + nd * g
        compute = (*compute[:2], pairs * self._attn_cmp_pair, *compute[3:])
        memory = (*memory[:2], kv_tokens * self._kv_mem_tok, *memory[3:])
        return self.params.price_run((compute, memory, *rest))  # an array, as the attention terms are

    def _work(self, batch: StepBatch) -> tuple:
        """``work`` as a plain tuple: the engine prices every scheduled batch, and a tuple is the
        cheapest thing to make."""
        g = batch.decode_tokens_per_seq
        nd = len(batch.decode_context)
        ctx = context_total(batch.decode_context)
        dt = nd * g  # decode tokens
        d_pairs = g * ctx + nd * g * (g + 1) // 2  # causal (query, key) pairs
        d_kv = ctx + dt  # KV read and written
        p_tokens = p_pairs = p_kv = 0
        for n, c in batch.prefill:
            p_tokens += n
            p_pairs += n * c + n * (n + 1) // 2
            p_kv += c + n
        tokens, prompts = dt + p_tokens, len(batch.prefill)
        if tokens == 0:
            return (), (), 0.0, 0, 0, self._compute_eff, self._memory_eff, self._ar_latency, 0, (), 0
        rest = (self._ar_count * tokens * self._ar_s_tok, self._ar_count, nd + prompts)
        if self.params.row_remainder == "gemv-ubatch" and prompts:
            # The prompts in ubatches of their own, after the decode tokens' (see RooflineParams).
            p = self._groups(p_tokens, prompts, p_pairs, p_kv, 0, passes=1, logit_passes=prompts)
            if not dt:
                return (*p[:2], *rest, self._compute_eff, self._memory_eff, self._ar_latency, tokens, p[2], 0)
            d = self._groups(dt, dt, d_pairs, d_kv, dt)
            return (d[0] + p[0], d[1] + p[1], *rest, self._compute_eff * 2, self._memory_eff * 2,
                    self._ar_latency, tokens, d[2] + p[2], dt)
        c, m, decode_cmp = self._groups(tokens, dt + prompts, d_pairs + p_pairs, d_kv + p_kv, dt)
        return (c, m, *rest, self._compute_eff, self._memory_eff, self._ar_latency, tokens, decode_cmp, tokens)

    def _groups(self, tokens: int, logits: int, pairs: int, kv_tokens: int, dt: int,
                passes: int | None = None, logit_passes: int | None = None) -> tuple:
        """Per operator group, the compute and memory seconds at peak of one kernel invocation over
        ``tokens`` rows (``dt`` of them decode tokens) of which ``logits`` need logits, and the decode
        tokens' share of the compute. ``passes``/``logit_passes``: reads of the weights / the LM
        head; None: as the row remainder says."""
        rg = self.params.row_group
        remainder = self.params.row_remainder
        if rg == 1 or remainder in GEMV_REMAINDERS:  # "gemv": every row priced as itself
            rows, logit_rows = tokens, logits
            if rg > 1 and remainder in PASS_REMAINDERS:
                passes = weight_passes(tokens, rg) if passes is None else passes
                logit_passes = weight_passes(logits, rg) if logit_passes is None else logit_passes
        else:
            rows, logit_rows = -(-tokens // rg) * rg, -(-logits // rg) * rg
        passes = 1 if passes is None else passes  # reads of the weights per step
        logit_passes = 1 if logit_passes is None else logit_passes
        model = self.model
        if model.is_moe:
            e, k = model.num_experts, model.experts_per_token
            touched = e * (1.0 - (1.0 - k / e) ** tokens)
            mlp_tok = k * self._expert_cmp_tok + self._router_cmp_tok
            mlp_cmp = rows * mlp_tok
            mlp_mem = touched * self._expert_mem * passes
        else:
            mlp_tok = self._expert_cmp_tok
            mlp_cmp, mlp_mem = rows * mlp_tok, self._expert_mem * passes
        # The decode tokens' share of the GEMMs' FLOPs (their rows, each with its logits); under "pad"
        # the padding rows go to the prefill's share.
        decode_cmp = (min(dt, rows) * self._attn_proj_cmp_tok, min(dt, rows) * mlp_tok, 0.0,
                      min(dt, logit_rows) * self._lm_cmp_tok, 0.0)
        return ((rows * self._attn_proj_cmp_tok, mlp_cmp, pairs * self._attn_cmp_pair, logit_rows * self._lm_cmp_tok,
                 0.0),
                (self._attn_proj_mem * passes, mlp_mem, kv_tokens * self._kv_mem_tok, self._lm_mem * logit_passes,
                 tokens * self._elementwise_mem_tok),
                decode_cmp)

    def describe(self) -> dict[str, Any]:
        gemm, attn, head = self.efficiency["gemm"], self.efficiency["attention"], self.efficiency["lm_head"]
        eff = {"gemm_precision": self.gemm_precision, "attention_precision": self.attention_precision,
               "gemm_flops": gemm.gemm_flops, "weight_bandwidth": gemm.weight_bandwidth,
               "attention_prefill_flops": attn.attention_prefill_flops,
               "attention_decode_bandwidth": attn.attention_decode_bandwidth, "lm_head_flops": head.gemm_flops,
               "elementwise_bandwidth": gemm.elementwise_bandwidth,
               "allreduce_bus_bandwidth": gemm.allreduce_bus_bandwidth, "allreduce_latency_s": self._ar_latency,
               "replaced_by": [k for k in ("mfu", "mbu") if getattr(self.params, k) is not None],
               "catalog": "data/efficiency.json" + (f" + {self.efficiency_file}" if self.efficiency_file else "")}
        return {"predictor": "roofline", "model": self.model.id, "gpu": self.gpu.id,
                "weights": self.weights.id, "kv": self.kv.id, "tp": self.tp, **self.params.to_dict(),
                "efficiency": eff}


def weight_passes(rows: int, row_group: int) -> int:
    """How many times a "gemv-pass" step reads a weight matrix for ``rows`` rows: once per row past
    the last full row group (each a matrix-vector product over the whole matrix), and once more for
    the full groups' GEMM kernel if it runs."""
    return rows % row_group + (1 if rows >= row_group else 0)


def _elementwise_bytes(model: ModelSpec, tp: int, heads: float, kv_heads: float, fp8_activations: bool,
                       *, kernel_fusions: bool = False, rotary_in_attention: bool = False) -> float:
    """Bytes one token moves through one layer's memory-bound elementwise passes (16-bit activations):
    two fused residual-add + RMSNorms (read x and the residual, write both: replicated across TP),
    rotary on Q and K (read and write), the MLP activation (SiLU-and-mul reads gate and up, writes
    one; else read and write one), and with FP8 GEMMs each GEMM input quantized (read 2 bytes, write
    1) for QKV, O, the MLP's first and second matrices.

    ``kernel_fusions``: the passes left beside measured kernels, as aiconfigurator-core's own
    Llama op list counts them (``sdk/models/llama.py``, whose tables the kernel predictor reads):
    the O and down projections take FP8 input straight from the attention and activation kernels
    (its GEMMs with ``low_precision_input``), so only the QKV and gate/up inputs are quantized by a
    pass of their own. ``rotary_in_attention``: rotary is inside the measured attention op
    (TensorRT-LLM's attention op applies RoPE in its QKV preprocessing kernel; vLLM and SGLang
    apply it before attention, so their tables leave it out)."""
    h, hd = model.hidden_size, model.head_dim
    inter = model.intermediate_size / tp * model.experts_per_token
    norms = 2 * 4 * h * 2
    activation = (3 if model.gated_mlp else 2) * inter * 2
    rotary = 0.0 if rotary_in_attention else 2 * (heads + kv_heads) * hd * 2
    if kernel_fusions:
        return norms + rotary + activation + (3 * (h + h) if fp8_activations else 0.0)
    quant = 3 * (h + heads * hd + h + inter) if fp8_activations else 0.0
    return norms + rotary + activation + quant
