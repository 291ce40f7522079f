"""``KernelPredictor``: an engine step priced from measured kernel tables (``--predictor kernels``).

Per step, for all layers on one GPU:

- the GEMMs (QKV, O, the MLP's up/gate and down) at the weights' precision with ``m`` = the step's
  tokens, and the LM head (16-bit) with ``m`` = the tokens that need logits: each from the measured
  GEMM table at this model's (n, k), precomputed at construction into one latency curve over the
  table's ``m`` grid, interpolated linearly per step;
- decode attention: the generation-attention table at (decode sequences, their mean KV length);
- prefill attention, per prompt chunk of ``n`` new tokens after ``c`` cached ones: the
  context-attention table at one prompt of ``n + c`` tokens, times the chunk's share of that
  prompt's causal (query, key) pairs, (n·c + n(n+1)/2) / ((n+c)(n+c+1)/2), exact for c = 0; past
  the longest prompt measured (16,384 tokens in most tables), that prompt's latency scaled by the
  ratio of causal pairs, as attention's work grows with them (not extended linearly);
- under TP, two all-reduces per layer of tokens × hidden values from the all-reduce table (its
  ``message_size`` counts 16-bit elements, not bytes: aiconfigurator's collector all-reduces a
  [size / 4096, 4096] bfloat16 tensor, and its own queries pass tokens × hidden);
- what the tables do not measure, as the roofline prices them (``RooflinePredictor``; its
  efficiency catalog): the norms, the activation, rotary (except with TensorRT-LLM's tables, whose
  attention op applies it), the FP8 quantization of the QKV and gate/up inputs (aiconfigurator's
  own op list: the O and down projections take FP8 input from the kernel before them), and the
  host overheads;
- on a GPU that takes another part's tables (the A100 40GB those of the 80GB: the same SMs, less
  bandwidth; ``tables.BORROWED``), each GEMM and the decode attention at least their bytes at this
  part's measured copy rate: the measured part's SMs stream faster than this part's HBM can.

- a mixture of experts: the router's GEMM (16-bit, one logit per expert) and the MoE layer from the
  MoE table at this model's exact expert shape and TP (``moe.moe_table``: the routing, the experts'
  GEMMs and the sum back, measured with tokens routed by a power law over the experts, as
  aiconfigurator prices such models), interpolated over tokens like the GEMMs; a shape the tables
  lack is a usage error, not a guess. On a part that borrows the tables, at least the touched
  experts' weights at this part's copy rate, as for the GEMMs.

The tables are those of the engine preset (``--engine``; vLLM's without one) at the newest version
the package ships, for the GPU (a MoE table: that version, else the newest that measured the
shape). For a fixed decode batch the step time is piecewise affine in the total context (linear
between the table's KV-length grid points);
``decode_run_s`` prices a run of such steps as arrays, float for float what ``step_s`` gives each.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.simulator.catalog import GPU, ModelSpec, Precision, experts_touched
from tokenpace.simulator.kernels.interp import interp, interp_array
from tokenpace.simulator.kernels.moe import moe_table
from tokenpace.simulator.kernels.tables import BORROWED, GEMM_DTYPES, KernelTables, kernel_backend, load_tables
from tokenpace.simulator.memory import kv_heads_per_gpu
from tokenpace.simulator.roofline import RooflineParams, RooflinePredictor
from tokenpace.simulator.step import StepBatch, context_total

MS = 1e-3


class KernelPredictor:
    def __init__(self, model: ModelSpec, gpu: GPU, weights: Precision, kv: Precision, tp: int = 1,
                 params: RooflineParams | None = None, efficiency: str | None = None,
                 engine: str | None = None, tables: KernelTables | None = None) -> None:
        self.model, self.gpu, self.weights, self.kv, self.tp = model, gpu, weights, kv, tp
        self.roofline = RooflinePredictor(model, gpu, weights, kv, tp, params, efficiency, engine)
        self.params = self.roofline.params
        backend = kernel_backend(engine)
        self.tables = tables or load_tables(gpu.id, backend)
        dtype = GEMM_DTYPES.get(weights.id)
        if dtype is None:
            raise UsageError(f"--predictor kernels has no GEMM tables for {weights.id} weights "
                             f"(it has {', '.join(sorted(GEMM_DTYPES))}); use --predictor roofline")
        self.gemm_dtype = dtype
        kv_dtype = "fp8" if kv.id == "fp8" else "bfloat16"
        self.kv_dtype = kv_dtype
        h, hd, layers = model.hidden_size, model.head_dim, model.num_layers
        heads, kv_heads = attention_heads_per_gpu(model, tp)
        self.shapes = layer_gemm_shapes(model, tp)
        t = self.tables
        # Tables measured on a part with more bandwidth (BORROWED): a kernel is no faster than this
        # part's HBM streams its bytes.
        borrowed = BORROWED.get(gpu.id)
        self.copy_bytes_s = borrowed[1] * 1e12 if borrowed else None
        grid = t.gemm_rows(dtype)
        self.moe = None
        if model.is_moe:  # the measured MoE layer at this exact shape; its token grid joins the GEMMs'
            self.moe = moe_table(t, weights.id, h, model.intermediate_size, model.experts_per_token,
                                 model.num_experts, tp, model.gated_mlp)
            grid = np.union1d(grid, self.moe.tokens)
        per_layer = sum(self._streamed(t.gemm_curve(dtype, n, k, grid) * MS, grid, n, k, weights.bytes_per_value)
                        for n, k in self.shapes.values())
        if self.moe is not None:
            # The router (16-bit, one logit per expert), then the MoE layer itself.
            per_layer = per_layer + t.gemm_curve("bfloat16", model.num_experts, h, grid) * MS \
                + self._moe_streamed(interp_array(self.moe.tokens, self.moe.ms, grid) * MS, grid)
        self._m = grid.tolist()
        self._gemm_s = (per_layer * layers).tolist()
        head_grid = t.gemm_rows("bfloat16")
        self._head_m = head_grid.tolist()
        vocab = -(-model.vocab_size // tp)
        self._head_s = self._streamed(t.gemm_curve("bfloat16", vocab, h, head_grid) * MS, head_grid, vocab, h,
                                      weights.embedding_bytes_per_value).tolist()
        self.context = t.attention("context", heads, kv_heads, hd, kv_dtype)
        # A kernel that reads each KV head once per query head (``decode_kv_reads``) reads what
        # multi-head attention does: the table at as many KV heads as query heads.
        per_head = self.params.decode_kv_reads == "per-query-head"
        self.generation = t.attention("generation", heads, heads if per_head else kv_heads, hd, kv_dtype)
        # One decode token's KV bytes in one layer (read, as the KV length counts them).
        self._kv_bytes_tok = 2 * (heads if per_head else kv_heads) * hd * kv.bytes_per_value
        self._context_max = float(self.context.grid.b[-1])  # the longest prompt measured
        self._layers = layers
        if tp > 1:
            size, lat, self.allreduce_source = t.allreduce(tp)
            self._ar_size, self._ar_s = size.tolist(), (lat * MS * 2 * layers).tolist()
        else:
            self._ar_size, self._ar_s, self.allreduce_source = [], [], None
        self._ar_elems_tok = h  # the table's message_size is in elements
        self._elementwise_s_tok = self.roofline.elementwise_s_per_token(
            kernel_fusions=True, rotary_in_attention=backend == "trtllm")
        self._elementwise_fixed_s = 0.0 if self.params.mbu is not None else \
            self.roofline.elementwise_fixed_s(kernel_fusions=True, rotary_in_attention=backend == "trtllm")

    def step_s(self, batch: StepBatch) -> float:
        g = batch.decode_tokens_per_seq
        nd = len(batch.decode_context)
        tokens = nd * g
        logits = tokens
        p = self.params
        t = p.step_overhead_s
        if nd:
            ctx = context_total(batch.decode_context)
            attn = self.generation.ms(nd, ctx / nd + g) * MS
            if self.copy_bytes_s:
                attn = max(attn, (ctx + nd * g) * self._kv_bytes_tok / self.copy_bytes_s)
            t += attn * self._layers
        if batch.prefill:
            # Every prompt chunk of the step in one context-attention call per layer, as the engines
            # run them (one varlen FMHA launch): the table's batch of b prompts at their mean length
            # (a length past the grid counts as the longest measured), scaled by the (query, key)
            # pairs the chunks hold against the b causal prompts of that length.
            top = self._context_max
            b = len(batch.prefill)
            pairs = 0.0
            lengths = 0
            for n, c in batch.prefill:
                tokens += n
                pairs += n * c + n * (n + 1) / 2
                whole = n + c
                lengths += whole if whole <= top else top
            logits += b
            at = lengths / b
            t += self.context.ms(b, at) * pairs / (b * at * (at + 1) / 2) * MS * self._layers
        if tokens == 0:
            return t
        t += interp(self._m, self._gemm_s, tokens) + interp(self._head_m, self._head_s, logits)
        if self._ar_s:
            t += self.allreduce_s(tokens)
        t += tokens * (self._elementwise_s_tok + p.token_overhead_s) + (nd + len(batch.prefill)) * p.seq_overhead_s
        return t + self._elementwise_fixed_s

    def decode_run_s(self, batch: StepBatch, steps: int) -> np.ndarray:
        """``step_s`` of each of ``steps`` pure decode steps from ``batch`` (in step i every context
        has grown by i × ``decode_tokens_per_seq``), as one array: the same floats, summed in the
        same order. Only the decode attention's KV length changes from step to step."""
        if batch.prefill or not batch.decode_context:
            raise ValueError("decode_run_s prices runs of pure decode steps")
        g = batch.decode_tokens_per_seq
        nd = len(batch.decode_context)
        tokens = nd * g
        p = self.params
        ctx = context_total(batch.decode_context) + np.arange(steps, dtype=np.int64) * tokens
        attn = self.generation.ms_many(nd, ctx / nd + g) * MS
        if self.copy_bytes_s:
            attn = np.maximum(attn, (ctx + tokens) * self._kv_bytes_tok / self.copy_bytes_s)
        t = p.step_overhead_s + attn * self._layers
        t = t + (interp(self._m, self._gemm_s, tokens) + interp(self._head_m, self._head_s, tokens))
        if self._ar_s:
            t = t + self.allreduce_s(tokens)
        return t + (tokens * (self._elementwise_s_tok + p.token_overhead_s) + nd * p.seq_overhead_s) \
            + self._elementwise_fixed_s

    def _streamed(self, seconds: np.ndarray, rows: np.ndarray, n: int, k: int, bytes_per_weight: float) -> np.ndarray:
        """A GEMM's measured seconds over ``rows``, on a part that borrows the tables (``BORROWED``):
        at least its bytes (the weights, 16-bit input and output rows) at this part's copy rate."""
        if not self.copy_bytes_s:
            return seconds
        return np.maximum(seconds, (n * k * bytes_per_weight + rows * (n + k) * 2) / self.copy_bytes_s)

    def _moe_streamed(self, seconds: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The MoE layer's measured seconds over ``rows`` tokens, on a part that borrows the tables:
        at least the weights of the experts the tokens touch (uniform routing, as the roofline counts
        them) and the 16-bit rows in and out, at this part's copy rate."""
        if not self.copy_bytes_s:
            return seconds
        m = self.model
        expert = (3 if m.gated_mlp else 2) * m.hidden_size * m.intermediate_size / self.tp
        touched = experts_touched(m.num_experts, m.experts_per_token, rows)
        return np.maximum(seconds, (touched * expert * self.weights.bytes_per_value + rows * m.hidden_size * 4)
                          / self.copy_bytes_s)

    def allreduce_s(self, tokens: int) -> float:
        """Seconds a step of ``tokens`` tokens spends in all-reduces (all layers; 0 without TP)."""
        if not self._ar_s:
            return 0.0
        return interp(self._ar_size, self._ar_s, tokens * self._ar_elems_tok)

    def describe(self) -> dict[str, Any]:
        t = self.tables
        return {"predictor": "kernels", "model": self.model.id, "gpu": self.gpu.id, "weights": self.weights.id,
                "kv": self.kv.id, "tp": self.tp, **self.params.to_dict(),
                "tables": {"source": "aiconfigurator-core", "system": t.system, "engine": t.backend,
                           "version": t.version, "gemm_dtype": self.gemm_dtype,
                           "gemm_kernel": t.gemm_kernel(self.gemm_dtype), "kv_cache_dtype": self.kv_dtype,
                           "context_attention": _attn(self.context),
                           "generation_attention": _attn(self.generation),
                           "allreduce": self.allreduce_source,
                           **({"moe": {"version": self.moe.version, "kernel": self.moe.kernel,
                                       "moe_dtype": self.moe.dtype, "distribution": self.moe.distribution}}
                              if self.moe is not None else {}),
                           **({"measured_on": BORROWED[self.gpu.id][0],
                               "streaming_at_most_tb_s": BORROWED[self.gpu.id][1],
                               "streaming_source": BORROWED[self.gpu.id][2]} if self.copy_bytes_s else {})},
                "not_in_tables": "elementwise passes and host overheads, priced as the roofline does"}


def attention_heads_per_gpu(model: ModelSpec, tp: int) -> tuple[int, int]:
    """(query heads, KV heads) one GPU holds under TP (KV heads replicated where fewer than ``tp``)."""
    return model.num_heads // tp, max(1, round(kv_heads_per_gpu(model, tp)))


def layer_gemm_shapes(model: ModelSpec, tp: int) -> dict[str, tuple[int, int]]:
    """The (n, k) of one layer's GEMMs on one GPU under TP: QKV, O, the MLP's up (and gate), down
    (a mixture of experts: QKV and O; its experts are the MoE table's)."""
    h, hd = model.hidden_size, model.head_dim
    heads, kv_heads = attention_heads_per_gpu(model, tp)
    if model.is_moe:
        return {"qkv": ((heads + 2 * kv_heads) * hd, h), "o": (h, heads * hd)}
    inter = model.intermediate_size // tp
    up = 2 * inter if model.gated_mlp else inter
    return {"qkv": ((heads + 2 * kv_heads) * hd, h), "o": (h, heads * hd), "up": (up, h), "down": (h, inter)}


def _attn(a) -> dict[str, Any]:
    return {"kernel": a.kernel, "shape": list(a.shape), "scale": a.scale}
