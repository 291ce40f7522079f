"""Sweeps: raise the load step by step (concurrency or request rate, or `--rate auto`), one full run
per step, then find the knee, the max goodput under the SLO and its cost, and a recommendation per
SLO preset; on the simulator, cross engine what-ifs (`--vary`)."""

from tokenpace.sweep.analysis import CurvePoint, knee, quadrants, slo_crossing
from tokenpace.sweep.rates import auto_rates
from tokenpace.sweep.run import SweepResult, run_sweep
from tokenpace.sweep.spec import SweepConfig

__all__ = ["CurvePoint", "SweepConfig", "SweepResult", "auto_rates", "knee", "quadrants", "run_sweep",
           "slo_crossing"]
