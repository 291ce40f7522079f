"""Simulator sweeps: the shape physics predicts, a --vary grid with a known order, interruption."""

from __future__ import annotations

import json

import pytest

from tokenpace.config import BenchConfig
from tokenpace.simulator.config import SimConfig
from tokenpace.simulator.roofline import RooflineParams
from tokenpace.sweep import SweepConfig, run_sweep


# The loads below bracket this engine's saturation; its efficiencies are pinned so that the
# efficiency catalog's figures do not move the knee out of the sweep.
ENGINE = SimConfig(roofline=RooflineParams(mfu=0.5, mbu=0.75))


def _steps(result):
    return [s for s in result.steps if s["role"] == "step"]


@pytest.fixture(scope="module")
def overload_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "s.json"
    config = SweepConfig(
        base=BenchConfig(duration_s=40, input_tokens="1024", output_tokens="256", slo="chat",
                         gpu_hour_usd=3.0, progress=False),
        axis="rate", loads=[4, 8, 12, 16, 20, 28, 40], sim=ENGINE, out=str(out))
    return run_sweep(config)


def test_goodput_rises_then_falls_past_saturation(overload_sweep):
    good = [s["summary"]["goodput"]["requests_s"] for s in _steps(overload_sweep)]
    peak = good.index(max(good))
    assert 0 < peak < len(good) - 1
    assert all(a < b for a, b in zip(good[:peak], good[1:peak + 1]))  # rises
    assert good[-1] < 0.25 * good[peak]  # and collapses under overload


def test_knee_lies_where_the_engine_saturates(overload_sweep):
    steps = _steps(overload_sweep)
    thr = [s["summary"]["throughput"]["output_tokens_s"] for s in steps]
    analysis = overload_sweep.analysis[""]
    knee = analysis["knee"]
    k = [s["index"] for s in steps].index(knee["index"])
    # Saturated: the knee reaches at least 90% of the most the engine ever delivered; past it,
    # throughput grows by under a quarter of the load's growth, while p99 TTFT at least triples.
    loads = [s["load"]["value"] for s in steps]
    assert thr[k] >= 0.9 * max(thr)
    assert thr[-1] / thr[k] - 1 < 0.25 * (loads[-1] / loads[k] - 1)
    ttft = [s["summary"]["latency_ms"]["ttft"]["p99"] for s in steps]
    assert ttft[-1] >= 3 * ttft[k]
    # Well below the knee, throughput grows in proportion to the load.
    assert thr[1] / thr[0] == pytest.approx(loads[1] / loads[0], rel=0.15)
    assert thr[k - 1] < thr[k]


def test_max_goodput_and_cost_at_the_best_point(overload_sweep):
    best = overload_sweep.analysis[""]["max_goodput"]
    steps = {s["index"]: s for s in overload_sweep.steps}
    at = steps[best["step"]]["summary"]
    assert best["good_requests_s"] == pytest.approx(max(
        s["summary"]["goodput"]["requests_s"] for s in _steps(overload_sweep) if s["summary"]["goodput"]["verdict"]["met"]))
    assert best["limit_load"] >= best["load"]
    assert not best["held_at_every_step"]
    # Cost at the best point is the step's own cost when the best point is a step.
    if not best["interpolated"]:
        assert best["usd_per_1m_output_tokens"] == pytest.approx(at["cost"]["usd_per_1m_output_tokens"])
    # Every step carries its cost, and the price-free GPU-hours.
    for s in _steps(overload_sweep):
        assert s["summary"]["cost"]["usd_per_1m_output_tokens"] > 0
        assert s["gpu_hours_per_1m_output_tokens"] * 3.0 == pytest.approx(s["summary"]["cost"]["usd_per_1m_output_tokens"])


def test_quadrants_mark_overload_and_recommendations_cover_each_preset(overload_sweep):
    a = overload_sweep.analysis[""]
    quads = a["quadrants"]["steps"]
    first, last = str(_steps(overload_sweep)[0]["index"]), str(_steps(overload_sweep)[-1]["index"])
    assert quads[first] == "underused" and quads[last] == "saturated"
    assert [r["slo"] for r in a["recommendations"]] == ["chat", "code", "summarization", "batch"]
    chat = a["recommendations"][0]
    assert chat["load"] is not None and "good req/s" in chat["text"]


def test_sweep_file_holds_every_step_and_each_step_file_exists(overload_sweep):
    doc = json.loads(overload_sweep.path.read_text())
    assert doc["kind"] == "sweep" and doc["schema_version"] == 1 and not doc["interrupted"]
    assert len(doc["steps"]) == 7 and doc["started_utc"] is None  # a simulation reads no clock
    for s in doc["steps"]:
        step_file = overload_sweep.path.parent / s["result_path"]
        assert json.loads(step_file.read_text())["summary"] == s["summary"]


