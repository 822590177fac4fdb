"""The slave's dynamics when the system carries momentum (after a capture, under a push):
eq. 1 and eq. 2 with the system's angular momentum inferred from the measured base rate,
an external force on the tool, the reactionless closing of the tool, and the payload
merged into the arm's multibody.

Independent expectations: momentum summed from PyBullet's own link states
(``probe.momentum``); the base torque the plant itself shows after a step (eq. 6 holds when
it is zero); PyBullet's principal inertias of the merged link against the eigenvalues of
the parallel-axis sum done here by hand.
"""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from robot.debris import Payload
from robot.dynamics import system_momentum
from robot.ik import IKSettings
from robot.models import get_model
from robot.pybullet_arm import PyBulletArm
from robot.slave import SlaveController
from trials.capture import run_automatic_capture

RNG_SEED = 3


def _moving_state(model_name: str, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """A state whose base twist is not the zero-momentum one (the arm holds momentum)."""
    model = get_model(model_name)
    n = model.n_joints
    q = np.asarray(model.q0_rad) + rng.uniform(-0.2, 0.2, n)
    qd = rng.uniform(-0.3, 0.3, n)
    axis = np.array([0.0, 0.0, 1.0]) if model.task_dim == 2 else rng.normal(size=3)
    angle = 0.1
    quat = np.r_[np.sin(angle / 2) * axis / np.linalg.norm(axis), np.cos(angle / 2)]
    v = rng.uniform(-0.02, 0.02, 3)
    w = rng.uniform(-0.02, 0.02, 3)
    if model.task_dim == 2:
        v[2], w[0], w[1] = 0.0, 0.0, 0.0
    return q, qd, np.array([0.1, -0.05, 0.0]), quat, v, w


@pytest.mark.parametrize("model_name", ["planar-3r", "spatial-7dof"])
def test_system_momentum_sums_what_pybullet_sums(model_name, probe):
    rng = np.random.default_rng(RNG_SEED)
    q, qd, pos, quat, v, w = _moving_state(model_name, rng)
    with PyBulletArm(get_model(model_name)) as arm:
        arm.set_state(q, qd, pos, quat, v, w)
        linear, angular_origin = probe.momentum(arm)
        m = system_momentum(arm.model, q, qd, pos, quat, v, w)
    assert np.linalg.norm(linear) > 0.1 and np.linalg.norm(angular_origin) > 0.01  # not vacuous
    np.testing.assert_allclose(m.linear_kg_m_s, linear, atol=1e-9 * np.linalg.norm(linear))
    # about the centre of mass: L_o = L_c + c x P
    np.testing.assert_allclose(m.angular_kg_m2_s + np.cross(m.centre_m, m.linear_kg_m_s), angular_origin,
                               atol=1e-9 * np.linalg.norm(angular_origin))


def _one_step_base_torque(model_name: str, momentum: str, push_n: np.ndarray | None = None,
                          tell_slave: bool = True) -> tuple[float, float]:
    """Base torque the plant shows over one step after the slave commanded a reach from a
    moving state [N m], and the largest EE velocity mismatch of the slave's model [m/s]."""
    rng = np.random.default_rng(RNG_SEED)
    q, qd, pos, quat, v, w = _moving_state(model_name, rng)
    model = get_model(model_name)
    with PyBulletArm(model) as arm:
        arm.set_state(q, qd, pos, quat, v, w)
        slave = SlaveController(model, arm, settings=IKSettings(base_feedback=False, system_momentum=momentum))
        ee = arm.measure().ee_position_m.copy()
        x = ee + np.array([0.01, -0.01, 0.005 if model.task_dim == 3 else 0.0])
        if push_n is not None and tell_slave:
            slave.external_force_n[:] = push_n
            slave.external_point_m[:] = ee
        status = slave.step(0.0, x, np.zeros(3), np.zeros(3))
        velocity_error = float(np.linalg.norm(status.ee_velocity_m_s - arm.measure().ee_velocity_m_s))
        if push_n is not None:
            pb.applyExternalForce(arm.body_id, model.n_joints - 1, push_n.tolist(), ee.tolist(), pb.WORLD_FRAME,
                                  physicsClientId=arm.client_id)
        arm.advance()
        rows = model.arrays.reaction_rows
        return float(np.linalg.norm(arm.measure().base_torque_n_m[rows])), velocity_error


@pytest.mark.parametrize("model_name", ["planar-3r", "spatial-7dof"])
def test_eq6_holds_on_a_system_that_carries_momentum(model_name):
    """The zero-momentum model puts torque on the base of a moving system; the model with
    the measured momentum keeps eq. 6 to round-off, and its end-effector velocity is the
    plant's."""
    zero_torque, zero_velocity_error = _one_step_base_torque(model_name, "zero")
    torque, velocity_error = _one_step_base_torque(model_name, "measured")
    assert zero_torque > 1e-3 and zero_velocity_error > 1e-3  # the zero-momentum model is wrong here
    assert torque < 1e-6 * zero_torque + 1e-9
    assert velocity_error < 1e-9


@pytest.mark.parametrize("model_name", ["planar-3r", "spatial-7dof"])
def test_a_push_on_the_tool_known_to_the_slave_does_not_turn_the_base(model_name):
    push = np.array([0.8, -0.5, 0.3 if model_name.startswith("spatial") else 0.0])
    unaware, _ = _one_step_base_torque(model_name, "measured", push, tell_slave=False)
    aware, _ = _one_step_base_torque(model_name, "measured", push, tell_slave=True)
    assert unaware > 1e-2  # the push reaches the base through the arm
    assert aware < 1e-6 * unaware + 1e-9


def test_the_merged_link_carries_the_parallel_axis_inertia():
    model = get_model("planar-3r")
    last = model.links[-1]
    payload = Payload(12.0, np.array([0.3, 0.05, 0.0]), np.array([[0.2, 0.03, 0.0], [0.03, 0.1, 0.0], [0.0, 0.0, 0.25]]))
    # by hand: both bodies' inertias moved to the common centre of mass
    mass = last.mass_kg + payload.mass_kg
    com = (last.mass_kg * np.asarray(last.com_m) + payload.mass_kg * payload.com_m) / mass
    inertia = np.diag(last.inertia_kg_m2) + payload.inertia_kg_m2
    for m, c in ((last.mass_kg, np.asarray(last.com_m)), (payload.mass_kg, payload.com_m)):
        d = c - com
        inertia += m * (d @ d * np.eye(3) - np.outer(d, d))
    with PyBulletArm(model) as arm:
        body = arm.carry(payload)
        info = pb.getDynamicsInfo(body, model.n_joints - 1, physicsClientId=arm.client_id)
        frame = pb.getLinkState(body, model.n_joints - 1, physicsClientId=arm.client_id)
    assert info[0] == pytest.approx(mass, rel=1e-12)
    np.testing.assert_allclose(sorted(info[2]), np.linalg.eigvalsh(inertia), rtol=1e-9)
    # the centre of mass in the link frame: world COM - link frame origin, rotated back
    rotation = np.array(pb.getMatrixFromQuaternion(frame[5])).reshape(3, 3)
    np.testing.assert_allclose(rotation.T @ (np.asarray(frame[0]) - np.asarray(frame[4])), com, atol=1e-6)


@pytest.mark.parametrize("model_name", ["planar-3r", "spatial-7dof"])
def test_closing_on_ten_times_the_arms_mass_leaves_the_base_rate_alone(model_name):
    """The automatic capture closes on a debris ten times the arm's mass: the joint rates
    take the debris' momentum up and the base keeps its rate (pinv, the same closing
    without the reaction constraint, turns it); afterwards eq. 6 holds with the payload."""
    model = get_model(model_name)
    mass = 10.0 * sum(link.mass_kg for link in model.links)
    jumps = {}
    for solver, settings in (("lse", IKSettings(base_feedback=False)), ("pinv", None)):
        run = run_automatic_capture(model_name, solver, duration_s=2.6, debris_mass_kg=mass, settings=settings)
        assert run.captured
        k = int(np.searchsorted(run.t_s, run.captured_at_s))
        w = run.base_angular_velocity_rad_s
        jumps[solver] = float(np.linalg.norm(w[k + 1] - w[k]))
        if solver == "lse":
            after = run.t_s > run.captured_at_s + 0.002
            rows = model.arrays.reaction_rows
            assert float(np.max(np.linalg.norm(run.base_torque_n_m[after][:, rows], axis=1))) < 1e-6
    assert jumps["pinv"] > 1e-3
    assert jumps["lse"] < 0.02 * jumps["pinv"]
