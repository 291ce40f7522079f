"""`tokenpace calibrate` as a user runs it: a run in, a calibration file out that `tokenpace sim
--calibration` predicts with; a real streamed run over HTTP; one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .helpers import run_cli
from tokenpace.errors import ExitCode
from tokenpace.servers import BuiltinServerConfig, start_server_process
from tokenpace.simulator import RooflineParams, SimConfig

REPO = Path(__file__).resolve().parents[2]
CPU = str(REPO / "examples" / "hardware" / "cpu-2core-x86.json")
# Gemma 3 270M's shape, as its Hugging Face config.json states it.
GEMMA_270M = {"architectures": ["Gemma3ForCausalLM"], "hidden_size": 640, "num_hidden_layers": 18,
              "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "intermediate_size": 2048,
              "vocab_size": 262144, "tie_word_embeddings": True}
LOAD = ("--requests", "40", "--input-tokens", "uniform:min=64,max=256", "--output-tokens",
        "uniform:min=16,max=48", "--seed", "2")


# A bound against a hang, not a timing check: a calibration fits every step structure twice, one
# test here took 78 s on a 2-core machine at load 2.5, and 120 s was passed at load 7-9.
CLI_TIMEOUT_S = 600


def cli_ok(tmp_path, *args):
    proc = run_cli(*args, cwd=tmp_path, timeout_s=CLI_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    return proc


def summary(tmp_path, name):
    return json.loads((tmp_path / name).read_text())["summary"]["latency_ms"]


def test_calibrate_on_a_cpu_then_sim_predicts_with_the_fitted_engine(tmp_path):
    (tmp_path / "gemma").mkdir()
    (tmp_path / "gemma" / "config.json").write_text(json.dumps(GEMMA_270M))
    engine = ("--model", "gemma/config.json", "--gpu", CPU, "--quant", "int8", "--max-num-seqs", "8",
              "--max-batched-tokens", "2048")
    cli_ok(tmp_path, "sim", *engine, "--mfu", "0.2", "--mbu", "0.5", "--step-overhead-ms", "2",
           "--concurrency", "4", *LOAD, "--out", "measured.json")
    proc = cli_ok(tmp_path, "calibrate", "measured.json", "--model-config", "gemma/config.json",
                  "--hardware", CPU, "--quant", "int8", "--max-num-seqs", "8", "--max-batched-tokens", "2048",
                  "--out", "cal.json")
    assert "MFU" in proc.stdout and "tokenpace sim --calibration cal.json" in proc.stdout
    cal = json.loads((tmp_path / "cal.json").read_text())
    noise = cal["fit"]["step_noise"]["sd"]  # a noiseless simulated engine: nothing left to spread
    assert noise < 0.01 and f"tokenpace sim --step-noise {noise:g}" in " ".join(proc.stdout.split())
    assert cal["kind"] == "calibration" and cal["engine"]["hardware"]["id"] == "cpu-2core-x86"
    assert cal["roofline"]["mfu"] == pytest.approx(0.2, rel=0.03)
    assert cal["source"]["runs"][0]["load"]["concurrency"] == 4

    # The calibration alone (no model, hardware or engine flags) reproduces another load.
    cli_ok(tmp_path, "sim", *engine, "--mfu", "0.2", "--mbu", "0.5", "--step-overhead-ms", "2",
           "--concurrency", "8", *LOAD, "--out", "truth8.json")
    proc = cli_ok(tmp_path, "sim", "--calibration", "cal.json", "--concurrency", "8", *LOAD, "--out", "pred8.json")
    doc = json.loads((tmp_path / "pred8.json").read_text())
    # Fitted at concurrency 4, it never saw the batches of 8 it predicts now, and says so.
    seen = cal["fit"]["observations"]["decode_batch_sizes"]
    assert max(seen) == 4
    coverage = doc["engine"]["calibration"]
    assert coverage["decode_batch_sizes"] == seen and coverage["fitted_on"] == [{"concurrency": 4, "rate": None}]
    assert max(coverage["simulated_decode_batch_sizes"]) == 8 and coverage["share_outside"] > 0.5
    assert coverage["extrapolates"] and "extrapolated" in " ".join(proc.stdout.split())
    # Its validated error is a calibration's (fitted to the user's runs), not the published points' roofline.
    from tokenpace.simulator.error_band import error_bands

    assert doc["engine"]["validated_error"] == error_bands()["calibration"]
    assert "Predicted by the calibrated roofline" in " ".join(proc.stdout.split())
    cli_ok(tmp_path, "sim", "--calibration", "cal.json", "--concurrency", "4", *LOAD, "--out", "pred4.json")
    within = json.loads((tmp_path / "pred4.json").read_text())["engine"]["calibration"]
    assert not within["extrapolates"] and within["share_outside"] < 0.1
    assert doc["target"]["gpu"] == "cpu-2core-x86" and doc["engine"]["config"]["max_num_seqs"] == 8
    assert doc["engine"]["config"]["roofline"]["mfu"] == cal["roofline"]["mfu"]
    truth, pred = summary(tmp_path, "truth8.json"), summary(tmp_path, "pred8.json")
    for metric in ("ttft", "tpot"):
        assert pred[metric]["p50"] == pytest.approx(truth[metric]["p50"], rel=0.02), metric

    # A simulated sweep takes the calibration as sim does: its concurrency-8 step is that prediction.
    cli_ok(tmp_path, "sweep", "--sim", "--calibration", "cal.json", "--concurrency", "2,8",
           *[a.replace("--requests", "--requests-per-step") for a in LOAD], "--out", "sweep.json")
    steps = json.loads((tmp_path / "sweep.json").read_text())["steps"]
    step8 = steps[1]["summary"]["latency_ms"]
    assert step8["tpot"]["p50"] == pytest.approx(pred["tpot"]["p50"], rel=1e-9)
    assert steps[1]["calibration"]["extrapolates"] and not steps[0]["calibration"]["extrapolates"]
    assert run_cli("sweep", "--calibration", "cal.json", cwd=tmp_path).returncode == 2  # needs --sim

    # A sweep file calibrates from its steps' results, jointly, and says what it saw.
    proc = cli_ok(tmp_path, "calibrate", "sweep.json", "--model-config", "gemma/config.json", "--hardware", CPU,
                  "--quant", "int8", "--max-num-seqs", "8", "--max-batched-tokens", "2048", "--out", "joint.json")
    joint = json.loads((tmp_path / "joint.json").read_text())
    obs = joint["fit"]["observations"]
    assert obs["runs"] == 2 and max(obs["decode_batch_sizes"]) == 8 and obs["decode_context_tokens"][1] > 64
    assert [r["load"]["concurrency"] for r in joint["source"]["runs"]] == [2, 8]
    assert joint["roofline"]["mfu"] == pytest.approx(cal["roofline"]["mfu"], rel=0.05)
    assert "seen: decode batches" in proc.stdout and "from 2 run(s)" in proc.stdout

    # A flag given explicitly wins over the calibration.
    cli_ok(tmp_path, "sim", "--calibration", "cal.json", "--mbu", "0.1", "--concurrency", "8", *LOAD,
           "--out", "slow.json")
    assert summary(tmp_path, "slow.json")["tpot"]["p50"] > 2 * pred["tpot"]["p50"]


def test_calibrate_from_a_streamed_run_over_http(tmp_path):
    # The built-in server stepping the simulator in wall-clock time, with known parameters: the
    # client's timestamps (loopback, a busy 2-CPU machine) are all calibration sees. Llama-3.1-8B
    # in INT4 on an L4: decode steps ~25 ms, so client jitter of a millisecond stays small.
    truth = RooflineParams(mfu=0.35, mbu=0.7, step_overhead_s=0.003)
    engine = SimConfig(model="llama-3.1-8b", gpu="l4", weights="int4", roofline=truth, max_batched_tokens=2048)
    server = start_server_process(BuiltinServerConfig(model="llama-3.1-8b", max_num_seqs=16, sim=engine))
    try:
        bench = run_cli("bench", "--url", server.url, "--concurrency", "4", "--requests", "24",
                        "--input-tokens", "uniform:min=64,max=512", "--output-tokens", "uniform:min=8,max=32",
                        "--seed", "4", "--out", "run.json", "--quiet", cwd=tmp_path)
    finally:
        server.stop()
    assert bench.returncode in (ExitCode.OK, ExitCode.INVALID_RUN), bench.stderr
    cli_ok(tmp_path, "calibrate", "run.json", "--model-config", "llama-3.1-8b", "--hardware", "l4",
           "--quant", "int4", "--max-num-seqs", "16", "--max-batched-tokens", "2048", "--out", "cal.json")
    cal = json.loads((tmp_path / "cal.json").read_text())
    got, fit = cal["roofline"], cal["fit"]
    assert fit["observations"]["steps"] > 100 and fit["observations"]["mixed_steps"] > 10
    # Prefills pin MFU. Decode steps here are all bandwidth-bound, so MBU and the overheads trade off
    # along them (the ranges say so); real time adds what the simulation has not (the server's sleep
    # overshoot and the HTTP path: a millisecond or two per step), which the fit books as overhead.
    assert got["mfu"] == pytest.approx(truth.mfu, rel=0.15)
    assert fit["ranges"]["mbu"][0] <= truth.mbu <= fit["ranges"]["mbu"][1]
    # What is determined is their sum along those steps: a decode step of 4 sequences, priced with the
    # fitted parameters, costs what the true ones say (the HTTP path adds, never removes).
    from tokenpace.simulator import RooflinePredictor, get_gpu, get_model, get_precision
    from tokenpace.simulator.step import StepBatch

    parts = (get_model("llama-3.1-8b"), get_gpu("l4"), get_precision("int4"), get_precision("bf16"))
    fitted = RooflineParams(mfu=got["mfu"], mbu=got["mbu"], step_overhead_s=got["step_overhead_s"],
                            seq_overhead_s=got["seq_overhead_s"])
    decode4 = StepBatch(prefill=(), decode_context=(300, 300, 300, 300))
    true_s = RooflinePredictor(*parts, params=truth).step_s(decode4)
    assert 0.97 * true_s <= RooflinePredictor(*parts, params=fitted).step_s(decode4) <= 1.15 * true_s
    for row in fit["decode_step_by_batch"]:  # medians; the fit matches means, and the machine is shared
        if row["steps"] >= 10:
            assert abs(row["error_pct"]) < 10, row
    # The calibrated simulator's steps are the true parameters' steps: TPOT at this load and another.
    load = ("--requests", "24", "--input-tokens", "uniform:min=64,max=512", "--output-tokens",
            "uniform:min=8,max=32", "--seed", "4")
    for c in ("4", "12"):
        cli_ok(tmp_path, "sim", "--calibration", "cal.json", "--concurrency", c, *load, "--out", f"pred{c}.json")
        cli_ok(tmp_path, "sim", "--model", "llama-3.1-8b", "--gpu", "l4", "--quant", "int4", "--mfu", "0.35",
               "--mbu", "0.7", "--step-overhead-ms", "3", "--max-num-seqs", "16", "--max-batched-tokens", "2048",
               "--concurrency", c, *load, "--out", f"truth{c}.json")
        truth_tpot = summary(tmp_path, f"truth{c}.json")["tpot"]["p50"]
        assert summary(tmp_path, f"pred{c}.json")["tpot"]["p50"] == pytest.approx(truth_tpot, rel=0.08), c
    # TTFT measured holds what the true parameters' simulation does not: the HTTP path, and next
    # requests sent a moment after a step began, which then wait for the next step. Calibration
    # measured the clients' turnaround and copies it when the next requests mostly waited.
    turnaround = fit["client_turnaround"]
    assert 0 < turnaround["median_ms"] < 20
    measured, predicted = summary(tmp_path, "run.json"), summary(tmp_path, "pred4.json")
    assert predicted["ttft"]["p50"] == pytest.approx(measured["ttft"]["p50"], rel=0.25)
    assert predicted["tpot"]["p50"] == pytest.approx(measured["tpot"]["p50"], rel=0.10)


def _run_doc(tmp_path) -> str:
    cli_ok(tmp_path, "sim", "--concurrency", "2", "--requests", "4", "--output-tokens", "8", "--out", "ok.json")
    return "ok.json"


@pytest.mark.parametrize("case", ["missing run", "run not json", "not a run", "unknown hardware",
                                  "bad hardware file", "bad gguf", "sim: missing calibration",
                                  "sim: not a calibration"])
def test_bad_input_is_one_line_with_exit_code_2(tmp_path, case):
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "hw.json").write_text(json.dumps({"id": "x", "memory_gb": 8}))  # no peak, no bandwidth
    (tmp_path / "model.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    cal = ("calibrate", "--model-config", "llama-3.1-8b", "--hardware", "h100-sxm")
    args = {
        "missing run": (*cal, "nope.json"),
        "run not json": (*cal, "broken.json"),
        "not a run": None,  # filled below: a calibration file given as the run
        "unknown hardware": ("calibrate", "RUN", "--model-config", "llama-3.1-8b", "--hardware", "tpu-v9"),
        "bad hardware file": ("calibrate", "RUN", "--model-config", "llama-3.1-8b", "--hardware", "hw.json"),
        "bad gguf": ("calibrate", "RUN", "--model-config", "model.gguf", "--hardware", "h100-sxm"),
        "sim: missing calibration": ("sim", "--calibration", "nope.json"),
        "sim: not a calibration": ("sim", "--calibration", "RUN"),
    }[case]
    if case == "not a run":
        run = _run_doc(tmp_path)
        cli_ok(tmp_path, *cal, run, "--out", "cal.json")
        args = (*cal, "cal.json")
    elif "RUN" in args:
        run = _run_doc(tmp_path)
        args = tuple(run if a == "RUN" else a for a in args)
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokenpace: error:"), proc.stderr


def test_serve_sim_takes_the_calibration(tmp_path):
    """`tokenpace serve --sim --calibration`: the built-in server runs the calibrated engine (its
    model, hardware, limits) in real time, and bench against it measures what `sim --calibration`
    predicts for the same load."""
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    (tmp_path / "gemma").mkdir()
    (tmp_path / "gemma" / "config.json").write_text(json.dumps(GEMMA_270M))
    load = ("--concurrency", "2", "--requests", "8", "--input-tokens", "64", "--output-tokens", "16", "--seed", "3")
    cli_ok(tmp_path, "sim", "--model", "gemma/config.json", "--gpu", CPU, "--quant", "int8", "--max-num-seqs", "4",
           "--mfu", "0.2", "--mbu", "0.5", "--step-overhead-ms", "2", *load, "--out", "measured.json")
    cli_ok(tmp_path, "calibrate", "measured.json", "--model-config", "gemma/config.json", "--hardware", CPU,
           "--quant", "int8", "--max-num-seqs", "4", "--out", "cal.json")
    cli_ok(tmp_path, "sim", "--calibration", "cal.json", *load, "--out", "pred.json")
    predicted = json.loads((tmp_path / "pred.json").read_text())["summary"]["latency_ms"]

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "tokenpace", "serve", "--sim", "--calibration", "cal.json",
                               "--port", str(port)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=dict(os.environ, COLUMNS="200"))
    try:
        announce = server.stdout.readline()
        assert "engine simulator: gemma on cpu-2core-x86 (calibration cal.json)" in announce, (announce, server.poll())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.1)
        bench = run_cli("bench", "--url", f"http://127.0.0.1:{port}/v1", *load, "--out", "bench.json",
                        "--quiet", cwd=tmp_path)
        assert bench.returncode in (ExitCode.OK, ExitCode.INVALID_RUN), bench.stderr
    finally:
        server.terminate()
        server.wait(timeout=10)
    measured = json.loads((tmp_path / "bench.json").read_text())["summary"]
    assert measured["counts"]["ok"] == 8
    # Real time on a shared machine, and the HTTP path the simulation leaves out: within 20%.
    assert measured["latency_ms"]["tpot"]["p50"] == pytest.approx(predicted["tpot"]["p50"], rel=0.2)

    # Without --sim it is refused, in one line.
    refused = run_cli("serve", "--calibration", "cal.json", "--port", "0", cwd=tmp_path)
    assert refused.returncode == ExitCode.USAGE and "needs --sim" in refused.stderr
