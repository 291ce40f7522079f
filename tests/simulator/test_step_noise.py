"""Step-time noise: each step's time times a seeded lognormal factor of mean 1, the same factor for
a step whether it is jumped or stepped; runs with other seeds move; a calibration reports a noisy
engine's spread."""

from __future__ import annotations

import dataclasses
import math
import statistics

import numpy as np
import pytest

from tokenpace.cli.main import main
from tokenpace.config import BenchConfig
from tokenpace.runner.simulate import SimRunConfig, run_sim
from tokenpace.simulator import SimConfig, SimRequest, simulate
from tokenpace.simulator.args import engine_argv
from tokenpace.simulator.calibrate import calibrate
from tokenpace.simulator.step_noise import StepNoise

from test_calibrate import ENGINE, VARIED


def test_a_steps_factor_does_not_depend_on_how_the_steps_were_asked_for():
    whole = StepNoise(0.2, seed=5).factors(0, 10_000)
    pieces = StepNoise(0.2, seed=5)
    got = np.concatenate([pieces.factors(start, k) for start, k in
                          ((0, 1), (1, 4095), (4096, 7), (4103, 3000), (7103, 2897))])
    assert np.array_equal(whole, got)
    assert pieces.factor(4100) == whole[4100]
    assert not np.array_equal(whole, StepNoise(0.2, seed=6).factors(0, 10_000))


def _one_client(noise: float, seed: int = 0):
    """One closed-loop client, requests of one shape: the noisy run's steps are the plain run's, step for step."""
    cfg = SimConfig(concurrency=1, step_noise=noise, noise_seed=seed, jump_decode_steps=True)
    return simulate(cfg, [SimRequest(512, 64) for _ in range(60)])


def test_each_step_is_the_plain_step_times_its_factor_and_the_mean_is_kept():
    plain, noisy = _one_client(0.0), _one_client(0.1, seed=2)
    gaps = lambda r: np.diff([r.sent_ns, *r.chunk_ns])  # noqa: E731 - a step per chunk at concurrency 1
    ratio = np.concatenate([gaps(n) / gaps(p) for p, n in zip(plain.records, noisy.records)])
    assert len(ratio) == 60 * 64
    sd = float(np.std(np.log(ratio)))
    assert 0.09 < sd < 0.11  # the spread asked for
    assert 0.98 < noisy.stats["sim_end_ns"] / plain.stats["sim_end_ns"] < 1.02  # the mean kept over 3,840 steps


NOISY_CASES = {
    "closed-c64": (SimConfig(concurrency=64, step_noise=0.08, noise_seed=1), [SimRequest(1024, 256)] * 300),
    "closed-c512-preempting": (SimConfig(concurrency=512, max_num_seqs=512, num_gpu_blocks=4000, step_noise=0.2,
                                         noise_seed=4), [SimRequest(700, 200)] * 900),
    "timeouts": (SimConfig(concurrency=32, timeout_s=1.0, num_gpu_blocks=1500, step_noise=0.1),
                 [SimRequest(300 + 37 * (i % 11), 40 + 13 * (i % 7)) for i in range(200)]),
}


@pytest.mark.parametrize("name", NOISY_CASES)
def test_jumping_gives_the_records_of_stepping_under_noise(name):
    cfg, reqs = NOISY_CASES[name]
    fast = simulate(cfg, reqs)
    slow = simulate(dataclasses.replace(cfg, jump_decode_steps=False), reqs)
    assert fast.stats["events"] < slow.stats["events"]
    assert [r.to_dict() for r in fast.records] == [r.to_dict() for r in slow.records]
    assert fast.stats["sim_end_ns"] == slow.stats["sim_end_ns"]
    if name.endswith("preempting"):
        assert fast.stats["preemptions"] > 0
    if name == "timeouts":
        assert any(r.status != "ok" for r in fast.records)
    plain = simulate(dataclasses.replace(cfg, step_noise=0.0), reqs)
    assert plain.stats["sim_end_ns"] != fast.stats["sim_end_ns"]


def test_members_move_and_each_seed_repeats_itself():
    reqs = [SimRequest(200 + 61 * (i % 13), 30 + 7 * (i % 5)) for i in range(160)]

    def ttft_p50(seed):
        result = simulate(SimConfig(concurrency=8, step_noise=0.1, noise_seed=seed), reqs)
        return statistics.median((r.first_token_ns - r.sent_ns) for r in result.records)

    members = [ttft_p50(seed) for seed in range(4)]
    assert len(set(members)) == 4
    assert ttft_p50(2) == members[2]
    cfg = SimConfig(step_noise=0.1, noise_seed=3)
    assert cfg.to_dict()["step_noise"] == 0.1 and cfg.to_dict()["noise_seed"] == 3
    assert "step_noise" not in SimConfig().to_dict()  # a run without noise writes what it wrote before
    assert engine_argv(cfg)[-4:] == ["--step-noise", "0.1", "--noise-seed", "3"]


