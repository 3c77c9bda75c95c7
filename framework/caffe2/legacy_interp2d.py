"""``scipy.interpolate.interp2d`` as scipy had it before 1.14 removed it, for the hook's legacy mode
(``framework.caffe2.legacy``), built on the FITPACK routines scipy still ships.

On a rectangular grid (``z.size == len(x) * len(y)``) it fits the interpolating spline of degree 1, 3 or 5
(``kind`` linear, cubic, quintic) through every grid value (smoothing 0), as ``RectBivariateSpline`` with
``s=0`` does; scattered points go through ``bisplrep`` with ``s=0``. A call evaluates on the grid of the
sorted ``x`` and ``y`` and returns rows per ``y`` (shape ``(len(y), len(x))``, a 1-D result when either
has one point), with ``bounds_error`` / ``fill_value`` as before (``fill_value=None``: a point outside the
data takes the value at the nearest edge, FITPACK's clamping).
"""

from __future__ import annotations

from typing import Any

import numpy as np

_DEGREES = {"linear": 1, "cubic": 3, "quintic": 5}


class interp2d:  # noqa: N801  (scipy's name)
    """``interp2d(x, y, z, kind='linear', copy=True, bounds_error=False, fill_value=None)``: ``z`` holds
    ``f(x, y)`` on the grid (shape ``(len(y), len(x))`` or flat) or at scattered points (same lengths)."""

    def __init__(
        self,
        x: Any,
        y: Any,
        z: Any,
        kind: str = "linear",
        copy: bool = True,
        bounds_error: bool = False,
        fill_value: Any = None,
    ) -> None:
        from scipy.interpolate import RectBivariateSpline, bisplrep

        x, y, z = np.ravel(x), np.ravel(y), np.asarray(z)
        if kind not in _DEGREES:
            raise ValueError(
                f"Unsupported interpolation type {kind!r}, must be either of 'linear', 'cubic', 'quintic'."
            )
        k = _DEGREES[kind]
        if z.size == len(x) * len(y):
            if z.ndim == 2 and z.shape != (len(y), len(x)):
                raise ValueError(
                    "When on a regular grid with x.size = m and y.size = n, if z.ndim == 2, "
                    "then z must have shape (n, m)"
                )
            # rows per y, columns per x (a flat z lists the values x-major)
            grid = z if z.ndim == 2 else z.reshape(len(x), len(y)).T
            xo, yo = np.argsort(x, kind="stable"), np.argsort(y, kind="stable")
            x, y, grid = x[xo], y[yo], grid[np.ix_(yo, xo)]
            spline = RectBivariateSpline(x, y, grid.T, kx=k, ky=k, s=0.0)
            tx, ty, c = spline.tck
            self.tck = (tx, ty, c, k, k)
            z = grid.T.ravel()
        else:
            z = z.ravel()
            if len(x) != len(y):
                raise ValueError("x and y must have equal lengths for non rectangular grid")
            if len(z) != len(x):
                raise ValueError("Invalid length for input z for non rectangular grid")
            self.tck = tuple(bisplrep(x, y, z, kx=k, ky=k, s=0.0))
        self.bounds_error = bounds_error
        self.fill_value = fill_value
        self.x, self.y, self.z = (np.array(a, copy=copy) for a in (x, y, z))
        self.x_min, self.x_max = np.amin(x), np.amax(x)
        self.y_min, self.y_max = np.amin(y), np.amax(y)

    def __call__(self, x: Any, y: Any, dx: int = 0, dy: int = 0, assume_sorted: bool = False) -> np.ndarray:
        """The spline (or its ``dx``/``dy`` partial derivative) on the grid of ``x`` and ``y``."""
        from scipy.interpolate import bisplev

        x, y = np.atleast_1d(x), np.atleast_1d(y)
        if x.ndim != 1 or y.ndim != 1:
            raise ValueError("x and y should both be 1-D arrays")
        if not assume_sorted:
            x, y = np.sort(x, kind="mergesort"), np.sort(y, kind="mergesort")
        out_x = (x < self.x_min) | (x > self.x_max)
        out_y = (y < self.y_min) | (y > self.y_max)
        if self.bounds_error and (out_x.any() or out_y.any()):
            raise ValueError(
                f"Values out of range; x must be in {(self.x_min, self.x_max)!r}, y in {(self.y_min, self.y_max)!r}"
            )
        z = np.atleast_2d(bisplev(x, y, self.tck, dx, dy)).T
        if self.fill_value is not None:
            z[:, out_x] = self.fill_value
            z[out_y, :] = self.fill_value
        if len(z) == 1:
            z = z[0]
        return np.array(z)


def removed(interpolate: Any) -> bool:
    """Whether this scipy's ``interpolate.interp2d`` is missing or only the stub that says it was removed."""
    current = getattr(interpolate, "interp2d", None)
    if current is None:
        return True
    try:
        current([0.0, 1.0], [0.0, 1.0], [[0.0, 1.0], [1.0, 2.0]])
    except NotImplementedError:
        return True
    except Exception:
        return False
    return False


__all__ = ["interp2d", "removed"]
