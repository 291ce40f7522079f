"""Result files written by tokenpace 0.1.0 (schema version 1, before ``tokenpace.results`` existed)
still read: the document, its records and engine timeline load, a report re-judges them, and a
simulation run now writes the same records and timeline bytes as that version did for the same
command, and the same document but for the last digits of means and standard deviations (the
summary now sums samples in the order they come, not sorted)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import orjson

from tokenpace.cli.main import main
from tokenpace.results import SCHEMA_VERSION, load_document, load_run, load_run_data, read_records

DATA = Path(__file__).parent / "data"
# The command that wrote data/v1-sim.* with tokenpace 0.1.0 (commit d17e110):
COMMAND = ["sim", "--concurrency", "4", "--requests", "12", "--input-tokens", "64", "--output-tokens", "16",
           "--warmup", "2", "--slo", "chat", "--quiet"]


def _copy(tmp_path: Path) -> Path:
    for f in DATA.glob("v1-sim.*"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "v1-sim.json"


def test_a_version_1_document_and_its_files_read(tmp_path):
    path = _copy(tmp_path)
    doc = load_document(path)
    assert doc["schema_version"] == 1 <= SCHEMA_VERSION and doc["tool"]["version"] == "0.1.0"
    data = load_run_data(path)
    assert data.notes == []
    assert len(data.records) == 14 and sum(r.warmup for r in data.records) == 2
    assert len(data.timeline) == len((DATA / "v1-sim.timeline.jsonl").read_bytes().splitlines())
    assert doc["summary"]["counts"]["sent"] == 12


def test_a_version_1_run_re_judged_gives_its_saved_numbers_back(tmp_path):
    path = _copy(tmp_path)
    saved = load_document(path)["summary"]
    again = load_run(path, slo="chat")["summary"]  # computed anew from the records
    assert same_numbers(again["latency_ms"], saved["latency_ms"])
    assert again["throughput"] == saved["throughput"]
    assert again["goodput"] == saved["goodput"]
    # Later versions add keys (requests in flight at the window's ends); every key it had is equal.
    assert {k: again["window"][k] for k in saved["window"]} == saved["window"]


def test_the_same_command_writes_the_same_bytes_as_version_1(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the config records --out as given
    _version_1_efficiencies(monkeypatch)
    _version_1_window(monkeypatch)
    assert main([*COMMAND, "--out", "v1-sim.json"]) == 0
    capsys.readouterr()
    assert (tmp_path / "v1-sim.timeline.jsonl").read_bytes() == (DATA / "v1-sim.timeline.jsonl").read_bytes()
    # Records and documents may gain fields (documented in the README); every field the version 1
    # files had is still there with the same value.
    new_lines = (tmp_path / "v1-sim.records.jsonl").read_bytes().splitlines()
    old_lines = (DATA / "v1-sim.records.jsonl").read_bytes().splitlines()
    assert len(new_lines) == len(old_lines)
    assert all(same_numbers(orjson.loads(n), orjson.loads(o), added_ok=True) for n, o in zip(new_lines, old_lines))
    new, old = (orjson.loads(p.read_bytes()) for p in (tmp_path / "v1-sim.json", DATA / "v1-sim.json"))
    assert same_numbers(new, old, added_ok=True)


def _version_1_efficiencies(monkeypatch) -> None:
    """The H100's efficiencies as the version-1 document records them, in place of the figures
    derived from measured kernel tables since (data/efficiency_measured.json, RESULTS 5g: a
    deliberate model change that moves every step time of this command): the test is about the
    files' bytes, not the step model."""
    from tokenpace.simulator.catalog import efficiency

    saved = load_document(DATA / "v1-sim.json")["engine"]["config"]["predictor"]["efficiency"]
    figures = {f: saved[f] for f in ("gemm_flops", "weight_bandwidth", "attention_prefill_flops",
                                     "attention_decode_bandwidth", "elementwise_bandwidth", "allreduce_bus_bandwidth")}
    # Version 1 had no fixed time per elementwise kernel (RESULTS 5h).
    entry = {"gpu": "h100-sxm", "compute": "*", **figures, "allreduce_base_latency_s": saved["allreduce_latency_s"],
             "elementwise_latency_s": 0.0}
    builtin = efficiency.efficiency_entries
    monkeypatch.setattr(efficiency, "efficiency_entries", lambda extra=None, moe=False: [*builtin(extra)[:1], entry])
    efficiency._builtin_efficiency.cache_clear()
    monkeypatch.setattr(efficiency, "_builtin_efficiency", _uncached(efficiency._resolve))


def _version_1_window(monkeypatch) -> None:
    """The closed loop's steady-state window as version 1 ended it: at the first completion strictly
    after the last send. RESULTS 26 ends it at the first completion that no send followed, a
    deliberate change that moves this command's rates (its 14 identical requests end in cohorts of 4,
    the last sends at the instant their cohort ends): the test is about the files' bytes, not the
    window rule (tests/metrics/test_steady_window.py is)."""
    from tokenpace.runner import steady

    def first_after(records, last_send, concurrency):
        later = [int(c[c > last_send].min()) for c in steady._completion_blocks(records) if (c > last_send).any()]
        return min(later, default=None)

    monkeypatch.setattr(steady, "cooldown_start", first_after)
    monkeypatch.setattr(steady, "CLOSED_RULE", steady.CLOSED_RULE.replace(
        "(the first completion that no send followed)", "(the first completion after the last send)"))


def _uncached(resolve):
    return lambda gpu, compute, engine, moe=False: resolve(gpu, compute, None, engine, moe)


# Deliberate model changes since version 1, each with its reason: (key, old value) -> new value.
CHANGED = {
    # The H100's CUDA total as vLLM 0.19.0's start-up logs report it (RESULTS 20), not 79.11 GiB.
    ("cuda_memory_gib", 79.11): 79.19,
}


def same_numbers(a, b, key: str = "", *, added_ok: bool = False) -> bool:
    """Equal, except that a mean or std may differ in its last digits (summation order), and (with
    ``added_ok``) ``a`` may have keys ``b`` has not."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys_ok = b.keys() <= a.keys() if added_ok else a.keys() == b.keys()
        return keys_ok and all(same_numbers(a[k], b[k], k, added_ok=added_ok) for k in b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_numbers(x, y, key, added_ok=added_ok) for x, y in zip(a, b))
    if key in ("mean", "std") and isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return a == CHANGED.get((key, b), b)


def test_records_read_through_the_old_import_path_are_the_same(tmp_path):
    from tokenpace.runner.sink import read_records as old_read_records  # compatibility path

    path = _copy(tmp_path).with_name("v1-sim.records.jsonl")
    assert old_read_records(path) == read_records(path)
    assert orjson.loads(path.read_bytes().splitlines()[0])["request_id"] == read_records(path)[0].request_id
