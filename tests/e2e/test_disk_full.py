"""A disk that fills up during a run, made real with a file-size limit on the `tokenpace` process
(writes past it fail, and the one that crosses it is short, as on a full disk): one line, exit 7,
the summary still printed, and every line that was written is whole."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from tokenpace.errors import ExitCode


def _bench_with_file_limit(tmp_path, limit_bytes, requests, command="bench"):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    extra = ["--builtin-timing", "parametric", "--quiet"] if command == "bench" else []
    return subprocess.run([sys.executable, "-m", "tokenpace", command, "--requests", str(requests),
                           "--output-tokens", "4", *extra, "--out", str(tmp_path / "run.json")],
                          capture_output=True, text=True, timeout=120, preexec_fn=limit,
                          env=dict(os.environ, COLUMNS="200",
                                   PYTHONDONTWRITEBYTECODE="1"))  # no .pyc cut short by the limit


def _whole_lines(path):
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # ends with a newline: no torn last line
    return [json.loads(line) for line in lines[:-1]]


def test_records_file_filling_up_stops_the_run_keeps_lines_whole_and_exits_7(tmp_path):
    proc = _bench_with_file_limit(tmp_path, 16 * 1024, requests=60)  # ~18 records fit
    assert proc.returncode == ExitCode.NOT_SAVED, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokenpace: error: cannot write "), proc.stderr
    assert "each line whole; sending stopped there" in lines[0]
    saved = _whole_lines(tmp_path / "run.records.jsonl")
    doc = json.loads((tmp_path / "run.json").read_text())  # small enough to be written
    counts = doc["summary"]["counts"]
    assert doc["interrupted"] is True and 0 < len(saved) < counts["sent"] < 60
    assert f"the first {len(saved)} of {counts['sent']} records" in lines[0]
    assert "Latency (ms" in proc.stdout  # the summary of every record, in-flight ones included


def test_result_file_that_cannot_be_written_still_shows_the_summary_and_exits_7(tmp_path):
    proc = _bench_with_file_limit(tmp_path, 6 * 1024, requests=5)  # records fit, the result not
    assert proc.returncode == ExitCode.NOT_SAVED, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot write the result file" in lines[0], proc.stderr
    assert "the records are whole in" in lines[0]
    assert len(_whole_lines(tmp_path / "run.records.jsonl")) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.records.jsonl"]  # no torn .tmp
    assert "Latency (ms" in proc.stdout


def test_a_simulation_that_cannot_be_written_leaves_no_torn_file(tmp_path):
    proc = _bench_with_file_limit(tmp_path, 16 * 1024, requests=200, command="sim")
    assert proc.returncode == ExitCode.NOT_SAVED, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokenpace: error: cannot write "), proc.stderr
    for path in tmp_path.iterdir():  # what exists is whole; no temporary file is left
        assert not path.name.endswith(".tmp")
        _whole_lines(path) if path.suffix == ".jsonl" else json.loads(path.read_text())
