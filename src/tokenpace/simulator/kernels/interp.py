"""Piecewise-linear lookups over the kernel tables' grids: exact at a grid point, the end segments
extended past the grid; a scalar form in pure Python and two array forms (one float for float what
the scalar gives)."""

from __future__ import annotations

import bisect

import numpy as np


def interp(xs: list[float], ys: list[float], x: float) -> float:
    """Piecewise-linear through (xs, ys) (xs ascending), the end segments extended; exact at a grid
    point. A scalar lookup in pure Python: faster than numpy for one value."""
    n = len(xs)
    if n == 1:
        return ys[0]
    i = bisect.bisect_left(xs, x)
    if i < n and xs[i] == x:
        return ys[i]
    i = min(max(i, 1), n - 1)
    x0, x1 = xs[i - 1], xs[i]
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0)


def interp_array(xs: np.ndarray, ys: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``interp`` over an array of x."""
    if len(xs) == 1:
        return np.full(np.shape(x), ys[0], dtype=float)
    i = np.clip(np.searchsorted(xs, x, side="left"), 1, len(xs) - 1)
    x0, x1 = xs[i - 1], xs[i]
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0)


def interp_exact(xs: np.ndarray, ys: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``interp`` over an array of x, float for float what ``interp`` gives each (a grid point's own
    value where x is one; the same operations in the same order elsewhere)."""
    n = len(xs)
    if n == 1:
        return np.full(np.shape(x), ys[0], dtype=float)
    i = np.searchsorted(xs, x, side="left")
    at = np.minimum(i, n - 1)
    j = np.clip(i, 1, n - 1)
    x0, x1 = xs[j - 1], xs[j]
    return np.where(xs[at] == x, ys[at], ys[j - 1] + (ys[j] - ys[j - 1]) * (x - x0) / (x1 - x0))
