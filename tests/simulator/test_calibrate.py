"""Calibration recovers the step-time parameters a run was made with, says honestly which ones the
run did not determine, and its predictions of other loads match runs made with the true ones."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from tokenpace.config import BenchConfig
from tokenpace.errors import UsageError
from tokenpace.runner.simulate import SimRunConfig, run_sim
from tokenpace.simulator import RooflineParams, SimConfig
from tokenpace.simulator.calibrate import calibrate, load_calibration, observe_steps, write_calibration
from tokenpace.simulator.calibrate.priors import sequence_prior_s
from tokenpace.simulator.catalog import get_gpu, get_model

from sim_helpers import assert_predicts

TRUTH = RooflineParams(mfu=0.35, mbu=0.7, step_overhead_s=0.003, seq_overhead_s=0.002)
# Llama-3.1-8B in INT4 on an L4: decode steps of ~25 ms, prefills compute-bound: both bounds matter.
ENGINE = SimConfig(model="llama-3.1-8b", gpu="l4", weights="int4", roofline=TRUTH, max_num_seqs=16,
                   max_batched_tokens=2048)
VARIED = dict(input_tokens="uniform:min=64,max=512", output_tokens="uniform:min=8,max=48")


def run(tmp_path, concurrency: int, engine: SimConfig = ENGINE, requests: int = 48, **workload):
    load = BenchConfig(concurrency=concurrency, requests=requests, **(workload or VARIED), seed=3,
                       out=str(tmp_path / f"c{concurrency}-{engine.roofline.mfu:.4f}.json"), progress=False)
    return run_sim(SimRunConfig(load=load, engine=engine))


def fit(records, **kw):
    return calibrate(records, model=ENGINE.model, hardware=ENGINE.gpu, weights=ENGINE.weights,
                     max_num_seqs=16, max_batched_tokens=2048, **kw)


def test_recovers_the_parameters_a_run_was_made_with(tmp_path):
    cal = fit(run(tmp_path, 4).records)
    got = cal.roofline
    assert got.mfu == pytest.approx(TRUTH.mfu, rel=0.03)
    assert got.mbu == pytest.approx(TRUTH.mbu, rel=0.03)
    assert got.step_overhead_s == pytest.approx(TRUTH.step_overhead_s, abs=0.0005)
    assert got.seq_overhead_s == pytest.approx(TRUTH.seq_overhead_s, abs=0.0005)
    for name in ("mfu", "mbu", "step_overhead_s", "seq_overhead_s"):  # the truth lies in each reported range
        lo, hi = cal.fit["ranges"][name]
        assert lo <= getattr(TRUTH, name) <= hi, name
    assert cal.fit["rms_relative_error"] < 0.005
    obs = cal.fit["observations"]
    assert obs["records"] == 48 and obs["mixed_steps"] > 10 and len(obs["decode_batch_sizes"]) >= 3
    assert set(obs["steps_from_send_to_first_token"]) == {"1"}  # one step from a send to its first token


@pytest.mark.parametrize("concurrency", [1, 12])
def test_calibrated_sim_predicts_other_loads(tmp_path, concurrency):
    cal = fit(run(tmp_path, 4).records)
    truth = run(tmp_path, concurrency)
    predicted = run(tmp_path, concurrency, dataclasses.replace(ENGINE, roofline=cal.roofline))
    assert_predicts(predicted, truth, rel=0.02)


def test_a_parameter_the_run_does_not_exercise_is_reported_as_undetermined(tmp_path):
    # One request at a time with the same prompt: one prefill length and one decode batch size.
    # Prefill pins MFU; MBU and the overhead trade off against each other along decode steps; with
    # one sequence in every step, the per-step and per-sequence overheads are one number.
    cal = fit(run(tmp_path, 1, input_tokens="256", output_tokens="32").records)
    mfu_lo, mfu_hi = cal.fit["ranges"]["mfu"]
    mbu_lo, mbu_hi = cal.fit["ranges"]["mbu"]
    assert mfu_hi / mfu_lo < 1.2
    assert mbu_hi / mbu_lo > 1.5
    # Not determined: held at its prior (sampling over the vocabulary at the hardware's bandwidth), and said so.
    prior = sequence_prior_s(get_model(ENGINE.model), get_gpu(ENGINE.gpu))
    assert cal.fit["ranges"]["seq_overhead_s"][1] is None and cal.roofline.seq_overhead_s == prior
    assert "assumed its prior" in cal.fit["undetermined"]["seq_overhead_s"]
    assert cal.fit["observations"]["decode_batch_sizes"] == [1]


def test_client_jitter_and_late_reads_are_tolerated(tmp_path):
    # Records as a client on a busy machine stamps them: each chunk up to 0.5 ms late; now and then
    # a stream read late enough that two steps' chunks arrive together (those steps are skipped).
    records = run(tmp_path, 4).records
    rng = random.Random(1)
    for r in records:
        r.chunk_ns = [t + rng.randrange(500_000) for t in r.chunk_ns]
        for j in range(2, len(r.chunk_ns), 37):
            r.chunk_ns[j - 1] = r.chunk_ns[j]
        r.first_token_ns = r.chunk_ns[0]
    observed = observe_steps(records, max_batched_tokens=2048, max_num_seqs=16)
    assert observed.skipped.get("two chunks of one request", 0) > 0
    got = fit(records).roofline
    assert got.mfu == pytest.approx(TRUTH.mfu, rel=0.05)
    assert got.mbu == pytest.approx(TRUTH.mbu, rel=0.10)
    assert got.step_overhead_s + got.seq_overhead_s == pytest.approx(
        TRUTH.step_overhead_s + TRUTH.seq_overhead_s, abs=0.001)


def test_prompts_split_by_the_token_budget_are_not_taken_for_whole_ones(tmp_path):
    # 16 prompts of up to 512 tokens arrive at once against a budget of 2,048 tokens per step: the
    # first steps compute parts of prompts whose first token comes later. Were they taken for whole
    # prompts, the fit would be off; they are skipped.
    records = run(tmp_path, 16, requests=32).records
    observed = observe_steps(records, max_batched_tokens=2048, max_num_seqs=16)
    assert sum(observed.skipped.values()) > 0
    got = fit(records).roofline
    assert got.mfu == pytest.approx(TRUTH.mfu, rel=0.03)


def test_calibration_file_round_trips_and_bad_files_are_one_line_errors(tmp_path):
    cal = fit(run(tmp_path, 4).records, source={"runs": [{"path": "run.json"}]})
    path = write_calibration(cal, tmp_path / "cal.json")
    again = load_calibration(path)
    assert again.roofline == cal.roofline and again.model == cal.model and again.hardware == cal.hardware
    assert again.max_num_seqs == 16 and again.source == {"runs": [{"path": "run.json"}]}
    doc = json.loads(path.read_text())
    assert doc["kind"] == "calibration" and doc["schema_version"] == 15
    # A version 4 file has no decode MFU: its decode rows keep MFU's efficiency, as they did.
    old = {k: v for k, v in doc["roofline"].items() if k != "decode_mfu"}
    (tmp_path / "v4.json").write_text(json.dumps({**doc, "schema_version": 4, "roofline": old}))
    assert load_calibration(tmp_path / "v4.json").roofline.decode_mfu is None
    cases = {"missing.json": None, "notjson.json": "{", "run.json": json.dumps({"kind": "bench", "schema_version": 1}),
             "future.json": json.dumps({**doc, "schema_version": 99}),
             "broken.json": json.dumps({**doc, "roofline": {"mfu": -1, "mbu": 0.5, "step_overhead_s": 0}}),
             "decode.json": json.dumps({**doc, "roofline": {**doc["roofline"], "decode_mfu": -0.5}})}
    for name, text in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        with pytest.raises(UsageError) as err:
            load_calibration(tmp_path / name)
        assert "\n" not in str(err.value) and name in str(err.value)


def test_a_run_without_streamed_tokens_cannot_be_calibrated(tmp_path):
    records = run(tmp_path, 2, requests=8).records
    for r in records:
        r.stream = False
    with pytest.raises(UsageError, match="streaming run"):
        fit(records)


@pytest.mark.parametrize("turnaround_s", [0.0, 0.002])
def test_a_closed_loop_clients_turnaround_is_measured_and_copied_where_it_matters(tmp_path, turnaround_s):
    # A client that sends its next request 2 ms after the previous ended misses the step the engine
    # began then; one that reacts at once joins it. Calibration tells them apart from the records.
    records = run(tmp_path, 4, dataclasses.replace(ENGINE, turnaround_s=turnaround_s)).records
    cal = fit(records, closed_loop_concurrency=4)
    t = cal.fit["client_turnaround"]
    assert t["median_ms"] == pytest.approx(turnaround_s * 1e3, abs=1e-6)
    if turnaround_s:
        assert t["next_requests_waited_a_step"] > t["next_requests_joined_the_step_begun"]
    assert cal.turnaround_s == pytest.approx(turnaround_s, abs=1e-9)


def _row(decode_seqs: int, steps: int, prefill_tokens: int = 0):
    from tokenpace.simulator.timeline import TimelineRow

    return TimelineRow(t_ns=0, steps=steps, step_ms=1.0, span_ms=float(steps), waiting=0, running=decode_seqs,
                       kv_usage=0.0, prefix_cache_hit_rate=0.0, batch_tokens=decode_seqs + prefill_tokens,
                       decode_seqs=decode_seqs, prefill_tokens=prefill_tokens, preempted=0, preemptions=0)


def test_coverage_counts_decode_steps_outside_the_calibrated_span():
    from tokenpace.simulator.calibrate.coverage import coverage

    scope = {"path": "cal.json", "decode_batch_sizes": [2, 4], "fitted_on": [{"concurrency": 4, "rate": None}]}
    # Batch 3 lies between the sizes seen: interpolated, not outside. Prefill-only rows do not count.
    inside = coverage(scope, [_row(2, 10), _row(3, 5), _row(4, 30), _row(0, 3, prefill_tokens=100)])
    assert inside["decode_steps"] == 45 and inside["decode_steps_outside"] == 0 and not inside["extrapolates"]
    # 1 in 46 outside: stated, under the 10% that makes it an extrapolation.
    few = coverage(scope, [_row(1, 1), _row(4, 45)])
    assert few["decode_steps_outside"] == 1 and not few["extrapolates"] and "2% of" in few["note"]
    many = coverage(scope, [_row(1, 20), _row(4, 20), _row(6, 10)])
    assert many["share_outside"] == pytest.approx(0.6) and many["extrapolates"]
    assert "(1, 6)" in many["note"] and "outside the 2–4" in many["note"]
    unknown = coverage({**scope, "decode_batch_sizes": []}, [_row(4, 5)])
    assert not unknown["extrapolates"] and "no decode step" in unknown["note"]


def test_prompts_queued_behind_a_full_engine_are_observed(tmp_path):
    # 8 clients and room for 4 sequences: each next prompt waits in the queue until a slot frees,
    # then runs beside 3 decodes. With no free slot it could not have begun earlier, so its step is
    # used (an engine's limit unknown, it is skipped: part of the prompt might have run before).
    engine = dataclasses.replace(ENGINE, max_num_seqs=4)
    records = run(tmp_path, 8, engine=engine).records
    seen = observe_steps(records, max_batched_tokens=2048, max_num_seqs=4)
    blind = observe_steps(records, max_batched_tokens=2048)

    def beside_three(o):
        return sum(1 for s in o.steps if s.kind == "mixed" and s.batch.num_decode == 3)

    assert beside_three(seen) >= 10 and beside_three(blind) == 0
    assert seen.skipped.get("prompt waited a step (queued, or split over steps)", 0) == 0
    cal = calibrate(records, model=ENGINE.model, hardware=ENGINE.gpu, weights=ENGINE.weights,
                    max_num_seqs=4, max_batched_tokens=2048)
    assert cal.fit["rms_relative_error"] < 0.005  # the steps were read as the engine ran them
    assert cal.roofline.mfu == pytest.approx(TRUTH.mfu, rel=0.03)


def test_a_fit_that_saw_no_lone_gemv_step_warns_that_one_is_extrapolated():
    from tokenpace.simulator import StepBatch
    from tokenpace.simulator.calibrate import ObservedStep
    from tokenpace.simulator.calibrate.coverage import lone_gemv_warning

    def decode(k: int) -> ObservedStep:
        return ObservedStep(batch=StepBatch(decode_context=(100,) * k), duration_s=0.05, end_ns=0)

    prompt = ObservedStep(batch=StepBatch(prefill=((128, 0),)), duration_s=0.5, end_ns=0)
    grouped = RooflineParams(row_group=2, row_remainder="gemv-pass")
    warning = lone_gemv_warning(grouped, [prompt, decode(2), decode(3), decode(4)])
    assert warning and "fewer than 2 sequences" in warning and "tokenpace calibrate c1.json c4.json" in warning
    assert lone_gemv_warning(grouped, [prompt, decode(1), decode(2), decode(4)]) is None  # a lone step was seen
    assert lone_gemv_warning(RooflineParams(row_group=4, row_remainder="gemv-pass"), [decode(3), decode(4)]) is None
    assert lone_gemv_warning(RooflineParams(row_group=2), [decode(2), decode(4)]) is None  # padded: no GEMV path
    assert lone_gemv_warning(RooflineParams(), [decode(2), decode(4)]) is None  # no row groups


def test_a_lone_sequences_short_steps_are_split_out_of_one_burst(tmp_path):
    # A step of one sequence costs a quarter of a step of four (20 ms per sequence): at the end of a
    # c=4 run the last request decodes alone, its chunks closer together than the gap that parts the
    # usual steps. They are still its steps, one each, and the fit sees batch size 1.
    engine = SimConfig(model="llama-3.1-8b", gpu="h100-sxm", weights="int4", max_num_seqs=16, max_batched_tokens=2048,
                       roofline=RooflineParams(mfu=0.35, mbu=0.7, step_overhead_s=0.0005, seq_overhead_s=0.02))
    records = run(tmp_path, 4, engine=engine, requests=24, input_tokens="uniform:min=64,max=512",
                  output_tokens="uniform:min=8,max=48").records
    rng = random.Random(2)
    for r in records:  # a client's reading jitter, up to 0.4 ms
        r.chunk_ns = [t + rng.randrange(400_000) for t in r.chunk_ns]
        r.first_token_ns = r.chunk_ns[0]
    observed = observe_steps(records, max_batched_tokens=2048, max_num_seqs=16)
    lone = [s.duration_s for s in observed.steps if s.kind == "decode" and s.batch.num_decode == 1]
    assert len(lone) >= 3 and max(lone) * 1e3 < observed.gap_threshold_ms  # shorter than the usual gap
    last = max(records, key=lambda r: r.done_ns)
    gaps = sorted((b - a) / 1e9 for a, b in zip(last.chunk_ns, last.chunk_ns[1:]))
    assert all(any(abs(d - g) < 4e-4 for g in gaps) for d in lone)  # each one of the last request's own gaps
    assert "two chunks of one request" not in observed.skipped
    cal = calibrate(records, model=engine.model, hardware=engine.gpu, weights=engine.weights, max_num_seqs=16,
                    max_batched_tokens=2048)
    assert 1 in cal.fit["observations"]["decode_batch_sizes"]
    assert cal.roofline.seq_overhead_s == pytest.approx(0.02, abs=0.001)
