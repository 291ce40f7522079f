"""The library inside a running event loop (Jupyter, async programs): `run_bench` says to await
`run_bench_async`, and that works there."""

from __future__ import annotations

import asyncio

import pytest

from tokenpace import BenchConfig, UsageError, run_bench, run_bench_async


def test_run_bench_inside_a_running_loop_says_to_await_run_bench_async(tmp_path):
    config = BenchConfig(requests=2, output_tokens="2", builtin_timing="parametric", progress=False,
                         out=str(tmp_path / "run.json"))

    async def notebook_cell():
        with pytest.raises(UsageError, match=r"use `await run_bench_async\(config\)`"):
            run_bench(config)
        return await run_bench_async(config)

    result = asyncio.run(notebook_cell())
    assert result.summary["counts"]["ok"] == 2 and result.result_path.exists()
