"""The slave controller's base angular-rate bound (``IKSettings.base_rate_max_rad_s``).

Each test checks the controller against quantities computed without it: the base rate
from the momentum maps (``Om q̈ dt`` from a state at rest) and from the PyBullet plant
(its base angular velocity, and a finite difference of its attitude), the task
acceleration from the Generalized Jacobian.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot import _kernels as kern
from robot.ik import BASE_RATE_MAX_RAD_S, IKSettings
from robot.models import get_model
from robot.pybullet_arm import PyBulletArm
from robot.slave import SlaveController
from trials.capture import run_automatic_capture

#: A planar pose at a reaction singularity (sigma_ratio 0.0018, below the 0.01 threshold)
#: where J is well conditioned (sigma_min 0.073 m/rad): with ``singularity_priority =
#: "task"`` eq. 6 keeps the task and gives up the reaction there.
SINGULAR_Q_RAD = np.array([0.0, -0.25, -0.2])
#: No secondary terms, so that at rest the IK's solution is linear in the task.
QUIET = dict(singularity_priority="task", null_gain_1_s=0.0, limit_gain_1_s2=0.0, sigma_gain=0.0)
#: 2 m/s^2 along y: about 6.8 rad/s^2 on the first joint (limits 20-30), and a base
#: rate of 1.45e-3 rad/s after one 1 ms step, beyond the default bound.
TASK_ACCELERATION_M_S2 = np.array([0.0, 2.0, 0.0])


def _one_tick(bound: float) -> tuple[np.ndarray, object, np.ndarray]:
    """One controller tick from rest at the singular pose, then one plant step: the
    joint accelerations, the status, the plant's base angular velocity after the step."""
    model = get_model("planar-3r")
    with PyBulletArm(model, q0_rad=SINGULAR_Q_RAD) as arm:
        slave = SlaveController(model, arm, settings=IKSettings(base_rate_max_rad_s=bound, **QUIET))
        status = slave.step(0.0, arm.measure().ee_position_m.copy(), np.zeros(3), TASK_ACCELERATION_M_S2)
        qdd = status.qdd_rad_s2.copy()
        flags = (status.rate_bounded, status.rate_scale, status.limited, status.singular,
                 slave.rate_bound_metadata())
        arm.advance()
        w_plant = arm.measure().base_angular_velocity_rad_s.copy()
    return qdd, flags, w_plant


