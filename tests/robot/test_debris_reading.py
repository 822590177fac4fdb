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


@pytest.mark.parametrize("seed", range(4))
def test_a_matrix_gives_the_quaternion_of_its_rotation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rotations = [Rotation.random(random_state=seed)]
    # Shepperd's four branches: near the identity and near half-turns about each axis
    rotations += [Rotation.from_rotvec(axis * (math.pi - 1e-3) + rng.normal(size=3) * 1e-4) for axis in np.eye(3)]
    rotations.append(Rotation.from_rotvec(rng.normal(size=3) * 1e-3))
    for rotation in rotations:
        quat = np.zeros(4)
        kern.matrix_to_quat(rotation.as_matrix(), quat)
        expected = rotation.as_quat()
        sign = 1.0 if float(quat @ expected) >= 0.0 else -1.0  # q and -q are one rotation
        np.testing.assert_allclose(sign * quat, expected, rtol=0.0, atol=1e-14)


@pytest.mark.parametrize(("scenario", "with_lever"), [("paper-2019", False), ("tumbling-7dof", True)])
def test_a_carried_debris_moves_rigidly_with_the_tool(scenario: str, with_lever: bool, tmp_path) -> None:
    """Once the arm carries the debris, its reading comes from the arm's own read-out
    (``carried_reading``): the fixture keeps its distance to the end effector exactly, its
    velocity relative to the end effector is ``ω × (p - ee)`` with the debris' own spin,
    and it agrees with PyBullet's query of the tool link to what PyBullet's link frames
    carry (1e-7 m measured: its forward kinematics is not ours)."""
    from trials.runner import TrialRequest, build_trial

    trial = build_trial(TrialRequest(scenario=scenario, condition="dg", seed=1, time_limit_s=6.0,
                                     end_on_capture=False), tmp_path)
    tick, debris = trial.tick, trial.tick.parts.scene
    carried, merged = 0, False
    distances, rigid_velocity, relative_speed, to_pybullet, spin_to_pybullet = [], [], [], [], []
    try:
        while carried < 300:
            assert tick(), "the trial ended before 300 carried ticks"
            if not debris.carried:
                continue
            if not merged:  # the tick of the merge reads PyBullet's link: the arm was just rebuilt
                merged = True
                continue
            carried += 1
            r = debris.reading
            m = tick._m
            offset = r.point_m - m.ee_position_m
            distances.append(np.linalg.norm(offset))
            relative = r.point_velocity_m_s - m.ee_velocity_m_s
            rigid_velocity.append(np.abs(relative - np.cross(r.angular_velocity_rad_s, offset)).max())
            relative_speed.append(np.linalg.norm(relative))
            position, _, _, spin = debris._payload_pose(False)  # PyBullet's link query, as before
            to_pybullet.append(np.abs(np.asarray(position) - debris.centre_m).max())
            spin_to_pybullet.append(np.abs(np.asarray(spin) - r.angular_velocity_rad_s).max())
    finally:
        trial.tick.finish_outcome("test over")
    assert debris._has_lever == with_lever
    # rigid (PyBullet's link frames jitter 1e-8..1e-7 m against the arm's own kinematics);
    # what is left is the base quaternion's norm, which PyBullet lets drift by 1e-11 a step
    assert np.ptp(distances) < 1e-10
    assert max(relative_speed) > 1e-3  # not vacuous: the tool turns while it carries
    assert max(rigid_velocity) < 1e-12
    assert max(to_pybullet) < 1e-6
    assert max(spin_to_pybullet) < 1e-12
