"""The fit's least-squares problem: for given MFU and MBU, the best non-negative linear overheads
in closed form, on a grid of (MFU, MBU) pairs, with the profiles and ranges the report gives."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

GRID_ELEMENTS = 4_000_000  # numbers per block of the vectorized grid
PROFILE_POINTS, PROFILE_ROUNDS = 9, 4  # points per axis of a profile's refinement, refinements


class Problem:
    """Relative residual r = (a + x·θ − y) / ref, with a the roofline's part (MFU, MBU), θ the
    step, sequence and token overheads, x the step's (1, sequences, tokens) and ref a reference
    time: linear in θ, so for given MFU and MBU the best non-negative θ is closed-form (the subset of
    the terms that meets the optimality conditions, see ``overheads``)."""

    def __init__(self, compute, memory, fixed, y, weight, counts, ref, names, compute_fixed=None) -> None:
        self.compute, self.memory, self.fixed, self.y, self.weight = compute, memory, fixed, y, weight
        # Compute seconds not scaled by MFU (the decode rows' at a held decode MFU), per step and group.
        self.compute_fixed = np.zeros_like(compute) if compute_fixed is None else compute_fixed
        self.ref, self.names = ref, names
        u = 1.0 / ref
        self.x = np.vstack([u, counts * u])  # (terms, steps): the columns of θ
        wx = self.x * weight
        self.gram = wx @ self.x.T  # (terms, terms)
        # A term the run cannot tell from the ones before it (one sequence per step everywhere:
        # sequences are the step count) is left at 0 and reported undetermined.
        self.cols = [0]
        for j in range(1, len(self.x)):
            trial = self.cols + [j]
            g = self.gram[np.ix_(trial, trial)]
            if float(np.linalg.det(g)) > 1e-9 * float(np.prod(np.diag(g))):
                self.cols = trial
        # Every subset of the terms, the largest first: its columns, its normal equations inverted
        # once (``overheads`` runs tens of thousands of times a fit), the terms left out and their
        # Gram rows.
        subsets = sorted(([c for k, c in enumerate(self.cols) if mask >> k & 1]
                          for mask in range(1, 1 << len(self.cols))), key=len, reverse=True)
        self.subsets = []
        for sub in subsets:
            out = [c for c in self.cols if c not in sub]
            self.subsets.append((np.array(sub), np.linalg.inv(self.gram[np.ix_(sub, sub)]), np.array(out),
                                 self.gram[np.ix_(sub, out)]))
        self._hint = 0  # the subset that held last time: tried first (neighbouring grid points share it)

    def roofline(self, mfus: np.ndarray, mbu: float) -> np.ndarray:
        """(len(mfus), steps): the step times without overheads."""
        c = self.compute[None, :, :] / mfus[:, None, None] + self.compute_fixed[None]
        return np.maximum(c, (self.memory / mbu)[None]).sum(axis=2) + self.fixed

    def overheads(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each row of ``a``: the least loss and its non-negative θ (rows, terms).

        Non-negative least squares by the optimality (KKT) conditions: the answer is the one subset
        of the terms whose own least-squares θ is >= 0 and to which no term left out would add (its
        residual correlation h_j − G_j·θ is <= 0). The loss is convex, so that subset is unique, and
        each row leaves the search once its subset is found: the one that held last time first
        (neighbouring grid points share it), then the largest first."""
        t = (self.y - a) / self.ref  # target of x·θ
        wt = t * self.weight
        h = wt @ self.x.T  # (rows, terms)
        tt = (wt * t).sum(axis=1)
        loss, best = tt.copy(), np.zeros((len(tt), len(self.x)))  # θ = 0 where no subset holds
        # A left-out term's correlation is "<= 0" within rounding of the terms' scale.
        slack = 1e-12 * (np.abs(h).max(axis=1) + 1e-300)
        pending = np.arange(len(tt))
        hint = self._hint
        for i in (hint, *range(hint), *range(hint + 1, len(self.subsets))):
            sub, inverse, out, gram_out = self.subsets[i]
            hp = h[pending]
            th = hp[:, sub] @ inverse  # (rows, |sub|); the Gram matrix and its inverse are symmetric
            ok = th.min(axis=1) >= 0
            if len(out):
                ok &= (hp[:, out] - th @ gram_out).max(axis=1) <= slack[pending]
            if not ok.any():
                continue
            rows = pending[ok]
            loss[rows] = tt[rows] - (th[ok] * hp[ok][:, sub]).sum(axis=1)
            best[rows[:, None], sub] = th[ok]
            self._hint = i
            pending = pending[~ok]
            if not len(pending):
                break
        return np.maximum(loss, 0.0), best

    def grid(self, mfus: np.ndarray, mbus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Loss and best overheads at every (mfu, mbu) pair (in blocks of MBU values that keep
        the arrays to a few million numbers)."""
        shape = (len(mfus), len(mbus))
        loss, theta = np.empty(shape), np.empty(shape + (len(self.x),))
        block = max(1, GRID_ELEMENTS // (len(mfus) * self.compute.size))
        # (F, 1, steps, groups)
        c = self.compute[None, None] / mfus[:, None, None, None] + self.compute_fixed[None, None]
        for j in range(0, len(mbus), block):
            m = self.memory[None] / mbus[j:j + block, None, None]  # (B, steps, groups)
            a = np.maximum(c, m[None]).sum(axis=3) + self.fixed  # (F, B, steps)
            lo, th = self.overheads(a.reshape(-1, a.shape[2]))
            loss[:, j:j + block] = lo.reshape(len(mfus), -1)
            theta[:, j:j + block] = th.reshape(len(mfus), -1, len(self.x))
        return loss, theta

    def refine_mfu(self, grid: np.ndarray, mbu: float, i: int | None) -> tuple[float, float]:
        """The least loss at this MBU, MFU refined around grid[i] (None: the grid's best); (loss, mfu)."""
        if i is None:
            i = int(np.argmin(self.grid(grid, np.array([mbu]))[0][:, 0]))
        lo, hi = around(grid, i)
        for _ in range(PROFILE_ROUNDS):
            mfus = np.geomspace(lo, hi, PROFILE_POINTS)
            loss = self.grid(mfus, np.array([mbu]))[0][:, 0]
            k = int(np.argmin(loss))
            lo, hi = around(mfus, k)
        return float(loss[k]), float(mfus[k])

    def refine_mbu(self, mfu: float, grid: np.ndarray, j: int | None) -> tuple[float, float]:
        """The least loss at this MFU, MBU refined around grid[j] (None: the grid's best); (loss, mbu)."""
        if j is None:
            j = int(np.argmin(self.grid(np.array([mfu]), grid)[0][0]))
        lo, hi = around(grid, j)
        for _ in range(PROFILE_ROUNDS):
            mbus = np.geomspace(lo, hi, PROFILE_POINTS)
            loss = self.grid(np.array([mfu]), mbus)[0][0]
            k = int(np.argmin(loss))
            lo, hi = around(mbus, k)
        return float(loss[k]), float(mbus[k])

    def predict(self, mfu: float, mbu: float, theta: list[float]) -> np.ndarray:
        return self.roofline(np.array([mfu]), mbu)[0] + (np.asarray(theta) @ self.x) * self.ref

    def overhead_ranges(self, theta: list[float], best: float, limit: float) -> dict[str, tuple[float, float]]:
        """Each overhead's range at this MFU and MBU, the others re-fitted: the loss is quadratic
        in θ, so the half-width is sqrt(margin × (G⁻¹)ⱼⱼ) over the terms the run determines; the
        others range over [0, ∞)."""
        margin = max(0.0, limit - best)
        inv = np.linalg.inv(self.gram[np.ix_(self.cols, self.cols)])
        out = {name: (0.0, float("inf")) for name in self.names}
        for k, j in enumerate(self.cols):
            half = float(np.sqrt(margin * inv[k, k]))
            out[self.names[j]] = (max(0.0, theta[j] - half), theta[j] + half)
        return out


def around(axis: np.ndarray, i: int) -> tuple[float, float]:
    return float(axis[max(0, i - 1)]), float(axis[min(len(axis) - 1, i + 1)])


def profile_range(axis: np.ndarray, profile: np.ndarray, limit: float, best: float,
                  loss_at: Callable[[float], float]) -> tuple[float, float]:
    """The outermost values whose profile loss is within ``limit``: the grid's, then each edge
    bisected (in log space) against the next grid value outside, down to 1%."""
    inside = np.flatnonzero(profile <= limit)
    lo_in = min(float(axis[inside[0]]), best) if len(inside) else best
    hi_in = max(float(axis[inside[-1]]), best) if len(inside) else best
    below, above = axis[axis < lo_in], axis[axis > hi_in]
    lo = bisect(lo_in, float(below[-1]), limit, loss_at) if len(below) else lo_in
    hi = bisect(hi_in, float(above[0]), limit, loss_at) if len(above) else hi_in
    return lo, hi


def bisect(inside: float, outside: float, limit: float, loss_at: Callable[[float], float]) -> float:
    while abs(np.log(outside / inside)) > 0.01:
        mid = float(np.sqrt(inside * outside))
        if loss_at(mid) <= limit:
            inside = mid
        else:
            outside = mid
    return inside
