"""Dataset files: ShareGPT, OpenAI-style JSONL, Mooncake traces; bad lines stop the run or are counted."""

from __future__ import annotations

import json
from itertools import islice

import pytest

from tokenpace.config import BenchConfig
from tokenpace.errors import UsageError
from tokenpace.workload import load_dataset, plan_requests, workload_from_config
from tokenpace.workload.datasets import SAMPLES


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_sharegpt_first_human_turn_and_reply_length(tmp_path):
    f = tmp_path / "sg.json"
    f.write_text(json.dumps([
        {"conversations": [{"from": "system", "value": "be brief"},
                           {"from": "human", "value": "name three rivers"},
                           {"from": "gpt", "value": "one two three four five"},
                           {"from": "human", "value": "more"}]},
        {"conversations": [{"from": "human", "value": "hello there"}]},
    ]))
    spec = workload_from_config(BenchConfig(dataset=str(f), output_tokens="7"))
    plan = list(plan_requests(spec))
    assert [p.prompt for p in plan] == ["name three rivers", "hello there"]
    assert [p.input_tokens for p in plan] == [3, 2]  # words, without a tokenizer
    assert [p.output_tokens for p in plan] == [5, 7]  # the reply's length; no reply: --output-tokens


def test_jsonl_messages_and_prompts(tmp_path):
    f = write_jsonl(tmp_path / "r.jsonl", [
        {"messages": [{"role": "system", "content": "you help"}, {"role": "user", "content": "a b c"}],
         "max_tokens": 40},
        {"prompt": "write a poem", "output_tokens": 12},
        {"prompt": "no length given"},
    ])
    data = load_dataset(f)
    assert data.format.startswith("prompt") and len(data.entries) == 3
    plan = list(plan_requests(workload_from_config(BenchConfig(dataset=str(f), output_tokens="9"))))
    assert plan[0].prompt == [{"role": "system", "content": "you help"}, {"role": "user", "content": "a b c"}]
    assert [p.output_tokens for p in plan] == [40, 12, 9]
    # the completions API gets one text
    completions = list(plan_requests(workload_from_config(BenchConfig(dataset=str(f), api="completions"))))
    assert completions[0].prompt == "system: you help\n\nuser: a b c"


def test_mooncake_trace_lines(tmp_path):
    f = write_jsonl(tmp_path / "t.jsonl", [
        {"timestamp": 1000, "input_length": 600, "output_length": 20, "hash_ids": [1, 2]},
        {"timestamp": 1500, "input_length": 100, "output_length": 5, "hash_ids": [1]},
    ])
    data = load_dataset(f, flag="--trace")
    assert data.is_trace
    assert [(e.timestamp_ms, e.input_tokens, e.output_tokens, e.hash_ids) for e in data.entries] == [
        (1000.0, 600, 20, (1, 2)), (1500.0, 100, 5, (1,))]


BAD_ROWS = [
    {"prompt": "fine"},
    "{not json",
    {"messages": "not a list"},
    {"prompt": "fine too", "max_tokens": 0},
    {"something": "else"},
    {"prompt": "last"},
]


def test_bad_line_stops_with_file_and_line(tmp_path):
    f = write_jsonl(tmp_path / "bad.jsonl", BAD_ROWS)
    with pytest.raises(UsageError, match=r"bad\.jsonl:2: not valid JSON .*--skip-bad-lines"):
        load_dataset(f)


def test_bad_lines_skipped_and_counted(tmp_path):
    f = write_jsonl(tmp_path / "bad.jsonl", BAD_ROWS)
    data = load_dataset(f, skip_bad=True)
    assert [e.prompt for e in data.entries] == ["fine", "last"]
    assert [where for where, _ in data.skipped] == ["2", "3", "4", "5"]
    assert "max_tokens" in data.skipped[2][1]


