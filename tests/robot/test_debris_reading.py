"""The debris' read-out kernel (``robot._kernels.debris_reading``, what
``PyBulletDebris.read`` and the fused tick's plant stage compute) against rigid-body
kinematics done independently: the lever arm rotated by scipy's rotation of the
quaternion, ``v + ω × r``, ``ω × (ω × r)``, the offset and the gap."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from robot import _kernels as kern


def _buffer(lever: np.ndarray, radius: float, thrust: bool) -> np.ndarray:
    buf = np.full(kern.N_DEBRIS, 99.0)  # nothing read before it is written
    buf[kern.DB_LEVER:kern.DB_LEVER + 3] = lever
    buf[kern.DB_HAS_LEVER] = 1.0 if np.any(lever != 0.0) else 0.0
    buf[kern.DB_RADIUS] = radius
    buf[kern.DB_THRUST] = 1.0 if thrust else 0.0
    return buf


@pytest.mark.parametrize("seed", range(5))
def test_the_fixture_moves_with_the_body(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lever = rng.normal(size=3) * 0.2
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    centre, velocity, spin, ee = (rng.normal(size=3) for _ in range(4))
    buf = _buffer(lever, 0.05, thrust=False)
    gap = kern.debris_reading(buf, tuple(centre), tuple(quat), tuple(velocity), tuple(spin), ee, True)
    r = Rotation.from_quat(quat).apply(lever)  # scipy's quaternions are xyzw, as PyBullet's
    point = centre + r
    tol = dict(rtol=0.0, atol=1e-12)
    np.testing.assert_allclose(buf[kern.DB_CENTRE:kern.DB_CENTRE + 3], centre, **tol)
    np.testing.assert_allclose(buf[kern.DB_SPIN:kern.DB_SPIN + 3], spin, **tol)
    np.testing.assert_allclose(buf[kern.DB_POINT:kern.DB_POINT + 3], point, **tol)
    np.testing.assert_allclose(buf[kern.DB_POINT_V:kern.DB_POINT_V + 3], velocity + np.cross(spin, r), **tol)
    np.testing.assert_allclose(buf[kern.DB_POINT_A:kern.DB_POINT_A + 3], np.cross(spin, np.cross(spin, r)), **tol)
    np.testing.assert_allclose(buf[kern.DB_OFFSET:kern.DB_OFFSET + 3], point - ee, **tol)
    assert gap == buf[kern.DB_GAP]
    assert abs(gap - (np.linalg.norm(point - ee) - 0.05)) < 1e-12


def test_without_a_lever_the_fixture_is_the_centre_and_a_thrust_restarts_its_acceleration() -> None:
    buf = _buffer(np.zeros(3), 0.1, thrust=True)
    ee = np.array([1.0, 2.0, 2.0])
    gap = kern.debris_reading(buf, (1.0, 2.0, 5.0), (0.0, 0.0, 0.0, 1.0), (0.5, 0.0, 0.0), (0.0, 0.0, 3.0), ee, True)
    np.testing.assert_array_equal(buf[kern.DB_OFFSET:kern.DB_OFFSET + 3], [0.0, 0.0, 3.0])
    assert gap == pytest.approx(2.9, abs=1e-15)
    np.testing.assert_array_equal(buf[kern.DB_POINT_A:kern.DB_POINT_A + 3], 0.0)  # the thrust adds to it
    np.testing.assert_array_equal(buf[kern.DB_POINT:kern.DB_POINT + 3], 99.0)  # unused: the centre is the point
    # without the gap (a release): the offset and the gap are left as they were
    buf[kern.DB_OFFSET:kern.DB_GAP + 1] = 7.0
    assert math.isnan(kern.debris_reading(buf, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0),
                                          (0.0, 0.0, 0.0), ee, False))
    np.testing.assert_array_equal(buf[kern.DB_OFFSET:kern.DB_GAP + 1], 7.0)
    np.testing.assert_array_equal(buf[kern.DB_CENTRE:kern.DB_CENTRE + 3], 0.0)
