"""The join window (``RooflineParams.join_window_s``): after a step during which requests arrived,
an engine that sets up new requests between steps (llama-server) takes in every request that
reaches it meanwhile before it forms the next batch. The engine applies it, the step observer
measures the sends that joined or missed, and a calibration recovers it with the clients' spread
of turnarounds."""

from __future__ import annotations

import dataclasses

import pytest

from tokenpace.simulator import RooflineParams, SimConfig
from tokenpace.simulator.calibrate.client import join_window, turnaround_spread
from tokenpace.simulator.request import SimRequest
from tokenpace.simulator.simulate import simulate

from sim_helpers import FIXED_STEP_ENGINE, FixedStep

CONFIG = SimConfig(**FIXED_STEP_ENGINE)


def chunk_ms(join_window_s: float, c_at: float) -> list[list[float]]:
    # A decodes from 0; B arrives at 25 ms, during A's step [20, 30); C arrives at c_at.
    requests = [SimRequest(prompt_tokens=32, output_tokens=6, arrival_s=0.0),
                SimRequest(prompt_tokens=32, output_tokens=2, arrival_s=0.025),
                SimRequest(prompt_tokens=32, output_tokens=2, arrival_s=c_at)]
    result = simulate(CONFIG, requests, FixedStep(RooflineParams(join_window_s=join_window_s)))
    return [[round(t / 1e6, 3) for t in r.chunk_ns] for r in sorted(result.records, key=lambda r: r.index)]


def test_a_request_arriving_within_the_window_after_a_step_with_arrivals_joins_the_next_one():
    # No window: C, arriving 1 ms after the step [20, 30) ended, waits for the step [30, 40) to end.
    assert chunk_ms(0.0, 0.031) == [[10, 20, 30, 40, 50, 60], [40, 50], [50, 60]]
    # A 2 ms window: B arrived during [20, 30), so the next batch forms at 32 ms and takes C in
    # with B; the step is priced from 30 ms, as a calibration measures it, and ends at 40.
    assert chunk_ms(0.002, 0.031) == [[10, 20, 30, 40, 50, 60], [40, 50], [40, 50]]
    # C at 33 ms, past the window: it waits a step, as without one.
    assert chunk_ms(0.002, 0.033) == chunk_ms(0.0, 0.033) == [[10, 20, 30, 40, 50, 60], [40, 50], [50, 60]]


def test_no_window_follows_a_step_during_which_nothing_arrived():
    # C arrives 1 ms after the step [10, 20) ended; nothing arrived during that step, so the batch
    # [20, 30) formed at once without C, whatever the window.
    assert chunk_ms(0.002, 0.021)[2] == chunk_ms(0.0, 0.021)[2] == [40, 50]


def test_the_window_is_the_delay_that_best_separates_joins_from_misses():
    # Halfway between the longest delay that joined and the shortest that waited after it.
    assert join_window([0.4e-3, 0.9e-3, 1.2e-3], [1.6e-3, 2.0e-3]) == pytest.approx(1.4e-3)
    # One late join among misses costs one error either way: the smaller window wins.
    assert join_window([0.5e-3, 2.5e-3], [1.0e-3, 1.5e-3, 3.0e-3]) == pytest.approx(0.75e-3)
    assert join_window([1e-3, 2e-3], []) == pytest.approx(2e-3)  # none waited: the longest that joined
    assert join_window([], [1e-3]) == 0.0
    spread = turnaround_spread(__import__("numpy").linspace(0.001, 0.002, 101), n=4)
    assert spread == pytest.approx((0.001125, 0.001375, 0.001625, 0.001875))


def test_a_calibration_recovers_the_window_and_predicts_another_load(tmp_path):
    from sim_helpers import assert_predicts

    from test_calibrate import ENGINE, fit, run

    spread = (0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008)
    truth = dataclasses.replace(ENGINE, roofline=dataclasses.replace(ENGINE.roofline, join_window_s=0.0045),
                                turnarounds_s=spread)
    records = run(tmp_path, 4, truth, requests=96).records
    measured_only = fit(records, closed_loop_concurrency=4, apply_join_window="none")  # measured, reported
    assert measured_only.roofline.join_window_s == 0 and not measured_only.turnarounds_s
    assert measured_only.fit["client_turnaround"]["join_window_applied"] is False
    cal = fit(records, closed_loop_concurrency=4)  # the default: applied where the run shows one
    assert fit(records, closed_loop_concurrency=4, apply_join_window=False).roofline == measured_only.roofline
    t = cal.fit["client_turnaround"]
    assert t["join_window_applied"] and t["join_window_ms"] == measured_only.fit["client_turnaround"]["join_window_ms"]
    assert t["while_another_waited"]["joined"] and t["while_another_waited"]["waited"]
    # Between the longest turnaround that joined (3 ms; no 4 ms send came while another waited)
    # and the shortest that waited (5 ms), as the truth's 4.5 ms is.
    assert 0.003 < cal.roofline.join_window_s < 0.005
    assert cal.turnarounds_s and min(cal.turnarounds_s) >= 0.0005 and max(cal.turnarounds_s) <= 0.008
    without = dataclasses.replace(cal.roofline, join_window_s=0.0)
    want = run(tmp_path, 8, truth)
    predicted = run(tmp_path, 8, dataclasses.replace(ENGINE, roofline=cal.roofline, turnarounds_s=cal.turnarounds_s))
    assert_predicts(predicted, want, rel=0.03)
    # Without the window, the prompts that joined others' are priced alone: the TTFT median misses.
    missed = run(tmp_path, 8, dataclasses.replace(ENGINE, roofline=without, turnarounds_s=cal.turnarounds_s))
    with pytest.raises(AssertionError):
        assert_predicts(missed, want, rel=0.03)


