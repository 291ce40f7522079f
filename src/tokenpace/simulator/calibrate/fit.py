"""Fit the roofline's efficiencies and overheads to observed engine steps, by least squares.

The model of a step is ``step_overhead + sequences × seq_overhead + Σ_groups max(compute_s / MFU,
memory_s / MBU)`` (plus TP all-reduces, not fitted), where each operator group's work at the
hardware's full peak comes from ``RooflinePredictor.work``: the fit sees exactly the model the
simulator runs. The objective is the weighted mean of squared *relative* residuals: a 250 ms prefill and a
20 ms decode step count alike, and the two kinds of step (any with prompt tokens; decode only)
weigh half each, whatever their numbers (a run has some thirty decode steps per prompt, and TTFT
depends on the few). Relative to what: dividing by the measured time favours predicting low (a
step measured long counts less), so after a first pass the residuals are divided by the previous
pass's prediction instead (iteratively reweighted least squares): the fit then matches the mean
step time, which is what TPOT and throughput add up.

Why a per-sequence overhead beside the per-step one: a CPU engine (llama.cpp) samples each
sequence's token over the whole vocabulary (262k entries for Gemma 3) on the same core that runs
the model, so its decode step grows by a fixed time per sequence that neither FLOPs nor bytes
explain; GPU engines batch that work and fit it near 0. It is told apart from the compute term
by prefill steps (many tokens, one sequence) and from the step overhead by steps of different
batch sizes; a run where every step held one sequence leaves it at 0 (reported).

How (numpy only, no scipy): for fixed MFU and MBU the model is linear in the two overheads, so
their best non-negative values are closed-form (weighted least squares on a 2×2 system, with the
constrained corners tried). MFU and MBU are searched on a log-spaced grid over their bounds,
vectorized over all steps, then refined around the best point a few times. The max() makes the
objective piecewise smooth with kinks where a group changes bound; a grid cannot be trapped by a
kink or a flat valley the way a gradient method can, and in two dimensions it costs about a
second for thousands of steps. To find a narrow valley between grid points, the search starts
from the profile: for each grid value of MBU, MFU refined (the best of these starts the final
2-D refinement).

The report says how well each parameter is determined: the range over which the best achievable
RMS relative error stays within 10% of the minimum, or within one percentage point of it when the
minimum is near zero (from the grid's profiles for MFU and MBU, closed-form for the overheads). A
wide range means the run did not exercise that term (e.g. MBU and the overhead trade off when
every decode step streams the same bytes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from tokenpace.simulator.calibrate.steps import ObservedStep
from tokenpace.simulator.roofline import RooflineParams, RooflinePredictor

BOUNDS = (1e-3, 1.0)  # MFU and MBU: fractions of peak
GRID = 61  # points per axis of the first grid (12% apart over three decades)
REFINE = (15, 6)  # points per axis of each refinement, refinements
PROFILE_POINTS, PROFILE_ROUNDS = 9, 4  # the same along one axis, for the profiles
GRID_ELEMENTS = 4_000_000  # numbers per block of the vectorized grid
PASSES = 3  # residuals relative to the measured time, then twice to the previous pass's prediction
RANGE_RMS = (1.1, 0.01)  # a parameter's range: RMS relative error within 10% of the best, or 1 point


@dataclass(frozen=True)
class Fit:
    params: RooflineParams
    rms_rel: float  # weighted RMS relative residual at the best point
    predicted_s: np.ndarray  # per step, with the fitted params
    ranges: dict[str, tuple[float, float]]  # parameter → (low, high) within 10% of the best RMS
    at_bound: tuple[str, ...]  # parameters that ended on a bound of their search range


def fit_roofline(predictor: RooflinePredictor, steps: list[ObservedStep], base: RooflineParams) -> Fit:
    """Best MFU, MBU, step and sequence overheads for ``steps`` priced by ``predictor``'s work
    model; ``base`` supplies what is not fitted (the all-reduce latency)."""
    works = [predictor.work(s.batch) for s in steps]
    groups = max(len(w.compute_s) for w in works)
    compute = np.zeros((len(steps), groups))
    memory = np.zeros((len(steps), groups))
    for i, w in enumerate(works):
        compute[i, :len(w.compute_s)] = w.compute_s
        memory[i, :len(w.memory_s)] = w.memory_s
    fixed = np.array([w.link_s + w.allreduces * base.allreduce_latency_s for w in works])
    sequences = np.array([w.sequences for w in works], dtype=float)
    y = np.array([s.duration_s for s in steps])
    weights = _weights(steps)
    ref = y
    for _ in range(PASSES):
        problem = _Problem(compute, memory, fixed, y, weights, sequences, ref)
        fit = _search(problem, base)
        ref = fit.predicted_s
    return fit


def _search(problem: _Problem, base: RooflineParams) -> Fit:
    grid = np.geomspace(BOUNDS[0], BOUNDS[1], GRID)
    loss = problem.grid(grid, grid)[0]
    # Profiles: the best loss at each grid value of one parameter, the other refined around its
    # best grid value. They give the ranges, and the start of the final search (a coarse grid alone
    # can miss a narrow valley between its points).
    profile_mfu = np.array([problem.refine_mbu(float(f), grid, int(np.argmin(loss[i])))[0]
                            for i, f in enumerate(grid)])
    by_mbu = [problem.refine_mfu(grid, float(b), int(np.argmin(loss[:, j]))) for j, b in enumerate(grid)]
    profile_mbu = np.array([lo for lo, _ in by_mbu])
    j = int(np.argmin(profile_mbu))
    mfu, mbu = by_mbu[j][1], float(grid[j])
    points, rounds = REFINE
    span = grid[1] / grid[0]
    f_lo, f_hi, b_lo, b_hi = mfu / span, mfu * span, mbu / span, mbu * span
    for _ in range(rounds):
        mfus = np.geomspace(max(f_lo, BOUNDS[0]), min(f_hi, BOUNDS[1]), points)
        mbus = np.geomspace(max(b_lo, BOUNDS[0]), min(b_hi, BOUNDS[1]), points)
        loss, step_o, seq_o = problem.grid(mfus, mbus)
        best = np.unravel_index(np.argmin(loss), loss.shape)
        f_lo, f_hi, b_lo, b_hi = _around(mfus, best[0]) + _around(mbus, best[1])
    mfu, mbu = float(mfus[best[0]]), float(mbus[best[1]])
    o, so = float(step_o[best]), float(seq_o[best])
    params = replace(base, mfu=mfu, mbu=mbu, step_overhead_s=o, seq_overhead_s=so)
    rms = float(np.sqrt(loss[best]))
    limit = max(rms * RANGE_RMS[0], rms + RANGE_RMS[1]) ** 2
    ranges = {"mfu": _range(grid, profile_mfu, limit, mfu, lambda x: problem.refine_mbu(x, grid, None)[0]),
              "mbu": _range(grid, profile_mbu, limit, mbu, lambda x: problem.refine_mfu(grid, x, None)[0]),
              **problem.overhead_ranges(o, so, float(loss[best]), limit)}
    at_bound = tuple(name for name, v in (("mfu", mfu), ("mbu", mbu))
                     if v <= BOUNDS[0] * 1.0001 or v >= BOUNDS[1] * 0.9999)
    at_bound += tuple(name for name, v in (("step_overhead_s", o), ("seq_overhead_s", so)) if v == 0.0)
    return Fit(params=params, rms_rel=rms, predicted_s=problem.predict(mfu, mbu, o, so),
               ranges=ranges, at_bound=at_bound)


def _weights(steps: list[ObservedStep]) -> np.ndarray:
    """Steps with prompt tokens and decode-only steps weigh half each (all of it if one is absent)."""
    has_prefill = np.array([bool(s.batch.prefill) for s in steps])
    w = np.zeros(len(steps))
    kinds = [k for k in (has_prefill, ~has_prefill) if k.any()]
    for k in kinds:
        w[k] = 1.0 / (k.sum() * len(kinds))
    return w


class _Problem:
    """Relative residual r = (a + o + s·n − y) / ref, with a the roofline's part (MFU, MBU), o the
    step overhead, s the sequence overhead, n the step's sequences and ref a reference time: linear
    in (o, s), so for given MFU and MBU the best non-negative (o, s) are closed-form."""

    def __init__(self, compute, memory, fixed, y, weight, sequences, ref) -> None:
        self.compute, self.memory, self.fixed, self.y, self.weight = compute, memory, fixed, y, weight
        self.ref = ref
        u = 1.0 / ref
        self.x = np.stack([u, sequences * u])  # (2, steps): the columns of (o, s)
        wx = self.x * weight
        self.gram = wx @ self.x.T  # (2, 2)
        # One sequence per step everywhere: s cannot be told from o; it is then left at 0.
        det = float(np.linalg.det(self.gram))
        self.separable = det > 1e-9 * float(self.gram[0, 0] * self.gram[1, 1])
        self.wx = wx

    def roofline(self, mfus: np.ndarray, mbu: float) -> np.ndarray:
        """(len(mfus), steps): the step times without overheads."""
        c = self.compute[None, :, :] / mfus[:, None, None]
        return np.maximum(c, (self.memory / mbu)[None]).sum(axis=2) + self.fixed

    def overheads(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each row of ``a``: the least loss and its non-negative (o, s)."""
        t = (self.y - a) / self.ref  # target of x·θ
        wt = t * self.weight
        h = wt @ self.x.T  # (rows, 2)
        tt = (wt * t).sum(axis=1)
        g = self.gram

        def loss(o, s):
            return tt - 2 * (o * h[:, 0] + s * h[:, 1]) + o * o * g[0, 0] + 2 * o * s * g[0, 1] + s * s * g[1, 1]

        o_only = np.maximum(0.0, h[:, 0] / g[0, 0])
        cands = [(o_only, np.zeros_like(o_only))]
        if self.separable:
            both = np.linalg.solve(g, h.T).T
            ok = (both >= 0).all(axis=1)
            cands.append((np.where(ok, both[:, 0], 0.0), np.where(ok, both[:, 1], 0.0)))
            cands.append((np.zeros_like(o_only), np.maximum(0.0, h[:, 1] / g[1, 1])))
        losses = np.stack([loss(o, s) for o, s in cands])
        k = np.argmin(losses, axis=0)
        rows = np.arange(len(k))
        o = np.stack([c[0] for c in cands])[k, rows]
        s = np.stack([c[1] for c in cands])[k, rows]
        return np.maximum(losses[k, rows], 0.0), o, s

    def grid(self, mfus: np.ndarray, mbus: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Loss and best overheads at every (mfu, mbu) pair (in blocks of MBU values that keep
        the arrays to a few million numbers)."""
        shape = (len(mfus), len(mbus))
        loss, step_o, seq_o = np.empty(shape), np.empty(shape), np.empty(shape)
        block = max(1, GRID_ELEMENTS // (len(mfus) * self.compute.size))
        c = self.compute[None, None] / mfus[:, None, None, None]  # (F, 1, steps, groups)
        for j in range(0, len(mbus), block):
            m = self.memory[None] / mbus[j:j + block, None, None]  # (B, steps, groups)
            a = np.maximum(c, m[None]).sum(axis=3) + self.fixed  # (F, B, steps)
            out = self.overheads(a.reshape(-1, a.shape[2]))
            for arr, val in zip((loss, step_o, seq_o), out):
                arr[:, j:j + block] = val.reshape(len(mfus), -1)
        return loss, step_o, seq_o

    def refine_mfu(self, grid: np.ndarray, mbu: float, i: int | None) -> tuple[float, float]:
        """The least loss at this MBU, MFU refined around grid[i] (None: the grid's best); (loss, mfu)."""
        if i is None:
            i = int(np.argmin(self.grid(grid, np.array([mbu]))[0][:, 0]))
        lo, hi = _around(grid, i)
        for _ in range(PROFILE_ROUNDS):
            mfus = np.geomspace(lo, hi, PROFILE_POINTS)
            loss = self.grid(mfus, np.array([mbu]))[0][:, 0]
            k = int(np.argmin(loss))
            lo, hi = _around(mfus, k)
        return float(loss[k]), float(mfus[k])

    def refine_mbu(self, mfu: float, grid: np.ndarray, j: int | None) -> tuple[float, float]:
        """The least loss at this MFU, MBU refined around grid[j] (None: the grid's best); (loss, mbu)."""
        if j is None:
            j = int(np.argmin(self.grid(np.array([mfu]), grid)[0][0]))
        lo, hi = _around(grid, j)
        for _ in range(PROFILE_ROUNDS):
            mbus = np.geomspace(lo, hi, PROFILE_POINTS)
            loss = self.grid(np.array([mfu]), mbus)[0][0]
            k = int(np.argmin(loss))
            lo, hi = _around(mbus, k)
        return float(loss[k]), float(mbus[k])

    def predict(self, mfu: float, mbu: float, step_o: float, seq_o: float) -> np.ndarray:
        return self.roofline(np.array([mfu]), mbu)[0] + step_o + seq_o * self.x[1] / self.x[0]

    def overhead_ranges(self, o: float, s: float, best: float, limit: float) -> dict[str, tuple[float, float]]:
        """Each overhead's range at this MFU and MBU, the other re-fitted: the loss is quadratic
        in (o, s), so the half-width is sqrt(margin / Schur complement)."""
        g, margin = self.gram, max(0.0, limit - best)
        if not self.separable:
            half = float(np.sqrt(margin / g[0, 0]))
            return {"step_overhead_s": (max(0.0, o - half), o + half), "seq_overhead_s": (0.0, float("inf"))}
        half_o = float(np.sqrt(margin / (g[0, 0] - g[0, 1] ** 2 / g[1, 1])))
        half_s = float(np.sqrt(margin / (g[1, 1] - g[0, 1] ** 2 / g[0, 0])))
        return {"step_overhead_s": (max(0.0, o - half_o), o + half_o),
                "seq_overhead_s": (max(0.0, s - half_s), s + half_s)}


def _around(axis: np.ndarray, i: int) -> tuple[float, float]:
    return float(axis[max(0, i - 1)]), float(axis[min(len(axis) - 1, i + 1)])


def _range(axis: np.ndarray, profile: np.ndarray, limit: float, best: float,
           loss_at: Callable[[float], float]) -> tuple[float, float]:
    """The outermost values whose profile loss is within ``limit``: the grid's, then each edge
    bisected (in log space) against the next grid value outside, down to 1%."""
    inside = np.flatnonzero(profile <= limit)
    lo_in = min(float(axis[inside[0]]), best) if len(inside) else best
    hi_in = max(float(axis[inside[-1]]), best) if len(inside) else best
    below, above = axis[axis < lo_in], axis[axis > hi_in]
    lo = _bisect(lo_in, float(below[-1]), limit, loss_at) if len(below) else lo_in
    hi = _bisect(hi_in, float(above[0]), limit, loss_at) if len(above) else hi_in
    return lo, hi


def _bisect(inside: float, outside: float, limit: float, loss_at: Callable[[float], float]) -> float:
    while abs(np.log(outside / inside)) > 0.01:
        mid = float(np.sqrt(inside * outside))
        if loss_at(mid) <= limit:
            inside = mid
        else:
            outside = mid
    return inside
