"""bench writes its records to the columnar parts while the load runs, not after it: parts appear
on disk while requests are still ending, and the run's summary, made from those parts, is the
summary of the records in its JSONL journal."""

from __future__ import annotations

import threading
import time

from tokenpace import BenchConfig, read_records, run_bench, summarize
from tokenpace.results import columnar


def test_parts_are_written_during_the_load_and_the_summary_reads_them(tmp_path, monkeypatch):
    monkeypatch.setattr(columnar, "BATCH_RECORDS", 40)  # a part every 40 records (4,096 by default)
    out = tmp_path / "run.json"
    journal, parts_dir = tmp_path / "run.records.jsonl", tmp_path / "run.columns"
    seen: list[tuple[int, int]] = []  # (records in the journal, parts on disk), while running
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if journal.exists() and parts_dir.exists():
                lines = journal.read_bytes().count(b"\n")
                seen.append((lines, len(list(parts_dir.glob("part-*.npz")))))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run_bench(BenchConfig(concurrency=4, requests=400, input_tokens="32", output_tokens="8",
                                       builtin_timing="parametric", progress=False, out=str(out)))
    finally:
        done.set()
        watcher.join()
    assert result.summary["counts"]["sent"] == 400
    during = [parts for lines, parts in seen if lines < 400]
    assert max(during) >= 3, seen[-20:]  # parts on disk while a quarter of the run was still to end
    assert columnar.is_complete(parts_dir)
    assert len(list(parts_dir.glob("part-*.npz"))) == 10
    # The run's summary came from the parts (in the order the requests ended); the journal holds the
    # same records in the same order, and summarizes to the same figures.
    journal_records = read_records(journal)
    assert summarize(journal_records, window=result.window_ns) == result.summary
    assert list(result.records) == journal_records
