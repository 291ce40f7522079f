"""Workloads on the real runner against the built-in server: traces keep their timing,
conversations wait for the previous turn, datasets and shared prefixes shape the plan."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tokenpace import BenchConfig, UsageError, run_bench


def _bench(url, tmp_path, **kw):
    kw.setdefault("output_tokens", "4")
    return run_bench(BenchConfig(url=url, progress=False, out=str(tmp_path / "r.json"), **kw))


def test_trace_replay_honours_arrival_times_scaled(logged_server, tmp_path):
    trace = tmp_path / "trace.jsonl"
    stamps_ms = [0, 100, 250, 400, 700, 1000]
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": 64, "output_length": 3,
                                         "hash_ids": [i]}) + "\n" for i, t in enumerate(stamps_ms)))
    result = _bench(logged_server[0].url, tmp_path, trace=str(trace), time_scale=0.5)
    recs = sorted(result.records, key=lambda r: r.index)
    assert len(recs) == 6 and result.load["mode"] == "trace"
    offsets_ms = [(r.scheduled_ns - recs[0].scheduled_ns) / 1e6 for r in recs]
    assert offsets_ms == pytest.approx([t * 0.5 for t in stamps_ms], abs=0.01)
    assert all(r.output_tokens == 3 for r in recs)  # lengths from the trace
    assert all(r.sent_ns >= r.scheduled_ns for r in recs)  # never before its time


def test_conversation_turns_wait_for_the_previous_reply_and_think_time(logged_server, tmp_path):
    result = _bench(logged_server[0].url, tmp_path, conversations="sessions=3,turns=3,think-time=0.2s",
                    input_tokens="16")
    assert result.summary["counts"]["ok"] == 9
    by_session = defaultdict(list)
    for r in result.records:
        by_session[r.session].append(r)
    assert len(by_session) == 3
    for turns in by_session.values():
        turns.sort(key=lambda r: r.turn)
        assert [r.turn for r in turns] == [1, 2, 3]
        for prev, nxt in zip(turns, turns[1:]):
            assert nxt.scheduled_ns >= prev.done_ns + 0.2e9 - 1e6  # after the reply + think time
            assert nxt.sent_ns >= nxt.scheduled_ns
            # history first: each turn's prompt holds the previous one (server's own count)
            assert nxt.prompt_tokens > prev.prompt_tokens + prev.output_tokens
    assert set(result.summary["breakdowns"]["ttft_by_turn_ms"]) == {"1", "2", "3"}


def test_dataset_sends_each_entry_once_by_default_and_counts_skipped_lines(logged_server, tmp_path):
    data = tmp_path / "req.jsonl"
    lines = [json.dumps({"prompt": f"tell me about river {i}", "output_tokens": 2 + i}) for i in range(5)]
    data.write_text("\n".join(lines[:2] + ["{broken"] + lines[2:]) + "\n")
    with pytest.raises(UsageError, match=r"req.jsonl:3"):
        _bench(logged_server[0].url, tmp_path, dataset=str(data), api="completions")
    result = _bench(logged_server[0].url, tmp_path, dataset=str(data), api="completions",
                    skip_bad_lines=True)
    assert result.summary["counts"]["ok"] == 5
    assert sorted(r.output_tokens for r in result.records) == [2, 3, 4, 5, 6]
    assert result.workload_info["dataset"]["skipped_lines"] == 1


def test_shared_prefix_grouped_order_sends_each_group_together(logged_server, tmp_path):
    result = _bench(logged_server[0].url, tmp_path, concurrency=1, input_tokens="8",
                    shared_prefix="groups=3,prefix-tokens=64,per-group=4,order=grouped")
    groups = [r.prefix_group for r in sorted(result.records, key=lambda r: r.index)]
    assert groups == [0] * 4 + [1] * 4 + [2] * 4
    assert all(r.prompt_tokens >= 64 + 8 for r in result.records)


def test_an_unsorted_trace_is_refused_or_sorted_and_said(tmp_path):
    from tokenpace.errors import ExitCode

    from .helpers import run_cli

    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": 16, "output_length": 2}) + "\n"
                             for t in (0, 300, 100, 400)))
    refused = run_cli("bench", "--trace", str(trace), "--out", str(tmp_path / "a.json"))
    assert refused.returncode == ExitCode.USAGE
    assert refused.stderr.strip().splitlines() == [
        f"tokenpace: error: --trace: {trace}:3: timestamp 100 ms is earlier than 300 ms on line 2; "
        "the trace must be in time order (--sort-trace sorts it)"]
    sorted_run = run_cli("bench", "--trace", str(trace), "--sort-trace", "--quiet",
                         "--out", str(tmp_path / "b.json"))
    # The sorted trace is sent on its schedule. On a busy machine the client may keep it late (schedule
    # lag p99 over 10 ms: exit 5, the run marked invalid); that is the load check's business, not the
    # sorting's, so either verdict is accepted as long as it is the lag that was judged.
    assert sorted_run.returncode in (ExitCode.OK, ExitCode.INVALID_RUN), sorted_run.stderr
    assert "trace sorted by timestamp (1 line was out of order)" in " ".join(sorted_run.stdout.split())
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["summary"]["counts"]["ok"] == 4
    lg = doc["load_generator"]
    assert lg["valid"] is (sorted_run.returncode == ExitCode.OK)
    assert lg["valid"] or all("schedule lag" in reason for reason in lg["invalid_reasons"]), lg
