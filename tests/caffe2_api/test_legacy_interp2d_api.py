"""The legacy mode's scipy.interpolate.interp2d against references computed independently: bilinear
interpolation by hand for kind='linear', and exact reproduction of polynomials the spline space holds."""

import numpy as np
import pytest
import scipy.interpolate
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.caffe2 import legacy
from framework.caffe2.legacy_interp2d import interp2d, removed


def bilinear(xs, ys, z, x, y):
    """Hand-written bilinear interpolation of the grid ``z[j, i] = f(xs[i], ys[j])`` at (x, y)."""
    i = min(max(np.searchsorted(xs, x, side="right") - 1, 0), len(xs) - 2)
    j = min(max(np.searchsorted(ys, y, side="right") - 1, 0), len(ys) - 2)
    tx = (x - xs[i]) / (xs[i + 1] - xs[i])
    ty = (y - ys[j]) / (ys[j + 1] - ys[j])
    return (
        (1 - tx) * (1 - ty) * z[j, i]
        + tx * (1 - ty) * z[j, i + 1]
        + (1 - tx) * ty * z[j + 1, i]
        + tx * ty * z[j + 1, i + 1]
    )


@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(nx=st.integers(2, 6), ny=st.integers(2, 6), seed=st.integers(0, 2**16))
def test_linear_is_bilinear_interpolation(nx, ny, seed):
    rng = np.random.RandomState(seed)
    xs = np.sort(rng.uniform(-1, 1, nx)) + np.arange(nx)
    ys = np.sort(rng.uniform(-1, 1, ny)) + 2 * np.arange(ny)
    z = rng.randn(ny, nx)
    qx = np.sort(rng.uniform(xs[0], xs[-1], 5))
    qy = np.sort(rng.uniform(ys[0], ys[-1], 4))
    got = interp2d(xs, ys, z, kind="linear")(qx, qy)
    want = np.array([[bilinear(xs, ys, z, x, y) for x in qx] for y in qy])
    assert got.shape == (4, 5)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind, degree", [("cubic", 3), ("quintic", 5)])
def test_higher_kinds_reproduce_polynomials_of_their_degree(kind, degree):
    xs, ys = np.linspace(0, 1, 9), np.linspace(-1, 2, 8)

    def f(x, y):
        return (1 + 2 * x - x**degree) * (3 - y + 0.5 * y**degree)

    z = f(xs[None, :], ys[:, None])
    qx, qy = np.linspace(0.05, 0.95, 7), np.linspace(-0.9, 1.9, 6)
    np.testing.assert_allclose(
        interp2d(xs, ys, z, kind=kind)(qx, qy), f(qx[None, :], qy[:, None]), rtol=1e-8, atol=1e-8
    )


def test_grid_orientation_sorting_and_flat_z():
    xs, ys = np.array([0.0, 1.0, 2.0]), np.array([0.0, 10.0])
    z = np.array([[0.0, 1.0, 2.0], [10.0, 11.0, 12.0]])  # f = x + y
    f = interp2d(xs, ys, z)
    np.testing.assert_allclose(f([0.5, 1.5], [5.0]), [5.5, 6.5])  # one y: a 1-D row
    np.testing.assert_allclose(f([1.5, 0.5], [5.0, 0.0]), [[0.5, 1.5], [5.5, 6.5]])  # queries sorted
    assert f(1.0, 10.0).shape == (1,)
    # unsorted grid axes, and z given flat in x-major order
    g = interp2d(xs[::-1], ys, z[:, ::-1])
    np.testing.assert_allclose(g([0.5], [5.0]), [5.5])
    h = interp2d(xs, ys, z.T.ravel())
    np.testing.assert_allclose(h([0.5, 1.5], [5.0]), [5.5, 6.5])
    with pytest.raises(ValueError, match="shape"):
        interp2d(xs, ys, z.T)
    with pytest.raises(ValueError, match="Unsupported interpolation type"):
        interp2d(xs, ys, z, kind="nearest")


def test_bounds():
    xs, ys = np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0])
    z = xs[None, :] + 2 * ys[:, None]
    # outside the data: the nearest edge's value (FITPACK clamps), as scipy documented it
    np.testing.assert_allclose(interp2d(xs, ys, z)([3.0], [0.5]), [3.0])
    filled = interp2d(xs, ys, z, fill_value=-7.0)([0.5, 3.0], [0.5, 2.0])
    np.testing.assert_allclose(filled, [[1.5, -7.0], [-7.0, -7.0]])
    with pytest.raises(ValueError, match="out of range"):
        interp2d(xs, ys, z, bounds_error=True)([3.0], [0.5])


@pytest.mark.filterwarnings("ignore:No more knots can be added")
def test_scattered_points_reproduce_a_plane():
    rng = np.random.RandomState(0)
    x, y = rng.uniform(0, 1, 40), rng.uniform(0, 1, 40)
    f = interp2d(x, y, 2 * x - y + 1, kind="linear")
    qx, qy = np.array([0.3, 0.6]), np.array([0.4, 0.5, 0.7])
    # surfit fits rather than interpolates: close, not exact
    np.testing.assert_allclose(f(qx, qy), 2 * qx[None, :] - qy[:, None] + 1, atol=1e-4)
    with pytest.raises(ValueError, match="equal lengths"):
        interp2d(x, y[:-1], np.ones(40 * 39 + 1))


def test_legacy_mode_installs_it_where_scipy_removed_it():
    was = scipy.interpolate.interp2d
    legacy.enable()
    try:
        if removed(type("stub", (), {"interp2d": was})):
            assert scipy.interpolate.interp2d is interp2d
        else:
            assert scipy.interpolate.interp2d is was
    finally:
        legacy.disable()
    assert scipy.interpolate.interp2d is was
