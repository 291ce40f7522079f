"""`tokenpace export`: CSV and Parquet round-trips, the documented column set, and a clear error
when pyarrow is missing."""

from __future__ import annotations

import builtins
import csv
import dataclasses
import re
from pathlib import Path

import pytest

from tokenpace.cli.main import main
from tokenpace.errors import UsageError
from tokenpace.record import RequestRecord
from tokenpace.reports import export
from tokenpace.results import read_records

from .runs import make_records, write_run

README = Path(__file__).resolve().parents[2] / "README.md"


def tricky_records() -> list[RequestRecord]:
    """Ordinary records, failures with commas, quotes and newlines in the message, a warmup, a
    non-ASCII id and several tokens per chunk."""
    records = make_records(n=20, errors=3)
    records[0].warmup = True
    records[1].request_id = "req-ü-1"
    records[2].chunk_tokens = [3] * len(records[2].chunk_tokens)
    records[2].output_tokens = sum(records[2].chunk_tokens)
    records[3].retry_after_s = 1.5
    records[4].server_timing = {"prompt_n": 64, "prompt_ms": 12.5, "predicted_n": 20, "predicted_ms": 190.25}
    return records


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_export_round_trips(tmp_path, suffix):
    if suffix == "parquet":
        pytest.importorskip("pyarrow")
    records = tricky_records()
    run = write_run(tmp_path, "run", records)
    out = tmp_path / f"records.{suffix}"
    assert main(["export", str(run), f"--{suffix}", str(out)]) == 0
    assert export.read_export(out) == records


def test_csv_columns_and_derived_values(tmp_path):
    records = tricky_records()
    out = export.write_csv(records, tmp_path / "r.csv")
    with open(out, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(export.COLUMNS)
    assert rows[0]["measured"] == "false" and rows[5]["measured"] == "true"  # warmup is not measured
    # A constructed request: 20 tokens, 10 ms apart, so TPOT is exactly 10 ms and E2E = TTFT + 190 ms.
    row = rows[5]
    assert float(row["tpot_ms"]) == pytest.approx(10.0)
    assert float(row["e2e_ms"]) == pytest.approx(float(row["ttft_ms"]) + 190.0)
    assert row["chunk_count"] == "20" and row["output_tokens_used"] == "20"
    failed = rows[-1]
    assert failed["status"] == "error" and failed["ttft_ms"] == "" and "\n" in failed["error_message"]


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_simulated_records_export_as_their_lists(tmp_path, suffix):
    # A simulated record's chunk times are runs of the engine's steps (tokenpace.chunk_runs).
    if suffix == "parquet":
        pytest.importorskip("pyarrow")
    from tokenpace.simulator import SimConfig, SimRequest, simulate

    records = simulate(SimConfig(concurrency=4), [SimRequest(256, 12) for _ in range(8)]).records
    as_lists = [dataclasses.replace(r, chunk_ns=list(r.chunk_ns)) for r in records]
    ours, theirs = tmp_path / f"runs.{suffix}", tmp_path / f"lists.{suffix}"
    getattr(export, f"write_{suffix}")(records, ours)
    getattr(export, f"write_{suffix}")(as_lists, theirs)
    assert ours.read_bytes() == theirs.read_bytes()
    assert export.read_export(ours) == as_lists


def test_partial_jsonl_exports(tmp_path):
    run = write_run(tmp_path, "run", make_records(n=30))
    jsonl = tmp_path / "run.records.jsonl"
    with open(jsonl, "ab") as fh:
        fh.write(b'{"request_id": "torn", "ind')  # a killed run's torn last line
    out = tmp_path / "partial.csv"
    assert main(["export", str(jsonl), "--csv", str(out)]) == 0
    assert export.read_export(out) == read_records(jsonl)
    assert run.exists()


def test_every_column_is_documented_in_the_readme():
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### `tokenpace export`"):]
    section = section[:section.index("\n## ")]
    documented = set(re.findall(r"`([a-z_0-9]+)`", section))
    missing = [c for c in export.COLUMNS if c not in documented]
    assert not missing, f"columns not documented in the README's export section: {missing}"


def test_parquet_without_pyarrow_is_a_clear_usage_error(tmp_path, monkeypatch, capsys):
    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError("No module named 'pyarrow'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(UsageError, match=r"tokenpace\[parquet\]"):
        export.write_parquet(make_records(n=2), tmp_path / "x.parquet")
    run = write_run(tmp_path, "run", make_records(n=5))
    assert main(["export", str(run), "--parquet", str(tmp_path / "x.parquet")]) == 2
    assert "tokenpace[parquet]" in capsys.readouterr().err


def test_export_needs_a_target(tmp_path, capsys):
    run = write_run(tmp_path, "run", make_records(n=5))
    assert main(["export", str(run)]) == 2
    assert "--csv PATH" in capsys.readouterr().err


def test_export_of_a_sweep_says_it_is_not_a_run(tmp_path, capsys):
    sweep = tmp_path / "sweep.json"
    sweep.write_text('{"schema_version": 1, "kind": "sweep", "steps": []}')
    assert main(["export", str(sweep), "--csv", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sweep.json is a sweep, not a run" in err[0] and "sweep.steps/" in err[0]
