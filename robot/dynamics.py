"""Free-floating dynamics terms of eq. 1 and eq. 2 for any state of either model.

Own implementation, checked against PyBullet (tests/robot/test_dynamics.py): the
Generalized Jacobian and the base motion come from the system's momentum equation
written in closed form with O(n) suffix sums (derivation in :mod:`robot._kernels`),
compiled with numba. Why not PyBullet's ``calculateMassMatrix`` / ``calculateJacobian``:
they assume zero base velocity, so the floating-base velocity terms (``J̇q̇``, ``n``) need
an own derivation anyway, and the Python round trips (several queries plus numpy on
3x3 and 6x6 matrices) would cost far more than the 1 kHz tick can spare, while the
compiled kernel returns all four terms in a few microseconds. The tests compare the base
twist from the momentum equation with PyBullet's floating-base mass matrix, the
Generalized Jacobian with the plant's end-effector velocity, and the bias terms with
finite differences of the plant's own motion.

Assumptions: zero total linear and angular momentum (the free-floating arm starts at
rest and nothing external acts). The bias terms are directional central differences of
``Jg(q) q̇`` and ``Om(q) q̇`` along ``q̇`` (about 1e-10 relative error) plus the exact
base-rotation terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from robot import _kernels as kern
from robot.models import ManipulatorModel


@dataclass(frozen=True)
class DynamicsTerms:
    """The terms of eq. 1 and eq. 2 at one state, task frame, all three rows.

    Attributes:
        jacobian: (3, n) Generalized Jacobian J [m/rad]: EE velocity = J q̇.
        jdot_qdot: (3,) bias J̇ q̇ [m/s^2] of eq. 1.
        reaction_map: (3, n) M of eq. 2 [N m / (rad/s^2)].
        reaction_bias: (3,) n of eq. 2 [N m].
        ee_position_m: (3,) end effector [m]; ee_velocity_m_s: (3,) J q̇ [m/s].
        base_angular_velocity_rad_s: (3,) base rate implied by zero momentum [rad/s].

    For a planar model, eq. 1 uses rows x, y of the first two and eq. 2 row z of the
    other two (``model.arrays.task_rows`` / ``reaction_rows``).
    """

    jacobian: NDArray[np.float64]
    jdot_qdot: NDArray[np.float64]
    reaction_map: NDArray[np.float64]
    reaction_bias: NDArray[np.float64]
    ee_position_m: NDArray[np.float64]
    ee_velocity_m_s: NDArray[np.float64]
    base_angular_velocity_rad_s: NDArray[np.float64]


def quaternion_matrix(quat_xyzw: NDArray[np.float64] | tuple[float, ...]) -> NDArray[np.float64]:
    """Rotation matrix (task <- body) of a unit quaternion (x, y, z, w)."""
    out = np.empty((3, 3))
    kern.quat_to_matrix(float(quat_xyzw[0]), float(quat_xyzw[1]), float(quat_xyzw[2]), float(quat_xyzw[3]), out)
    return out


def dynamics_terms(model: ManipulatorModel, q_rad: NDArray[np.float64], qd_rad_s: NDArray[np.float64],
                   base_position_m: NDArray[np.float64] | None = None,
                   base_orientation_xyzw: NDArray[np.float64] | None = None) -> DynamicsTerms:
    """J, J̇q̇, M and n (eq. 1, 2) at a state, assuming zero system momentum.

    Args:
        model: the manipulator.
        q_rad, qd_rad_s: (n,) joint angles [rad] and rates [rad/s].
        base_position_m: (3,) base centre of mass, task frame (origin when None).
        base_orientation_xyzw: (4,) base attitude (identity when None).

    Not for the servo tick (allocates); the tick uses :func:`robot._kernels.controller_step`.
    """
    n = model.n_joints
    q = np.ascontiguousarray(q_rad, dtype=float)
    qd = np.ascontiguousarray(qd_rad_s, dtype=float)
    if q.shape != (n,) or qd.shape != (n,):
        raise ValueError(f"{model.name}: q and qd need shape ({n},), got {q.shape} and {qd.shape}")
    pos = np.zeros(3) if base_position_m is None else np.asarray(base_position_m, dtype=float)
    quat = np.array([0.0, 0.0, 0.0, 1.0]) if base_orientation_xyzw is None else np.asarray(base_orientation_xyzw)
    rot0 = quaternion_matrix(quat)
    a = model.arrays
    jac = np.empty((3, n))
    mmat = np.empty((3, n))
    jdqd = np.empty(3)
    nvec = np.empty(3)
    re_b = np.empty(3)
    vee_b = np.empty(3)
    kern.dynamics_terms(q, qd, rot0, a.joint_xyz, a.joint_rot, a.joint_axis, a.link_mass, a.link_com,
                        a.link_inertia, a.ee_offset, a.base_mass, a.base_inertia, np.zeros(3), jac, jdqd, mmat, nvec,
                        re_b, vee_b)
    jg = np.empty((3, n))
    om = np.empty((3, n))
    kern.floating_base_maps(q, a.joint_xyz, a.joint_rot, a.joint_axis, a.link_mass, a.link_com, a.link_inertia,
                            a.ee_offset, a.base_mass, a.base_inertia, jg, om, np.empty(3))
    return DynamicsTerms(
        jacobian=jac,
        jdot_qdot=jdqd,
        reaction_map=mmat,
        reaction_bias=nvec,
        ee_position_m=pos + rot0 @ re_b,
        ee_velocity_m_s=rot0 @ vee_b,
        base_angular_velocity_rad_s=rot0 @ (om @ qd),
    )


def base_twist(model: ManipulatorModel, q_rad: NDArray[np.float64],
               qd_rad_s: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Base (linear, angular) velocity that makes the system momentum zero, base frame.

    Returns:
        (3,) base centre-of-mass velocity [m/s] and (3,) base angular velocity [rad/s].
    """
    n = model.n_joints
    a = model.arrays
    q = np.ascontiguousarray(q_rad, dtype=float)
    qd = np.ascontiguousarray(qd_rad_s, dtype=float)
    jg = np.empty((3, n))
    om = np.empty((3, n))
    re = np.empty(3)
    kern.floating_base_maps(q, a.joint_xyz, a.joint_rot, a.joint_axis, a.link_mass, a.link_com, a.link_inertia,
                            a.ee_offset, a.base_mass, a.base_inertia, jg, om, re)
    w = om @ qd
    je_qd = jg @ qd - np.cross(w, re)  # v0 + (joint part) = Jg qd - w x r_e
    origins = np.empty((n, 3))
    axes = np.empty((n, 3))
    rots = np.empty((n, 3, 3))
    kern.forward_kinematics(q, a.joint_xyz, a.joint_rot, a.joint_axis, a.ee_offset, origins, axes, rots, re)
    joint_part = sum(np.cross(axes[j], re - origins[j]) * qd[j] for j in range(n))
    return je_qd - joint_part, w


