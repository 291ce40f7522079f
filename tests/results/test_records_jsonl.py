"""Records JSONL lines with a simulated run's chunk times cut from text made once
(tokenpace.results.records_jsonl): every line is the bytes orjson gives the record itself."""

from __future__ import annotations

import dataclasses

import orjson

from tokenpace.chunk_runs import ChunkRuns, StepEnds, json_default
from tokenpace.record import RequestRecord
from tokenpace.results.records_jsonl import StepEndsText, record_lines
from tokenpace.simulator import SimConfig, SimRequest, simulate


def _plain(row) -> bytes:
    return orjson.dumps(row, default=json_default, option=orjson.OPT_APPEND_NEWLINE)


def test_runs_are_cut_from_the_step_ends_text_at_every_width_of_number():
    steps = StepEnds()
    steps += [0, 9, 10, 99, 100, 12345, 999_999_999, 1_000_000_000, 2**62, 2**63 - 1]
    text = StepEndsText(steps)
    assert text.usable
    for start in range(len(steps)):
        for stop in range(start, len(steps) + 1):
            runs = ChunkRuns(steps)
            runs.add(start, stop)
            assert text.json(runs) == orjson.dumps(steps[start:stop])
    runs = ChunkRuns(steps)
    runs.add(0, 2)
    runs.add(4, 5)
    runs.add(8, 10)  # three runs: after two preemptions
    assert text.json(runs) == orjson.dumps(runs.tolist())


def test_step_ends_with_a_sign_are_not_cut_from_text():
    steps = StepEnds()
    steps += [-5, 10]
    assert not StepEndsText(steps).usable
    record = RequestRecord(request_id="r", index=0)
    record.chunk_ns = ChunkRuns(steps)
    record.chunk_ns.add(0, 2)
    assert list(record_lines([record])) == [_plain(record)]


def test_a_simulated_runs_lines_are_the_records_own_bytes():
    # Preemptions (records of several runs), timeouts (chunk times as lists, token counts of
    # their own), shared token-count lists, and a timeline row among the records.
    cfg = SimConfig(model="llama-3.1-8b", gpu="h100-sxm", concurrency=512, max_num_seqs=512,
                    num_gpu_blocks=3000, timeout_s=6.0, timeline=True)
    res = simulate(cfg, [SimRequest(600 + 97 * (i % 13), 40 + 31 * (i % 7)) for i in range(1500)])
    assert res.stats["preemptions"] > 0
    kinds = {(type(r.chunk_ns), r.status) for r in res.records}
    assert (ChunkRuns, "ok") in kinds and any(status == "timeout" for _, status in kinds)
    assert any(type(r.chunk_ns) is ChunkRuns and len(r.chunk_ns.runs) > 2 for r in res.records)
    rows = [*res.records, res.timeline[0], res.records[0]]
    assert list(record_lines(rows)) == [_plain(r) for r in rows]


def test_a_changed_record_is_written_as_it_now_is():
    steps = StepEnds()
    steps += [100, 200, 300]
    ones = [1, 1, 1]
    records = []
    for i in range(3):
        r = RequestRecord(request_id=f"r{i}", index=i, server_timing={"queue_ms": 1.5}, retry_after_s=0.25)
        r.chunk_ns = ChunkRuns(steps)
        r.chunk_ns.add(0, 3)
        r.chunk_tokens = ones  # one list shared by every record, as the simulator hands it out
        records.append(r)
    records[2] = dataclasses.replace(records[2], chunk_tokens=[2, 1, 1], status="timeout")
    assert list(record_lines(records)) == [_plain(r) for r in records]
