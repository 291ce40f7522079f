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
"""

from __future__ import annotations

from tokenpace.simulator.catalog import GPU, ModelSpec

SAMPLER_BYTES_PER_VOCAB_ENTRY = 4 + 12 + 12  # logits read, candidates written, candidates read by top-k


def sequence_prior_s(model: ModelSpec, hardware: GPU) -> float:
    """Seconds a sequence's sampling costs the host per step (see the module docstring)."""
    return model.vocab_size * SAMPLER_BYTES_PER_VOCAB_ENTRY / hardware.hbm_bytes_s


def describe_sequence_prior(model: ModelSpec, hardware: GPU) -> str:
    return (f"{sequence_prior_s(model, hardware) * 1e3:.3f} ms: sampling over the {model.vocab_size:,}-entry "
            f"vocabulary, {SAMPLER_BYTES_PER_VOCAB_ENTRY} bytes per entry (the logits read, llama.cpp's candidate "
            f"array written and read by top-k) at the hardware file's {hardware.hbm_bytes_s / 1e9:g} GB/s")
