"""`run_sweep`: the steps of a sweep, one full run each, then the analysis; the sweep file is
rewritten after every step, so an interrupted or killed sweep keeps every completed step.

Measured steps share one event loop and one target (the built-in server starts once for all of
them); simulated steps call ``run_sim``. A step that raises (the target refused, a bad answer) is
recorded as failed and the sweep goes on; Ctrl-C or SIGTERM during a measured step ends that step
the way bench ends (grace, then cancel) and the sweep stops after it; between steps, or during a
simulated step, it stops at once. Either way the sweep file says ``interrupted`` and keeps the
completed steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenpace.config import BenchConfig
from tokenpace.errors import RunInterrupted, TokenpaceError
from tokenpace.metrics import parse_slo
from tokenpace.results import result_paths
from tokenpace.sweep.achieved import AT_SATURATION, flag_group, flag_shortfall
from tokenpace.sweep.document import write_sweep
from tokenpace.sweep.findings import analyse_group, compare_groups
from tokenpace.sweep.perceived import perceived_latency
from tokenpace.sweep.rates import auto_rates, how_chosen, saturation_ladder, still_growing, wide_miss
from tokenpace.sweep.spec import (SYNC_PROBE_MAX_REQUESTS, SweepConfig, apply_combination, combination_label,
                                  combinations)
from tokenpace.sweep.steps import entry_of_result, entry_without_run

StepCallback = Callable[[dict[str, Any]], None]


@dataclass
class SweepResult:
    config: SweepConfig
    steps: list[dict[str, Any]]
    analysis: dict[str, dict[str, Any]]
    comparison: list[str]
    rate_choice: dict[str, dict[str, Any]]  # per combination: how --rate auto chose its rates
    path: Path
    interrupted: bool = False
    started_utc: str | None = None
    target: dict[str, Any] = field(default_factory=dict)
    perceived: list[dict[str, Any]] = field(default_factory=list)  # --vary stream=on,off (perceived.py)


class _Stop(KeyboardInterrupt):
    """SIGTERM outside a measured step: handled as Ctrl-C is."""


def run_sweep(config: SweepConfig, *, on_step: StepCallback | None = None,
              on_start: Callable[[dict[str, Any]], None] | None = None) -> SweepResult:
    """Run every step (blocking) and return the sweep with its analysis. ``on_step`` is called with
    each step's entry as it ends (the CLI prints its row); ``on_start`` with each step's plan."""
    config.validate()
    slo = parse_slo(config.base.slo) if config.base.slo else None
    path, _ = result_paths(config.out, kind="sweep")
    steps_dir = path.with_name((path.name[:-5] if path.name.endswith(".json") else path.name) + ".steps")
    started = None if config.sim is not None else _utc_now()
    result = SweepResult(config=config, steps=[], analysis={}, comparison=[], rate_choice={}, path=path,
                         started_utc=started)

    def save() -> None:
        result.analysis = {}
        for combo in combinations(config.vary):
            label = combination_label(combo)
            members = [s for s in result.steps if s["group"] == label]
            if members:
                flag_group(members, (result.rate_choice.get(label) or {}).get("saturation_rps"))
                result.analysis[label] = analyse_group(members, axis=config.axis, slo=slo,
                                                       price=config.base.gpu_hour_usd,
                                                       up_to_saturation=config.auto and not any(
                                                           s["status"] == "skipped" for s in members))
        result.comparison = compare_groups(result.analysis, slo)
        result.perceived = perceived_latency(result.steps, config.vary,
                                             "concurrency" if config.axis == "concurrency" else "req/s")
        write_sweep(result)

    with _executor(config) as execute:
        try:
            for combo in combinations(config.vary):
                engine = None if config.sim is None else apply_combination(config.sim, combo)
                run_group(config, combo, engine, execute, result, steps_dir, save, on_step, on_start)
                if result.interrupted:
                    break
        except KeyboardInterrupt:
            result.interrupted = True
    if result.steps and result.steps[-1]["status"] == "interrupted":
        result.interrupted = True
    save()
    return result


def run_group(config: SweepConfig, combo: dict[str, str], engine: Any, execute: Callable,
               result: SweepResult, steps_dir: Path, save: Callable[[], None],
               on_step: StepCallback | None, on_start: Callable | None) -> None:
    group = combination_label(combo)
    base = config.base

    def step(role: str, *, concurrency: int | None = None, rate: float | None = None,
             requests: int | None = None) -> dict[str, Any]:
        index = len(result.steps)
        value = float(rate if config.axis == "rate" and rate is not None else concurrency or 0)
        axis = "rate" if rate is not None else "concurrency"
        slug = "".join(ch if ch.isalnum() else "-" for ch in group).strip("-")
        name = f"{index:02d}{'-' + slug if slug else ''}-{role}-{axis}-{value:g}.json"
        if on_start:
            on_start({"index": index, "role": role, "group": group, "axis": axis, "value": value})
        cfg = config.step_config(concurrency=concurrency, rate=rate, requests=requests,
                                 out=str(steps_dir / name), combo=combo)
        cfg = dataclasses.replace(cfg, progress_step=_step_label(index, role, group, axis, value))
        gpus = base.gpus if base.gpus != 1 or engine is None else engine.tp
        run = None
        try:
            run = execute(cfg, engine)
        except RunInterrupted as exc:
            if exc.result is None:  # before the step's first request
                result.steps.append(entry_without_run(
                    index=index, role=role, group=group, combo=combo, axis=axis, value=value,
                    status="interrupted", reason="interrupted"))
                raise KeyboardInterrupt from None
            run, result.interrupted = exc.result, True  # after its load: the step is whole
        except TokenpaceError as exc:
            entry = entry_without_run(index=index, role=role, group=group, combo=combo, axis=axis,
                                      value=value, status="failed", reason=str(exc))
        except KeyboardInterrupt:
            entry = entry_without_run(index=index, role=role, group=group, combo=combo, axis=axis,
                                      value=value, status="interrupted", reason="interrupted")
            result.steps.append(entry)
            raise
        if run is not None:
            entry = entry_of_result(run, index=index, role=role, group=group, combo=combo, axis=axis,
                                    value=value, gpus=gpus, sweep_path=result.path)
            flag_shortfall(entry, (result.rate_choice.get(group) or {}).get("saturation_rps"))
        result.steps.append(entry)
        save()
        if on_step:
            on_step(entry)
        if entry["status"] == "interrupted":
            result.interrupted = True
        return entry

    if config.axis == "concurrency":
        for c in config.loads or []:
            step("step", concurrency=int(c))
            if result.interrupted:
                return
        return

    cap = base.concurrency
    if config.loads is not None:
        rates = list(config.loads)
    else:
        sync_n = None if base.requests is None else min(base.requests, SYNC_PROBE_MAX_REQUESTS)
        sync = step("sync", concurrency=1, requests=sync_n)
        if result.interrupted:
            return
        sat_rps, sat_c, tried = None, None, []
        for c in saturation_ladder(config.saturation_concurrency):
            sat_n = None if base.requests is None else max(base.requests, 2 * c)
            rps = _rps(step("saturation", concurrency=c, requests=sat_n))
            if result.interrupted:
                return
            tried.append(f"{c}: {rps:.4g} req/s" if rps else f"{c}: failed")
            if not still_growing(sat_rps, rps):
                break  # throughput stopped growing: saturated
            sat_rps, sat_c = rps, c
        sync_rps = _rps(sync)
        if not (sync_rps and sat_rps):
            result.rate_choice[group] = {"rates": [], "how": "a probe failed: no rate to choose"}
            return
        rates = auto_rates(sync_rps, sat_rps, config.auto_steps)
        result.rate_choice[group] = {"sync_rps": sync_rps, "saturation_rps": sat_rps, "saturation_concurrency": sat_c,
                                     "rates": rates,
                                     "how": how_chosen(sync_rps, sat_rps, sat_c, config.auto_steps,
                                                       "concurrency " + ", ".join(tried))}
    sat_rps = (result.rate_choice.get(group) or {}).get("saturation_rps") if config.auto else None
    met_once, skip_reason, overload_rate = False, None, None
    for r in rates:
        if skip_reason is not None and r != overload_rate:
            result.steps.append(entry_without_run(
                index=len(result.steps), role="step", group=group, combo=combo, axis="rate",
                value=r, status="skipped", reason=skip_reason))
            if on_step:
                on_step(result.steps[-1])
            continue
        entry = step("step", concurrency=cap, rate=r)
        if result.interrupted:
            return
        goodput = (entry.get("summary") or {}).get("goodput") or {}
        met_once = met_once or bool((goodput.get("verdict") or {}).get("met"))
        why = wide_miss(goodput) if config.auto and skip_reason is None else None
        if why:
            skip_reason = f"skipped: at {r:g} req/s {why}"
            # Past saturation once all the same, when the SLO held somewhere: the overload region.
            past = [x for x in rates if sat_rps and x > AT_SATURATION * sat_rps and x > r]
            overload_rate = past[0] if met_once and past and sat_rps and r <= sat_rps else None


def _step_label(index: int, role: str, group: str, axis: str, value: float) -> str:
    """The live view's title for this step (the row it becomes is printed when it ends)."""
    what = {"sync": "sync probe", "saturation": "saturate", "step": "step"}[role]
    load = f"{value:g} req/s" if axis == "rate" else f"concurrency {value:g}"
    return f"sweep step {index}{' ' + group if group else ''} · {what} · {load}"


