"""A simulated record's chunk times held as runs of the engine's step ends (tokenpace.chunk_runs)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from bisect import bisect_right

import numpy as np
import orjson
import pytest

from tokenpace.chunk_runs import ChunkRuns, StepEnds, all_runs, gather, json_default
from tokenpace.record import RequestRecord
from tokenpace.simulator import SimConfig, SimRequest, simulate

# Seven engine steps ending at these times (ns).
ENDS = [100, 250, 400, 600, 900, 1300, 1700]


def _steps() -> StepEnds:
    steps = StepEnds()
    steps += ENDS
    return steps


def _preempted(steps: StepEnds) -> ChunkRuns:
    """A request whose prompt ends in step 1, decodes in steps 2 and 3, is preempted, and whose
    recompute samples in step 5 before it decodes again in step 6."""
    runs = ChunkRuns(steps)
    runs.add(1, 2)  # the first token, when the prompt finished
    runs.add(2, 4)  # two decode steps: they continue the run
    runs.add(5, 6)  # after the preemption: the recompute's token
    runs.add(6, 7)
    return runs


def test_a_preempted_requests_chunk_times_are_the_step_ends_of_its_runs():
    runs = _preempted(_steps())
    assert runs.runs == [1, 4, 5, 7]  # two runs: before and after the preemption
    assert runs == [250, 400, 600, 1300, 1700] and [250, 400, 600, 1300, 1700] == runs
    assert runs != [250, 400, 600, 900, 1300, 1700] and runs != [250, 400, 600, 1300]
    assert len(runs) == 5 and bool(runs) and not ChunkRuns(_steps())
    assert (runs[0], runs[2], runs[3], runs[-1], runs[-2], runs[-5]) == (250, 600, 1300, 1700, 1300, 250)
    with pytest.raises(IndexError):
        runs[5]
    with pytest.raises(IndexError):
        runs[-6]
    assert runs[1:4] == [400, 600, 1300] and runs[:0] == [] and type(runs[:]) is list
    assert list(runs) == runs.tolist() == [250, 400, 600, 1300, 1700]
    assert 1300 in runs and 900 not in runs
    assert bisect_right(runs, 1000) == 3  # what the virtual client cuts by
    assert repr(runs) == "[250, 400, 600, 1300, 1700]"


def test_runs_read_as_numpy_and_gather_records_one_after_another():
    steps = _steps()
    a, b = _preempted(steps), ChunkRuns(steps)
    b.add(0, 3)
    assert np.asarray(a).tolist() == [250, 400, 600, 1300, 1700]
    assert np.asarray(a, dtype=np.float64).dtype == np.float64
    assert all_runs([a, b]) and not all_runs([a, [1, 2]]) and not all_runs([])
    assert gather([a, b]).tolist() == [250, 400, 600, 1300, 1700, 100, 250, 400]
    assert gather([b]).tolist() == [100, 250, 400]
    other = ChunkRuns(_steps())  # another run's step ends
    other.add(0, 1)
    assert not all_runs([a, other])


def test_step_ends_appended_after_an_array_was_made_are_in_the_next_one():
    steps = _steps()
    runs = ChunkRuns(steps)
    runs.add(5, 7)
    assert np.asarray(runs).tolist() == [1300, 1700]
    steps += [2000, 2400]
    runs.add(7, 9)
    assert np.asarray(runs).tolist() == [1300, 1700, 2000, 2400]


def test_a_record_holding_runs_copies_pickles_and_serializes_as_its_list():
    runs = _preempted(_steps())
    rec = RequestRecord(request_id="sim-000000", index=0, chunk_ns=runs, chunk_tokens=[1] * 5)
    as_list = dataclasses.replace(rec, chunk_ns=[250, 400, 600, 1300, 1700])
    assert rec == as_list
    assert rec.to_dict() == as_list.to_dict() and type(rec.to_dict()["chunk_ns"]) is list
    assert copy.deepcopy(runs) == [250, 400, 600, 1300, 1700]
    back = pickle.loads(pickle.dumps(rec))
    assert type(back.chunk_ns) is list and back == as_list
    assert orjson.dumps(rec, default=json_default) == orjson.dumps(as_list)
    with pytest.raises(TypeError):
        orjson.dumps(rec)  # without the default: a ChunkRuns is not JSON
    with pytest.raises(TypeError):
        hash(runs)
    mine = runs.copy()
    assert mine == runs and mine.runs == runs.runs and mine.runs is not runs.runs


def test_simulated_records_hold_runs_and_a_preempted_one_holds_several():
    # 256 running on a cache too small for them: decoders are preempted and recomputed.
    cfg = SimConfig(policy="chunked-prefill", concurrency=256, max_num_seqs=256, num_gpu_blocks=2000)
    res = simulate(cfg, [SimRequest(1024, 256) for _ in range(600)])
    assert res.stats["preemptions"] > 0
    several = [r for r in res.records if type(r.chunk_ns) is ChunkRuns and len(r.chunk_ns.runs) > 2]
    assert several, "no record with more than one run"
    for r in res.records:
        assert type(r.chunk_ns) is ChunkRuns and len(r.chunk_ns) == r.output_tokens == 256
        times = r.chunk_ns.tolist()
        assert times[0] == r.first_token_ns and times[-1] == r.last_token_ns == r.done_ns
        assert all(b > a for a, b in zip(times, times[1:]))
