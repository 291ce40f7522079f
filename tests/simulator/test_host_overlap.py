"""Host work per sequence that the engine overlaps with the GPU (``RooflineParams.host_seq_s``): a
step takes the longer of the GPU's time and sequences × host_seq_s. The TensorRT-LLM preset sets it
(its PyTorch backend's per-request Python work behind the overlap scheduler); a flag overrides it."""

from __future__ import annotations

import argparse

import pytest

from tokenpace.errors import UsageError
from tokenpace.simulator import RooflineParams, SimConfig
from tokenpace.simulator.args import add_engine_arguments, engine_config
from tokenpace.simulator.request import SimRequest
from tokenpace.simulator.simulate import simulate

from sim_helpers import FIXED_STEP_ENGINE, FixedStep

CONFIG = SimConfig(**FIXED_STEP_ENGINE, concurrency=8)


def ends_ms(host_seq_s: float, n: int) -> list[float]:
    """The chunk times of the first of ``n`` requests (16 in, 6 out), all sent at once (a closed loop of
    8), each step 10 ms on the GPU."""
    requests = [SimRequest(prompt_tokens=16, output_tokens=6) for _ in range(n)]
    result = simulate(CONFIG, requests, FixedStep(RooflineParams(host_seq_s=host_seq_s)))
    first = min(result.records, key=lambda r: r.index)
    return [round(t / 1e6, 6) for t in first.chunk_ns]


def test_a_step_takes_the_longer_of_the_gpu_and_the_host_work_for_its_sequences():
    # 10 ms a step on the GPU; the prompts in one step, then 5 decode steps (jumped as one run).
    assert ends_ms(0.0, 4) == [10, 20, 30, 40, 50, 60]
    # 2 ms per sequence: 4 sequences' host work (8 ms) hides behind the GPU's 10 ms.
    assert ends_ms(0.002, 4) == [10, 20, 30, 40, 50, 60]
    # 8 sequences: 16 ms of host work, longer than the GPU's step: every step takes 16 ms, the
    # prompts' step (8 prompt chunks) as the decode runs.
    assert ends_ms(0.002, 8) == [16, 32, 48, 64, 80, 96]


def parse(*argv: str) -> SimConfig:
    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    return engine_config(parser.parse_args(list(argv)), model=None, max_num_seqs=None)


def test_the_trtllm_preset_sets_it_and_says_so_and_a_flag_wins():
    trt = parse("--engine", "trtllm")
    assert trt.roofline.host_seq_s == pytest.approx(29.4e-6)
    assert dict(trt.engine_set)["host_seq_s"] == trt.roofline.host_seq_s
    assert trt.to_dict()["roofline"]["host_seq_s"] == trt.roofline.host_seq_s
    off = parse("--engine", "trtllm", "--host-seq-us", "0")
    assert off.roofline.host_seq_s == 0 and "host_seq_s" not in dict(off.engine_set)
    # vLLM's and SGLang's presets, and no preset, leave it at 0 (and out of the result file)
    for c in (parse("--engine", "vllm"), parse("--engine", "sglang"), parse()):
        assert c.roofline.host_seq_s == 0 and "host_seq_s" not in c.to_dict()["roofline"]
    assert parse("--host-seq-us", "12.5").roofline.host_seq_s == pytest.approx(12.5e-6)
    with pytest.raises(UsageError, match="--host-seq-us"):
        parse("--host-seq-us", "-1")


def test_sim_list_shows_each_presets_host_time_per_sequence():
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "tokenpace", "sim", "--list"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "host µs/seq (overlapped)" in proc.stdout
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()
            if line.split() and line.split()[0] in ("vllm", "trtllm", "sglang") and "×" in line}
    assert rows["trtllm"][-1] == "29.4" and rows["vllm"][-1] == "-" and rows["sglang"][-1] == "-"
