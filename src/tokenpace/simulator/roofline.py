"""The default step-time model: a roofline per operator group, plus TP all-reduce and host overhead.

Each operator group takes max(FLOPs / (peak × its compute efficiency), bytes / (bandwidth × its
bandwidth efficiency)), per layer, with efficiencies by GPU, precision, engine preset and operator
class from the efficiency catalog (data/efficiency.json; for GPUs with measured kernel tables,
data/efficiency_measured.json, derived from them by ``scripts/derive_efficiency.py``; each figure
with its source; ``mfu`` and ``mbu`` replace them all where given, as a calibration does):

- attention projections (QKV, O) and the MLP: GEMMs at the weights' compute precision; their weights
  streamed once per step at the weight-streaming efficiency (at the GEMM's row count where the
  catalog gives it by rows: measured GEMMs stream more slowly as rows grow toward the compute
  bound); 2 FLOPs per weight per token. For MoE
  the experts the batch touches: with top-k routing over E experts a batch of T tokens touches
  E·(1 − (1 − k/E)^T) distinct experts on average (uniform routing), and each token pays for k
  experts' FLOPs;
- attention over the KV history: reads each sequence's KV once (and writes its new tokens) at the
  KV-streaming efficiency; 4·heads·head_dim FLOPs per (query, key) pair, causal within a chunk, at
  the peak of the attention kernel's precision (FP8 where the KV cache is FP8 and the GPU has FP8
  units, as FlashAttention-3 and TensorRT-LLM's FP8 context attention do; else BF16);
- the LM head (kept in 16 bits) for the tokens that need logits;
- elementwise passes, memory-bound: two fused residual-add + RMSNorms per layer, rotary on Q and K,
  the MLP activation, and with FP8 or NVFP4 weights the per-token quantization of every GEMM's input (under
  the TensorRT-LLM preset, its kernels' fusions: rotary inside the attention, and only the QKV and
  gate/up inputs quantized by a pass of their own); each pass also a fixed time per kernel.

Then two all-reduces per layer under TP (``allreduce.AllReduceCost``: the measured latency by
message size where the catalog has one for the GPU count, else a ring at the bus bandwidth) and the costs beyond the operator groups: the
parameters that price a step's work, its overheads and its GEMM rows' kernels, are
``step_price``'s (``RooflineParams``, ``StepWork``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenpace.simulator.allreduce import AllReduceCost
from tokenpace.simulator.catalog import GPU, ModelSpec, Precision, experts_touched
from tokenpace.simulator.catalog.efficiency import Efficiency, curve_at, get_efficiency
from tokenpace.simulator.elementwise import QUANTIZED_INPUT_BYTES, elementwise_bytes, elementwise_kernels
from tokenpace.simulator.memory import kv_heads_per_gpu
from tokenpace.simulator.shared_kv import other_cells, tiled_cells
from tokenpace.simulator.step import StepBatch, context_total
from tokenpace.simulator.step_price import (
    GEMV_REMAINDERS, PASS_REMAINDERS, RooflineParams, StepWork, weight_passes,
)

GROUPS = ("attention_projections", "mlp", "attention", "lm_head", "elementwise")


def compute_precision(gpu: GPU, compute: str) -> str:
    """The tensor-core format a kernel runs in: FP8 or FP4 only where the GPU has such units."""
    if compute == "fp4" and gpu.fp4_tflops:
        return "fp4"
    return "fp8" if compute == "fp8" and gpu.fp8_tflops else "bf16"


class RooflinePredictor:
    """Step time of ``model`` in ``weights`` precision with a ``kv`` cache on ``tp`` × ``gpu``;
    ``efficiency``: a user's efficiency catalog file, added to the built-in one; ``engine``: the
    engine preset whose catalog entries apply (its measured kernels' figures), None: any engine's."""

    def __init__(self, model: ModelSpec, gpu: GPU, weights: Precision, kv: Precision,
                 tp: int = 1, params: RooflineParams | None = None, efficiency: str | None = None,
                 engine: str | None = None) -> None:
        if tp < 1:
            raise ValueError("tp must be >= 1")
        self.model, self.gpu, self.weights, self.kv, self.tp = model, gpu, weights, kv, tp
        self.params = params or RooflineParams()
        self.efficiency_file, self.engine = efficiency, engine
        self.gemm_precision = compute_precision(gpu, weights.compute)
        self.attention_precision = compute_precision(gpu, "fp8" if kv.compute == "fp8" else "bf16")
        gemm = get_efficiency(gpu.id, self.gemm_precision, efficiency, engine, moe=model.is_moe)
        attn = get_efficiency(gpu.id, self.attention_precision, efficiency, engine)
        head = get_efficiency(gpu.id, "bf16", efficiency, engine)
        self.efficiency = {"gemm": gemm, "attention": attn, "lm_head": head}
        # Weight streaming by a GEMM's rows where the catalog gives it so: rows -> (efficiency, one
        # GEMM call's fixed seconds), for the projections' and MLP's GEMMs and for the LM head's,
        # interpolated once per row count (steps repeat the same few).
        self._by_rows = bool(gemm.weight_bandwidth_by_rows or head.weight_bandwidth_by_rows)
        self._gemm_at_rows: dict[float, tuple[float, float]] = {}
        self._head_at_rows: dict[float, tuple[float, float]] = {}
        self._no_latency = (0.0,) * len(GROUPS)
        # The GEMMs' FLOPs efficiency at the size of this model's layer on one GPU (the catalog's
        # ``by_size`` where it gives one: larger matrices run closer to peak).
        self.layer_gemm_weights = (model.attn_params_per_layer + model.expert_params) / tp
        gemm_eff = gemm.gemm_flops_at(self.layer_gemm_weights)
        # A mixture of experts' layer at the catalog's MoE efficiency where it gives one: its curve
        # by the rows each touched expert gets, at one expert's weights on one GPU.
        self._moe_expert_size = model.hidden_size * model.intermediate_size / tp
        self._moe_curve = (gemm.moe_curve_at(self._moe_expert_size)
                           if model.is_moe and gemm.moe_efficiency is not None else None)
        self._compute_eff = (gemm_eff, gemm_eff, attn.attention_prefill_flops, head.gemm_flops, 1.0)
        # Decode attention at the efficiency of this model's query heads per KV head (per GPU); a
        # kernel that reads each KV head once per query head (``decode_kv_reads``) reads G times the
        # bytes, as multi-head attention reads them (the figure at one query head per KV head).
        group = (model.num_heads / tp) / kv_heads_per_gpu(model, tp)
        per_head = self.params.decode_kv_reads == "per-query-head"
        self._kv_reads = group if per_head else 1.0  # reads of each KV head per decode step
        self._attention_decode_eff = attn.attention_decode_bandwidth_at(1.0 if per_head else group)
        self._memory_eff = (gemm.weight_bandwidth, gemm.weight_bandwidth, self._attention_decode_eff,
                            head.weight_bandwidth, gemm.elementwise_bandwidth)
        # The attention group's figures in ``price`` (no decode share, no GEMM calls): ``step_s``.
        self._attention_eff = (self._compute_eff[2], self._attention_decode_eff, 0.0, 0.0)
        # ``_shape_price``'s: (decodes, tokens per decode, prompt rows, prompts) -> seconds, for
        # these params.
        self._shapes_priced: dict[tuple[int, int, int, int], tuple[float, tuple[float, ...]]] = {}
        self._shapes_priced_for = self.params
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
        self._kv_mem_tok = layers * 2 * kv_heads * hd * kv.bytes_per_value * self._kv_reads / bw
        # The LM head (the embedding matrix when tied).
        self._lm_mem = model.vocab_size * model.hidden_size / tp * weights.embedding_bytes_per_value / bw
        self._lm_cmp_tok = 2 * model.vocab_size * model.hidden_size / tp / bf16
        quantized_bytes = QUANTIZED_INPUT_BYTES.get(self.gemm_precision, 0.0)
        # TensorRT-LLM's kernels do inside others what vLLM and SGLang run as passes of their own:
        # rotary in the attention op's QKV preprocessing, and the O and down projections' FP8 inputs
        # written by the attention and activation kernels (see ``elementwise.elementwise_bytes``).
        self.fused_elementwise = engine == "trtllm"
        fused = self.fused_elementwise
        self._elementwise_mem_tok = layers * elementwise_bytes(model, tp, heads, kv_heads, quantized_bytes,
                                                                kernel_fusions=fused, rotary_in_attention=fused) / bw
        self._elementwise_fused_mem_tok = {
            rope: layers * elementwise_bytes(model, tp, heads, kv_heads, quantized_bytes, kernel_fusions=True,
                                              rotary_in_attention=rope) / bw for rope in (False, True)}
        # Each elementwise kernel's fixed GPU time, once per layer and kernel invocation of a step.
        self._elementwise_latency = gemm.elementwise_latency_s
        self._elementwise_fixed_s = self.elementwise_fixed_s(fused, fused)
        self.allreduce = AllReduceCost.of(model, gpu, tp, gemm)
        self._ar_count, self._ar_latency = self.allreduce.count, self.allreduce.latency_s

    def elementwise_s_per_token(self, kernel_fusions: bool = False, rotary_in_attention: bool = False) -> float:
        """Seconds one token's memory-bound elementwise passes take (all layers, at the catalog's
        elementwise bandwidth efficiency, or ``mbu``). ``kernel_fusions``: only the passes a
        kernel-table predictor adds (see ``elementwise.elementwise_bytes``)."""
        mem = self._elementwise_fused_mem_tok[rotary_in_attention] if kernel_fusions else self._elementwise_mem_tok
        return mem / (self._memory_eff[4] if self.params.mbu is None else self.params.mbu)

    def elementwise_fixed_s(self, kernel_fusions: bool, rotary_in_attention: bool) -> float:
        """The fixed seconds of one kernel invocation's elementwise kernels (all layers: the catalog's
        ``elementwise_latency_s`` per pass ``elementwise.elementwise_kernels`` counts). Pricing leaves it out
        where ``mbu`` replaces the catalog, as it does the GEMM calls' (a calibration's overheads
        hold such costs)."""
        quantized_in = self.gemm_precision in QUANTIZED_INPUT_BYTES
        return self.model.num_layers * elementwise_kernels(quantized_in, kernel_fusions, rotary_in_attention) \
            * self._elementwise_latency

    def _memory_for(self, rows: float, mlp_rows: float, logit_rows: int, passes: int,
                    logit_passes: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The groups' memory efficiencies for GEMMs of these row counts, and the fixed seconds of
        their GEMM calls: two per layer and weight pass in the projections and the MLP, one per
        LM-head pass (only where the catalog gives weight streaming by rows)."""
        gemm, head, fixed = self.efficiency["gemm"], self.efficiency["lm_head"], self._memory_eff
        proj_eff, proj_lat = _streaming_at(gemm, rows, self._gemm_at_rows)
        mlp_eff, mlp_lat = _streaming_at(gemm, mlp_rows, self._gemm_at_rows)
        head_eff, head_lat = _streaming_at(head, logit_rows, self._head_at_rows)
        calls = 2 * self.model.num_layers * passes
        return ((proj_eff, mlp_eff, fixed[2], head_eff, fixed[4]),
                (proj_lat * calls, mlp_lat * calls, 0.0, head_lat * logit_passes, 0.0))

    @property
    def attention_pair_s(self) -> float:
        """Seconds at peak of one attention (query, key) pair over all layers on one GPU: what a
        computed pair costs at MFU 1 (``kv_scan_s``'s bound in ``calibrate``)."""
        return self._attn_cmp_pair

    def work(self, batch: StepBatch) -> StepWork:
        """What ``batch`` asks of the hardware, before efficiencies (empty for an empty batch)."""
        return StepWork(*self._work(batch))

    def step_s(self, batch: StepBatch) -> float:
        """``params.price(work(batch))``, the same float: the attention priced from the contexts,
        the rest once per batch shape (``_shape_price``); a decode-only step adds the calibration's
        correction for its batch size (``RooflineParams.decode_delta``; none by default)."""
        prefill = batch.prefill
        if prefill and self.params.row_remainder == "gemv-ubatch":  # prompts in kernel passes of their own
            return self.params.price(self._work(batch))
        g = batch.decode_tokens_per_seq
        nd = len(batch.decode_context)
        p_tokens = p_pairs = p_kv = p_own = 0
        for n, c in prefill:  # as in _work
            p_tokens += n
            p_pairs += n * c + n * (n + 1) // 2
            p_kv += c + n
            p_own += n * (c + n)
        if not nd * g + p_tokens:  # an empty step: no operator groups
            return self.params.price(self._work(batch))
        before, after = self._shape_price(batch, (nd, g, p_tokens, len(prefill)))
        ctx = context_total(batch.decode_context)
        pairs = g * ctx + nd * g * (g + 1) // 2 + p_pairs  # as in _work
        kv_tokens = ctx + nd * g + p_kv
        tile, scan_s = self.params.attention_tile_rows, self.params.kv_scan_s
        scan = other_cells(nd, g, ctx + nd * g, p_tokens, p_kv, p_own) if scan_s else 0
        if tile and nd * g + p_tokens >= tile:  # as in _work: the other sequences' cells the tiles compute
            pairs += tiled_cells(nd, g, ctx + nd * g, prefill, tile)
        t = before + self.params.group_s(pairs * self._attn_cmp_pair, kv_tokens * self._kv_mem_tok,
                                         *self._attention_eff)
        for s in after:  # price's order: each group added in turn
            t += s
        if scan_s:  # as price adds it: last
            t += scan_s * scan
        if not prefill and self.params.decode_delta_s:  # a calibration's correction by batch size
            t += self.params.decode_delta(nd, g)
        return t

    def decode_run_s(self, batch: StepBatch, steps: int) -> np.ndarray:
        """``step_s`` of each of ``steps`` pure decode steps from ``batch`` (in step i every context
        has grown by i × ``decode_tokens_per_seq``), as one array: the same floats. Only the
        attention's (query, key) pairs and KV tokens change from step to step; the rest is the
        first step's (``_shape_price``)."""
        if batch.prefill or not batch.decode_context:
            raise ValueError("decode_run_s prices runs of pure decode steps")
        g, nd = batch.decode_tokens_per_seq, len(batch.decode_context)
        before, after = self._shape_price(batch, (nd, g, 0, 0))
        ctx = context_total(batch.decode_context) + np.arange(steps, dtype=np.int64) * (nd * g)
        pairs = g * ctx + nd * g * (g + 1) // 2  # as in _work, with an array of totals
        kv_tokens = ctx + nd * g
        tile = self.params.attention_tile_rows
        if tile and nd * g >= tile:  # as in _work
            pairs = pairs + other_cells(nd, g, kv_tokens, 0, 0, 0)
        t = before + self.params.group_s(pairs * self._attn_cmp_pair, kv_tokens * self._kv_mem_tok,
                                         *self._attention_eff)  # an array, as the attention terms are
        for s in after:
            t = t + s
        if self.params.kv_scan_s:
            t = t + self.params.kv_scan_s * other_cells(nd, g, kv_tokens, 0, 0, 0)
        if self.params.decode_delta_s:
            t = t + self.params.decode_delta(nd, g)
        return t

    def _shape_price(self, batch: StepBatch, shape: tuple[int, int, int, int]) -> tuple[float, tuple[float, ...]]:
        """What ``price`` adds up for a step of ``batch``'s shape (decodes, tokens per decode, prompt
        rows, prompts) whatever its contexts: the seconds before the attention group (the fixed
        seconds, then the projections and the MLP, in that order) and each group's after it.
        Priced once per shape and params: steps repeat the same few shapes as their contexts grow,
        and only the attention reads the contexts."""
        if self.params is not self._shapes_priced_for:  # (params replaced: price every shape again)
            self._shapes_priced, self._shapes_priced_for = {}, self.params
        got = self._shapes_priced.get(shape)
        if got is None:
            work = StepWork(*self._work(batch))
            price = self.params
            groups = [price.group_s(*group) for group in zip(work.compute_s, work.memory_s, work.compute_eff,
                                                              work.memory_eff, work.decode_compute_s,
                                                              work.memory_latency_s)]
            got = self._shapes_priced[shape] = (price.fixed_s(work) + groups[0] + groups[1], tuple(groups[3:]))
        return got

    def _work(self, batch: StepBatch) -> tuple:
        """``work`` as a plain tuple: the engine prices every scheduled batch, and a tuple is the
        cheapest thing to make."""
        g = batch.decode_tokens_per_seq
        nd = len(batch.decode_context)
        ctx = context_total(batch.decode_context)
        dt = nd * g  # decode tokens
        d_pairs = g * ctx + nd * g * (g + 1) // 2  # causal (query, key) pairs
        d_kv = ctx + dt  # KV read and written
        p_tokens = p_pairs = p_kv = p_own = 0
        for n, c in batch.prefill:
            p_tokens += n
            p_pairs += n * c + n * (n + 1) // 2
            p_kv += c + n
            p_own += n * (c + n)
        tokens, prompts = dt + p_tokens, len(batch.prefill)
        if tokens == 0:
            return (), (), 0.0, 0, 0, self._compute_eff, self._memory_eff, self._ar_latency, 0, (), 0, (), 0
        rest = (self._ar_count * self.allreduce.link_s(tokens), self._ar_count, nd + prompts)
        scan = other_cells(nd, g, d_kv, p_tokens, p_kv, p_own)  # (kv_scan_s)
        tile = self.params.attention_tile_rows
        # other sequences' cells computed as attention pairs
        tiled = tiled_cells(nd, g, d_kv, batch.prefill, tile) if tile and tokens >= tile else 0
        if self.params.row_remainder == "gemv-ubatch" and prompts:
            # The prompts in ubatches of their own, after the decode tokens' (see RooflineParams).
            p = self._groups(p_tokens, prompts, p_pairs + tiled, p_kv, 0, passes=1, logit_passes=prompts)
            if not dt:
                return (*p[:2], *rest, p[5], p[3], self._ar_latency, tokens, p[2], 0, p[4], scan)
            d = self._groups(dt, dt, d_pairs, d_kv, dt)
            return (d[0] + p[0], d[1] + p[1], *rest, d[5] + p[5], d[3] + p[3],
                    self._ar_latency, tokens, d[2] + p[2], dt, d[4] + p[4], scan)
        c, m, decode_cmp, memory_eff, latency, compute_eff = self._groups(
            tokens, dt + prompts, d_pairs + p_pairs + tiled, d_kv + p_kv, dt)
        return (c, m, *rest, compute_eff, memory_eff, self._ar_latency, tokens, decode_cmp, tokens, latency,
                scan)

    def _groups(self, tokens: int, logits: int, pairs: int, kv_tokens: int, dt: int,
                passes: int | None = None, logit_passes: int | None = None) -> tuple:
        """Per operator group, the compute and memory seconds at peak of one kernel invocation over
        ``tokens`` rows (``dt`` of them decode tokens) of which ``logits`` need logits, the decode
        tokens' share of the compute, and the groups' memory efficiencies, GEMM calls' fixed
        seconds at these rows (two GEMMs per layer and weight pass in the projections and the
        MLP, one per LM-head pass) and compute efficiencies (a mixture of experts' MLP at the
        catalog's MoE efficiency for these rows, where it gives one: both bounds, and no fixed
        seconds of its own, as the measured layer holds them).
        ``passes``/``logit_passes``: reads of the weights / the LM head; None: as the row remainder
        says."""
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
            touched = experts_touched(e, k, tokens)
            mlp_tok = k * self._expert_cmp_tok + self._router_cmp_tok
            mlp_cmp = rows * mlp_tok
            mlp_mem = touched * self._expert_mem * passes
            mlp_rows = rows * k / touched  # each touched expert's GEMM rows, on average
        else:
            mlp_tok = self._expert_cmp_tok
            mlp_cmp, mlp_mem = rows * mlp_tok, self._expert_mem * passes
            mlp_rows = rows
        eff, lat = (self._memory_for(rows, mlp_rows, logit_rows, passes, logit_passes) if self._by_rows
                    else (self._memory_eff, self._no_latency))
        lat = (*lat[:4], self._elementwise_fixed_s)  # the elementwise kernels' fixed time, once per invocation
        compute_eff = self._compute_eff
        if self._moe_curve is not None:
            e = curve_at(self._moe_curve, mlp_rows)
            eff, lat = (eff[0], e, *eff[2:]), (lat[0], 0.0, *lat[2:])
            compute_eff = (compute_eff[0], e, *compute_eff[2:])
        # The decode tokens' share of the GEMMs' FLOPs (their rows, each with its logits); under "pad"
        # the padding rows go to the prefill's share.
        decode_cmp = (min(dt, rows) * self._attn_proj_cmp_tok, min(dt, rows) * mlp_tok, 0.0,
                      min(dt, logit_rows) * self._lm_cmp_tok, 0.0)
        return ((rows * self._attn_proj_cmp_tok, mlp_cmp, pairs * self._attn_cmp_pair, logit_rows * self._lm_cmp_tok,
                 0.0),
                (self._attn_proj_mem * passes, mlp_mem, kv_tokens * self._kv_mem_tok, self._lm_mem * logit_passes,
                 tokens * self._elementwise_mem_tok),
                decode_cmp, eff, lat, compute_eff)

    def describe(self) -> dict[str, Any]:
        gemm, attn, head = self.efficiency["gemm"], self.efficiency["attention"], self.efficiency["lm_head"]
        eff = {"gemm_precision": self.gemm_precision, "attention_precision": self.attention_precision,
               "gemm_flops": self._compute_eff[0], "weight_bandwidth": gemm.weight_bandwidth,
               "attention_prefill_flops": attn.attention_prefill_flops,
               "attention_decode_bandwidth": self._attention_decode_eff, "lm_head_flops": head.gemm_flops,
               "weight_bandwidth_by_rows": [list(p) for p in gemm.weight_bandwidth_by_rows],  # rows, eff, latency_s
               "elementwise_bandwidth": gemm.elementwise_bandwidth, "elementwise_latency_s": gemm.elementwise_latency_s,
               "elementwise_fused": self.fused_elementwise,
               "allreduce_bus_bandwidth": gemm.allreduce_bus_bandwidth, "allreduce_latency_s": self._ar_latency,
               "allreduce_measured": self.allreduce.measured,  # the catalog's by_message at this TP
               "moe_efficiency": (None if self._moe_curve is None else
                                  {"expert_weights": self._moe_expert_size,
                                   "by_rows": [list(p) for p in self._moe_curve]}),
               "replaced_by": [k for k in ("mfu", "mbu") if getattr(self.params, k) is not None],
               "engine": self.engine or "*",
               "catalog": "data/efficiency.json" + (f" + {self.efficiency_file}" if self.efficiency_file else ""),
               "measured_catalog": "data/efficiency_measured.json (GPUs with measured kernel tables)"}
        return {"predictor": "roofline", "model": self.model.id, "gpu": self.gpu.id,
                "weights": self.weights.id, "kv": self.kv.id, "tp": self.tp, **self.params.to_dict(),
                "efficiency": eff}


def _streaming_at(eff: Efficiency, rows: float, memo: dict[float, tuple[float, float]]) -> tuple[float, float]:
    """(weight-streaming efficiency, one GEMM call's fixed seconds) of ``eff`` at ``rows`` rows,
    interpolated once per row count (``memo``)."""
    got = memo.get(rows)
    if got is None:
        got = memo[rows] = (eff.weight_bandwidth_at(rows), eff.gemm_latency_at(rows))
    return got
