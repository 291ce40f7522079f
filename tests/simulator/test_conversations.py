"""Conversations in virtual time: each session's next turn a think time after its previous one ended,
the history shared through the prefix cache, records numbered in send order with session and turn."""

from __future__ import annotations

from collections import defaultdict

import pytest

from tokenpace import BenchConfig
from tokenpace.runner.simulate import SimRunConfig, run_sim
from tokenpace.simulator import SimConfig, SimRequest, simulate
from tokenpace.simulator.load import to_ns

from sim_helpers import ttft_ms

NS = 1_000_000_000


def run(tmp_path, engine: SimConfig | None = None, name: str = "sim.json", **load):
    load.setdefault("out", str(tmp_path / name))
    return run_sim(SimRunConfig(load=BenchConfig(**load), engine=engine or SimConfig()))


def by_session(records):
    out = defaultdict(list)
    for r in records:
        out[r.session].append(r)
    return {s: sorted(rs, key=lambda r: r.turn) for s, rs in out.items()}


def think_times(res):
    """The planned think time of each (session, turn), as the simulator was given it."""
    from tokenpace.workload import conversations_for, workload_from_config

    out = {}
    for conv in conversations_for(workload_from_config(res.config.workload_config())):
        while not conv.done:
            t = conv.next_turn(None)
            out[t.session, t.turn] = t.think_time_s
    return out


def test_every_turn_follows_the_previous_one_by_its_think_time(tmp_path):
    res = run(tmp_path, conversations="sessions=5,turns=4,think-time=exp:1s", input_tokens="300",
              output_tokens="uniform:min=20,max=80")
    assert len(res.records) == 20 and {r.status for r in res.records} == {"ok"}
    assert [r.index for r in res.records] == list(range(20))
    sends = [r.sent_ns for r in res.records]
    assert sends == sorted(sends)  # numbered in send order, as bench numbers a conversation run
    thinks = think_times(res)
    sessions = by_session(res.records)
    assert sorted(sessions) == list(range(5))
    for s, turns in sessions.items():
        assert [r.turn for r in turns] == [1, 2, 3, 4]
        assert turns[0].scheduled_ns == turns[0].sent_ns == 0  # closed: every session starts at once
        for prev, nxt in zip(turns, turns[1:]):
            due = prev.done_ns + to_ns(thinks[s, nxt.turn])
            assert nxt.scheduled_ns == nxt.sent_ns == due >= prev.done_ns
            assert nxt.requested_input_tokens > prev.requested_input_tokens + prev.requested_output_tokens
    assert set(res.summary["breakdowns"]["ttft_by_turn_ms"]) == {"1", "2", "3", "4"}


def test_prefix_caching_serves_the_history_and_lowers_ttft(tmp_path):
    load = dict(conversations="sessions=6,turns=4,think-time=0.5s", input_tokens="800", output_tokens="100")
    plain = run(tmp_path, name="plain.json", **load)
    cached = run(tmp_path, SimConfig(prefix_caching=True), name="cached.json", **load)
    assert all(r.cached_prompt_tokens == 0 for r in plain.records)
    bs = SimConfig().block_size
    for s, turns in by_session(cached.records).items():
        assert turns[0].cached_prompt_tokens == 0
        for prev, nxt in zip(turns, turns[1:]):
            # the previous prompt and reply, in full blocks (its last token's KV is never computed)
            history = prev.prompt_tokens + prev.output_tokens - 1
            assert nxt.cached_prompt_tokens == history // bs * bs > prev.prompt_tokens
    later_plain = [ttft_ms(r) for r in plain.records if r.turn > 1]
    later_cached = [ttft_ms(r) for r in cached.records if r.turn > 1]
    assert sum(later_cached) < 0.8 * sum(later_plain)
    plain_by_key = {(r.session, r.turn): ttft_ms(r) for r in plain.records}
    for r in cached.records:
        if r.turn > 1:
            assert ttft_ms(r) < plain_by_key[r.session, r.turn]
    assert cached.engine["stats"]["prefix_cache_hit_rate"] > 0.5


def test_rate_staggers_session_starts_and_a_count_stops_sending(tmp_path):
    res = run(tmp_path, conversations="sessions=8,turns=3,think-time=1s", rate=2.0, requests=10,
              input_tokens="200", output_tokens="30")
    assert len(res.records) == 10 and [r.index for r in res.records] == list(range(10))
    starts = [r.scheduled_ns for r in res.records if r.turn == 1]
    assert len(set(starts)) == len(starts) and starts == sorted(starts)
    for turns in by_session(res.records).values():  # a session's turns are sent in order
        assert [r.turn for r in turns] == list(range(1, len(turns) + 1))


def test_a_duration_run_sends_no_turn_due_after_the_deadline(tmp_path):
    res = run(tmp_path, conversations="sessions=4,turns=50,think-time=2s", duration_s=10.0,
              input_tokens="200", output_tokens="30", grace_s=1.0)
    assert 0 < len(res.records) < 200
    assert max(r.sent_ns for r in res.records) < 10 * NS
    assert (res.window_ns.start_ns, res.window_ns.end_ns) == (0, 10 * NS)


def test_warmup_turns_come_first(tmp_path):
    res = run(tmp_path, conversations="sessions=3,turns=3", warmup_requests=3, input_tokens="100",
              output_tokens="10")
    assert len(res.records) == 9
    assert [r.warmup for r in res.records] == [True] * 3 + [False] * 6
    assert res.summary["counts"]["sent"] == 6


def test_the_simulator_api_takes_session_requests_directly():
    reqs = [SimRequest(prompt_tokens=100 + 200 * (t - 1), output_tokens=50, session=s, turn=t,
                       arrival_s=0.1 * s if t == 1 else None, think_time_s=0.0 if t == 1 else 0.25)
            for s in range(3) for t in (1, 2)]
    res = simulate(SimConfig(prefix_caching=True), reqs)
    assert [(r.session, r.turn) for r in res.records][:3] == [(0, 1), (1, 1), (2, 1)]
    done = {(r.session, r.turn): r for r in res.records}
    for s in range(3):
        assert done[s, 2].sent_ns == done[s, 1].done_ns + 250_000_000
        assert done[s, 2].cached_prompt_tokens == (100 + 50 - 1) // 16 * 16
    capped = simulate(SimConfig(), reqs, max_requests=4)
    assert len(capped.records) == 4


@pytest.mark.parametrize("kwargs, message", [
    (dict(session=0, turn=2, arrival_s=1.0), "later turns none"),
    (dict(session=0, turn=1), "turn 1 needs arrival_s"),
    (dict(session=0, turn=None), "both session and turn"),
    (dict(session=0, turn=1, arrival_s=0.0, prefix_group=1, prefix_tokens=10), "no prefix_group"),
    (dict(think_time_s=-1.0), "think_time_s"),
])
def test_bad_session_requests_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SimRequest(prompt_tokens=100, output_tokens=10, **kwargs)


def test_turns_out_of_order_or_a_cap_are_refused():
    turn2 = SimRequest(prompt_tokens=100, output_tokens=10, session=0, turn=2)
    turn1 = SimRequest(prompt_tokens=50, output_tokens=10, session=0, turn=1, arrival_s=0.0)
    with pytest.raises(ValueError, match="turn 2 where turn 1 was due"):
        simulate(SimConfig(), [turn2, turn1])
    with pytest.raises(ValueError, match="not capped"):
        simulate(SimConfig(concurrency=4), [turn1, turn2])
