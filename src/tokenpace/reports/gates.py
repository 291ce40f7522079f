"""``--fail-if`` regression gates: the expression grammar, and judging a run against its base.

Grammar (one expression per ``--fail-if``)::

    PATH  OP  CHANGE
    PATH    a figure of the run's summary, dotted: a latency name stands for latency_ms.NAME
            (ttft.p99, tpot.p50, itl.mean, e2e.p99.9, ttft_from_scheduled.p99), or a section path
            (throughput.output_tokens_s, goodput.requests_s, goodput.fraction,
            cost.usd_per_1m_output_tokens, counts.error)
    OP      >  <  >=  <=
    CHANGE  a signed change from the base run: +10% / -5% (relative), +20ms / +0.5s / +250us
            (absolute, latency figures only), or a bare signed number in the figure's own unit
            (+100 for tokens/s, +0.02 for a fraction)

The gate fails when (new − base) OP CHANGE holds, the relative form using (new − base) / |base|.
``ttft.p99 > +10%`` fails a run whose p99 TTFT grew by more than 10%; ``goodput.requests_s <
-5%`` one whose goodput fell by more than 5%. The sign is required so that a change is never
mistaken for an absolute limit (absolute limits belong in ``--slo``).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.metrics.summary import LATENCY_NAMES, figure_value, summary_path  # noqa: F401 - re-exported

GATE_FAILED_EXIT = 6  # documented in the README's exit-code table

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
_TIME_UNITS_MS = {"ms": 1.0, "s": 1000.0, "us": 0.001}
_EXPR = re.compile(
    r"^\s*(?P<path>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_.]+)?)\s*(?P<op>>=|<=|>|<)\s*"
    r"(?P<sign>[+-])?\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>%|ms|s|us)?\s*$")
SECTIONS = ("throughput", "goodput", "cost", "counts", "window")


@dataclass(frozen=True)
class Gate:
    text: str
    path: str
    op: str
    change: float  # signed; percent when relative, else in the figure's unit (ms for latency)
    relative: bool

    def describe_change(self) -> str:
        return f"{self.change:+g}%" if self.relative else f"{self.change:+g}"


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    run: str
    base: float
    new: float | None  # None: the run has no number there because none of its requests succeeded
    change: float | None  # the observed change, in the gate's form (percent or absolute)
    failed: bool


def is_latency(path: str) -> bool:
    keys = summary_path(path)
    return keys[0] == "latency_ms" and keys[-1] != "count"


def parse_gate(text: str) -> Gate:
    """Parse one ``--fail-if`` expression; a bad one raises a one-line ``UsageError``."""
    m = _EXPR.match(text if isinstance(text, str) else "")
    if not m:
        raise UsageError(f"--fail-if {text!r}: expected PATH OP CHANGE, e.g. \"ttft.p99 > +10%\" or "
                         "\"goodput.requests_s < -5%\" (OP: > < >= <=; CHANGE: signed, in % or the "
                         "figure's unit)")
    path, unit = m["path"], m["unit"]
    head = path.partition(".")[0]
    if head not in LATENCY_NAMES and head not in SECTIONS:
        raise UsageError(f"--fail-if {text!r}: unknown figure {path!r}: start with a latency name "
                         f"({', '.join(LATENCY_NAMES)}) or a section ({', '.join(SECTIONS)})")
    if head in LATENCY_NAMES and "." not in path:
        raise UsageError(f"--fail-if {text!r}: say which statistic of {head}, e.g. {head}.p99")
    if m["sign"] is None:
        raise UsageError(f"--fail-if {text!r}: the change needs a sign (+{m['num']}{unit or ''} or "
                         f"-{m['num']}{unit or ''}): it is a change from the base run; absolute limits "
                         "belong in --slo")
    value = float(m["num"]) * (-1 if m["sign"] == "-" else 1)
    if unit in _TIME_UNITS_MS:
        if not is_latency(path):
            raise UsageError(f"--fail-if {text!r}: {unit} only applies to latency figures; "
                             f"{path} is not one (use % or a bare number)")
        value *= _TIME_UNITS_MS[unit]
    return Gate(text=text.strip(), path=path, op=m["op"], change=value, relative=unit == "%")


def judge(gate: Gate, run: str, base_summary: dict[str, Any], new_summary: dict[str, Any],
          base_name: str) -> GateResult:
    base, new = figure_value(base_summary, gate.path), figure_value(new_summary, gate.path)
    if base is not None and new is None and _none_ok(new_summary):
        # Every request failed, so there is no latency to judge: the worst regression there is.
        return GateResult(gate=gate, run=run, base=base, new=None, change=None, failed=True)
    for value, name in ((base, base_name), (new, run)):
        if value is None:
            raise UsageError(f"--fail-if {gate.text!r}: {name} has no number at {gate.path} "
                             "(no SLO or price given for it? a typo?)")
    assert base is not None and new is not None
    delta = new - base
    if gate.relative:
        change = delta / abs(base) * 100 if base else (0.0 if delta == 0 else math.copysign(math.inf, delta))
    else:
        change = delta
    return GateResult(gate=gate, run=run, base=base, new=new, change=change,
                      failed=_OPS[gate.op](change, gate.change))


def _none_ok(summary: dict[str, Any]) -> bool:
    counts = summary.get("counts") or {}
    return bool(counts.get("sent")) and not counts.get("ok")