def _rps(entry: dict[str, Any]) -> float | None:
    if entry["status"] not in ("ok", "invalid") or not entry.get("summary"):
        return None
    return entry["summary"]["throughput"].get("requests_s") or None


@contextlib.contextmanager
def _executor(config: SweepConfig) -> Iterator[Callable[[BenchConfig, Any], Any]]:
    """A function that runs one step: simulated, or measured on one loop with one target (its load
    from one process, worker processes or Ray actors: the step's BenchConfig says)."""
    if config.sim is not None:  # here, or fanned out to processes or Ray tasks (fanout.py)
        from tokenpace.sweep.fanout import sim_executor

        with sim_executor(config) as simulate:
            yield simulate
        return

    from tokenpace.runner.bench import run_bench_async, target_for

    if config.base.ray is not None:  # a cluster that cannot be joined fails the sweep once, not each step
        from tokenpace.runner.ray_backend import connect_cluster

        connect_cluster(config.base.ray)
    loop = _new_loop()
    target_cm = target_for(dataclasses.replace(config.base, progress=config.progress))
    previous = _catch_term()
    try:
        target = loop.run_until_complete(target_cm.__aenter__())

        def measure(cfg: BenchConfig, engine: Any) -> Any:
            try:
                return loop.run_until_complete(run_bench_async(cfg, target=target))
            finally:
                _catch_term()  # bench's own handlers are gone after the step: ours again

        yield measure
    finally:
        try:
            loop.run_until_complete(target_cm.__aexit__(None, None, None))
        finally:
            loop.close()
            signal.signal(signal.SIGTERM, previous)


def _catch_term() -> Any:
    """SIGTERM between steps stops the sweep like Ctrl-C (the file is still written)."""
    def stop(signum: int, frame: Any) -> None:
        raise _Stop()

    try:
        return signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        return signal.SIG_DFL


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _utc_now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")
