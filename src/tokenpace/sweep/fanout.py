"""Where a simulated sweep's steps run: one after another here, or fanned out to local processes
(`--jobs N`) or to Ray tasks across a cluster (`--ray ADDRESS|auto`), with the same files.

A simulated step is a pure function of its configuration, so the grid splits into independent
tasks: one per step when the loads are given (`--concurrency 1,8,32`, `--rate 2,4`), one per
`--vary` combination with `--rate auto` (there each step depends on the ones before: the probes
choose the rates, a wide SLO miss skips the rest). A task runs the group's own logic
(``run.run_group``) and returns every step's run. The sweep then walks the grid in the serial
order, as a serial sweep does, and takes each step's run from its task instead of simulating it
(``Replay``): step numbers, file names, rows, analysis and files are those of the serial sweep,
byte for byte; ``moved`` checks that each step was run with the settings the serial order asks for.
Rows appear in order: a finished task waits for the ones before it.

The work stays in the task: it writes each step's files (in a scratch directory of its own: it
cannot know the step's number, and on a Ray node the sweep's directory may not exist) and judges
the step's records (goodput under each preset, achieved load: ``RunResult.record_figures``). What
comes back is the run without its records, and its files as bytes (``results.bundle``), which the
sweep writes under the serial name: no record is pickled, unpickled or serialized twice, so the
sweep's own process does little more than copy bytes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenpace.config import BenchConfig
from tokenpace.errors import TokenpaceError
from tokenpace.results import JournalRecords, RunResult, write_result
from tokenpace.results.bundle import RunFiles, pack, unpack
from tokenpace.sweep.spec import SweepConfig, apply_combination, combinations

Execute = Callable[[BenchConfig, Any], RunResult]


@dataclass(frozen=True)
class Task:
    """One independent piece of a simulated sweep: a combination's steps at ``loads`` (None: all
    of them, `--rate auto`)."""

    combo: dict[str, str]
    loads: list[float] | None


@dataclass
class Outcome:
    """One step as a task ran it: its configuration, and its run (records left out) with its files,
    or the error it ended with."""

    load: BenchConfig
    result: RunResult | None = None
    files: RunFiles | None = None
    records: int = 0  # how many the run had
    error: str | None = None


def simulate_step(config: SweepConfig, cfg: BenchConfig, engine: Any) -> RunResult:
    """One simulated step, its files written where ``cfg.out`` says."""
    from tokenpace.runner.simulate import SimRunConfig, run_sim

    return run_sim(SimRunConfig(load=cfg, engine=engine, shared_prefix_tokens=config.shared_prefix_tokens,
                                calibration=config.calibration))


def tasks_of(config: SweepConfig) -> list[Task]:
    """The sweep's independent tasks, in the serial order."""
    out = []
    for combo in combinations(config.vary):
        if config.auto:
            out.append(Task(combo, None))
        else:
            out.extend(Task(combo, [load]) for load in config.loads or [])
    return out


def compute(config: SweepConfig, task: Task) -> list[Outcome]:
    """Run one task's steps (in a worker process or a Ray task): each step's files written in a
    scratch directory and read back as bytes, its records judged, then dropped."""
    from tokenpace.sweep.run import SweepResult, run_group  # run.py imports this module

    sub = dataclasses.replace(config, loads=config.loads if task.loads is None else task.loads,
                              progress=False)
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="tokenpace-step-") as scratch_dir:
        steps_dir = Path(scratch_dir)

        def execute(cfg: BenchConfig, engine: Any) -> RunResult:
            try:
                result = simulate_step(sub, cfg, engine)
            except TokenpaceError as exc:
                outcomes.append(Outcome(cfg, error=str(exc)))
                raise
            outcomes.append(Outcome(cfg, result=result, files=pack(result), records=len(result.records)))
            return result

        scratch = SweepResult(config=sub, steps=[], analysis={}, comparison=[], rate_choice={},
                              path=steps_dir / "fan-out.json")
        run_group(sub, task.combo, apply_combination(config.sim, task.combo), execute, scratch,
                  steps_dir, lambda: None, None, None)
    for outcome in outcomes:  # judged by run_group's entries (record_figures): the records can go
        if outcome.result is not None:
            outcome.result = dataclasses.replace(outcome.result, records=[], sim=None)
    return outcomes


class Replay:
    """The executor of the serial walk: each step's run from its task (``pending``: one function
    per task, in the serial order, that waits for its outcomes), saved under the serial name."""

    def __init__(self, pending: list[Callable[[], list[Outcome]]]):
        self._pending = deque(pending)
        self._current: deque[Outcome] = deque()

    def __call__(self, cfg: BenchConfig, engine: Any) -> RunResult:
        from tokenpace.runner.simulate import moved

        while not self._current:
            if not self._pending:
                raise RuntimeError("fan-out: the sweep asked for more steps than its tasks ran")
            self._current = deque(self._pending.popleft()())
        outcome = self._current.popleft()
        if outcome.error is not None:
            raise TokenpaceError(outcome.error)
        result = moved(outcome.result, cfg)
        unpack(outcome.files, result)
        write_result(result)  # last, as a run writes it
        return dataclasses.replace(result, records=JournalRecords(result.records_path, outcome.records))


def describe(config: SweepConfig) -> dict[str, Any]:
    """How the steps ran, for the sweep file: serial, processes (jobs) or Ray tasks."""
    if config.ray is not None:
        return {"backend": "ray", "address": config.ray, "tasks": len(tasks_of(config))}
    if config.jobs > 1:
        return {"backend": "processes", "jobs": config.jobs, "tasks": len(tasks_of(config))}
    return {"backend": "serial"}


@contextlib.contextmanager
def sim_executor(config: SweepConfig) -> Iterator[Execute]:
    """The function that runs one simulated step: here, or taken from processes or Ray tasks."""
    if config.ray is not None:
        with _ray_tasks(config) as pending:
            yield Replay(pending)
    elif config.jobs > 1:
        with _processes(config) as pending:
            yield Replay(pending)
    else:
        yield lambda cfg, engine: simulate_step(config, cfg, engine)


@contextlib.contextmanager
def _processes(config: SweepConfig) -> Iterator[list[Callable[[], list[Outcome]]]]:
    import multiprocessing as mp

    tasks = tasks_of(config)
    # spawn: nothing of this process (its loop, its signal handlers) is inherited
    pool = mp.get_context("spawn").Pool(min(config.jobs, len(tasks)) or 1)
    try:
        yield [pool.apply_async(compute, (config, task)).get for task in tasks]
    finally:
        pool.terminate()  # every task has been taken, or the sweep stopped: none is wanted
        pool.join()


@contextlib.contextmanager
def _ray_tasks(config: SweepConfig) -> Iterator[list[Callable[[], list[Outcome]]]]:
    from tokenpace.runner.ray_backend import connect_cluster

    ray = connect_cluster(config.ray)
    remote = ray.remote(compute).options(num_cpus=1)
    refs = [remote.remote(config, task) for task in tasks_of(config)]
    try:
        yield [lambda ref=ref: ray.get(ref) for ref in refs]
    finally:
        for ref in refs:  # those not taken (an interrupted sweep); a finished one ignores it
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)


def default_jobs() -> int:
    """`--jobs auto`: one process per CPU."""
    return os.cpu_count() or 1
