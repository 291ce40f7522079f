"""The kernel tables' cache (``simulator/kernels/table_cache.py``): a second process prices the same
steps without importing pyarrow; a damaged entry or a cache that cannot be written costs only time.

Each case runs the kernel predictor in a fresh process (the cache is per machine, and the process
keeps what it read), so pyarrow's import shows whether the Parquet file was read. Needs
aiconfigurator-core: skips where it is missing, fails instead with TOKENPACE_REQUIRE_KERNELS=1."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tokenpace.simulator.kernels import table_cache

PRICE = r"""
import json, sys
from tokenpace.simulator import get_gpu, get_model, get_precision
from tokenpace.simulator.kernels.predictor import KernelPredictor
from tokenpace.simulator.step import StepBatch
p = KernelPredictor(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), get_precision("fp8"), get_precision("fp8"),
                    engine="vllm")
steps = [StepBatch(prefill=((2048, 0),)), StepBatch(decode_context=(1500,) * 64),
         StepBatch(prefill=((512, 1024),), decode_context=(3000,) * 200)]
print(json.dumps({"prices": [p.step_s(s) for s in steps], "pyarrow": "pyarrow" in sys.modules}))
"""


@pytest.fixture(autouse=True)
def _needs_tables(kernel_tables):
    pass


def _price(cache) -> dict:
    env = {**os.environ, "TOKENPACE_KERNEL_CACHE": str(cache)}
    out = subprocess.run([sys.executable, "-c", PRICE], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_second_process_prices_the_same_steps_from_the_cache_without_pyarrow(tmp_path):
    cache = tmp_path / "kernel-tables"
    cold = _price(cache)
    assert cold["pyarrow"] is True
    assert sorted(p.name.split("-")[0] for p in cache.glob("*.npz")) == [
        "context_attention_perf", "gemm_perf", "generation_attention_perf"]
    warm = _price(cache)
    assert warm["pyarrow"] is False
    assert warm["prices"] == cold["prices"]


def test_a_damaged_entry_is_read_again_from_the_table_and_replaced(tmp_path):
    cache = tmp_path / "kernel-tables"
    cold = _price(cache)
    gemm = next(cache.glob("gemm_perf-*.npz"))
    gemm.write_bytes(b"not a zip file")
    again = _price(cache)
    assert again["pyarrow"] is True and again["prices"] == cold["prices"]
    assert gemm.stat().st_size > 1000
    assert _price(cache)["pyarrow"] is False


def test_a_cache_that_cannot_be_written_only_costs_the_parquet_read(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("the cache folder cannot be made under a file")
    first, second = _price(blocked / "kernel-tables"), _price(blocked / "kernel-tables")
    assert first["pyarrow"] is second["pyarrow"] is True
    assert second["prices"] == first["prices"]


def test_text_columns_are_kept_as_values_and_indices_and_come_back_whole():
    columns = {"kernel_source": np.array(["cutlass", "torch", "cutlass", "cutlass"]),
               "m": np.array([1, 2, 4, 8], dtype=np.int64), "latency": np.array([0.5, 0.25, 1.0, 2.0])}
    packed = table_cache._pack(columns)
    assert sorted(packed["t.kernel_source"].tolist()) == ["cutlass", "torch"]
    back = table_cache._unpack(packed)
    assert back.keys() == columns.keys()
    for name, array in columns.items():
        assert back[name].dtype == array.dtype and back[name].tolist() == array.tolist()
