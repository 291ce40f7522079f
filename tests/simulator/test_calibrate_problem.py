"""The calibration's non-negative least squares (``calibrate.problem.Problem.overheads``).

It solves by the optimality conditions, trying the subset that held last time first; here every
answer is checked against trying every subset of the terms and keeping the best feasible one.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tokenpace.simulator.calibrate.problem import Problem


def brute_force(problem: Problem, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = (problem.y - a) / problem.ref
    wt = t * problem.weight
    h, tt = wt @ problem.x.T, (wt * t).sum(axis=1)
    loss, theta = tt.copy(), np.zeros((len(tt), len(problem.x)))
    for r in range(1, len(problem.cols) + 1):
        for sub in map(list, itertools.combinations(problem.cols, r)):
            th = np.linalg.solve(problem.gram[np.ix_(sub, sub)], h[:, sub].T).T
            cand = tt - (th * h[:, sub]).sum(axis=1)
            better = (th >= 0).all(axis=1) & (cand < loss)
            loss[better] = cand[better]
            theta[better] = 0.0
            theta[np.ix_(np.flatnonzero(better), sub)] = th[better]
    return np.maximum(loss, 0.0), theta


def test_the_overheads_are_the_best_non_negative_ones_whatever_the_order_tried():
    rng = np.random.default_rng(3)
    for _ in range(30):
        steps, terms = 120, int(rng.integers(1, 7))
        counts = rng.random((terms, steps)) * rng.integers(1, 20, (terms, 1))
        y = rng.random(steps) + 0.5
        problem = Problem(np.zeros((steps, 1)), np.zeros((steps, 1)), np.zeros(steps), y,
                          np.full(steps, 1 / steps), counts, y.copy(), tuple(f"t{i}" for i in range(terms + 1)))
        for _ in range(3):  # the hint left by one call must not change the next call's answer
            a = y + rng.normal(0.0, 0.6, (40, steps))  # targets that call for some terms and not others
            loss, theta = problem.overheads(a)
            want_loss, want_theta = brute_force(problem, a)
            assert np.allclose(loss, want_loss, rtol=1e-9, atol=1e-12)
            assert np.allclose(theta, want_theta, rtol=1e-7, atol=1e-10)
            assert (theta >= 0).all()


def test_a_grid_over_repeated_steps_gives_what_each_step_priced_alone_gives():
    # A closed loop repeats the same steps: the grid prices each distinct one once and gathers the
    # sums by distinct step. Its losses and overheads must be those of pricing every step.
    rng = np.random.default_rng(5)
    distinct, steps, groups = 9, 300, 3
    row = rng.integers(0, distinct, steps)
    compute, memory = rng.random((distinct, groups))[row] * 1e-3, rng.random((distinct, groups))[row] * 1e-3
    fixed = rng.random(distinct)[row] * 1e-4
    counts = np.vstack([rng.integers(1, 9, steps), rng.integers(0, 3, steps)]).astype(float)
    y = compute.sum(axis=1) / 0.4 + memory.sum(axis=1) / 0.7 + fixed + counts[0] * 2e-4 + rng.normal(0, 2e-5, steps)
    problem = Problem(compute, memory, fixed, y, np.full(steps, 1 / steps), counts, y.copy(), ("step", "seq", "arr"))
    mfus, mbus = np.geomspace(0.1, 1.0, 7), np.geomspace(0.2, 2.0, 5)
    loss, theta = problem.grid(mfus, mbus)
    for i, f in enumerate(mfus):
        for j, b in enumerate(mbus):
            each = np.maximum(compute / f, memory / b).sum(axis=1) + fixed  # every step priced alone
            want_loss, want_theta = problem.overheads(each[None])
            assert loss[i, j] == pytest.approx(want_loss[0], rel=1e-9, abs=1e-15)
            assert np.allclose(theta[i, j], want_theta[0], rtol=1e-7, atol=1e-12)
    assert problem.roofline(mfus[:1], float(mbus[0]))[0] == pytest.approx(
        np.maximum(compute / mfus[0], memory / mbus[0]).sum(axis=1) + fixed, rel=1e-12)


def brute_force_bounded(problem: Problem, a: np.ndarray, j: int, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The best θ >= 0 with θ_j <= u (per row) by trying every subset of the terms, θ_j left out, free
    or held at u."""
    t = (problem.y - a) / problem.ref
    wt = t * problem.weight
    h, tt, g = wt @ problem.x.T, (wt * t).sum(axis=1), problem.gram
    loss, theta = tt.copy(), np.zeros((len(tt), len(problem.x)))
    for r in range(0, len(problem.cols) + 1):
        for sub in map(list, itertools.combinations(problem.cols, r)):
            for held in ((False, True) if j not in sub else (False,)):
                hh, base = h.copy(), tt.copy()
                if held:  # θ_j = u: the targets lose u·x_j
                    hh, base = h - u[:, None] * g[j][None, :], tt - 2 * u * h[:, j] + u * u * g[j, j]
                th = np.linalg.solve(g[np.ix_(sub, sub)], hh[:, sub].T).T if sub else np.zeros((len(tt), 0))
                cand = base - (th * hh[:, sub]).sum(axis=1)
                full = np.zeros((len(tt), len(problem.x)))
                full[:, sub] = th
                if held:
                    full[:, j] = u
                ok = (full >= 0).all(axis=1) & (full[:, j] <= u * (1 + 1e-12)) & (cand < loss)
                loss[ok], theta[ok] = cand[ok], full[ok]
    return np.maximum(loss, 0.0), theta


def test_an_upper_bound_at_each_rows_mfu_holds_and_the_rest_is_fitted_again():
    # The shared KV scan's term is held at most c / MFU (a visited cell costs no more than a
    # computed one): where the non-negative answer passes it, it sits at the bound, and the other
    # terms are the best given that.
    rng = np.random.default_rng(7)
    passed = 0
    for _ in range(20):
        steps, terms = 80, int(rng.integers(2, 6))
        counts = rng.random((terms, steps)) * rng.integers(1, 20, (terms, 1))
        y = rng.random(steps) + 0.5
        names = tuple(f"t{i}" for i in range(terms + 1))
        j = int(rng.integers(1, terms + 1))
        problem = Problem(np.zeros((steps, 1)), np.zeros((steps, 1)), np.zeros(steps), y,
                          np.full(steps, 1 / steps), counts, y.copy(), names, upper=(names[j], 0.002))
        for _ in range(2):
            a = y + rng.normal(0.0, 0.6, (30, steps))
            mfus = rng.uniform(0.05, 1.0, 30)
            loss, theta = problem.overheads(a, mfus)
            u = 0.002 / mfus
            if j in problem.cols:
                want_loss, want_theta = brute_force_bounded(problem, a, j, u)
                assert np.allclose(loss, want_loss, rtol=1e-9, atol=1e-12)
                assert np.allclose(theta, want_theta, rtol=1e-7, atol=1e-10)
                passed += int(np.isclose(theta[:, j], u).sum())
            assert (theta >= 0).all() and (theta[:, j] <= u * (1 + 1e-12)).all()
            free_loss, free_theta = problem.overheads(a)  # no MFUs: no bound
            assert (free_loss <= loss + 1e-12).all()
    assert passed > 20  # the bound was reached, often
