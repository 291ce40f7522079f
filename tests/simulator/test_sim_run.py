"""`run_sim`: bench's load options in virtual time (warmup, duration window, grace, timeout), the
shared prefix, and the files it writes."""

from __future__ import annotations

import json

import pytest

from tokenpace import BenchConfig, read_records, summarize
from tokenpace.runner.simulate import SimRunConfig, run_sim
from tokenpace.simulator import SimConfig

NS = 1_000_000_000


def run(tmp_path, engine: SimConfig | None = None, prefix: int = 0, **load):
    load.setdefault("out", str(tmp_path / "sim.json"))
    return run_sim(SimRunConfig(load=BenchConfig(**load), engine=engine or SimConfig(),
                                shared_prefix_tokens=prefix))


def test_warmup_requests_are_sent_in_addition_and_excluded(tmp_path):
    res = run(tmp_path, concurrency=4, requests=20, warmup_requests=5, output_tokens="16")
    assert len(res.records) == 25
    assert [r.warmup for r in res.records] == [True] * 5 + [False] * 20
    assert res.summary["counts"]["sent"] == 20 and res.summary["counts"]["warmup_excluded"] == 5


def test_duration_run_measures_its_window_and_cancels_after_the_grace(tmp_path):
    res = run(tmp_path, concurrency=8, duration_s=4.0, warmup_s=1.0, grace_s=0.5,
              input_tokens="512", output_tokens="2000")
    assert (res.window_ns.start_ns, res.window_ns.end_ns) == (1 * NS, 5 * NS)
    assert res.summary["window"]["duration_s"] == pytest.approx(4.0)
    sent = [r.sent_ns for r in res.records]
    assert max(sent) < 5 * NS
    warm = [r for r in res.records if r.warmup]
    assert warm and all(r.scheduled_ns < NS for r in warm)
    cancelled = [r for r in res.records if r.status == "cancelled"]
    assert len(cancelled) == 8  # every stream still running at 5.5 s
    for r in cancelled:
        assert r.done_ns == 5_500_000_000 and r.chunk_ns[-1] <= r.done_ns
        assert r.output_tokens == sum(r.chunk_tokens) == len(r.chunk_ns) < 2000
    assert res.engine["stats"]["completed"] > len([r for r in res.records if r.status == "ok"])


def test_a_request_running_past_the_timeout_times_out(tmp_path):
    res = run(tmp_path, concurrency=2, requests=4, output_tokens="3000", timeout_s=2.0)
    assert {r.status for r in res.records} == {"timeout"}
    assert all(r.error_kind == "total_timeout" and r.done_ns - r.sent_ns == 2 * NS for r in res.records)


def test_shared_prefix_is_prepended_and_cached(tmp_path):
    engine = SimConfig(prefix_caching=True)
    res = run(tmp_path, engine, prefix=2048, rate=2.0, requests=20, input_tokens="256", output_tokens="8")
    assert all(r.requested_input_tokens == r.prompt_tokens == 2304 for r in res.records)
    assert res.records[0].cached_prompt_tokens == 0
    assert all(r.cached_prompt_tokens == 2048 for r in res.records[1:])
    assert res.engine["stats"]["prefix_cache_hit_rate"] > 0.8


def test_files_round_trip_through_summarize(tmp_path):
    res = run(tmp_path, engine=SimConfig(tp=2), concurrency=4, requests=30, slo="chat", gpu_hour_usd=2.0)
    doc = json.loads((tmp_path / "sim.json").read_text())
    assert doc["kind"] == "sim" and doc["started_utc"] is None and doc["load_generator"] is None
    assert doc["target"]["simulated"] is True and doc["target"]["tp"] == 2
    assert doc["summary"]["cost"]["gpus"] == 2  # one engine of --tp GPUs unless --gpus says otherwise
    records = read_records(tmp_path / doc["records_path"])
    assert records == res.records
    assert json.loads(json.dumps(summarize(records, slo="chat", gpu_hour_usd=2.0, gpus=2,
                                                window=res.window_ns))) == doc["summary"]
    timeline = (tmp_path / doc["engine"]["timeline_path"]).read_text().splitlines()
    assert len(timeline) == doc["engine"]["stats"]["batches"]
    assert doc["engine"]["memory"]["kv_capacity_tokens"] > 0


