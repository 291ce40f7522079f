"""The stream interval (``RooflineParams.stream_interval_s``): an engine that streams a step's
sequences one after another, in slot order, before it forms its next batch (llama-server on one
core) lets a closed-loop client whose sequence came early get its next request into that batch.
The engine gives slots as llama-server does and tells each finished sequence how early it came; the
closed loop's clients send that much sooner; the step observer measures the interval from a run's
chunks, and a calibration applies it with the turnaround."""

from __future__ import annotations

import pytest

from tokenpace.simulator import RooflineParams, SimConfig
from tokenpace.simulator.calibrate.steps import observe_steps
from tokenpace.simulator.request import SimRequest
from tokenpace.simulator.sequence import Sequence
from tokenpace.simulator.simulate import simulate
from tokenpace.simulator.stream_slots import StreamSlots

from sim_helpers import FIXED_STEP_ENGINE, FixedStep


def seqs(n: int) -> list[Sequence]:
    return [Sequence(i, SimRequest(prompt_tokens=8, output_tokens=4), 0) for i in range(n)]


def test_slots_go_to_the_free_one_used_least_recently_and_leads_follow_slot_order():
    slots = StreamSlots(600_000)
    a, b, c, d, e, f, g = seqs(7)
    slots.finish([a, b, c, d], [])
    assert [s.slot for s in (a, b, c, d)] == [0, 1, 2, 3]
    slots.finish([a, b, c, d], [b])  # b is streamed second of four: two sequences after it
    assert b.lead_ns == 1_200_000 and b.slot == -1
    slots.finish([e, a, c, d], [d])  # e takes b's slot 1; d, in slot 3, is streamed last
    assert e.slot == 1 and d.lead_ns == 0
    slots.finish([a, e, c], [a])  # slot 0 of three: two after it
    assert a.lead_ns == 1_200_000
    slots.finish([f, e, c], [])  # free: 3 (since d), then 0 (since a): f takes 3, used least recently
    assert f.slot == 3
    slots.finish([g, f, e, c], [])  # then 0; a fifth sequence would open slot 4
    assert g.slot == 0
    slots.release(c)  # a cancelled sequence frees its slot too
    assert c.slot == -1


def closed_loop(interval_s: float, turnaround_s: float = 0.001):
    config = SimConfig(**FIXED_STEP_ENGINE, concurrency=4, turnaround_s=turnaround_s)
    requests = [SimRequest(prompt_tokens=32, output_tokens=3 + i % 4) for i in range(48)]
    result = simulate(config, requests, FixedStep(RooflineParams(stream_interval_s=interval_s)))
    return observe_steps(result.records, max_batched_tokens=2048, max_num_seqs=8), result


def test_a_client_whose_sequence_was_streamed_early_gets_its_next_request_into_the_next_batch():
    # Clients send 1 ms after their request ends. Delivered at the step's end, every next request
    # misses the batch that forms then and waits a step.
    joined, waited = closed_loop(0.0)[0].joins_after_start
    assert joined == 0 and waited > 20
    # Streamed 0.6 ms apart in slot order: of 4 sequences, the first two end 1.8 and 1.2 ms before
    # the step does, so their clients' sends come in time; the last two's do not.
    joined, waited = closed_loop(0.0006)[0].joins_after_start
    assert joined > 5 and waited > 5
    # 0.2 ms apart: even the first ends only 0.6 ms early, less than the turnaround.
    assert closed_loop(0.0002)[0].joins_after_start[0] == 0


def test_joining_shortens_ttft_by_the_step_it_no_longer_waits():
    def mean_ttft_ms(interval_s: float) -> float:
        recs = [r for r in closed_loop(interval_s)[1].records if r.index >= 4]  # after the first wave
        return sum((r.first_token_ns - r.sent_ns) / 1e6 for r in recs) / len(recs)

    late, early = mean_ttft_ms(0.0), mean_ttft_ms(0.0006)
    assert late - early > 2.0  # ms: a share of the requests saves a 10 ms step
    assert early > 10.0  # a joining request still waits for its prompt's step


def test_the_observer_measures_the_interval_from_each_steps_chunks():
    from tokenpace.record import RequestRecord

    # Three sequences decoding together; each step's chunks reach the client 0.5 ms apart.
    records = []
    for k in range(3):
        chunks = [int((10 + 20 * j) * 1e6 + k * 0.5e6) for j in range(6)]
        records.append(RequestRecord(request_id=f"r{k}", index=k, sent_ns=0, first_token_ns=chunks[0], last_token_ns=chunks[-1],
                                     done_ns=chunks[-1], chunk_ns=chunks, stream=True, status="ok",
                                     output_tokens=6, prompt_tokens=16))
    obs = observe_steps(records)
    assert obs.stream_interval_s == pytest.approx(0.0005)
    assert obs.describe()["stream_interval_ms"] == pytest.approx(0.5)


def test_a_calibration_file_and_the_sim_flags_carry_the_interval(tmp_path):
    from tokenpace.simulator.calibrate.calibration import Calibration

    params = RooflineParams(mfu=0.3, mbu=0.6, stream_interval_s=0.0006)
    assert params.to_dict()["stream_interval_s"] == 0.0006
    assert "stream_interval_s" not in RooflineParams(mfu=0.3, mbu=0.6).to_dict()
    with pytest.raises(ValueError, match="stream_interval_s"):
        RooflineParams(stream_interval_s=-1e-3)
    from tokenpace.simulator.catalog import get_gpu, get_model, get_precision
    cal = Calibration(model=get_model("llama-3.1-8b"), hardware=get_gpu("l4"), weights=get_precision("int4"),
                      kv_cache_dtype=get_precision("bf16"), roofline=params)
    assert Calibration.from_dict(cal.to_dict()).roofline.stream_interval_s == 0.0006


