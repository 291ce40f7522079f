"""`tokenpace serve --sim`: the built-in server driven by the engine simulator in wall-clock time.
Bench against it agrees with `tokenpace sim` on the same workload, and /metrics shows the engine."""

from __future__ import annotations

import asyncio
import json
import re

import aiohttp
import pytest

from .helpers import run_cli
from tokenpace.errors import ExitCode
from tokenpace.servers import BuiltinServerConfig, config_to_argv, running_server, start_server_process
from tokenpace.servers.__main__ import build_parser
from tokenpace.servers.args import config_from_args
from tokenpace.simulator import SimConfig, SpecDecodeConfig


def test_bench_against_serve_sim_agrees_with_sim(tmp_path):
    # Llama-3.1-8B on an H100: decode steps of ~8 ms and prefills of 2,048 tokens ~65 ms, so wall-clock
    # sleep error and the HTTP path (3-5 ms here, which TTFT includes and the simulation does not)
    # stay small against them. A light open loop: Poisson arrivals land anywhere within a step, in
    # the simulation as in real time. Measured on a 2-CPU machine: TTFT +4..10%, TPOT -1..+8%.
    workload = ("--rate", "6", "--requests", "30", "--input-tokens", "2048", "--output-tokens", "32",
                "--seed", "5")
    sim = run_cli("sim", *workload, "--out", "sim.json", cwd=tmp_path)
    assert sim.returncode == 0, sim.stderr
    simulated = json.loads((tmp_path / "sim.json").read_text())["summary"]
    # Wall-clock timing on a shared machine: a second attempt when other processes starve this one
    # (seen at load average 6 on 2 CPUs: TTFT p50 +34% once in three runs).
    misses = []
    for attempt in range(2):
        measured = _bench_serve_sim(tmp_path, workload, f"bench{attempt}.json")
        assert measured["counts"]["ok"] == simulated["counts"]["ok"] == 30
        ratios = {m: measured["latency_ms"][m]["p50"] / simulated["latency_ms"][m]["p50"] for m in ("ttft", "tpot")}
        if all(abs(r - 1) <= 0.15 for r in ratios.values()):
            return
        misses.append(ratios)
    pytest.fail(f"bench vs sim p50 ratios off by more than 15% twice: {misses}")


def _bench_serve_sim(tmp_path, workload: tuple[str, ...], out: str) -> dict:
    server = start_server_process(BuiltinServerConfig(model="llama-3.1-8b", sim=SimConfig()))
    try:
        bench = run_cli("bench", "--url", server.url, *workload, "--out", out, "--quiet", cwd=tmp_path)
    finally:
        server.stop()
    # 5 (load generator lagged its schedule, p99 > 10 ms) happens on a busy 2-CPU test machine; TTFT
    # counts from the actual send, so the comparison still holds.
    assert bench.returncode in (ExitCode.OK, ExitCode.INVALID_RUN), bench.stderr
    return json.loads((tmp_path / out).read_text())["summary"]


def _metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.MULTILINE)
    assert match, name
    return float(match.group(1))


def test_metrics_report_the_engines_true_state():
    busy, after = asyncio.run(_load_and_scrape())
    assert _metric(busy, "vllm:num_requests_running") == 3
    assert _metric(busy, "vllm:num_requests_waiting") == 1
    assert 0.5 < _metric(busy, "vllm:kv_cache_usage_perc") <= 1.0
    assert _metric(after, "vllm:num_preemptions_total") > 0
    assert _metric(after, "vllm:kv_cache_usage_perc") == 0
    assert _metric(after, "vllm:prefix_cache_queries_total") == 4 * 500
    assert _metric(after, "vllm:time_to_first_token_seconds_count") == 4
    assert _metric(after, "vllm:request_success_total") == 4


async def _load_and_scrape() -> tuple[str, str]:
    # 100 KV blocks of 16 = 1,600 tokens: three running 500-token prompts fill 96, and growing to 600
    # tokens each they cannot all stay, so the engine preempts; max_num_seqs 3 keeps one waiting.
    config = BuiltinServerConfig(model="llama-3.1-8b", max_num_seqs=3, sim=SimConfig(num_gpu_blocks=100))
    async with running_server(config) as url, aiohttp.ClientSession() as session:
        async def one() -> int:
            body = {"model": "llama-3.1-8b", "max_tokens": 100, "stream": True,
                    "messages": [{"role": "user", "content": " ".join(["word"] * 500)}]}
            async with session.post(f"{url}/chat/completions", json=body) as resp:
                return sum(line.startswith(b'data: {"id"') for line in [x async for x in resp.content])

        async def scrape() -> str:
            async with session.get(url.removesuffix("/v1") + "/metrics") as resp:
                return await resp.text()

        tasks = [asyncio.create_task(one()) for _ in range(4)]
        await asyncio.sleep(0.15)
        busy = await scrape()
        await asyncio.gather(*tasks)
        after = await scrape()
    return busy, after


def test_sim_flags_survive_the_trip_to_a_server_process():
    sim = SimConfig(model="qwen3-8b", gpu="a100-80gb", weights="int4", kv_cache_dtype="fp8", tp=2,
                    policy="decode-first", max_batched_tokens=4096, block_size=32, prefix_caching=True,
                    spec_decode=SpecDecodeConfig(3, 0.6, 0.05, "sampled"))
    config = BuiltinServerConfig(model="my-name", max_num_seqs=64, seed=9, sim=sim)
    again = config_from_args(build_parser().parse_args(config_to_argv(config)))
    assert again == config and again.sim.max_num_seqs == 64 and again.sim.seed == 9


def test_serve_sim_rejects_an_unknown_gpu_in_one_line():
    proc = run_cli("serve", "--sim", "--gpu", "h1000", "--port", "0")
    assert proc.returncode == ExitCode.USAGE
    assert "unknown GPU 'h1000'; known: h100-sxm" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_client_that_leaves_frees_its_place_in_the_engine():
    async def go() -> tuple[int, str]:
        config = BuiltinServerConfig(model="llama-3.1-8b", max_num_seqs=1, sim=SimConfig())
        async with running_server(config) as url, aiohttp.ClientSession() as session:
            body = {"model": "llama-3.1-8b", "max_tokens": 5000, "stream": True,
                    "messages": [{"role": "user", "content": "hello there"}]}
            async with session.post(f"{url}/chat/completions", json=body) as resp:
                for _ in range(5):
                    await resp.content.readline()
                resp.close()  # gone mid-stream, holding the only slot
            body["max_tokens"] = 3
            async with session.post(f"{url}/chat/completions", json=body) as resp:
                chunks = sum(line.startswith(b'data: {"id"') for line in [x async for x in resp.content])
            async with session.get(url.removesuffix("/v1") + "/metrics") as resp:
                return chunks, await resp.text()

    chunks, metrics = asyncio.run(asyncio.wait_for(go(), timeout=20))
    assert chunks == 1 + 3 + 0  # role chunk and three token chunks (no usage asked for)
    assert _metric(metrics, "vllm:num_requests_running") == 0
    assert _metric(metrics, "vllm:kv_cache_usage_perc") == 0
