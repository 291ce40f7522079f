"""The planner's search, checked from outside: its winner verified by a separate `tokenpace sweep
--sim` of that configuration, its replica count minimal, its pruning sound, bad input one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tokenpace.metrics.slo import parse_slo
from tokenpace.plan.candidates import Candidate
from tokenpace.plan.search import Traffic, probe
from tokenpace.workload.lengths import parse_length


def cli(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenpace", *args], capture_output=True, text=True,
                          timeout=timeout_s)


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    proc = cli("plan", "--model", "llama-3.1-8b", "--rate", "90", "--slo", "chat", "--gpus", "h100-sxm,l40s",
               "--quant", "fp8", "--tp", "1,2,4", "--input-tokens", "512", "--output-tokens", "128",
               "--top", "1", "--jobs", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def test_the_winner_meets_the_slo_in_a_separate_sweep_and_fails_well_past_its_capacity(plan, tmp_path):
    w = plan["winner"]
    c = w["candidate"]
    per_replica = plan["traffic"]["rate_rps"] / w["replicas"]
    past = 1.3 * w["max_rps_per_replica"]
    out = tmp_path / "sweep.json"
    proc = cli("sweep", "--sim", "--model", "llama-3.1-8b", "--gpu", c["gpu"], "--tp", str(c["tp"]),
               "--quant", c["weights"], "--engine", c["engine"], "--rate", f"{per_replica:.3f},{past:.3f}",
               "--input-tokens", "512", "--output-tokens", "128", "--slo", "chat",
               "--duration-per-step", "120", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(out.read_text())["steps"]
    verdicts = [s["summary"]["goodput"]["verdict"]["met"] for s in steps]
    assert verdicts == [True, False]


def test_one_replica_fewer_would_miss_the_slo(plan):
    w = plan["winner"]
    if w["replicas"] == 1:
        pytest.skip("one replica: nothing fewer to try")
    c = w["candidate"]
    traffic = Traffic(plan["traffic"]["rate_rps"], parse_length("512"), parse_length("128"))
    fewer = probe(Candidate(c["gpu"], c["tp"], c["weights"], c["engine"]), "llama-3.1-8b", traffic,
                  parse_slo("chat"), traffic.rate / (w["replicas"] - 1))
    assert fewer.attainment < 0.9


def test_a_candidate_left_unsimulated_could_not_have_been_cheaper_than_the_winner(plan):
    winner_cost = plan["winner"]["cost"]["usd_per_hour"]
    rate = plan["traffic"]["rate_rps"]
    pruned = [r for r in plan["rejected"] if r["pruned"]]
    assert pruned, "with --top 1 the search should have skipped some candidates"
    for r in pruned:
        per_replica_hour = r["usd_per_gpu_hour"] * r["candidate"]["tp"]
        if r["probes"] is None:  # never simulated: even its throughput ceiling costs more
            assert per_replica_hour * -(-rate // r["bounds"]["max_rps"]) > winner_cost
        else:  # stopped: every replica count it tried missed, and one more would cost more
            idle, *tried = r["probes"]  # the first probe, nearly idle, met the SLO
            assert idle["attainment"] >= 0.9 and tried and all(p["attainment"] < 0.9 for p in tried)
            most = max(round(rate / p["rate_rps"]) for p in tried)
            assert per_replica_hour * (most + 1) > winner_cost


def test_ranked_cheapest_first_and_the_frontier_trades_cost_for_ttft(plan):
    costs = [r["cost"]["usd_per_hour"] for r in plan["ranked"]]
    assert costs == sorted(costs)
    frontier = plan["frontier"]
    assert frontier[0]["candidate"]["label"] == plan["winner"]["candidate"]["label"]
    for cheaper, dearer in zip(frontier, frontier[1:]):
        assert dearer["cost"]["usd_per_hour"] >= cheaper["cost"]["usd_per_hour"]
        assert dearer["at_rate"]["ttft_p99_ms"] < cheaper["at_rate"]["ttft_p99_ms"]


def test_the_plan_states_its_predictor_and_error_band_and_each_prices_source(plan):
    assert plan["predictor"]["name"] == "roofline"
    assert set(plan["predictor"]["error_band"]["median_abs_error"]) == {"throughput", "ttft", "tpot"}
    for price in plan["prices"].values():
        assert price["source"].startswith("https://") and price["read"]


def test_speculative_decoding_helps_an_idle_engine_when_drafts_are_accepted():
    from tokenpace.plan.candidates import bounds
    from tokenpace.simulator.spec_decode import SpecDecodeConfig

    plain = Candidate("h100-sxm", 1, "bf16")
    spec = Candidate("h100-sxm", 1, "bf16", spec=SpecDecodeConfig(4, 0.8, 0.1))
    rejected = Candidate("h100-sxm", 1, "bf16", spec=SpecDecodeConfig(4, 0.0, 0.1))
    floors = [bounds(c.sim_config("llama-3.1-8b"), 1024, 256, 64).tpot_floor_ms for c in (plain, spec, rejected)]
    assert floors[1] < floors[0] < floors[2]  # accepted drafts: faster; none accepted: pure overhead


@pytest.mark.parametrize("args, message", [
    (["--rate", "0"], "--rate"),
    (["--rate", "5", "--gpus", "h900"], "h900"),
    (["--rate", "5", "--prices", "/nonexistent/prices.json"], "no such file"),
    (["--rate", "5", "--spec-decode", "draft-tokens=4"], "acceptance="),
    (["--rate", "5", "--gpus", "a100-80gb", "--quant", "fp8"], "no candidate"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    proc = cli("plan", "--model", "llama-3.1-8b", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_dataset_traffic_keeps_each_prompt_with_its_own_reply(tmp_path):
    from tokenpace.plan.search import dataset_traffic

    data = tmp_path / "traffic.jsonl"
    data.write_text("".join(json.dumps({"prompt": "word " * (100 if i % 2 else 900),
                                        "output_tokens": 50 if i % 2 else 400}) + "\n" for i in range(40)))
    traffic = dataset_traffic(5.0, str(data))
    assert (traffic.input_tokens.mean, traffic.output_tokens.mean) == (500.0, 225.0)
    ins, outs = traffic.lengths(1000)
    assert set(zip(ins.tolist(), outs.tolist())) == {(100, 50), (900, 400)}  # drawn as pairs
    out = tmp_path / "plan.json"
    proc = cli("plan", "--model", "llama-3.1-8b", "--rate", "5", "--dataset", str(data), "--gpus", "h100-sxm",
               "--quant", "fp8", "--tp", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    t = json.loads(out.read_text())["traffic"]
    assert (t["dataset"], t["dataset_requests"], t["mean_input_tokens"]) == (str(data), 40, 500.0)


def test_a_what_if_compares_a_candidate_with_its_twin_in_the_plans_own_figures(tmp_path):
    out = tmp_path / "plan.json"
    proc = cli("plan", "--model", "llama-3.1-8b", "--rate", "20", "--gpus", "l40s", "--quant", "fp8", "--tp", "1",
               "--spec-decode", "acceptance=0.7,draft-tokens=4", "--input-tokens", "1000", "--output-tokens", "300",
               "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    rows = {r["candidate"]["spec_decode"] is not None: r for r in doc["ranked"]}
    assert set(rows) == {False, True}, "both the plain and the speculative candidate meet the SLO here"
    line = next(w for w in doc["what_ifs"] if w.startswith("speculative decoding on 1 x L40S TP1 FP8 (vllm)"))
    plain, spec = rows[False], rows[True]
    assert f"{plain['replicas']} -> {spec['replicas']} replicas" in line
    verdict = ("pays" if spec["cost"]["usd_per_hour"] < plain["cost"]["usd_per_hour"] else
               "costs more" if spec["cost"]["usd_per_hour"] > plain["cost"]["usd_per_hour"] else "costs the same")
    assert f": {verdict}:" in line


def test_a_gpu_without_a_price_is_shown_as_meeting_the_slo_and_its_what_if_says_the_cost_is_unknown(tmp_path):
    """The GB200 has no price in the example table. Its candidates that meet the SLO are listed as such
    (the console said "No candidate meets the SLO" before), and its what-if still compares the twins'
    replicas and latencies, saying the cost is unknown (it crashed the whole plan before)."""
    out, html = tmp_path / "plan.json", tmp_path / "plan.html"
    proc = cli("plan", "--model", "llama-3.1-8b", "--rate", "10", "--gpus", "gb200", "--tp", "1",
               "--input-tokens", "512", "--output-tokens", "128", "--out", str(out), "--html", str(html))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["unpriced"] and not doc["ranked"] and doc["winner"] is None
    line = next(w for w in doc["what_ifs"] if w.startswith("FP8 weights on 1 x GB200"))
    assert "cost unknown (no price for gb200)" in line and "replicas" in line and "TTFT p99" in line
    assert f"{len(doc['unpriced'])} meet it on a GPU without a price" in proc.stdout
    assert "No candidate meets the SLO" not in proc.stdout and "--prices FILE" in proc.stdout
    page = html.read_text()
    assert 'Meet the SLO, no price' in page and "1 x GB200 (one Blackwell GPU of a GB200 NVL72) TP1 BF16 (vllm)" in page


def test_the_kernel_predictor_prices_what_it_has_tables_for_and_says_what_it_left_out(tmp_path, kernel_tables):
    out = tmp_path / "plan.json"
    proc = cli("plan", "--model", "llama-3.1-8b", "--rate", "10", "--gpus", "h100-sxm,l4", "--quant", "bf16",
               "--tp", "1", "--predictor", "kernels", "--input-tokens", "1000", "--output-tokens", "300",
               "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    from importlib import resources

    bands = json.loads(resources.files("tokenpace.simulator").joinpath("data/error_band.json").read_text("utf-8"))
    assert bands["kernels"] != bands["roofline"]
    assert doc["predictor"]["name"] == "kernels" and doc["predictor"]["error_band"] == bands["kernels"]
    assert [r["candidate"]["gpu"] for r in doc["ranked"]] == ["h100-sxm"]
    assert all(r["candidate"]["predictor"] == "kernels" for r in doc["ranked"])
    (l4,) = doc["rejected"]
    assert l4["binding"] == "predictor" and "no measured kernel tables" in l4["pruned"]
    assert "no measured tables" in proc.stdout
