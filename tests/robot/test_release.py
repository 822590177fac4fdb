"""Opening the tool: the arm sheds the payload it carried as part of its multibody, the
debris is a free body again, the slave's mass model drops the payload.

Independent expectations: momentum summed from PyBullet's own link states and the
debris body (``probe.momentum``, ``PyBulletDebris.momentum``); the debris' velocity from
the rigid-body kinematics of the model (the end effector's velocity from the plant
read-out, the tool link's angular velocity as the base rate plus the joint rates about
the model's joint axes, not PyBullet's link states); the parallel-axis theorem by hand.
"""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from robot import _kernels as kern
from robot.debris import DebrisSpec, Payload, combined_link_mass, quaternion_matrix, split_link_mass
from robot.ik import IKSettings
from robot.models import get_model
from robot.pybullet_arm import PyBulletArm
from robot.pybullet_debris import PyBulletDebris
from robot.slave import SlaveController
from scenarios.motion import LinearMotion

DEBRIS_KG = 5.0


def _carrying(model_name: str, settings: IKSettings | None = None) -> tuple[
        PyBulletArm, PyBulletDebris, SlaveController, float]:
    """An arm that closed on a 5 kg debris moving at 2 cm/s (a lever arm off its centre,
    so the payload's centre is off the end effector) and carried it for 0.3 s toward a
    point 2 cm away: every part moves and turns. Returns the arm, the scene, the slave
    and the time [s]."""
    model = get_model(model_name)
    arm = PyBulletArm(model)
    ee = arm.measure().ee_position_m.copy()
    spatial = model.task_dim == 3
    direction = np.array([0.3, 1.0, 0.4 if spatial else 0.0])
    direction /= np.linalg.norm(direction)
    fixture = ee + direction * (0.004 + model.capture_tool.tip_radius_m)
    spec = DebrisSpec(DEBRIS_KG, ((0.05, 0.0, 0.0), (0.0, 0.07, 0.0), (0.0, 0.0, 0.09)), 0.004, tuple(fixture),
                      lever_arm_m=(-0.03, -0.04, -0.01 if spatial else 0.0),
                      velocity_m_s=(0.02, -0.01, 0.005 if spatial else 0.0))
    debris = arm.add_debris(spec, LinearMotion(fixture, spec.velocity_m_s))
    slave = SlaveController(model, arm, settings=settings)
    slave.attach_payload(debris.attach())
    goal = ee + np.array([0.02, -0.01, 0.01 if spatial else 0.0])
    t = 0.0
    for _ in range(300):
        slave.step(t, goal, np.zeros(3), np.zeros(3))
        arm.advance()
        m = arm.measure()
        t += arm.dt_s
        debris.read(t, m.ee_position_m, m.ee_velocity_m_s)
    assert debris.carried
    return arm, debris, slave, t


def _tool_angular_velocity(arm: PyBulletArm) -> np.ndarray:
    """The last link's angular velocity [rad/s], task frame, from the model: the base
    rate plus each joint rate about its axis (forward kinematics of the model)."""
    model, state = arm.model, arm.state()
    a, n = model.arrays, model.n_joints
    origins, axes, rots, ee = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3, 3)), np.zeros(3)
    kern.forward_kinematics(np.ascontiguousarray(state.q_rad, dtype=float), a.joint_xyz, a.joint_rot, a.joint_axis,
                            a.ee_offset, origins, axes, rots, ee)
    base = state.base
    assert base is not None
    rotation = quaternion_matrix(base.orientation_xyzw)
    return np.asarray(base.angular_velocity_rad_s) + rotation @ (axes.T @ np.asarray(state.qd_rad_s))


@pytest.mark.parametrize("model_name", ["planar-3r", "spatial-7dof"])
def test_the_release_keeps_the_momentum_of_arm_base_and_debris(model_name, probe):
    """Linear and angular momentum (about the task origin) of arm + base + debris, summed
    from PyBullet's own states, are the same just before and just after the tool opens.

    Tolerance: every part keeps its velocity, so the split is exact up to the rebuilt
    inertias; what Bullet's principal-axes decomposition of the merged link leaves is
    taken out by a rigid twist on the arm (``shed_correction``), measured 2e-9 m/s and
    2e-8 rad/s. The bound on that twist (1e-7 m/s, 1e-6 rad/s) is far below what a
    wrong release would need: a debris let go 1 mm/s off the tool's motion needs
    m_d / M x 1 mm/s, 5e-5 m/s here (checked below)."""
    arm, debris, slave, t = _carrying(model_name)
    with arm:
        linear0, angular0 = probe.momentum(arm)  # the debris is part of the arm's multibody
        release = debris.release(t)
        linear_arm, angular_arm = probe.momentum(arm)
        linear_debris, angular_debris = debris.momentum()
        handed = DEBRIS_KG * float(np.linalg.norm(release.velocity_m_s))
        assert handed > 1e-3 and np.linalg.norm(linear_arm) > 1e-4  # not vacuous: both parts move
        np.testing.assert_allclose(linear_arm + linear_debris, linear0, rtol=0.0, atol=1e-12 * max(handed, 1.0))
        np.testing.assert_allclose(angular_arm + angular_debris, angular0, rtol=0.0, atol=1e-12 * max(handed, 1.0))
        assert release.correction_m_s < 1e-7 and release.correction_rad_s < 1e-6
        assert not debris.carried and not debris.reading.attached and arm.carried is None
        # the arm's own links are the model's again
        info = pb.getDynamicsInfo(arm.body_id, arm.n_joints - 1, physicsClientId=arm.client_id)
        assert info[0] == pytest.approx(arm.model.links[-1].mass_kg, rel=1e-12)


