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

    def __init__(self, compute, memory, fixed, y, weight, counts, ref, names, compute_fixed=None,
                 upper: tuple[str, float] | None = None) -> None:
        self.compute, self.memory, self.fixed, self.y, self.weight = compute, memory, fixed, y, weight
        # Compute seconds not scaled by MFU (the decode rows' at a held decode MFU), per step and group.
        self.compute_fixed = np.zeros_like(compute) if compute_fixed is None else compute_fixed
        self.ref, self.names = ref, names
        # Steps that ask the same of the hardware (a closed loop repeats the same few: same prompt
        # lengths, same contexts) are priced once: the distinct rows, and each step's (``_row``).
        work = np.hstack([self.compute, self.compute_fixed, self.memory, self.fixed[:, None]])
        unique, self._row = np.unique(work, axis=0, return_inverse=True)
        self._row = self._row.reshape(-1)
        if len(unique) > 0.8 * len(work):  # hardly any repeats: price the steps as they are
            unique, self._row = work, None
        groups = self.compute.shape[1]
        compute, compute_fixed, memory = (unique[:, k * groups:(k + 1) * groups] for k in range(3))
        self._fixed = np.ascontiguousarray(unique[:, -1])

        # Each operator group's columns, contiguous: a step's roofline time is summed group by group
        # (numpy reduces a short trailing axis slowly, and a fit prices millions of steps). A column
        # that is all zero is left out (None): no step has such work.
        def column(a: np.ndarray, g: int) -> np.ndarray | None:
            return np.ascontiguousarray(a[:, g]) if a[:, g].any() else None

        self._groups = [(column(compute, g), column(compute_fixed, g), column(memory, g)) for g in range(groups)]
        u = 1.0 / ref
        self.x = np.vstack([u, counts * u])  # (terms, steps): the columns of θ
        wx = self.x * weight
        self.gram = wx @ self.x.T  # (terms, terms)
        # With t = (y − a) / ref per step, the loss needs h = Σ w t x and tt = Σ w t²; a is the same
        # for the steps of one distinct row, so each is a sum over distinct rows: h = h0 − a·P and
        # tt = t0 − 2 a·Q + a²·R, with P, Q, R each row's sums over its steps.
        wr = self.weight / ref
        n = len(unique)
        row = np.arange(len(ref)) if self._row is None else self._row
        by = np.zeros((n, len(self.x)))
        np.add.at(by, row, (self.x * wr).T)
        q, r = np.zeros(n), np.zeros(n)
        np.add.at(q, row, wr * y / ref)
        np.add.at(r, row, wr / ref)
        self._by_row = (by, q, r, (wr * y) @ self.x.T, float(np.sum(wr * y * y / ref)))
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
        self.subsets = self._subsets(self.cols)
        # ``upper`` = (name, c): that term at most c / MFU (per row, from the row's MFU). Where the
        # non-negative answer passes it, the answer has the term at its bound (the loss is convex),
        # and the others are fitted again over the subsets without it.
        self._upper = None
        if upper is not None and upper[0] in names and names.index(upper[0]) in self.cols:
            j = names.index(upper[0])
            self._upper = (j, float(upper[1]), self._subsets([c for c in self.cols if c != j]))
        # Per subset list, the subset that held last time: tried first (neighbouring grid points share it).
        self._hint: dict[int, int] = {}

    def _subsets(self, cols: list[int]) -> list[tuple]:
        """Every non-empty subset of ``cols``, the largest first: its columns, its normal equations
        inverted once (``overheads`` runs tens of thousands of times a fit), the terms left out and
        their Gram rows."""
        subsets = sorted(([c for k, c in enumerate(cols) if mask >> k & 1]
                          for mask in range(1, 1 << len(cols))), key=len, reverse=True)
        out = []
        for sub in subsets:
            rest = [c for c in cols if c not in sub]
            out.append((np.array(sub), np.linalg.inv(self.gram[np.ix_(sub, sub)]), np.array(rest),
                        self.gram[np.ix_(sub, rest)]))
        return out

    def roofline(self, mfus: np.ndarray, mbu: float) -> np.ndarray:
        """(len(mfus), steps): the step times without overheads."""
        times = self._times(mfus[:, None], np.array([[mbu]]))
        return times if self._row is None else np.take(times, self._row, axis=-1)

    def _times(self, mfus: np.ndarray, mbus: np.ndarray) -> np.ndarray:
        """The times without overheads of the distinct steps (``_row``), at MFUs and MBUs that
        broadcast against each other (each with a trailing axis of 1): Σ over groups of
        max(compute / MFU + fixed compute, memory / MBU), plus the fixed seconds."""
        per_mfu, per_mbu = 1.0 / mfus, 1.0 / mbus
        total = self._fixed
        for compute, fixed, memory in self._groups:
            c = None if compute is None else compute * per_mfu
            if fixed is not None:
                c = fixed if c is None else c + fixed
            m = None if memory is None else memory * per_mbu
            if c is not None or m is not None:
                total = total + (m if c is None else c if m is None else np.maximum(c, m))
        shape = np.broadcast_shapes(per_mfu.shape, per_mbu.shape, self._fixed.shape)
        return total if total.shape == shape else np.broadcast_to(total, shape)

    def overheads(self, a: np.ndarray, mfus: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """For each row of ``a`` (step times without overheads, one column per step): the least
        loss and its non-negative θ (rows, terms), within the upper bound at each row's MFU
        (``mfus``; none: no bound)."""
        t = (self.y - a) / self.ref  # target of x·θ
        wt = t * self.weight
        return self._bounded(wt @ self.x.T, (wt * t).sum(axis=1), mfus)

    def _distinct_overheads(self, a: np.ndarray, mfus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``overheads`` from the times of the distinct steps (one column each): the sums over steps
        it needs, gathered by distinct step once (``_by_row``), so a fit prices each distinct step
        and not each step."""
        p, q, r, h0, t0 = self._by_row
        return self._bounded(h0 - a @ p, t0 - 2.0 * (a @ q) + (a * a) @ r, mfus)

    def _bounded(self, h: np.ndarray, tt: np.ndarray, mfus: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``_best``, and where a row's θ passes the upper bound, that term fixed at it and the others
        fitted again: with θ_j = u, the targets lose u·x_j, so h loses u·G_j and tt loses
        2u·h_j − u²·G_jj."""
        loss, best = self._best(h, tt, self.subsets)
        if self._upper is None or mfus is None:
            return loss, best
        j, c, subsets = self._upper
        u = c / np.broadcast_to(mfus, loss.shape)
        over = np.flatnonzero(best[:, j] > u)
        if len(over):
            u = u[over]
            lo, th = self._best(h[over] - u[:, None] * self.gram[j][None, :],
                                tt[over] - 2.0 * u * h[over, j] + u * u * self.gram[j, j], subsets)
            th[:, j] = u
            loss[over], best[over] = lo, th
        return loss, best

    def _best(self, h: np.ndarray, tt: np.ndarray, subsets: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
        """The least loss and its θ for each row's correlations ``h`` (rows, terms) and weighted
        sum of squared targets ``tt``.

        Non-negative least squares by the optimality (KKT) conditions: the answer is the one subset
        of the terms whose own least-squares θ is >= 0 and to which no term left out would add (its
        residual correlation h_j − G_j·θ is <= 0). The loss is convex, so that subset is unique, and
        each row leaves the search once its subset is found: the one that held last time first
        (neighbouring grid points share it), then the largest first."""
        loss, best = tt.copy(), np.zeros((len(tt), len(self.x)))  # θ = 0 where no subset holds
        # A left-out term's correlation is "<= 0" within rounding of the terms' scale.
        slack = 1e-12 * (np.abs(h).max(axis=1) + 1e-300)
        pending = np.arange(len(tt))
        hint = self._hint.get(id(subsets), 0)
        for i in (hint, *range(hint), *range(hint + 1, len(subsets))):
            sub, inverse, out, gram_out = subsets[i]
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
            self._hint[id(subsets)] = i
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
        for j in range(0, len(mbus), block):
            a = self._times(mfus[:, None, None], mbus[None, j:j + block, None])  # (F, B, distinct steps)
            lo, th = self._distinct_overheads(a.reshape(-1, a.shape[2]), np.repeat(mfus, a.shape[1]))
            loss[:, j:j + block] = lo.reshape(len(mfus), -1)
            theta[:, j:j + block] = th.reshape(len(mfus), -1, len(self.x))
        return loss, theta

    def pairs(self, mfus: np.ndarray, mbus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Loss and best overheads at each pair (mfus[k], mbus[k]) (in blocks that keep the arrays
        to a few million numbers)."""
        loss, theta = np.empty(len(mfus)), np.empty((len(mfus), len(self.x)))
        block = max(1, GRID_ELEMENTS // self.compute.size)
        for j in range(0, len(mfus), block):
            a = self._times(mfus[j:j + block, None], mbus[j:j + block, None])  # (pairs, distinct steps)
            loss[j:j + block], theta[j:j + block] = self._distinct_overheads(a, mfus[j:j + block])
        return loss, theta

    def refine_mfus(self, grid: np.ndarray, mbus: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each MBU, the least loss with MFU refined around grid[at[k]]: (losses, mfus)."""
        return self._refine(grid, at, lambda x, n: self.pairs(x, np.repeat(mbus, n))[0])

    def refine_mbus(self, mfus: np.ndarray, grid: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each MFU, the least loss with MBU refined around grid[at[k]]: (losses, mbus)."""
        return self._refine(grid, at, lambda x, n: self.pairs(np.repeat(mfus, n), x)[0])

    def _refine(self, grid: np.ndarray, at: np.ndarray, loss_of: Callable) -> tuple[np.ndarray, np.ndarray]:
        """Rows refined together: each row's bracket (the grid values beside its ``at``) sampled at
        PROFILE_POINTS log-spaced values, narrowed to the best one's neighbours, PROFILE_ROUNDS
        times; ``loss_of(values, PROFILE_POINTS)`` prices the rows' samples, row by row."""
        rows = np.arange(len(at))
        last = len(grid) - 1
        lo, hi = grid[np.maximum(at - 1, 0)], grid[np.minimum(at + 1, last)]
        for _ in range(PROFILE_ROUNDS):
            values = np.geomspace(lo, hi, PROFILE_POINTS, axis=1)  # (rows, points)
            loss = loss_of(values.ravel(), PROFILE_POINTS).reshape(values.shape)
            k = np.argmin(loss, axis=1)
            lo, hi = values[rows, np.maximum(k - 1, 0)], values[rows, np.minimum(k + 1, PROFILE_POINTS - 1)]
        return loss[rows, k], values[rows, k]

    def refine_mfu(self, grid: np.ndarray, mbu: float, i: int | None) -> tuple[float, float]:
        """The least loss at this MBU, MFU refined around grid[i] (None: the grid's best); (loss, mfu)."""
        if i is None:
            i = int(np.argmin(self.grid(grid, np.array([mbu]))[0][:, 0]))
        loss, mfu = self.refine_mfus(grid, np.array([mbu]), np.array([i]))
        return float(loss[0]), float(mfu[0])

    def refine_mbu(self, mfu: float, grid: np.ndarray, j: int | None) -> tuple[float, float]:
        """The least loss at this MFU, MBU refined around grid[j] (None: the grid's best); (loss, mbu)."""
        if j is None:
            j = int(np.argmin(self.grid(np.array([mfu]), grid)[0][0]))
        loss, mbu = self.refine_mbus(np.array([mfu]), grid, np.array([j]))
        return float(loss[0]), float(mbu[0])

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
