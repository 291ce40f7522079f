"""`tokenpace compare` on two runs of the same requests (a measurement and its simulation): the
per-request percentiles are judged with the requests resampled in pairs, which sees a difference
that the draw of lengths hides from the unpaired judgement."""

from __future__ import annotations

import contextlib
import dataclasses
import io

import numpy as np

from tokenpace.cli.main import main as cli_main
from tokenpace.record import RequestRecord
from tokenpace.reports.compare import compare_runs
from tokenpace.reports.pairing import same_requests
from tokenpace.reports.run_data import load_run_data

from .runs import MS, write_run


def _run(n: int, slower: float, *, seed: int, first_index: int = 0) -> list[RequestRecord]:
    """``n`` requests, one at a time, whose prompts (64-192 tokens, the same draw in every run)
    set their TTFT at 3 ms a token, times ``slower``, with 1% noise of the run's own; 20 tokens
    10 ms apart."""
    lengths = np.random.default_rng(7).integers(64, 193, n)
    noise = np.random.default_rng(seed).normal(1.0, 0.01, n)
    out, t = [], 0
    for i, (length, jitter) in enumerate(zip(lengths, noise)):
        first = t + round(3.0 * length * slower * jitter * MS)
        chunks = [first + k * 10 * MS for k in range(20)]
        out.append(RequestRecord(
            request_id=f"r{i}", index=first_index + i, scheduled_ns=t, sent_ns=t, first_token_ns=first,
            first_content_ns=first, last_token_ns=chunks[-1], done_ns=chunks[-1], chunk_ns=chunks,
            chunk_tokens=[1] * 20, chunk_tokens_source="chunk_usage", prompt_tokens=int(length),
            prompt_tokens_source="usage", requested_input_tokens=int(length), requested_output_tokens=20,
            output_tokens=20, output_tokens_source="usage", output_tokens_client=20, http_status=200,
            finish_reason="length"))
        t = chunks[-1] + MS
    return out


def test_the_same_requests_are_judged_in_pairs(tmp_path):
    base = write_run(tmp_path, "measured", _run(40, 1.0, seed=1))
    sim = write_run(tmp_path, "sim", _run(40, 1.04, seed=2))  # 4% slower on every request
    other = write_run(tmp_path, "other", _run(40, 1.04, seed=2, first_index=1000))  # same values, other requests
    runs = [load_run_data(p) for p in (base, sim, other)]
    cmp = compare_runs(runs)
    assert cmp.paired == [False, True, False]
    rows = {row.path: row for row in cmp.rows}
    paired, unpaired = rows["ttft.p50"].cells[1], rows["ttft.p50"].cells[2]
    assert paired.value == unpaired.value  # the same figures: only the judgement differs
    assert paired.noise.beyond and paired.noise.ci95[0] > 0
    # Unpaired, the prompts' spread (64-192 tokens over 40 requests) swamps a 4% shift.
    assert unpaired.noise.verdict == "within noise"
    # TPOT is exactly 10 ms in every run: no difference either way.
    assert not rows["tpot.p50"].cells[1].noise.beyond


def test_runs_pair_only_with_the_same_indices_and_output_lengths():
    a = _run(10, 1.0, seed=1)
    assert same_requests(a, _run(10, 1.1, seed=3))
    assert not same_requests(a, _run(9, 1.0, seed=1))  # a request fewer
    assert not same_requests(a, _run(10, 1.0, seed=1, first_index=1))
    longer = [dataclasses.replace(r, requested_output_tokens=30) if r.index == 4 else r for r in a]
    assert not same_requests(a, longer)
    assert not same_requests([], [])


def test_the_console_says_when_requests_were_paired(tmp_path):
    base = write_run(tmp_path, "measured", _run(40, 1.0, seed=1))
    sim = write_run(tmp_path, "sim", _run(40, 1.04, seed=2))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli_main(["compare", str(base), str(sim)]) == 0
    text = " ".join(out.getvalue().split())
    assert "resampled in pairs" in text
