"""Step-time noise: each engine step's time times a random factor, drawn per step from a seed.

A real engine's steps of one shape do not all take the same time: on a CPU engine they spread by
5-30% (RESULTS 7b, 7x), on a GPU by a few percent (clocks, host jitter). The simulator prices every
step at the mean, so a run is deterministic and its percentiles a point. Where a percentile sits at
a tipping point (a closed loop in which two prompts share a step half the time), the engine's own
run-to-run spread is wide while the simulation's is zero. ``StepNoise`` gives step ``i`` (the
engine's step index, counted from 0) the factor ``exp(sd * z_i - sd**2 / 2)``, ``z_i`` standard
normal from a generator seeded with ``seed``: lognormal, mean 1, so the long-run throughput is
kept and only the phases move. Keyed by the step index, a run of k decode steps jumped as one event
gets the very factors stepping one by one would: jumping changes nothing here either.

Runs with the same ``sd`` and different seeds ("members") show how far a figure moves from run to
run on such an engine: ``tokenpace sim --step-noise SD --noise-seed K``; a calibration reports the
spread of its run's steps around the fitted model (``fit.step_noise``).
"""

from __future__ import annotations

import numpy as np

_BLOCK = 4096  # factors drawn at a time
_STREAM = 0x5EED_7E57  # mixed into the seed: the noise's stream apart from any other draw of the run


class StepNoise:
    __slots__ = ("sd", "_rng", "_factors")

    def __init__(self, sd: float, seed: int = 0) -> None:
        if not 0 < sd < 1:
            raise ValueError("step noise must lie in (0, 1)")
        self.sd = sd
        self._rng = np.random.default_rng([int(seed), _STREAM])
        self._factors = np.empty(0)

    def factors(self, start: int, k: int) -> np.ndarray:
        """The factors of steps ``start`` to ``start + k - 1``."""
        end = start + k
        if end > len(self._factors):
            more = max(_BLOCK, end - len(self._factors), len(self._factors))
            z = self._rng.standard_normal(more)
            self._factors = np.concatenate([self._factors, np.exp(self.sd * z - self.sd * self.sd / 2)])
        return self._factors[start:end]

    def factor(self, step: int) -> float:
        """Step ``step``'s factor."""
        return float(self.factors(step, 1)[0])