def test_sharegpt_bad_entry_is_named(tmp_path):
    f = tmp_path / "sg.json"
    f.write_text(json.dumps([{"conversations": [{"from": "human", "value": "ok"}]},
                             {"conversations": [{"from": "gpt", "value": "no question"}]}]))
    with pytest.raises(UsageError, match="sg.json:entry 2: conversation has no non-empty human turn"):
        load_dataset(f)


def test_empty_and_all_bad_files(tmp_path):
    f = write_jsonl(tmp_path / "e.jsonl", ["{oops"])
    with pytest.raises(UsageError, match=r"no usable request \(1 bad lines skipped\)"):
        load_dataset(f, skip_bad=True)


def test_trace_and_dataset_are_told_apart(tmp_path):
    trace = write_jsonl(tmp_path / "t.jsonl", [{"timestamp": 0, "input_length": 5, "output_length": 5}])
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "x"}])
    with pytest.raises(UsageError, match="use --trace"):
        workload_from_config(BenchConfig(dataset=str(trace)))
    with pytest.raises(UsageError, match="not a trace"):
        workload_from_config(BenchConfig(trace=str(prompts)))
    with pytest.raises(UsageError, match="at most one"):
        workload_from_config(BenchConfig(trace=str(trace), dataset=str(prompts)))


def test_shipped_samples_are_small_and_valid():
    for flag, path in SAMPLES.items():
        assert path.stat().st_size < 200_000
        data = load_dataset("sample", flag=flag)
        assert len(data.entries) >= 100 and not data.skipped
    assert load_dataset("sample").format == "sharegpt"
    assert load_dataset("sample", flag="--trace").is_trace


def test_dataset_plan_is_finite_and_in_file_order():
    spec = workload_from_config(BenchConfig(dataset="sample"))
    plan = list(plan_requests(spec))
    assert len(plan) == spec.finite_requests == 100
    assert [p.index for p in islice(plan, 5)] == [0, 1, 2, 3, 4]


UNSORTED_TRACE = [{"timestamp": t, "input_length": 20, "output_length": 3} for t in (0, 400, 200, 600)]


def test_trace_out_of_time_order_is_refused_at_its_line(tmp_path):
    f = write_jsonl(tmp_path / "t.jsonl", UNSORTED_TRACE)
    with pytest.raises(UsageError, match=r"t\.jsonl:3: timestamp 200 ms is earlier than 400 ms on line 2; "
                                         r"the trace must be in time order \(--sort-trace sorts it\)"):
        workload_from_config(BenchConfig(trace=str(f)))


def test_sort_trace_replays_in_time_order_and_says_how_many_moved(tmp_path):
    from tokenpace.workload import workload_summary

    f = write_jsonl(tmp_path / "t.jsonl", UNSORTED_TRACE)
    spec = workload_from_config(BenchConfig(trace=str(f), sort_trace=True))
    assert [p.offset_s for p in plan_requests(spec)] == [0.0, 0.2, 0.4, 0.6]
    assert workload_summary(spec)["trace"]["sorted_out_of_order"] == 1
    with pytest.raises(UsageError, match="--sort-trace needs --trace"):
        workload_from_config(BenchConfig(sort_trace=True))


def test_a_bad_first_line_is_reported_before_the_rest_of_the_file_is_read(tmp_path):
    # A FIFO whose writer never closes: reading the file whole would wait forever for its end.
    import os
    import threading

    fifo = tmp_path / "endless.jsonl"
    os.mkfifo(fifo)
    outcome = []

    def load():
        try:
            load_dataset(fifo)
        except UsageError as exc:
            outcome.append(str(exc))

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    writer = os.open(fifo, os.O_WRONLY)  # opens once the reader has
    try:
        os.write(writer, b'{"oops": 1}\n' + b'{"prompt": "more"}\n' * 1000)
        reader.join(timeout=60)
        assert outcome and ":1: expected 'conversations'" in outcome[0]
    finally:
        os.close(writer)
        reader.join(timeout=60)