def test_auto_rates_start_with_two_probes_and_say_how_they_chose(tmp_path):
    config = SweepConfig(base=BenchConfig(requests=200, input_tokens="512", output_tokens="64",
                                          slo="chat", progress=False),
                         axis="rate", loads=None, auto_steps=4, sim=SimConfig(), out=str(tmp_path / "a.json"))
    result = run_sweep(config)
    roles = [s["role"] for s in result.steps]
    assert roles[:2] == ["sync", "saturation"]
    choice = result.rate_choice[""]
    rates = [s["load"]["value"] for s in result.steps if s["role"] == "step"]
    assert rates == choice["rates"] and len(rates) == 4
    assert rates[0] == pytest.approx(choice["sync_rps"], rel=1e-3)
    assert rates[1] == pytest.approx(choice["saturation_rps"], rel=1e-3)
    assert rates[2:] == [pytest.approx(f * choice["saturation_rps"], rel=1e-3) for f in (1.15, 1.35)]
    assert "denser near saturation" in choice["how"] and "overload" in choice["how"]
    # The saturation probes climbed in concurrency while throughput grew, and it is their best.
    probes = [s for s in result.steps if s["role"] == "saturation"]
    assert [p["load"]["value"] for p in probes] == [4, 16, 64, 256][:len(probes)]
    assert choice["saturation_rps"] == max(p["summary"]["throughput"]["requests_s"] for p in probes)


def test_auto_stops_early_when_the_slo_is_missed_by_a_wide_margin(tmp_path):
    # A TTFT limit below what even one request at a time gets: the first rate misses widely.
    config = SweepConfig(base=BenchConfig(requests=100, input_tokens="2048", output_tokens="32",
                                          slo="ttft=5ms", progress=False),
                         axis="rate", loads=None, auto_steps=5, sim=SimConfig(), out=str(tmp_path / "b.json"))
    result = run_sweep(config)
    statuses = [s["status"] for s in result.steps if s["role"] == "step"]
    assert statuses[0] == "ok" and set(statuses[1:]) == {"skipped"} and len(statuses) == 5
    assert "skipped" in result.steps[-1]["reason"]


def test_vary_grid_fp8_beats_bf16_on_decode_bound_traffic(tmp_path):
    # Short prompts, long outputs: decode is memory-bound, fp8 weights halve the bytes per step. The
    # efficiencies are pinned (as ENGINE's): the test is about the sweep's grid, and the catalog's
    # measured FP8 GEMMs pay a fixed cost per call (activation quantization) that narrows FP8's
    # lead at 70B TP4's small per-GPU layers (max goodput 1.13x BF16's with the catalog).
    config = SweepConfig(
        base=BenchConfig(requests=300, input_tokens="128", output_tokens="512", slo="chat", progress=False),
        axis="rate", loads=None, auto_steps=5,
        sim=SimConfig(model="llama-3.1-70b", tp=4, roofline=RooflineParams(mfu=0.5, mbu=0.75)),
        vary=[("quant", ["bf16", "fp8"])], out=str(tmp_path / "v.json"))
    result = run_sweep(config)
    bf16, fp8 = result.analysis["quant=bf16"], result.analysis["quant=fp8"]
    assert fp8["max_goodput"]["good_requests_s"] > 1.2 * bf16["max_goodput"]["good_requests_s"]
    tpot = {s["group"]: s["summary"]["latency_ms"]["tpot"]["p50"] for s in result.steps if s["role"] == "sync"}
    assert tpot["quant=fp8"] < 0.7 * tpot["quant=bf16"]
    assert len(result.comparison) == 1 and "quant=fp8 raises max goodput under the chat SLO" in result.comparison[0]


def test_interrupt_keeps_completed_steps(tmp_path):
    seen = []

    def stop_after_two(entry):
        seen.append(entry)
        if len(seen) == 2:
            raise KeyboardInterrupt

    config = SweepConfig(base=BenchConfig(requests=50, output_tokens="16", progress=False),
                         axis="concurrency", loads=[1, 2, 4, 8], sim=SimConfig(), out=str(tmp_path / "i.json"))
    result = run_sweep(config, on_step=stop_after_two)
    doc = json.loads(result.path.read_text())
    assert doc["interrupted"] and [s["status"] for s in doc["steps"]] == ["ok", "ok"]


