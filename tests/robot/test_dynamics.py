"""Free-floating dynamics against PyBullet (independent: its mass matrix and link states)."""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from robot.arm import JointCommand
from robot.dynamics import base_twist, dynamics_terms, quaternion_matrix
from robot.pybullet_arm import PyBulletArm


def _random_state(model, rng):
    n = model.n_joints
    q = rng.uniform(np.array(model.q_min_rad) * 0.8, np.array(model.q_max_rad) * 0.8)
    qd = rng.uniform(-1.0, 1.0, n) * np.array(model.qd_max_rad_s) * 0.5
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    if model.task_dim == 2:  # planar: the base turns about z only
        angle = rng.uniform(-np.pi, np.pi)
        quat = np.array([0.0, 0.0, np.sin(angle / 2), np.cos(angle / 2)])
    return q, qd, rng.uniform(-0.5, 0.5, 3) * (model.task_dim == 3), quat


def _zero_momentum_twist_from_pybullet(arm, q, qd, rot):
    """Base twist with zero system momentum, from PyBullet's floating-base mass matrix
    (rows/columns [base angular, base linear, joints], base frame)."""
    mass = np.array(pb.calculateMassMatrix(arm.body_id, list(q), physicsClientId=arm.client_id))
    twist = -np.linalg.solve(mass[:6, :6], mass[:6, 6:] @ qd)
    return rot @ twist[3:], rot @ twist[:3]


@pytest.mark.parametrize("seed", range(4))
def test_generalized_jacobian_matches_plant_velocity(model, seed, probe):
    rng = np.random.default_rng(seed)
    with PyBulletArm(model) as arm:
        q, qd, pos, quat = _random_state(model, rng)
        rot = quaternion_matrix(quat)
        v0, w0 = _zero_momentum_twist_from_pybullet(arm, q, qd, rot)
        arm.set_state(q, qd, pos, quat, v0, w0)
        linear, angular = probe.momentum(arm)
        assert np.linalg.norm(linear) < 1e-9 and np.linalg.norm(angular - np.cross(pos, linear)) < 1e-9
        terms = dynamics_terms(model, q, qd, pos, quat)
        plant = probe.ee_velocity(arm)
        assert np.linalg.norm(terms.jacobian @ qd - plant) <= 1e-9 * np.linalg.norm(plant)
        assert np.allclose(terms.ee_velocity_m_s, plant, rtol=0, atol=1e-9 * np.linalg.norm(plant))
        # the model's own momentum solution agrees with PyBullet's mass matrix
        v_model, w_model = base_twist(model, q, qd)
        assert np.allclose(rot @ w_model, w0, atol=1e-12) and np.allclose(rot @ v_model, v0, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_bias_terms_match_plant_accelerations(model, seed, probe):
    """Eq. 1 and eq. 2 predict the plant's EE acceleration and base torque for any q̈."""
    rng = np.random.default_rng(100 + seed)
    dt = 1e-5
    with PyBulletArm(model, dt_s=dt) as arm:
        q, qd, pos, quat = _random_state(model, rng)
        qdd = rng.uniform(-3.0, 3.0, model.n_joints)
        rot = quaternion_matrix(quat)
        v0, w0 = _zero_momentum_twist_from_pybullet(arm, q, qd, rot)
        arm.set_state(q, qd, pos, quat, v0, w0)
        terms = dynamics_terms(model, q, qd, pos, quat)
        v_before = probe.ee_velocity(arm)
        arm.send(JointCommand(0.0, q.copy(), qd + qdd * dt, qdd))
        arm.advance()
        measurement = arm.measure()
        measured_torque = measurement.base_torque_n_m.copy()
        # the joint accelerations the plant realised (its motor solver is not exact)
        qdd = (measurement.qd_rad_s - qd) / dt
        accel = (probe.ee_velocity(arm) - v_before) / dt
        predicted = terms.jacobian @ qdd + terms.jdot_qdot
        assert np.linalg.norm(accel - predicted) <= 2e-4 * np.linalg.norm(predicted)
        torque = terms.reaction_map @ qdd + terms.reaction_bias
        assert np.linalg.norm(measured_torque - torque) <= 1e-4 * np.linalg.norm(torque)
