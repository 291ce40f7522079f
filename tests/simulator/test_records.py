"""Simulated records carry what a measured record does, in virtual nanoseconds."""

from __future__ import annotations

import pytest

from tokenpace.simulator import SimConfig, SimRequest, StepBatch, build_predictor, simulate


def test_one_request_on_an_idle_engine():
    cfg = SimConfig()
    rec = simulate(cfg, [SimRequest(1024, 64, arrival_s=2.0)]).records[0]
    p = build_predictor(cfg)
    prefill_ns = round(p.step_s(StepBatch(prefill=((1024, 0),))) * 1e9)
    assert rec.request_id == "sim-000000" and rec.index == 0
    assert (rec.api, rec.stream, rec.status, rec.http_status) == ("chat", True, "ok", 200)
    assert rec.scheduled_ns == rec.sent_ns == 2_000_000_000
    assert rec.first_token_ns == rec.first_content_ns == rec.sent_ns + prefill_ns
    assert rec.last_token_ns == rec.done_ns == rec.chunk_ns[-1]
    assert rec.chunk_ns[0] == rec.first_token_ns
    assert rec.chunk_tokens == [1] * 64 and rec.chunk_tokens_source == "simulated"
    assert all(b > a for a, b in zip(rec.chunk_ns, rec.chunk_ns[1:]))
    assert (rec.prompt_tokens, rec.output_tokens, rec.cached_prompt_tokens) == (1024, 64, 0)
    assert rec.prompt_tokens_source == rec.output_tokens_source == "simulated"
    assert (rec.requested_input_tokens, rec.requested_output_tokens) == (1024, 64)
    # Each gap is one decode step over a context of 1,024 + i tokens.
    gap = rec.chunk_ns[1] - rec.chunk_ns[0]
    assert gap == pytest.approx(p.step_s(StepBatch(decode_context=(1024,))) * 1e9, abs=2)


def test_records_come_back_in_request_order_with_unique_ids():
    reqs = [SimRequest(100 + 50 * i, 20 + i, arrival_s=0.01 * (40 - i)) for i in range(40)]
    res = simulate(SimConfig(), reqs)
    assert [r.index for r in res.records] == list(range(40))
    assert len({r.request_id for r in res.records}) == 40
    assert [r.output_tokens for r in res.records] == [20 + i for i in range(40)]


def test_open_and_closed_loop_inputs_are_checked():
    from tokenpace.errors import UsageError

    with pytest.raises(UsageError, match="arrival_s"):
        simulate(SimConfig(), [SimRequest(10, 10)])
    with pytest.raises(UsageError, match="closed loop"):
        simulate(SimConfig(concurrency=2), [SimRequest(10, 10, arrival_s=0.0)])


def test_closed_loop_holds_its_concurrency():
    res = simulate(SimConfig(concurrency=32), [SimRequest(512, 128) for _ in range(256)])
    busy = [row.running + row.waiting for row in res.timeline if row.t_ns < res.records[200].sent_ns]
    assert max(busy) == 32 and min(busy[1:]) >= 31  # a finished stream is replaced at once


def test_timeline_describes_the_engine():
    res = simulate(SimConfig(concurrency=16), [SimRequest(2000, 300) for _ in range(64)])
    rows = res.timeline
    assert rows[0].t_ns == 0 and rows[0].prefill_tokens == 8192
    assert all(b.t_ns > a.t_ns for a, b in zip(rows, rows[1:]))
    assert sum(r.steps for r in rows) == res.stats["engine_steps"]
    assert all(0.0 <= r.kv_usage <= 1.0 for r in rows)
    assert any(r.steps > 100 for r in rows)  # runs of identical decode steps are one row