@dataclass(frozen=True)
class SystemMomentum:
    """Mass, centre of mass [m], linear momentum [kg m/s] and angular momentum about the
    centre of mass [kg m^2/s] of a free-floating system, task frame."""

    mass_kg: float
    centre_m: NDArray[np.float64]
    linear_kg_m_s: NDArray[np.float64]
    angular_kg_m2_s: NDArray[np.float64]


def system_momentum(model: ManipulatorModel, q_rad: NDArray[np.float64], qd_rad_s: NDArray[np.float64],
                    base_position_m: NDArray[np.float64], base_orientation_xyzw: NDArray[np.float64],
                    base_velocity_m_s: NDArray[np.float64], base_angular_velocity_rad_s: NDArray[np.float64],
                    bodies: tuple[tuple[float, NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                                        NDArray[np.float64]], ...] = ()) -> SystemMomentum:
    """The momentum of base, links and further free bodies from a measured state, summed
    body by body (no momentum assumption; forward kinematics of the model).

    Args:
        model: the manipulator (its mass properties, as the slave sees them).
        q_rad, qd_rad_s: (n,) joint angles [rad] and rates [rad/s].
        base_position_m, base_orientation_xyzw, base_velocity_m_s,
        base_angular_velocity_rad_s: the measured base state, task frame.
        bodies: further rigid bodies, each ``(mass [kg], centre [m], velocity [m/s],
            inertia about the centre [kg m^2], angular velocity [rad/s])``, task frame
            (a debris the tool is closing on).

    Not for the servo tick (allocates): once per capture.
    """
    a = model.arrays
    n = model.n_joints
    q = np.ascontiguousarray(q_rad, dtype=float)
    qd = np.asarray(qd_rad_s, dtype=float)
    rot0 = quaternion_matrix(np.asarray(base_orientation_xyzw, dtype=float))
    r0 = np.asarray(base_position_m, dtype=float)
    v0 = np.asarray(base_velocity_m_s, dtype=float)
    w0 = np.asarray(base_angular_velocity_rad_s, dtype=float)
    origins, axes, rots, ee = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3, 3)), np.zeros(3)
    kern.forward_kinematics(q, a.joint_xyz, a.joint_rot, a.joint_axis, a.ee_offset, origins, axes, rots, ee)
    parts = [(float(a.base_mass), r0, v0, rot0 @ a.base_inertia @ rot0.T, w0)]
    for i in range(n):
        centre_b = origins[i] + rots[i] @ a.link_com[i]
        v_b = sum((np.cross(axes[j], centre_b - origins[j]) * qd[j] for j in range(i + 1)), np.zeros(3))
        w_b = sum((axes[j] * qd[j] for j in range(i + 1)), np.zeros(3))
        rot = rot0 @ rots[i]
        parts.append((float(a.link_mass[i]), r0 + rot0 @ centre_b, v0 + np.cross(w0, rot0 @ centre_b) + rot0 @ v_b,
                      rot @ a.link_inertia[i] @ rot.T, w0 + rot0 @ w_b))
    parts.extend((float(m), np.asarray(c, float), np.asarray(v, float), np.asarray(i_, float), np.asarray(w, float))
                 for m, c, v, i_, w in bodies)
    mass = sum(p[0] for p in parts)
    centre = sum((p[0] * p[1] for p in parts), np.zeros(3)) / mass
    linear = sum((p[0] * p[2] for p in parts), np.zeros(3))
    angular = sum((p[0] * np.cross(p[1] - centre, p[2]) + p[3] @ p[4] for p in parts), np.zeros(3))
    return SystemMomentum(mass, centre, linear, angular)
