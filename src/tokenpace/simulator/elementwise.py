"""What one layer's memory-bound elementwise passes cost per token (``roofline.RooflinePredictor``'s
and the kernel predictor's): the kernels they launch and the bytes they move, with or without
TensorRT-LLM's fusions and with the GEMM inputs' quantization where the GEMMs run in FP8 or FP4."""

from __future__ import annotations

from tokenpace.simulator.catalog import ModelSpec

# Bytes one quantized GEMM input value is written in (its 16-bit source is read at 2): FP8's one
# byte; NVFP4's half byte plus an FP8 scale per 16 values.
QUANTIZED_INPUT_BYTES = {"fp8": 1.0, "fp4": 0.5 + 1 / 16}


def elementwise_kernels(quantized_inputs: bool, kernel_fusions: bool = False, rotary_in_attention: bool = False) -> int:
    """The elementwise kernels of one layer, the passes ``elementwise_bytes`` counts: two
    residual-add + RMSNorms, rotary (unless in the attention), the MLP activation, and with FP8
    or FP4 GEMMs a quantization per GEMM input that has a pass of its own (4; 2 with ``kernel_fusions``)."""
    quant = (2 if kernel_fusions else 4) if quantized_inputs else 0
    return 2 + (0 if rotary_in_attention else 1) + 1 + quant


def elementwise_bytes(model: ModelSpec, tp: int, heads: float, kv_heads: float, quantized_bytes: float,
                      *, kernel_fusions: bool = False, rotary_in_attention: bool = False) -> float:
    """Bytes one token moves through one layer's memory-bound elementwise passes (16-bit activations):
    two fused residual-add + RMSNorms (read x and the residual, write both: replicated across TP),
    rotary on Q and K (read and write), the MLP activation (SiLU-and-mul reads gate and up, writes
    one; else read and write one), and with FP8 or FP4 GEMMs (``quantized_bytes``: the bytes a
    quantized value is written in, 0 for 16-bit GEMMs) each GEMM input quantized (read 2 bytes,
    write ``quantized_bytes``) for QKV, O, the MLP's first and second matrices.

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
    per_value = 2 + quantized_bytes if quantized_bytes else 0.0
    if kernel_fusions:
        return norms + rotary + activation + per_value * (h + h)
    quant = per_value * (h + heads * hd + h + inter)
    return norms + rotary + activation + quant