def _maps(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Generalized Jacobian and the base angular-velocity map at ``q`` (base frame)."""
    a = get_model("planar-3r").arrays
    jg, om, re = np.empty((3, 3)), np.empty((3, 3)), np.empty(3)
    kern.floating_base_maps(q, a.joint_xyz, a.joint_rot, a.joint_axis, a.link_mass, a.link_com, a.link_inertia,
                            a.ee_offset, a.base_mass, a.base_inertia, jg, om, re)
    return jg, om


def test_bound_scales_the_task_so_the_base_turns_no_faster_than_the_bound() -> None:
    dt = 1e-3
    free_qdd, free_flags, free_w = _one_tick(math.inf)
    qdd, (bounded, scale, limited, singular, record), w_plant = _one_tick(BASE_RATE_MAX_RAD_S)
    jg, om = _maps(SINGULAR_Q_RAD)
    # without the bound: the task met exactly, the base turned faster than the bound
    assert singular and not free_flags[0] and free_flags[4]["ticks"] == 0
    np.testing.assert_allclose(jg[:2] @ free_qdd, TASK_ACCELERATION_M_S2[:2], atol=1e-9)
    free_rate = float(np.linalg.norm(om @ free_qdd)) * dt  # at rest: w(dt) = Om q̈ dt
    assert free_rate > 1.5 * BASE_RATE_MAX_RAD_S
    assert np.linalg.norm(free_w) == pytest.approx(free_rate, rel=1e-3)  # the plant agrees
    # with it: at rest the zero-task solution is q̈ = 0, so the blend is the unbounded
    # solution scaled by s = bound / rate, and so is the task
    expected = BASE_RATE_MAX_RAD_S / free_rate
    assert bounded and limited
    assert record == {"bound_rad_s": BASE_RATE_MAX_RAD_S, "ticks": 1, "first_s": 0.0, "last_s": 0.0}
    assert scale == pytest.approx(expected, rel=1e-9)
    np.testing.assert_allclose(qdd, expected * free_qdd, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(jg[:2] @ qdd, expected * TASK_ACCELERATION_M_S2[:2], atol=1e-9)
    assert float(np.linalg.norm(om @ qdd)) * dt == pytest.approx(BASE_RATE_MAX_RAD_S, rel=1e-9)
    # the plant's base after the step: at the bound, not beyond
    assert np.linalg.norm(w_plant) <= BASE_RATE_MAX_RAD_S * (1.0 + 1e-3)
    assert np.linalg.norm(w_plant) >= BASE_RATE_MAX_RAD_S * (1.0 - 1e-3)


def test_bound_inactive_in_reactionless_tracking() -> None:
    """The 2 s automatic capture (reach at 1.7 s): with the default bound and with none
    the joint trajectories agree to round-off and the bound never engages."""
    runs = [run_automatic_capture("planar-3r", duration_s=2.0, settings=IKSettings(base_rate_max_rad_s=bound))
            for bound in (BASE_RATE_MAX_RAD_S, math.inf)]
    bounded, free = runs
    assert bounded.first_reach_time_s < 2.0
    np.testing.assert_allclose(bounded.q_rad, free.q_rad, rtol=0.0, atol=1e-12)
    np.testing.assert_allclose(bounded.qd_rad_s, free.qd_rad_s, rtol=0.0, atol=1e-12)
    assert not np.any(bounded.limited)
    rate = np.linalg.norm(bounded.base_angular_velocity_rad_s, axis=1)
    assert rate.max() < 1e-3 * BASE_RATE_MAX_RAD_S  # far inside the bound


def test_target_leaving_reach_turns_the_base_no_faster_than_the_bound() -> None:
    """The automatic capture of a target flying away along +x at 0.1 m/s, eq. 6 as
    published (``task`` priority): the arm stretches into a reaction singularity at
    0.8 s. Without the bound the plant's base turns at up to 0.05 rad/s by 2 s; with
    it the plant's base rate (its angular velocity and the finite difference of its
    attitude) stays at the bound, 2 % for the plant against the model."""
    settings = dict(singularity_priority="task")
    runs = {bound: run_automatic_capture("planar-3r", duration_s=2.0, target_velocity_m_s=(0.1, 0.0, 0.0),
                                         settings=IKSettings(base_rate_max_rad_s=bound, **settings))
            for bound in (BASE_RATE_MAX_RAD_S, math.inf)}
    free, bounded = runs[math.inf], runs[BASE_RATE_MAX_RAD_S]
    free_rate = np.linalg.norm(free.base_angular_velocity_rad_s, axis=1)
    assert free_rate.max() > 10.0 * BASE_RATE_MAX_RAD_S
    rate = np.linalg.norm(bounded.base_angular_velocity_rad_s, axis=1)
    assert rate.max() <= 1.02 * BASE_RATE_MAX_RAD_S
    difference = np.abs(np.diff(bounded.base_attitude_rad[:, 2])) / bounded.dt_s
    assert difference.max() <= 1.02 * BASE_RATE_MAX_RAD_S
    assert rate.max() >= 0.9 * BASE_RATE_MAX_RAD_S  # it did bind: the task pushed
    assert np.any(bounded.limited)  # and the tick said so
    assert bounded.fault_count == 0


def test_base_feedback_returns_the_attitude_no_faster_than_the_bound() -> None:
    """A base turned 0.02 rad, the arm held still: the feedback (25 θ + 10 ω, up to
    1 N m) would turn it back at up to 0.037 rad/s; under the bound the plant's base
    returns at the bound's rate and no faster."""
    model = get_model("planar-3r")
    half = 0.01
    quat = np.array([0.0, 0.0, math.sin(half), math.cos(half)])
    peaks = {}
    for bound in (BASE_RATE_MAX_RAD_S, math.inf):
        with PyBulletArm(model) as arm:
            arm.set_state(np.asarray(model.q0_rad), np.zeros(model.n_joints), np.zeros(3), quat, np.zeros(3),
                          np.zeros(3))
            slave = SlaveController(model, arm, settings=IKSettings(base_rate_max_rad_s=bound))
            hold = arm.measure().ee_position_m.copy()
            peak = 0.0
            for k in range(300):
                slave.step(k * 1e-3, hold, np.zeros(3), np.zeros(3))
                arm.advance()
                peak = max(peak, float(np.linalg.norm(arm.measure().base_angular_velocity_rad_s)))
            peaks[bound] = (peak, float(arm.measure().base_attitude_rad[2]))
    assert peaks[math.inf][0] > 10.0 * BASE_RATE_MAX_RAD_S
    peak, attitude = peaks[BASE_RATE_MAX_RAD_S]
    assert BASE_RATE_MAX_RAD_S * 0.9 <= peak <= BASE_RATE_MAX_RAD_S * 1.02
    assert 0.02 - 0.3 * 1.02 * BASE_RATE_MAX_RAD_S <= attitude < 0.02  # returning, at the bound's pace


def test_settings_refuse_a_bound_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="base_rate_max_rad_s"):
        IKSettings(base_rate_max_rad_s=0.0)
    with pytest.raises(ValueError, match="base_rate_max_rad_s"):
        IKSettings(base_rate_max_rad_s=math.nan)