def test_a_debris_let_go_off_the_tools_motion_needs_a_large_correction():
    """The correction bound above can fail: the same release with the debris put 1 mm/s
    off the tool's motion before the arm sheds it."""
    arm, debris, _, t = _carrying("planar-3r")
    with arm:
        velocity, spin = pb.getBaseVelocity(debris.body_id, physicsClientId=arm.client_id)
        debris._payload_motion(place=True)  # where the tool holds it, moving with it
        velocity, spin = pb.getBaseVelocity(debris.body_id, physicsClientId=arm.client_id)
        pb.resetBaseVelocity(debris.body_id, (np.asarray(velocity) + [1e-3, 0.0, 0.0]).tolist(), spin,
                             physicsClientId=arm.client_id)
        _, (dv, _) = arm.shed(debris.body_id)
    total = arm.model.base_mass_kg + sum(link.mass_kg for link in arm.model.links)
    assert dv == pytest.approx(DEBRIS_KG * 1e-3 / total, rel=0.05)
    assert dv > 100 * 1e-7


@pytest.mark.parametrize("model_name", ["planar-3r", "spatial-7dof"])
def test_the_released_debris_leaves_with_the_end_effectors_rigid_motion(model_name):
    """``v_d = v_ee + ω × (c_d − ee)`` and ``ω_d = ω``: the end effector's velocity from the
    plant read-out (the model's kinematics), ``ω`` the tool link's from the model."""
    arm, debris, _, t = _carrying(model_name)
    with arm:
        m = arm.measure()
        ee, ee_velocity = m.ee_position_m.copy(), m.ee_velocity_m_s.copy()
        omega = _tool_angular_velocity(arm)
        release = debris.release(t)
        expected = ee_velocity + np.cross(omega, release.centre_m - ee)
        assert np.linalg.norm(omega) > 1e-3 and np.linalg.norm(release.centre_m - ee) > 0.03  # the lever counts
        np.testing.assert_allclose(release.velocity_m_s, expected, rtol=0.0, atol=1e-9)
        np.testing.assert_allclose(release.angular_velocity_rad_s, omega, rtol=0.0, atol=1e-9)
        # the free debris coasts: nothing pushes it while the opened tool still overlaps it
        velocity0 = np.asarray(pb.getBaseVelocity(debris.body_id, physicsClientId=arm.client_id)[0])
        np.testing.assert_allclose(velocity0, expected, atol=1e-9)
        for _ in range(20):
            arm.advance()
            t += arm.dt_s
            m = arm.measure()
            debris.read(t, m.ee_position_m, m.ee_velocity_m_s)
        velocity = np.asarray(pb.getBaseVelocity(debris.body_id, physicsClientId=arm.client_id)[0])
        np.testing.assert_allclose(velocity, velocity0, atol=1e-12)


@pytest.mark.parametrize("model_name", ["planar-3r", "spatial-7dof"])
def test_detach_gives_back_the_slaves_mass_model_before_the_capture(model_name):
    arm, debris, slave, _ = _carrying(model_name, IKSettings(singularity_priority="task"))
    with arm:
        model = arm.model
        assert slave.settings.singularity_priority == "reaction"  # forced while carrying
        before = (np.array([link.mass_kg for link in model.links]), model.arrays.link_com, model.arrays.link_inertia)
        carrying = slave.mass_model
        assert carrying[0][-1] == pytest.approx(before[0][-1] + DEBRIS_KG)
        shed = slave.detach_payload()
        assert shed is not None and slave.payload is None
        after = slave.mass_model
        np.testing.assert_allclose(after[0], before[0], rtol=1e-13)
        np.testing.assert_allclose(after[1], before[1], rtol=0.0, atol=1e-14)
        np.testing.assert_allclose(after[2], before[2], rtol=0.0, atol=1e-13 * np.abs(before[2]).max())
        assert slave.settings.singularity_priority == "task"  # the priority before the capture
        assert slave.settings.system_momentum == "measured"  # the arm keeps what momentum it has
        assert slave.detach_payload() is None  # nothing left to shed


def test_split_link_mass_undoes_the_parallel_axis_sum_done_by_hand():
    """A link of 1.5 kg and a 12 kg payload off its axes: the combined link by hand (as
    tests/robot/test_carried_momentum does), then split: the link comes back."""
    mass, com, inertia = 1.5, np.array([0.1, 0.0, 0.0]), np.diag([0.01, 0.02, 0.03])
    payload = Payload(12.0, np.array([0.3, 0.05, 0.0]), np.array([[0.2, 0.03, 0.0], [0.03, 0.1, 0.0],
                                                                 [0.0, 0.0, 0.25]]))
    total = mass + payload.mass_kg
    centre = (mass * com + payload.mass_kg * payload.com_m) / total
    summed = inertia + payload.inertia_kg_m2
    for m, c in ((mass, com), (payload.mass_kg, payload.com_m)):
        d = c - centre
        summed = summed + m * (d @ d * np.eye(3) - np.outer(d, d))
    np.testing.assert_allclose(combined_link_mass(mass, com, inertia, payload)[2], summed, atol=1e-15)
    back = split_link_mass(total, centre, summed, payload)
    assert back[0] == pytest.approx(mass, rel=1e-14)
    np.testing.assert_allclose(back[1], com, atol=1e-15)
    np.testing.assert_allclose(back[2], inertia, atol=1e-14)
    with pytest.raises(ValueError):
        split_link_mass(10.0, centre, summed, payload)