def test_an_invalid_step_is_marked_and_left_out_of_the_analysis(tmp_path):
    # A real step run, judged invalid by its load generator report (the client was the bottleneck).
    from tokenpace.runner.simulate import SimRunConfig, run_sim
    from tokenpace.sweep.findings import analyse_group
    from tokenpace.sweep.steps import entry_of_result

    entries = []
    for i, rate in enumerate((2.0, 4.0, 8.0)):
        run = run_sim(SimRunConfig(load=BenchConfig(rate=rate, requests=60, output_tokens="32", progress=False,
                                                    out=str(tmp_path / f"{i}.json")), engine=SimConfig()))
        if i == 1:
            run.load = {"valid": False, "invalid_reasons": ["schedule lag p99 12.8 ms > 10 ms"]}
        entries.append(entry_of_result(run, index=i, role="step", group="", combo={}, axis="rate", value=rate,
                                       gpus=1, sweep_path=tmp_path / "s.json"))
    assert [e["status"] for e in entries] == ["ok", "invalid", "ok"]
    assert entries[1]["reason"] == "load generator was the bottleneck: schedule lag p99 12.8 ms > 10 ms"
    assert analyse_group(entries, axis="rate", slo=None, price=None)["steps_analysed"] == [0, 2]


# Mixed traffic: long-tailed prompts (median ~700 tokens, 1% past 10,000) arriving while many short
# and medium replies decode, with vLLM's 2,048-token step budget (its default on smaller GPUs).
# Prefill-first runs each arriving prompt whole in a prefill-only step and every running stream
# waits for it (a prompt past the budget runs alone, however long); chunked prefill puts at most
# the budget's worth of prompt into a step beside the decodes. With short uniform prompts and a
# budget that holds eight of them, a chunked step stalls decodes about as long as a prefill-only
# one, and the two policies differ little: the workload has to be mixed for the difference to show.
MIXED = dict(input_tokens="lognormal:mean=1500,sigma=1.2,max=16000", output_tokens="uniform:min=16,max=256")


def test_vary_grid_chunked_prefill_beats_prefill_first_on_p99_tpot_under_mixed_load(tmp_path):
    config = SweepConfig(
        base=BenchConfig(duration_s=120, slo="chat", progress=False, **MIXED),
        axis="rate", loads=[6, 10, 14, 18, 22], sim=SimConfig(max_batched_tokens=2048),
        vary=[("policy", ["prefill-first", "chunked-prefill"])], out=str(tmp_path / "p.json"))
    result = run_sweep(config)
    first, chunked = result.analysis["policy=prefill-first"], result.analysis["policy=chunked-prefill"]
    tpot = {(s["group"], s["load"]["value"]): s["summary"]["latency_ms"]["tpot"]["p99"] for s in _steps(result)}
    # Under load, every rate: chunked prefill's p99 TPOT is well below prefill-first's.
    for rate in (14, 18):
        assert tpot[("policy=chunked-prefill", rate)] < 0.8 * tpot[("policy=prefill-first", rate)]
    # The recommendation says so: chunked prefill holds the chat SLO at a higher load, for more goodput.
    rec = {g: next(r for r in a["recommendations"] if r["slo"] == "chat") for g, a in
           (("first", first), ("chunked", chunked))}
    assert rec["chunked"]["load"] > rec["first"]["load"]
    assert chunked["max_goodput"]["good_requests_s"] > 1.05 * first["max_goodput"]["good_requests_s"]
    assert len(result.comparison) == 1
    said = result.comparison[0]
    assert said.startswith("policy=chunked-prefill raises max goodput under the chat SLO")
    assert "p99 TPOT" in said
    # The console names what was swept: the engine, the workload, the SLO, the grid.
    import io

    from rich.console import Console

    from tokenpace.reports.sweep_console import render_sweep
    from tokenpace.sweep.document import sweep_document

    console = Console(record=True, width=300, file=io.StringIO())
    render_sweep(sweep_document(result), console)
    text = console.export_text()
    assert "simulated llama-3.1-8b on 1× h100-sxm (TP 1), bf16 weights" in text
    assert f"input {MIXED['input_tokens']} tokens, output {MIXED['output_tokens']} tokens" in text
    assert "chat (TTFT ≤ 500 ms, TPOT ≤ 50 ms for 90% of requests)" in text
    assert "grid: policy prefill-first, chunked-prefill" in text and "2048 tokens per step" in text
    # Per user against per GPU, chunked prefill's steps make the whole Pareto frontier: at every load
    # its streams run faster for the same throughput.
    from tokenpace.sweep.findings import frontier

    front = frontier(result.steps)
    assert {p["group"] for p in front} == {"policy=chunked-prefill"} and len(front) >= 3
    assert all(a["per_user_tokens_s"] > b["per_user_tokens_s"] and a["per_gpu_tokens_s"] < b["per_gpu_tokens_s"]
               for a, b in zip(front, front[1:]))
    assert "Pareto frontier" in text
