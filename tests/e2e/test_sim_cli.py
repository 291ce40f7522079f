"""`tokenpace sim` as a user runs it: result files that summarize reads, the same bytes for the same
seed, the catalogs, one-line errors, and what-ifs a user would check."""

from __future__ import annotations

import json

import pytest

from .helpers import run_cli
from tokenpace import read_records, summarize
from tokenpace.reports.reload import saved_window
from tokenpace.errors import ExitCode

# Every GPU of REFERENCE section 5's hardware table, by its display name.
REFERENCE_GPUS = ("H100 SXM", "H100 PCIe", "H200", "A100 80GB SXM", "A100 40GB SXM", "L40S", "RTX A6000",
                  "L4", "H20", "MI300X")
REFERENCE_MODELS = ("Llama-3.1-8B", "Llama-3.1-70B", "Mistral-7B", "Qwen2.5-7B", "Qwen3-8B", "Mixtral-8x7B")


def sim(tmp_path, *args: str, name: str = "sim.json"):
    proc = run_cli("sim", *args, "--out", name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads((tmp_path / name).read_text())


def test_sim_writes_a_result_that_summarize_reads(tmp_path):
    proc, doc = sim(tmp_path, "--concurrency", "8", "--requests", "200", "--input-tokens", "uniform:min=100,max=2000",
                    "--output-tokens", "64", "--slo", "chat", "--gpu-hour-usd", "3")
    assert "SIMULATION" in proc.stdout and "llama-3.1-8b on h100-sxm" in proc.stdout
    assert "TTFT" in proc.stdout and "Goodput" in proc.stdout and "KV cache" in proc.stdout
    assert doc["schema_version"] == 1 and doc["kind"] == "sim"
    assert doc["target"] == {**doc["target"], "simulated": True, "model": "llama-3.1-8b", "gpu": "h100-sxm",
                             "weights": "bf16", "tp": 1, "policy": "chunked-prefill"}
    assert doc["load_generator"] is None and doc["started_utc"] is None
    assert doc["engine"]["memory"]["kv_capacity_tokens"] > 400_000
    assert doc["summary"]["counts"]["ok"] == 200
    records = read_records(tmp_path / doc["records_path"])
    assert len(records) == 200 and {r.chunk_tokens_source for r in records} == {"simulated"}
    window = saved_window(doc["summary"]["window"], doc["config"])  # the steady-state window, again
    again = json.loads(json.dumps(summarize(records, slo="chat", gpu_hour_usd=3.0, window=window)))
    assert again == doc["summary"]


def test_same_command_same_seed_gives_identical_files(tmp_path):
    args = ("--rate", "20", "--arrival", "gamma", "--burstiness", "0.5", "--duration", "20", "--warmup", "2s",
            "--input-tokens", "lognormal:mean=800,sigma=0.6,max=6000", "--output-tokens", "uniform:min=16,max=300",
            "--prefix-caching", "--shared-prefix-tokens", "512", "--spec-decode", "--acceptance-mode", "sampled",
            "--seed", "11")
    files = {}
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        sim(tmp_path / run, *args)
        files[run] = {p.relative_to(tmp_path / run).as_posix(): p.read_bytes()
                      for p in (tmp_path / run).rglob("*") if p.is_file()}
    assert set(files["a"]) == {"sim.json", "sim.records.jsonl", "sim.timeline.jsonl",
                               "sim.columns/part-000000.npz", "sim.columns/manifest.json"}
    assert files["a"] == files["b"]
    (tmp_path / "c").mkdir()
    sim(tmp_path / "c", *args[:-1], "12")
    assert (tmp_path / "c" / "sim.records.jsonl").read_bytes() != files["a"]["sim.records.jsonl"]


def test_list_prints_every_catalog(tmp_path):
    proc = run_cli("sim", "--list")
    assert proc.returncode == 0, proc.stderr
    for name in (*REFERENCE_GPUS, *REFERENCE_MODELS, "B200", "GB200", "int4", "fp8", "nvfp4", "static",
                 "prefill-first", "decode-first", "chunked-prefill"):
        assert name in proc.stdout, name


@pytest.mark.parametrize("args, needle", [
    (["--gpu", "h1000"], "unknown GPU 'h1000'; known: h100-sxm, h100-pcie, h200,"),
    (["--model", "llama-9"], "unknown model 'llama-9'; known: llama-3.1-8b"),
    (["--quant", "int3"], "unknown precision 'int3'"),
    (["--tp", "0"], "--tp must be >= 1"),
    (["--mfu", "1.5"], "--mfu must lie in (0, 1]"),
    (["--mbu", "5"], "--mbu must lie in (0, 4]"),
    (["--row-remainder", "gemv", "--gemv-row-ms", "-1"], "--gemv-row-ms must be a finite number >= 0"),
    (["--draft-tokens", "4"], "--draft-tokens needs --spec-decode"),
    (["--policy", "fastest"], "invalid choice"),
    (["--requests", "5", "--duration", "5"], "not both"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys, args, needle):
    # In-process (the same main() the command runs) to spare a process start per case.
    from tokenpace.cli.main import main

    monkeypatch.chdir(tmp_path)
    try:
        code = main(["sim", *args])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())  # nothing was written


def test_prefix_caching_lowers_ttft_for_a_shared_prefix(tmp_path):
    load = ("--rate", "4", "--requests", "100", "--shared-prefix-tokens", "2048", "--input-tokens", "128",
            "--output-tokens", "32")
    _, cold = sim(tmp_path, *load, name="cold.json")
    _, warm = sim(tmp_path, *load, "--prefix-caching", name="warm.json")
    ttft = {k: d["summary"]["latency_ms"]["ttft"]["p50"] for k, d in (("cold", cold), ("warm", warm))}
    assert ttft["warm"] < 0.5 * ttft["cold"]
    # Every request after the first hit the cache (the throughput section counts only the part of
    # the run inside its steady-state window: the records say it for all of them).
    cached = [r.cached_prompt_tokens for r in read_records(tmp_path / warm["records_path"])]
    assert sum(cached) == 99 * 2048
    assert warm["engine"]["stats"]["prefix_cache_hit_rate"] > 0.8


def test_issue_example_runs(tmp_path):  # its speed: benchmarks/sim_speed.py
    proc, doc = sim(tmp_path, "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--quant", "fp8", "--tp", "1",
                    "--policy", "chunked-prefill", "--max-num-seqs", "256", "--max-batched-tokens", "8192",
                    "--concurrency", "64", "--requests", "5000", "--input-tokens", "1024", "--output-tokens", "256")
    assert doc["summary"]["counts"]["ok"] == 5000
    assert doc["config"]["engine"]["concurrency"] == 64
    assert "closed loop, concurrency 64" in proc.stdout and "weights fp8" in proc.stdout


def test_conversations_run_turn_by_turn_and_repeat_byte_for_byte(tmp_path):
    args = ("--conversations", "sessions=6,turns=4,think-time=exp:1s", "--rate", "2", "--input-tokens",
            "uniform:min=200,max=800", "--output-tokens", "uniform:min=20,max=120", "--prefix-caching",
            "--seed", "5")
    files = {}
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        proc, doc = sim(tmp_path / run, *args)
        files[run] = {p.relative_to(tmp_path / run).as_posix(): p.read_bytes()
                      for p in (tmp_path / run).rglob("*") if p.is_file()}
    assert files["a"] == files["b"]
    assert doc["summary"]["counts"]["ok"] == 24
    assert set(doc["summary"]["breakdowns"]["ttft_by_turn_ms"]) == {"1", "2", "3", "4"}
    records = read_records(tmp_path / "b" / doc["records_path"])
    assert sorted((r.session, r.turn) for r in records) == [(s, t) for s in range(6) for t in (1, 2, 3, 4)]
    done = {(r.session, r.turn): r.done_ns for r in records}
    for r in records:
        if r.turn > 1:
            assert r.sent_ns >= done[r.session, r.turn - 1]
            assert r.cached_prompt_tokens > 0


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_long_prompts_at_saturation_do_not_thrash(tmp_path, engine):
    # The issue's case, scaled down: 20,000 in / 2,000 out, every request queued at once, FP8 weights.
    proc, doc = sim(tmp_path, "--engine", engine, "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--quant", "fp8",
                    "--concurrency", "60", "--requests", "60", "--input-tokens", "20000",
                    "--output-tokens", "2000")
    assert f"engine {engine}" in proc.stdout and "KV fp8 (implied" in proc.stdout
    assert doc["summary"]["counts"]["ok"] == 60  # no client timeout cut the long run short
    assert doc["engine"]["stats"]["preemptions"] <= 5
    cfg = doc["engine"]["config"]
    assert cfg["engine"]["preset"] == engine and cfg["kv_dtype_implied"] is True
    assert set(cfg["engine"]["set"]) >= {"admission", "max_num_seqs", "max_batched_tokens", "memory_model",
                                         "gpu_memory_utilization", "step_overhead_s"}
    assert doc["engine"]["memory"]["memory_model"] == cfg["memory_model"]


def test_a_blackwell_nvfp4_deployment_runs_with_its_fp8_kv_implied(tmp_path):
    # TensorRT-LLM's published B200 runs: Llama 3.3 70B from NVIDIA's NVFP4 checkpoint at TP1.
    proc, doc = sim(tmp_path, "--engine", "trtllm", "--model", "llama-3.1-70b", "--gpu", "b200", "--quant", "fp4",
                    "--concurrency", "32", "--requests", "64", "--output-tokens", "64")
    assert "llama-3.1-70b on b200" in proc.stdout and "weights nvfp4, KV fp8 (implied" in proc.stdout
    assert doc["summary"]["counts"]["ok"] == 64
    cfg = doc["engine"]["config"]
    assert cfg["gpu"]["fp4_tflops"] == 9000 and cfg["weights"]["compute"] == "fp4"


def test_a_simulated_run_quotes_its_predictors_validated_error(tmp_path):
    """The result, the console and the HTML report say how far this predictor has been off on
    published measurements: the shipped file's entry (benchmarks/sim_fidelity.py --write-band)."""
    from html.parser import HTMLParser

    from tokenpace.simulator.error_band import error_bands

    proc, doc = sim(tmp_path, "--concurrency", "4", "--requests", "40")
    band = error_bands()["roofline"]
    assert doc["engine"]["validated_error"] == band
    m = band["median_abs_error"]
    said = (f"Predicted by the roofline; median |error| throughput {m['throughput']:.1%}, TTFT {m['ttft']:.1%}, "
            f"TPOT/ITL {m['tpot']:.1%}")
    assert said in " ".join(proc.stdout.split())

    report = run_cli("report", "sim.json", "--html", "sim.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr

    class Note(HTMLParser):
        inside, text = False, ""

        def handle_starttag(self, tag, attrs):
            self.inside = self.inside or ("id", "validated-error") in attrs

        def handle_endtag(self, tag):
            self.inside = self.inside and tag != "div"

        def handle_data(self, data):
            if self.inside:
                self.text += data

    note = Note()
    note.feed((tmp_path / "sim.html").read_text())
    assert f"throughput {m['throughput']:.1%}" in note.text and band["worst"] in note.text, note.text
