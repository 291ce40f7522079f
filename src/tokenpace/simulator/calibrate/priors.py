"""What a calibration assumes for a term its run cannot determine, from the engine and the hardware
file alone (never from other measured loads).

The per-sequence host cost. A decode step of k sequences on llama.cpp's CPU backend runs k
matrix-vector passes over the weights while k < 4 (ggml's repacked kernels: see
``roofline.weight_passes``), so in a closed loop at one concurrency a cost per sequence is the same
line as those passes, and a fit can put the steps' growth on either. What llama-server does per
sequence and step beyond the model is sample: ``common_sampler::set_logits`` (llama.cpp,
common/sampling.cpp) copies the sequence's logits into an array of ``llama_token_data`` (token id,
logit, probability: 12 bytes) for every vocabulary entry, and the default chain's top-k
(``llama_sampler_top_k``, src/llama-sampling.cpp) reads that array once more before the later
samplers work on its 40 survivors. So per sequence: the logits read (4 bytes per entry), the array
written (12) and read (12), memory-bound at the hardware file's bandwidth. On the 2-core VM's file
(8 GB/s) and Gemma 3's 262,144-entry vocabulary that is 0.9 ms; on a GPU engine, which samples on
the device, it is microseconds, as a batched sampler's cost is.

The decode rows' GEMM efficiency (``decode_mfu``). Under ggml's CPU kernels a decode step of 4g
sequences is one pass over each weight matrix plus g row groups' compute on weights already in the
core's cache (see ``roofline``'s docstring: ``repack.cpp``, ``forward_mul_mat``), and a closed loop
at one concurrency shows one group size only, so nothing it measures says what a further group
costs. Assumed: the hardware file's peak (``DECODE_MFU_PRIOR`` = 1.0 of it), the one compute rate
the file states; on the 2-core VM's file that is the FP32 rate of both cores, which one thread's
int8 dot products (AVX2 ``maddubs``: 32 int8 multiply-adds an instruction against 8 FP32 FMAs)
can reach. So a decode step is priced by its weight pass until its rows' FLOPs at that peak
exceed it.
"""

from __future__ import annotations

from tokenpace.simulator.catalog import GPU, ModelSpec

SAMPLER_BYTES_PER_VOCAB_ENTRY = 4 + 12 + 12  # logits read, candidates written, candidates read by top-k
DECODE_MFU_PRIOR = 1.0  # the decode rows' GEMM efficiency: the hardware file's peak (see the docstring)


def sequence_prior_s(model: ModelSpec, hardware: GPU) -> float:
    """Seconds a sequence's sampling costs the host per step (see the module docstring)."""
    return model.vocab_size * SAMPLER_BYTES_PER_VOCAB_ENTRY / hardware.hbm_bytes_s


def describe_sequence_prior(model: ModelSpec, hardware: GPU) -> str:
    return (f"{sequence_prior_s(model, hardware) * 1e3:.3f} ms: sampling over the {model.vocab_size:,}-entry "
            f"vocabulary, {SAMPLER_BYTES_PER_VOCAB_ENTRY} bytes per entry (the logits read, llama.cpp's candidate "
            f"array written and read by top-k) at the hardware file's {hardware.hbm_bytes_s / 1e9:g} GB/s")


def describe_decode_mfu_prior(hardware: GPU) -> str:
    peak = hardware.peak_flops("bf16") / 1e12
    return (f"{DECODE_MFU_PRIOR:g} of the hardware file's peak ({peak:g} TFLOP/s): the "
            "decode rows' GEMM FLOPs on weights already in cache, a row group after the first costing its compute "
            "(ggml's repacked kernels)")