def test_a_calibration_reports_the_spread_of_a_noisy_engines_steps(tmp_path):
    def noisy_run(noise):
        engine = dataclasses.replace(ENGINE, step_noise=noise, noise_seed=7)
        load = BenchConfig(concurrency=4, requests=48, **VARIED, seed=3, out=str(tmp_path / f"n{noise}.json"),
                           progress=False)
        return run_sim(SimRunConfig(load=load, engine=engine)).records

    def reported(noise):
        cal = calibrate(noisy_run(noise), model=ENGINE.model, hardware=ENGINE.gpu, weights=ENGINE.weights,
                        max_num_seqs=16, max_batched_tokens=2048)
        return cal.fit["step_noise"]

    quiet, noisy = reported(0.0), reported(0.06)
    assert quiet["sd"] < 0.01  # the model is the truth: nothing left to spread
    assert 0.045 < noisy["sd"] < 0.075, noisy
    assert set(noisy["by_kind"]) <= {"prefill", "mixed", "decode"} and "decode" in noisy["by_kind"]


@pytest.mark.parametrize("flag,value,message", [
    ("--step-noise", "1.5", "--step-noise must lie in [0, 1), not 1.5"),
    ("--step-noise", "nan", "--step-noise must lie in [0, 1), not nan"),
    ("--noise-seed", "-1", "--noise-seed must be >= 0, not -1"),
])
def test_bad_noise_flags_are_one_line_errors(tmp_path, capsys, flag, value, message):
    code = main(["sim", flag, value, "--requests", "4", "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_sim_command_takes_the_noise_and_records_it(tmp_path):
    import json

    out = tmp_path / "r.json"
    code = main(["sim", "--step-noise", "0.05", "--noise-seed", "9", "--concurrency", "4", "--requests", "20",
                 "--input-tokens", "256", "--output-tokens", "32", "--out", str(out)])
    assert code == 0
    doc = json.loads(out.read_text())
    found = json.dumps(doc)
    assert '"step_noise": 0.05' in found and '"noise_seed": 9' in found
    assert math.isfinite(doc["summary"]["latency_ms"]["ttft"]["p50"])


def test_members_report_each_figures_spread_and_write_the_first_members_run(tmp_path):
    import json

    load = ["--concurrency", "8", "--requests", "120", "--input-tokens", "uniform:min=200,max=900",
            "--output-tokens", "uniform:min=20,max=60", "--seed", "4", "--step-noise", "0.1", "--noise-seed", "3"]
    assert main(["sim", *load, "--members", "4", "--out", str(tmp_path / "m.json")]) == 0
    assert main(["sim", *load, "--out", str(tmp_path / "one.json")]) == 0
    doc, one = (json.loads((tmp_path / name).read_text()) for name in ("m.json", "one.json"))
    members = doc["engine"]["members"]
    assert members["members"] == 4 and members["noise_seeds"] == [3, 4, 5, 6]
    ttft = members["figures"]["ttft_p50_ms"]
    assert ttft["values"][0] == one["summary"]["latency_ms"]["ttft"]["p50"] == doc["summary"]["latency_ms"]["ttft"]["p50"]
    assert len(set(ttft["values"])) > 1 and ttft["min"] <= ttft["median"] <= ttft["max"]
    assert ttft["spread_pct"] > 0 and members["figures"]["output_tokens_s"]["spread_pct"] < ttft["spread_pct"]
    # The next member is the run with the next noise seed.
    assert main(["sim", *load[:-1], "4", "--out", str(tmp_path / "next.json")]) == 0
    nxt = json.loads((tmp_path / "next.json").read_text())
    assert ttft["values"][1] == nxt["summary"]["latency_ms"]["ttft"]["p50"]
    assert (tmp_path / "m.records.jsonl").read_bytes() == (tmp_path / "one.records.jsonl").read_bytes()



def test_report_shows_the_members_table_again(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["sim", "--concurrency", "4", "--requests", "40", "--step-noise", "0.1", "--members", "3",
                 "--out", str(out)]) == 0
    assert "Run to run: 3 members" in capsys.readouterr().out
    assert main(["report", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "Run to run: 3 members, step noise 0.1" in shown and "TTFT p50 (ms)" in shown


@pytest.mark.parametrize("args,message", [
    (["--members", "3"], "--members needs --step-noise"),
    (["--members", "0", "--step-noise", "0.1"], "--members must lie in [1, 1000], not 0"),
])
def test_bad_members_are_one_line_errors(tmp_path, capsys, args, message):
    code = main(["sim", *args, "--requests", "4", "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
