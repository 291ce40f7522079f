"""What a sweep runs: its axis (concurrency or request rate), the loads, the per-step bound, the
base run configuration, and the `--vary` grid: engine what-ifs on the simulator, client what-ifs
(client_vary.py) against any target."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from tokenpace.config import BenchConfig
from tokenpace.errors import UsageError
from tokenpace.runner.counting import check_holdable
from tokenpace.simulator.config import SimConfig
from tokenpace.simulator.error_band import error_band
from tokenpace.sweep.client_vary import CLIENT_KEYS, apply_client, check_client_key, on_off
from tokenpace.sweep.rates import DEFAULT_AUTO_STEPS

AXES = ("concurrency", "rate")
DEFAULT_CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_SATURATION_CONCURRENCY = 256
SYNC_PROBE_MAX_REQUESTS = 20  # a count-bounded synchronous probe sends at most this many


_bool = on_off  # on/off, true/false, yes/no, 1/0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be >= 1")
    return value


def _spec_decode(text: str, base: SimConfig) -> Any:
    from tokenpace.simulator.spec_decode import SpecDecodeConfig

    return (base.spec_decode or SpecDecodeConfig()) if _bool(text) else None


def _policy(text: str) -> str:
    from tokenpace.simulator.policies import POLICIES

    if text not in POLICIES:
        raise ValueError(f"known policies: {', '.join(POLICIES)}")
    return text


# --vary KEY → (SimConfig field, parse(text, base engine) -> value). The keys are the sim flags'
# names without the dashes; max-batch is max-num-seqs under the name people say.
VARY_KEYS: dict[str, tuple[str, Any]] = {
    "policy": ("policy", lambda t, b: _policy(t)),
    "quant": ("weights", lambda t, b: t),
    "kv-dtype": ("kv_cache_dtype", lambda t, b: t),
    "tp": ("tp", lambda t, b: _positive_int(t)),
    "gpu": ("gpu", lambda t, b: t),
    "max-num-seqs": ("max_num_seqs", lambda t, b: _positive_int(t)),
    "max-batch": ("max_num_seqs", lambda t, b: _positive_int(t)),
    "max-batched-tokens": ("max_batched_tokens", lambda t, b: _positive_int(t)),
    "prefix-caching": ("prefix_caching", lambda t, b: _bool(t)),
    "spec-decode": ("spec_decode", _spec_decode),
}


def parse_loads(text: str, flag: str, *, integer: bool) -> list[float]:
    """'1,4,16' → [1, 4, 16]: positive, finite, distinct; sorted ascending."""
    values = []
    for part in str(text).split(","):
        part = part.strip()
        try:
            value = int(part) if integer else float(part)
        except ValueError:
            kind = "whole numbers" if integer else "numbers"
            raise UsageError(f"{flag} takes {kind} separated by commas, not {text!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} values must be > 0, not {part!r}")
        values.append(value)
    if len(set(values)) != len(values):
        raise UsageError(f"{flag} lists a value twice: {text!r}")
    return sorted(values)


def parse_vary(items: list[str]) -> list[tuple[str, list[str]]]:
    """['policy=a,b', 'quant=bf16,fp8'] → [('policy', ['a', 'b']), ('quant', ['bf16', 'fp8'])].
    output-tokens may separate its values by ';' (a length spec has commas of its own)."""
    out: list[tuple[str, list[str]]] = []
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip().lower().lstrip("-")
        if not sep or not values.strip():
            raise UsageError(f"--vary takes KEY=V1,V2,..., not {item!r}")
        if key not in VARY_KEYS and key not in CLIENT_KEYS:
            raise UsageError(f"--vary: unknown key {key!r} (engine, with --sim: {', '.join(VARY_KEYS)}; "
                             f"client, measured: {', '.join(CLIENT_KEYS)})")
        if any(k == key for k, _ in out):
            raise UsageError(f"--vary {key} given twice")
        # A length spec holds commas itself: its values may be separated by ';' instead.
        vals = [v.strip() for v in values.split(";" if key == "output-tokens" and ";" in values else ",")]
        if any(not v for v in vals) or len(set(vals)) != len(vals):
            raise UsageError(f"--vary {key}: empty or repeated value in {values!r}")
        out.append((key, vals))
    return out


def combinations(vary: list[tuple[str, list[str]]]) -> list[dict[str, str]]:
    """The crossed grid, in the order given (the first combination is the baseline)."""
    if not vary:
        return [{}]
    keys = [k for k, _ in vary]
    return [dict(zip(keys, combo)) for combo in itertools.product(*(vals for _, vals in vary))]


def combination_label(combo: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in combo.items())


def apply_combination(engine: SimConfig, combo: dict[str, str]) -> SimConfig:
    """The base engine with one grid combination applied; a bad value is a UsageError."""
    from tokenpace.simulator.args import check_catalogs

    changes: dict[str, Any] = {}
    for key, text in combo.items():
        if key not in VARY_KEYS:
            continue  # a client key (client_vary.py)
        name, parse = VARY_KEYS[key]
        try:
            changes[name] = parse(text, engine)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"--vary {key}={text}: {exc}") from None
    try:
        config = dataclasses.replace(engine, **changes)
    except ValueError as exc:
        raise UsageError(f"--vary {combination_label(combo)}: {exc}") from None
    check_catalogs(config)
    return config


@dataclass
class SweepConfig:
    """``base``: bench's load/workload/SLO/cost options; its ``requests`` / ``duration_s`` bound
    each step, its ``concurrency`` caps in-flight requests on a rate axis. ``loads``: the axis'
    values, or None with ``axis="rate"`` for `--rate auto`. ``sim``: steps are simulations of this
    engine (None: measured runs against ``base.url``, or the built-in server)."""

    base: BenchConfig = field(default_factory=BenchConfig)
    axis: str = "rate"
    loads: list[float] | None = None
    auto_steps: int = DEFAULT_AUTO_STEPS
    saturation_concurrency: int = DEFAULT_SATURATION_CONCURRENCY
    sim: SimConfig | None = None
    calibration: dict[str, Any] | None = None  # sim from a calibration file: its scope (coverage.py)
    shared_prefix_tokens: int = 0
    vary: list[tuple[str, list[str]]] = field(default_factory=list)
    out: str | None = None
    progress: bool = True
    # --sim: run the steps in this many local processes, or as Ray tasks on the cluster at ``ray``
    # (sweep.fanout); the files are the serial sweep's. A measured sweep's load spreads by the
    # base config's ``workers`` and ``ray`` instead (its steps run one after another).
    jobs: int = 1
    ray: str | None = None

    @property
    def auto(self) -> bool:
        return self.axis == "rate" and self.loads is None

    def validate(self) -> SweepConfig:
        if self.axis not in AXES:
            raise UsageError(f"sweep axis must be one of {AXES}, not {self.axis!r}")
        if self.axis == "concurrency" and not self.loads:
            raise UsageError("a concurrency sweep needs its concurrency values")
        if self.auto_steps < 2:
            raise UsageError(f"--steps must be >= 2, not {self.auto_steps}")
        if self.saturation_concurrency < 1:
            raise UsageError(f"--saturation-concurrency must be >= 1, not {self.saturation_concurrency}")
        for key, _ in self.vary:
            if key in CLIENT_KEYS:
                check_client_key(key, simulated=self.sim is not None)
            elif self.sim is None:
                raise UsageError(f"--vary {key} is an engine parameter: it needs --sim "
                                 f"(against an endpoint: {', '.join(CLIENT_KEYS)})")
        if not (isinstance(self.jobs, int) and self.jobs >= 1):
            raise UsageError(f"--jobs must be a whole number >= 1 or auto, not {self.jobs}")
        if self.sim is None and (self.jobs > 1 or self.ray is not None):
            raise UsageError("--jobs and the steps' Ray tasks are for simulated sweeps (--sim): a measured "
                             "sweep runs its steps one after another (spread each step's load with "
                             "--workers or --ray)")
        if self.jobs > 1 and self.ray is not None:
            raise UsageError("give --jobs or --ray, not both: with --ray the cluster's CPUs run the steps")
        b = self.base
        if self.sim is not None and (b.workers is not None or b.ray is not None):
            raise UsageError("--workers spreads a measured step's load: a simulated sweep has none "
                             "(run its steps in parallel with --jobs N or --ray)")
        if b.trace or b.conversations:
            raise UsageError("a sweep sets the load itself: --trace and --conversations runs cannot be swept")
        if b.requests is None and b.duration_s is None:
            raise UsageError("give --requests-per-step or --duration-per-step")
        if self.axis == "concurrency" and b.concurrency is not None:
            raise UsageError("--concurrency is the swept axis here; it cannot also be a cap")
        if self.axis == "concurrency":  # refused before any step runs, not found out at the step
            check_holdable(int(max(self.loads or [0])), b.requests, flag="--requests-per-step")
        for combo in combinations(self.vary):  # a typo in the grid fails before any step runs
            if self.sim is not None:
                apply_combination(self.sim, combo)
            apply_client(self.base, combo).validate()
        return self

    def step_config(self, *, concurrency: int | None = None, rate: float | None = None,
                    requests: int | None = None, out: str | None = None,
                    combo: dict[str, str] | None = None) -> BenchConfig:
        """The BenchConfig of one step (of the grid's combination ``combo``: its client keys)."""
        b = apply_client(self.base, combo or {})
        changes: dict[str, Any] = dict(concurrency=concurrency, rate=rate, out=out, progress=self.progress)
        if rate is None and concurrency is not None and (b.workers or 1) > concurrency:
            changes["workers"] = concurrency  # a closed-loop step of c streams has at most c workers
        if requests is not None:
            changes["requests"] = requests
        return dataclasses.replace(b, **changes).validate()

    def to_dict(self) -> dict[str, Any]:
        base = {k: v for k, v in self.base.to_dict().items() if k not in ("concurrency", "rate", "out")}
        return {
            "axis": self.axis, "loads": self.loads, "auto": self.auto, "auto_steps": self.auto_steps,
            "saturation_concurrency": self.saturation_concurrency,
            "concurrency_cap": self.base.concurrency if self.axis == "rate" else None,
            "requests_per_step": self.base.requests, "duration_per_step_s": self.base.duration_s,
            "simulated": self.sim is not None, "shared_prefix_tokens": self.shared_prefix_tokens,
            "vary": [{"key": k, "values": v} for k, v in self.vary],
            "base": base,
            "engine": None if self.sim is None else self.sim.to_dict(),
            "calibration": None if self.calibration is None else self.calibration.get("path"),
            "validated_error": None if self.sim is None else error_band(self.sim.predictor, self.calibration is not None),
            "fan_out": fan_out(self),
        }


def fan_out(config: SweepConfig) -> dict[str, Any]:
    from tokenpace.sweep.fanout import describe  # fanout.py imports this module

    return describe(config)