def test_ttft_and_idle_timeouts_act_as_the_client_would(tmp_path):
    from tokenpace.record import RequestRecord
    from tokenpace.runner.virtual_client import ClientLimits, apply_client_limits

    def rec():  # sent at 0; first token at 1 s; then a 3 s silence before the last two chunks
        return RequestRecord("r", 0, sent_ns=0, first_token_ns=NS, first_content_ns=NS, last_token_ns=5 * NS,
                             done_ns=5 * NS, chunk_ns=[NS, NS + 1, 4 * NS + 1, 5 * NS], chunk_tokens=[1, 1, 1, 1],
                             output_tokens=4)

    r = rec()
    apply_client_limits(r, ClientLimits(ttft_timeout_s=0.5))
    assert (r.status, r.error_kind, r.done_ns, r.chunk_ns, r.first_token_ns) == ("timeout", "ttft_timeout",
                                                                                NS // 2, [], None)
    r = rec()
    apply_client_limits(r, ClientLimits(idle_timeout_s=2.0))
    assert (r.status, r.error_kind, r.done_ns, r.output_tokens) == ("timeout", "idle_timeout", 3 * NS + 1, 2)
    r = rec()
    apply_client_limits(r, ClientLimits(idle_timeout_s=2.0), cancel_at_ns=2 * NS)
    assert (r.status, r.done_ns, r.output_tokens) == ("cancelled", 2 * NS, 2)
    r = rec()
    apply_client_limits(r, ClientLimits(timeout_s=10, ttft_timeout_s=2, idle_timeout_s=4))
    assert r.status == "ok" and r.output_tokens == 4


def test_trace_replay_keeps_its_arrival_times_and_shares_its_blocks(tmp_path):
    from importlib import resources

    trace = str(resources.files("tokenpace.workload").joinpath("data", "sample_trace.jsonl"))
    res = run(tmp_path, SimConfig(prefix_caching=True), trace=trace)
    lines = [json.loads(line) for line in open(trace)]
    assert len(res.records) == len(lines) == res.summary["counts"]["ok"]
    assert [r.scheduled_ns for r in res.records] == [round(e["timestamp"] * 1e6) for e in lines]
    assert [r.prompt_tokens for r in res.records] == [e["input_length"] for e in lines]
    # The third request repeats the first one's first two 512-token blocks.
    assert res.records[2].cached_prompt_tokens == 1024
    assert res.engine["stats"]["prefix_cache_hit_rate"] > 0.2


def test_records_dropped_before_the_summary_give_the_same_files_summary_and_records(tmp_path):
    """``tokenpace sim`` writes the records and drops them before summarizing from the columnar
    file (``hold_records=False``): byte for byte the same files, the same summary and the same
    records (read back from the JSONL) as the run that holds them, with warmup, timeouts and
    the cancellation after the grace in play."""
    from tokenpace.results.columnar import columns_path
    from tokenpace.results.columnar_read import read_table

    def one(name: str, hold: bool):
        load = BenchConfig(concurrency=8, duration_s=4.0, warmup_s=1.0, grace_s=0.5, warmup_requests=3,
                           ttft_timeout_s=0.4, input_tokens="512", output_tokens="uniform:min=16,max=2000",
                           out=str(tmp_path / name / "sim.json"))
        return run_sim(SimRunConfig(load=load, engine=SimConfig()), hold_records=hold)

    held, lean = one("held", True), one("lean", False)
    statuses = {r.status for r in held.records}
    assert {"ok", "cancelled"} <= statuses  # the cut after the grace is in play
    assert isinstance(held.records, list) and not isinstance(lean.records, list)
    assert list(lean.records) == held.records
    assert lean.summary == held.summary
    for name in ("sim.json", "sim.records.jsonl", "sim.timeline.jsonl"):  # the result names its --out
        lean_bytes = (tmp_path / "lean" / name).read_bytes().replace(b"/lean/", b"/held/")
        assert lean_bytes == (tmp_path / "held" / name).read_bytes(), name
    a, b = (read_table(columns_path(tmp_path / d / "sim.records.jsonl")) for d in ("held", "lean"))
    for name, column in a.ints.items():
        assert (b.ints[name] == column).all(), name
    assert (a.chunk_ns == b.chunk_ns).all() and (a.chunk_tokens == b.chunk_tokens).all()