def test_the_stream_join_threshold_sets_how_early_a_client_must_be():
    # 0.6 ms apart with a -1 ms threshold: of 4, only the first's client (1.8 - 1 = 0.8 ms of lead)
    # beats a 0.5 ms turnaround, where without the threshold the first two (1.8, 1.2 ms) did.
    def joined(join_s: float) -> int:
        config = SimConfig(**FIXED_STEP_ENGINE, concurrency=4, turnaround_s=0.0005)
        requests = [SimRequest(prompt_tokens=32, output_tokens=3 + i % 4) for i in range(48)]
        params = RooflineParams(stream_interval_s=0.0006, stream_join_s=join_s)
        result = simulate(config, requests, FixedStep(params))
        return observe_steps(result.records, max_batched_tokens=2048, max_num_seqs=8).joins_after_start[0]

    assert 0 < joined(-0.001) < joined(0.0)


def streamed_closed_loop(join_s: float, interval_s: float = 0.0004, turns_s=(0.6e-3, 0.7e-3, 0.8e-3, 0.9e-3, 1.0e-3),
                         clients: int = 4, steps: int = 400):
    """Records of an engine that streams each 20 ms step's sequences ``interval_s`` apart in slot
    order, and takes a client's next request into the next step when it is sent no later than
    ``join_s`` after the step's last chunk; the clients send their next request a turnaround (drawn
    from ``turns_s``) after their last chunk."""
    import random

    from tokenpace.record import RequestRecord

    rng = random.Random(7)
    step_ns, interval_ns, join_ns = 20_000_000, round(interval_s * 1e9), round(join_s * 1e9)
    records = []
    # per client (its slot): [record fields, tokens left, the step of its first token]
    live = {c: {"sent": 0, "chunks": [], "left": 3 + c % 4, "index": c, "start": 0} for c in range(clients)}
    nxt = clients
    for n in range(steps):
        end = (n + 1) * step_ns
        members = sorted(c for c, r in live.items() if r["start"] <= n)
        last = end + (len(members) - 1) * interval_ns
        for place, c in enumerate(members):
            r = live[c]
            t = end + place * interval_ns
            r["chunks"].append(t)
            r["left"] -= 1
            if r["left"]:
                continue
            records.append(RequestRecord(request_id=f"r{r['index']}", index=r["index"], sent_ns=r["sent"],
                                         first_token_ns=r["chunks"][0], last_token_ns=t, done_ns=t,
                                         chunk_ns=r["chunks"], stream=True, status="ok",
                                         output_tokens=len(r["chunks"]), prompt_tokens=16))
            sent = t + round(rng.choice(turns_s) * 1e9)
            live[c] = {"sent": sent, "chunks": [], "left": rng.randint(3, 7), "index": nxt,
                       "start": n + 1 if sent <= last + join_ns else n + 2}
            nxt += 1
    return records


def test_the_places_that_got_in_give_the_cutoff_in_the_engines_order():
    from tokenpace.simulator.calibrate.client import stream_join_from_places

    turns = (0.6e-3, 0.7e-3, 0.8e-3, 0.9e-3, 1.0e-3)
    # 0.4 ms apart, in time up to 0.45 ms before the last chunk: with three chunks after it a client
    # has 1.2 - 0.45 = 0.75 ms, which two turnarounds of five beat; with two after, none; four, all.
    obs = observe_steps(streamed_closed_loop(-0.00045, turns_s=turns), max_batched_tokens=2048, max_num_seqs=8)
    places = obs.stream_places
    share = {a: (sum(j for b, j in places if b == a), sum(b == a for b, _ in places)) for a in range(4)}
    assert share[0][0] == share[1][0] == share[2][0] == 0 and min(n for _, n in share.values()) >= 10
    assert 0.25 < share[3][0] / share[3][1] < 0.55
    join = stream_join_from_places(places, 0.0004, turns)
    assert -0.0005 <= join < -0.0004  # where 3 × 0.4 ms + join lies between the 2nd and 3rd turnaround
    # The same engine, taking requests up to 0.15 ms after the last chunk: a client with two chunks
    # after it has 0.95 ms, so four of five get in.
    later = observe_steps(streamed_closed_loop(0.00015, turns_s=turns), max_batched_tokens=2048, max_num_seqs=8)
    assert 0.0001 <= stream_join_from_places(later.stream_places, 0.0004, turns) < 0.0002
    # Nothing to fit where every client got in, or none did, or nothing was seen.
    assert stream_join_from_places([(3, True), (2, True)], 0.0004, turns) is None
    assert stream_join_from_places([], 0.0004, turns) is None


def test_a_calibration_fits_the_cutoff_so_its_clients_get_in_by_place_as_the_engines_did():
    import numpy as np
    from test_calibrate import fit

    records = streamed_closed_loop(-0.00045, steps=150)
    cal = fit(records, closed_loop_concurrency=4)  # applied by default where the run shows both outcomes
    t = cal.fit["client_turnaround"]
    assert t["stream_join_fitted"] and t["stream_interval_applied"]
    assert cal.roofline.stream_interval_s == pytest.approx(0.0004, rel=0.05)
    # The simulated clients draw the measured turnarounds in turn: by place, the share of them in
    # time (turnaround ≤ chunks after × interval + cutoff) is the share the engine took in.
    turns = np.array(t["turnarounds_ms"]) / 1e3
    for after, (joined, seen) in t["next_request_in_time_by_chunks_after"].items():
        lead = int(after) * cal.roofline.stream_interval_s + cal.roofline.stream_join_s
        assert (turns <= lead).mean() == pytest.approx(joined / seen, abs=0.15)