def first_token_ms(join_after: str, window_s: float, c_at: float) -> float:
    # A and B arrive at 0 and share the prompt step [0, 10); A ends in the step [10, 20), B decodes
    # on; nothing arrives during [10, 20). C arrives at c_at.
    requests = [SimRequest(prompt_tokens=32, output_tokens=2, arrival_s=0.0),
                SimRequest(prompt_tokens=32, output_tokens=6, arrival_s=0.0),
                SimRequest(prompt_tokens=32, output_tokens=2, arrival_s=c_at)]
    params = RooflineParams(join_window_s=window_s, join_after=join_after)
    result = simulate(CONFIG, requests, FixedStep(params))
    return round(sorted(result.records, key=lambda r: r.index)[2].chunk_ns[0] / 1e6, 3)


def test_join_after_finish_opens_the_window_after_a_step_in_which_a_sequence_finished():
    # C, 1 ms after A's last step ended: under "arrival" no window follows (nothing arrived during
    # [10, 20)), the batch [20, 30) formed without C, and C's prompt runs in [30, 40).
    assert first_token_ms("arrival", 0.002, 0.021) == first_token_ms("finish", 0.0, 0.021) == 40
    # Under "finish" A's ending opens the 2 ms window: the batch forms at 22 ms with C in it, priced
    # from 20 ms, so C's first token comes at 30.
    assert first_token_ms("finish", 0.002, 0.021) == 30
    # Past the window (23 ms) C waits a step either way.
    assert first_token_ms("finish", 0.002, 0.023) == 40
    with pytest.raises(ValueError, match="join_after"):
        RooflineParams(join_after="always")


def test_a_calibration_recovers_a_window_that_opens_after_finishes_and_predicts_another_load(tmp_path):
    from sim_helpers import assert_predicts

    from test_calibrate import ENGINE, fit, run

    spread = (0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008)
    truth = dataclasses.replace(ENGINE, roofline=dataclasses.replace(
        ENGINE.roofline, join_window_s=0.0045, join_after="finish"), turnarounds_s=spread)
    records = run(tmp_path, 4, truth, requests=96).records
    cal = fit(records, closed_loop_concurrency=4, apply_join_window="finish")
    assert cal.roofline.join_after == "finish" and cal.fit["client_turnaround"]["join_window_after"] == "finish"
    # Between the longest turnaround that joined and the shortest that waited, as the truth's 4.5 ms.
    assert 0.003 < cal.roofline.join_window_s < 0.006
    want = run(tmp_path, 8, truth)
    predicted = run(tmp_path, 8, dataclasses.replace(ENGINE, roofline=cal.roofline, turnarounds_s=cal.turnarounds_s))
    assert_predicts(predicted, want, rel=0.03)
    # The same window opened only after arrivals misses: the sends after a finish wait a step.
    arrival_only = dataclasses.replace(cal.roofline, join_after="arrival")
    missed = run(tmp_path, 8, dataclasses.replace(ENGINE, roofline=arrival_only, turnarounds_s=cal.turnarounds_s))
    with pytest.raises(AssertionError):
        assert_predicts(missed, want, rel=0.03)


def test_the_turnaround_is_copied_where_a_good_share_of_the_next_requests_waited():
    from tokenpace.simulator.calibrate.client import copies_turnaround

    # llama-server's c=4 runs: 9 joined / 53 waited and 14 / 16 copied, and so is 16 / 14 (one of three
    # like runs), which a rule of "most waited" turned off, taking the join window with it.
    assert copies_turnaround(9, 53) and copies_turnaround(14, 16) and copies_turnaround(16, 14)
    # An engine that takes nearly every next request into the step begun: clients that send at once.
    assert not copies_turnaround(30, 2) and not copies_turnaround(12, 0) and not copies_turnaround(0, 0)
