"""The reactionless workspace: where, and along which axes, the arm tracks a target reactionless.

A capture point ``p`` and an approach axis ``d`` (a unit vector; ``d`` and ``-d`` are one
axis, see below) are **reactionless-trackable** when the model's own slave controller
(:func:`robot._kernels.controller_step`: eq. 10, eq. 6 with its damping, limits,
null-space terms, sigma ascent and base feedback, ``k_p = 7.7``, ``k_d = 5``), starting
at rest in the model's start pose ``q0``,

1. **approaches**: brings the end effector from its start position to ``p`` along the
   straight line (trapezoidal speed: ``approach_accel_m_s2`` up to
   ``approach_speed_m_s`` and down again), then holds ``settle_s``; and then
2. **passes**: from rest at ``p``, tracks the target along ``+d`` and, again from the
   state at ``p``, along ``-d``: each a ramp at ``speed²/(2 ramp_m)`` up to
   ``speed_m_s`` (0.1 m/s, the scenarios' debris speed) over ``ramp_m``, then that speed
   out to ``half_length_m`` (±3 cm through ``p`` in all),

with all of the following holding:

* ``sigma_ratio = σ_min(M (I − J⁺J)) / ‖M‖`` stays at or above the IK's
  ``sigma_threshold`` (0.01) at every step of the approach and the passes (no reaction
  singularity, so no damping lets torque through to the base);
* no joint bound (position braking curve, rate or acceleration limit) is active in the
  passes (``limited`` of the IK; on the approach a bound may bind for a moment, the
  controller then scales the task and catches up, which the final error checks);
* the end effector ends the approach within ``position_tolerance_m`` of ``p`` and stays
  within it of the target throughout the passes;
* no joint origin beyond the first nor the end effector enters the base box grown by
  ``BASE_CLEARANCE_M`` (checked every ``clearance_stride`` steps);
* every number stays finite.

A run stops at its first certain failure (sigma_ratio under the threshold, the arm in
the base, a non-finite number), so the failure counts name what failed first. Not
checked: collisions between links (the models have none) and the real plant's servo
errors (the joints here follow the command exactly).

Why an axis and not a signed direction: the reaction constraint is linear in the joint
rates (``M q̇ = 0`` and ``J q̇ = v`` at zero momentum), so reversing the target reverses
the reactionless joint motion (exactly for the planar arm, whose reactionless motion is
unique); the passes cover both senses, so one axis stands for both directions.

The plant is the model itself, no PyBullet: the joints follow the controller's command
exactly (``q ← q_cmd``, ``q̇ ← q̇_cmd``, as an ideal joint servo would), the base moves as
zero system momentum requires: its angular velocity ``ω0 = Om(q) q̇`` is integrated into
the base attitude (quaternion, exponential map) and the base position follows from the
fixed system centre of mass, so the end effector is ``x_com + R0 (r_e(q) − c(q))``.
The attitude change this predicts is recorded. Where the motion is reactionless it is
only the discretisation's residue, proportional to the servo period (measured: at most
5e-5 rad over a whole approach and pass at 5 ms, 1e-5 rad at 1 ms); a run stops before a
damped reaction singularity could let torque through.

The map: cells of a regular grid (planar: x-y; spatial: x-y-z) over the cube of side
``2 R`` about the shoulder (``R`` the reach, :func:`shoulder_and_reach`); each cell centre
is a capture point. Cells whose centre lies beyond the reach or inside the base box
(grown by ``BASE_CLEARANCE_M``) are not simulated (no end effector can be there) and
count as untrackable. Per point, the trackable fraction of the axes; the workspace
size is the area (planar, m²) or volume (spatial, m³) of the cells with a fraction of
at least 50 %, and the same weighted by the fraction; the coverage is that size over
the reach disc (``π R²``) or ball (``4/3 π R³``).

The per-point work is one compiled call that releases the GIL; :func:`evaluate_points`
runs chunks of points on a thread per CPU.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from numba import njit
from numpy.typing import NDArray

from capture_trainer.kernel_cache import depends_on
from robot import _kernels as kern
from robot.ik import IKSettings, settings_vector
from robot.models import ManipulatorModel

depends_on(__file__, kern)  # the kernels below compile robot._kernels' into themselves

#: Servo period of the simulated controller [s] (the real one runs at 1 ms; see the docs
#: for the comparison).
DT_S = 0.005
#: Target speed in the passes [m/s] (the scenarios' debris speed).
SPEED_M_S = 0.1
#: Half length of the pass through the point [m] (the pass covers ±HALF_LENGTH_M).
HALF_LENGTH_M = 0.03
#: Distance over which the pass ramps up to SPEED_M_S [m].
RAMP_M = 0.01
#: Peak speed of the minimum-jerk approach from the start pose [m/s].
APPROACH_SPEED_M_S = 0.2
#: Acceleration of the trapezoidal approach [m/s^2].
APPROACH_ACCEL_M_S2 = 0.5
#: Hold at the point after the approach [s].
SETTLE_S = 0.3
#: Largest end-effector error at the end of the approach and during the passes [m]
#: (the start-pose search's tolerance).
POSITION_TOLERANCE_M = 0.005
#: Clearance kept from the base box [m] (as the start-pose search).
BASE_CLEARANCE_M = 0.05
#: Fraction of the axes a point needs to count into the workspace size.
FRACTION_THRESHOLD = 0.5
K_P = 7.7
K_D = 5.0
_F = NDArray[np.float64]
_I = NDArray[np.int64]
#: Most points one thread takes at a time.
_CHUNK_POINTS = 8
#: Default grid resolution (cells per axis) and number of approach axes per model dimension.
DEFAULT_RESOLUTION = {2: 41, 3: 21}
DEFAULT_AXES = {2: 16, 3: 13}

# Failure bits of a (point, axis) pair.
FAIL_SINGULAR = 1  # sigma_ratio below the threshold on the approach or a pass
FAIL_LIMIT = 2  # a joint bound active during a pass
FAIL_TRACKING = 4  # approach ended off the point, or a pass lost the target
FAIL_BASE = 8  # a joint or the end effector entered the base box (+ clearance)
FAIL_FAULT = 16  # a non-finite number
FAILURE_NAMES: dict[int, str] = {
    FAIL_SINGULAR: "reaction singularity",
    FAIL_LIMIT: "joint limit",
    FAIL_TRACKING: "tracking error",
    FAIL_BASE: "base clearance",
    FAIL_FAULT: "non-finite",
}

# Per-run statistics (layout of the compiled runs' stats vector).
_ST_SIGMA, _ST_LIMITED, _ST_ERR_MAX, _ST_ERR_END, _ST_ATT, _ST_RATE, _ST_BASE, _ST_FAULT = range(8)
_N_ST = 8
# Layout of the map kernel's settings vector (WorkspaceSettings.vector).
_SET_APPROACH_SPEED, _SET_APPROACH_ACCEL, _SET_SETTLE, _SET_SPEED, _SET_RAMP = range(5)
_SET_HALF_LENGTH, _SET_TOLERANCE, _SET_THRESHOLD, _SET_STRIDE = range(5, 9)
_N_SET = 9
# Per-(point, axis) outputs of the map kernel.
_PA_FLAGS, _PA_SIGMA, _PA_ERR, _PA_ATT, _PA_RATE = range(5)
_N_PA = 5
# Per-point outputs (approach and state at the point).
_PT_FLAGS, _PT_SIGMA, _PT_ERR, _PT_ATT, _PT_SIGMA_AT = range(5)
_N_PT = 5


@njit(cache=True, error_model="numpy")
def _matvec(mat: _F, vec: _F, out: _F) -> None:
    """``out = mat @ vec`` without an allocation (the base rate from the momentum map)."""
    for r in range(out.shape[0]):
        acc = 0.0
        for j in range(vec.shape[0]):
            acc += mat[r, j] * vec[j]
        out[r] = acc


@njit(cache=True, error_model="numpy")
def _quat_step(quat: _F, w_body: _F, dt: float) -> None:
    """quat <- quat ⊗ exp(w_body dt / 2) (body-frame rate, xyzw), renormalised."""
    angle = math.sqrt(w_body[0] ** 2 + w_body[1] ** 2 + w_body[2] ** 2) * dt
    if angle > 1e-300:
        s = math.sin(0.5 * angle) / (angle / dt)
        dx, dy, dz, dw = w_body[0] * s, w_body[1] * s, w_body[2] * s, math.cos(0.5 * angle)
    else:
        dx, dy, dz, dw = 0.0, 0.0, 0.0, 1.0
    x, y, z, w = quat[0], quat[1], quat[2], quat[3]
    nx = w * dx + x * dw + y * dz - z * dy
    ny = w * dy - x * dz + y * dw + z * dx
    nz = w * dz + x * dy - y * dx + z * dw
    nw = w * dw - x * dx - y * dy - z * dz
    norm = math.sqrt(nx * nx + ny * ny + nz * nz + nw * nw)
    quat[0], quat[1], quat[2], quat[3] = nx / norm, ny / norm, nz / norm, nw / norm


@njit(cache=True, error_model="numpy")
def _mass_centre_and_clearance(q: _F, joint_xyz: _F, joint_rot: _F, joint_axis: _F, link_mass: _F, link_com: _F,
                               ee_offset: _F, base_mass: float, base_half: _F, c_b: _F, re_b: _F) -> bool:
    """System centre of mass c_b and end effector re_b relative to the base CoM (base frame);
    returns True if a joint origin after the first or the end effector is inside the box
    ``|x_i| < base_half_i`` (all three axes)."""
    n = q.shape[0]
    origins = np.empty((n, 3))
    axes = np.empty((n, 3))
    rots = np.empty((n, 3, 3))
    kern.forward_kinematics(q, joint_xyz, joint_rot, joint_axis, ee_offset, origins, axes, rots, re_b)
    mtot = base_mass
    for r in range(3):
        c_b[r] = 0.0
    for i in range(n):
        mtot += link_mass[i]
        for r in range(3):
            acc = origins[i, r]
            for k in range(3):
                acc += rots[i, r, k] * link_com[i, k]
            c_b[r] += link_mass[i] * acc
    for r in range(3):
        c_b[r] /= mtot
    inside = False
    for i in range(1, n + 1):
        hit = True
        for r in range(3):
            v = re_b[r] if i == n else origins[i, r]
            if abs(v) >= base_half[r]:
                hit = False
        if hit:
            inside = True
    return inside


@njit(cache=True, error_model="numpy")
def _reference(kind: int, t: float, x0: _F, x1: _F, speed: float, accel: float, x: _F, v: _F, a: _F) -> None:
    """Commanded position, velocity, acceleration at time t.

    kind 0: from x0 to x1 along the straight line, trapezoidal speed (``accel`` up to
    ``speed``, then down; triangular when the line is short), then hold at x1;
    kind 1: from x0 along the unit vector x1: ``accel`` up to ``speed``, then that speed.
    """
    if kind == 0:
        length = math.sqrt((x1[0] - x0[0]) ** 2 + (x1[1] - x0[1]) ** 2 + (x1[2] - x0[2]) ** 2)
        if length <= 0.0:
            for r in range(3):
                x[r] = x1[r]
                v[r] = 0.0
                a[r] = 0.0
            return
        peak = min(speed, math.sqrt(accel * length))
        t_acc = peak / accel
        t_cruise = (length - peak * t_acc) / peak
        if t < t_acc:
            s, sd, sdd = 0.5 * accel * t * t, accel * t, accel
        elif t < t_acc + t_cruise:
            s, sd, sdd = 0.5 * peak * t_acc + peak * (t - t_acc), peak, 0.0
        elif t < 2.0 * t_acc + t_cruise:
            left = 2.0 * t_acc + t_cruise - t
            s, sd, sdd = length - 0.5 * accel * left * left, accel * left, -accel
        else:
            s, sd, sdd = length, 0.0, 0.0
        for r in range(3):
            u = (x1[r] - x0[r]) / length
            x[r] = x0[r] + u * s
            v[r] = u * sd
            a[r] = u * sdd
    else:
        t_ramp = speed / accel
        if t < t_ramp:
            s, sd, sdd = 0.5 * accel * t * t, accel * t, accel
        else:
            s, sd, sdd = 0.5 * speed * t_ramp + speed * (t - t_ramp), speed, 0.0
        for r in range(3):
            x[r] = x0[r] + x1[r] * s
            v[r] = x1[r] * sd
            a[r] = x1[r] * sdd


@njit(cache=True, error_model="numpy")
def _run(q: _F, qd: _F, quat: _F, x_com: _F, kind: int, x0: _F, x1: _F, steps: int, speed: float, accel: float,
         threshold: float, params: _F, joint_xyz: _F, joint_rot: _F, joint_axis: _F, link_mass: _F, link_com: _F,
         link_inertia: _F, ee_offset: _F, base_mass: float, base_inertia: _F, task_rows: _I, reaction_rows: _I,
         q_min: _F, q_max: _F, qd_max: _F, qdd_max: _F, base_half: _F, clearance_stride: int, stats: _F) -> None:
    """Run the slave controller on the ideal floating plant for ``steps`` ticks (state in place).

    Stops at the first certain failure: sigma_ratio below ``threshold``, the arm in the
    base box, or a non-finite number. stats (out, _N_ST): smallest sigma_ratio, any
    bound active (0/1), largest and last end-effector error [m], largest base attitude
    angle from identity [rad], largest |q̇_i|/q̇_max_i, base entered (0/1), non-finite (0/1).
    """
    n = q.shape[0]
    dt = params[kern.P_DT]
    arena = np.empty(kern.arena_size(n))
    qdd = np.empty(n)
    q_cmd = q.copy()
    qd_cmd = qd.copy()
    qdd_cmd = np.zeros(n)
    status = np.zeros(kern.N_STATUS)
    diag = np.zeros(8)
    jac_pinv = np.zeros((n, 3))
    x = np.empty(3)
    v = np.empty(3)
    a = np.empty(3)
    c_b = np.empty(3)
    re_b = np.empty(3)
    pos = np.empty(3)
    w_task = np.empty(3)
    zero_v = np.zeros(3)
    w_body = np.empty(3)
    rot0 = np.empty((3, 3))
    jg = np.empty((3, n))
    om = np.empty((3, n))
    rv = np.empty(3)
    stats[_ST_SIGMA] = math.inf
    for k in range(_ST_LIMITED, _N_ST):
        stats[k] = 0.0
    kern.quat_to_matrix(quat[0], quat[1], quat[2], quat[3], rot0)
    _mass_centre_and_clearance(q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, ee_offset, base_mass,
                               base_half, c_b, re_b)
    kern.floating_base_maps(q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia, ee_offset,
                            base_mass, base_inertia, jg, om, re_b)
    _matvec(om, qd, w_body)
    for step in range(steps):
        for r in range(3):
            pos[r] = x_com[r] - (rot0[r, 0] * c_b[0] + rot0[r, 1] * c_b[1] + rot0[r, 2] * c_b[2])
            w_task[r] = rot0[r, 0] * w_body[0] + rot0[r, 1] * w_body[1] + rot0[r, 2] * w_body[2]
        _reference(kind, step * dt, x0, x1, speed, accel, x, v, a)
        kern.controller_step(q, qd, pos, quat, w_task, zero_v, 1.0, zero_v, zero_v, zero_v, x, v, a, joint_xyz, joint_rot, joint_axis, link_mass,
                             link_com, link_inertia, ee_offset, base_mass, base_inertia, task_rows, reaction_rows,
                             q_min, q_max, qd_max, qdd_max, params, qdd, q_cmd, qd_cmd, qdd_cmd, status, diag,
                             jac_pinv, arena)
        if status[kern.S_FAULT] > 0.0:
            stats[_ST_FAULT] = 1.0
            return
        err = 0.0
        for r in range(3):
            err += (status[kern.S_EE + r] - x[r]) ** 2
        err = math.sqrt(err)
        stats[_ST_ERR_MAX] = max(stats[_ST_ERR_MAX], err)
        stats[_ST_ERR_END] = err
        stats[_ST_SIGMA] = min(stats[_ST_SIGMA], status[kern.S_SIGMA_RATIO])
        if status[kern.S_LIMITED] > 0.0:
            stats[_ST_LIMITED] = 1.0
        if stats[_ST_SIGMA] < threshold:
            return
        # the ideal joint servo, then the base as zero momentum requires
        for j in range(n):
            q[j] = q_cmd[j]
            qd[j] = qd_cmd[j]
            stats[_ST_RATE] = max(stats[_ST_RATE], abs(qd[j]) / qd_max[j])
        inside = _mass_centre_and_clearance(q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, ee_offset,
                                            base_mass, base_half, c_b, re_b)
        if inside and (step % clearance_stride == 0 or step == steps - 1):
            stats[_ST_BASE] = 1.0
            return
        kern.floating_base_maps(q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia, ee_offset,
                                base_mass, base_inertia, jg, om, re_b)
        _matvec(om, qd, w_body)
        _quat_step(quat, w_body, dt)
        kern.quat_to_matrix(quat[0], quat[1], quat[2], quat[3], rot0)
        kern.quat_to_rotvec(quat, rv)
        stats[_ST_ATT] = max(stats[_ST_ATT], math.sqrt(rv[0] ** 2 + rv[1] ** 2 + rv[2] ** 2))
        if not (math.isfinite(quat[3]) and math.isfinite(rv[0] + rv[1] + rv[2])):
            stats[_ST_FAULT] = 1.0
            return
    # error at the end: the state after the last tick against the reference of that time
    _reference(kind, steps * dt, x0, x1, speed, accel, x, v, a)
    err = 0.0
    for r in range(3):
        ee = x_com[r] + rot0[r, 0] * (re_b[0] - c_b[0]) + rot0[r, 1] * (re_b[1] - c_b[1]) \
            + rot0[r, 2] * (re_b[2] - c_b[2])
        err += (ee - x[r]) ** 2
    stats[_ST_ERR_END] = math.sqrt(err)
    stats[_ST_ERR_MAX] = max(stats[_ST_ERR_MAX], stats[_ST_ERR_END])


@njit(cache=True, error_model="numpy")
def _failures(stats: _F, tol: float, threshold: float, check_limits: bool) -> int:
    """Failure bits of one run's stats."""
    flags = 0
    if stats[_ST_FAULT] > 0.0:
        flags |= FAIL_FAULT
    if stats[_ST_SIGMA] < threshold:
        flags |= FAIL_SINGULAR
    if check_limits and stats[_ST_LIMITED] > 0.0:
        flags |= FAIL_LIMIT
    if flags == 0 and not (stats[_ST_ERR_END] <= tol and (not check_limits or stats[_ST_ERR_MAX] <= tol)):
        flags |= FAIL_TRACKING
    if stats[_ST_BASE] > 0.0:
        flags |= FAIL_BASE
    return flags


@njit(cache=True, error_model="numpy")
def _sigma_at(q: _F, joint_xyz: _F, joint_rot: _F, joint_axis: _F, link_mass: _F, link_com: _F, link_inertia: _F,
              ee_offset: _F, base_mass: float, base_inertia: _F, task_rows: _I, reaction_rows: _I, j_sigma: float,
              j_damp: float) -> float:
    """sigma_ratio at q, computed as the IK computes it (robot._kernels._sigma_ratio_base)."""
    arena = np.empty(kern.arena_size(q.shape[0]))
    diag = np.zeros(8)
    value: float = kern._sigma_ratio_base(arena, 0, q, joint_xyz, joint_rot, joint_axis, link_mass, link_com,
                                          link_inertia, ee_offset, base_mass, base_inertia, task_rows,
                                          reaction_rows, j_sigma, j_damp, diag)
    return value


@njit(cache=True, error_model="numpy", nogil=True)
def _map_points(order: _I, start: int, stop: int, points: _F, axes: _F, q0: _F, settings: _F, params: _F,
                joint_xyz: _F, joint_rot: _F, joint_axis: _F, link_mass: _F, link_com: _F, link_inertia: _F,
                ee_offset: _F, base_mass: float, base_inertia: _F, task_rows: _I, reaction_rows: _I, q_min: _F,
                q_max: _F, qd_max: _F, qdd_max: _F, base_half: _F, pair_out: _F, point_out: _F, q_at: _F) -> None:
    """Evaluate the (point, axis) pairs of the points ``order[start:stop]`` (no GIL held:
    threads run disjoint ranges at the same time).

    settings: (_N_SET,) see :meth:`WorkspaceSettings.vector`.
    pair_out: out (P, D, _N_PA); point_out: out (P, _N_PT); q_at: out (P, n).
    """
    n = q0.shape[0]
    dt = params[kern.P_DT]
    approach_speed = settings[_SET_APPROACH_SPEED]
    approach_accel = settings[_SET_APPROACH_ACCEL]
    settle = settings[_SET_SETTLE]
    speed = settings[_SET_SPEED]
    ramp = settings[_SET_RAMP]
    half_length = settings[_SET_HALF_LENGTH]
    tol = settings[_SET_TOLERANCE]
    threshold = settings[_SET_THRESHOLD]
    stride = int(settings[_SET_STRIDE])
    accel = speed * speed / (2.0 * ramp)
    pass_steps = int(math.ceil((speed / accel + (half_length - ramp) / speed) / dt - 1e-9))
    for index in range(start, stop):
        p = order[index]
        q = q0.copy()
        qd = np.zeros(n)
        quat = np.array([0.0, 0.0, 0.0, 1.0])
        c_b = np.empty(3)
        re_b = np.empty(3)
        _mass_centre_and_clearance(q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, ee_offset, base_mass,
                                   base_half, c_b, re_b)
        x_com = c_b.copy()  # base CoM at the origin, identity attitude at the start
        ee0 = re_b.copy()
        target = points[p].copy()
        length = math.sqrt((target[0] - ee0[0]) ** 2 + (target[1] - ee0[1]) ** 2 + (target[2] - ee0[2]) ** 2)
        peak = min(approach_speed, math.sqrt(approach_accel * length))
        duration = 0.0 if length <= 0.0 else 2.0 * peak / approach_accel + (length - peak * peak / approach_accel) / peak
        steps = int(math.ceil((duration + settle) / dt))
        st = np.zeros(_N_ST)
        _run(q, qd, quat, x_com, 0, ee0, target, steps, approach_speed, approach_accel, threshold, params,
             joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia, ee_offset, base_mass, base_inertia,
             task_rows, reaction_rows, q_min, q_max, qd_max, qdd_max, base_half, stride, st)
        flags = _failures(st, tol, threshold, False)
        point_out[p, _PT_FLAGS] = flags
        point_out[p, _PT_SIGMA] = st[_ST_SIGMA]
        point_out[p, _PT_ERR] = st[_ST_ERR_END]
        point_out[p, _PT_ATT] = st[_ST_ATT]
        for j in range(n):
            q_at[p, j] = q[j]
        point_out[p, _PT_SIGMA_AT] = _sigma_at(q, joint_xyz, joint_rot, joint_axis, link_mass, link_com,
                                               link_inertia, ee_offset, base_mass, base_inertia, task_rows,
                                               reaction_rows, params[kern.P_J_SIGMA_M], params[kern.P_J_DAMP_M])
        if flags != 0:
            for d in range(axes.shape[0]):
                pair_out[p, d, _PA_FLAGS] = flags
                pair_out[p, d, _PA_SIGMA] = st[_ST_SIGMA]
                pair_out[p, d, _PA_ERR] = st[_ST_ERR_END]
                pair_out[p, d, _PA_ATT] = st[_ST_ATT]
                pair_out[p, d, _PA_RATE] = st[_ST_RATE]
            continue
        q_p = q.copy()
        qd_p = qd.copy()
        quat_p = quat.copy()
        approach_sigma = st[_ST_SIGMA]
        approach_att = st[_ST_ATT]
        unit = np.empty(3)
        for d in range(axes.shape[0]):
            sigma = approach_sigma
            err = 0.0
            att = approach_att
            rate = 0.0
            pflags = 0
            for sign in (1.0, -1.0):
                for r in range(3):
                    unit[r] = sign * axes[d, r]
                for j in range(n):
                    q[j] = q_p[j]
                    qd[j] = qd_p[j]
                for r in range(4):
                    quat[r] = quat_p[r]
                _run(q, qd, quat, x_com, 1, target, unit, pass_steps, speed, accel, threshold, params, joint_xyz,
                     joint_rot, joint_axis, link_mass, link_com, link_inertia, ee_offset, base_mass, base_inertia,
                     task_rows, reaction_rows, q_min, q_max, qd_max, qdd_max, base_half, stride, st)
                pflags |= _failures(st, tol, threshold, True)
                sigma = min(sigma, st[_ST_SIGMA])
                err = max(err, st[_ST_ERR_MAX])
                att = max(att, st[_ST_ATT])
                rate = max(rate, st[_ST_RATE])
            pair_out[p, d, _PA_FLAGS] = pflags
            pair_out[p, d, _PA_SIGMA] = sigma
            pair_out[p, d, _PA_ERR] = err
            pair_out[p, d, _PA_ATT] = att
            pair_out[p, d, _PA_RATE] = rate


@dataclass(frozen=True)
class WorkspaceSettings:
    """How a (point, axis) pair is tested (SI units; defaults are the module constants).

    Attributes:
        dt_s: servo period of the simulated controller [s].
        speed_m_s: target speed in the passes [m/s].
        half_length_m: the pass covers ±half_length_m through the point [m].
        ramp_m: distance of the ramp up to speed_m_s [m].
        approach_speed_m_s: peak speed of the minimum-jerk approach [m/s].
        approach_accel_m_s2: its acceleration [m/s^2]; settle_s: hold at the point [s].
        position_tolerance_m: largest end-effector error allowed [m].
        base_clearance_m: clearance from the base box [m].
        clearance_stride: check the base clearance every this many ticks.
        ik: the IK settings (sigma_threshold is the reaction-singularity threshold).
    """

    dt_s: float = DT_S
    speed_m_s: float = SPEED_M_S
    half_length_m: float = HALF_LENGTH_M
    ramp_m: float = RAMP_M
    approach_speed_m_s: float = APPROACH_SPEED_M_S
    approach_accel_m_s2: float = APPROACH_ACCEL_M_S2
    settle_s: float = SETTLE_S
    position_tolerance_m: float = POSITION_TOLERANCE_M
    base_clearance_m: float = BASE_CLEARANCE_M
    clearance_stride: int = 4
    ik: IKSettings = field(default_factory=IKSettings)

    def __post_init__(self) -> None:
        positive = ("dt_s", "speed_m_s", "half_length_m", "ramp_m", "approach_speed_m_s", "approach_accel_m_s2",
                    "position_tolerance_m")
        for name in positive:
            value = getattr(self, name)
            if not (value > 0.0 and math.isfinite(value)):
                raise ValueError(f"workspace setting {name} must be a positive finite number, got {value}")
        if not (self.ramp_m <= self.half_length_m):
            raise ValueError(f"ramp_m ({self.ramp_m}) must not exceed half_length_m ({self.half_length_m})")
        if self.settle_s < 0.0 or self.base_clearance_m < 0.0 or self.clearance_stride < 1:
            raise ValueError("settle_s and base_clearance_m must be >= 0 and clearance_stride >= 1")

    def vector(self) -> NDArray[np.float64]:
        """The map kernel's settings vector (layout of :func:`_map_points`)."""
        return np.array([self.approach_speed_m_s, self.approach_accel_m_s2, self.settle_s, self.speed_m_s, self.ramp_m,
                         self.half_length_m, self.position_tolerance_m, self.ik.sigma_threshold,
                         float(self.clearance_stride)])


@dataclass(frozen=True)
class PointResult:
    """The (point, axis) pairs of a set of capture points (P points, D axes).

    Attributes:
        points_m: (P, 3) capture points, task frame [m].
        axes: (D, 3) unit approach axes.
        trackable: (P, D) the pair is reactionless-trackable.
        failures: (P, D) failure bits (FAIL_*; 0 when trackable).
        sigma_ratio_min: (P, D) smallest sigma_ratio over the approach and the passes.
        error_max_m: (P, D) largest end-effector error of the passes (of the approach
            end when it failed) [m].
        attitude_change_max_rad: (P, D) largest base attitude change from the start [rad].
        joint_rate_fraction_max: (P, D) largest |q̇_i|/q̇_max,i in the passes.
        approach_failures: (P,) failure bits of the approach alone.
        q_at_point_rad: (P, n) joint angles at the end of the approach.
        sigma_ratio_at_point: (P,) sigma_ratio at ``q_at_point_rad``.
    """

    points_m: NDArray[np.float64]
    axes: NDArray[np.float64]
    trackable: NDArray[np.bool_]
    failures: NDArray[np.int64]
    sigma_ratio_min: NDArray[np.float64]
    error_max_m: NDArray[np.float64]
    attitude_change_max_rad: NDArray[np.float64]
    joint_rate_fraction_max: NDArray[np.float64]
    approach_failures: NDArray[np.int64]
    q_at_point_rad: NDArray[np.float64]
    sigma_ratio_at_point: NDArray[np.float64]

    def select(self, rows: slice | NDArray[np.int64] | NDArray[np.bool_]) -> PointResult:
        """The same result for a subset of the points."""
        return PointResult(self.points_m[rows], self.axes, self.trackable[rows], self.failures[rows],
                           self.sigma_ratio_min[rows], self.error_max_m[rows], self.attitude_change_max_rad[rows],
                           self.joint_rate_fraction_max[rows], self.approach_failures[rows],
                           self.q_at_point_rad[rows], self.sigma_ratio_at_point[rows])

    @property
    def fraction(self) -> NDArray[np.float64]:
        """(P,) fraction of the axes trackable at each point."""
        if self.axes.shape[0] == 0:
            return np.zeros(self.points_m.shape[0])
        result: NDArray[np.float64] = self.trackable.mean(axis=1)
        return result


def approach_axes(task_dim: int, count: int) -> NDArray[np.float64]:
    """``count`` unit approach axes (each stands for ±d).

    Planar: evenly over 180° in the x-y plane (from +x). Spatial: 3 gives x, y, z; 13
    gives the 13 axes of a cube's 26 neighbours (faces, edges, corners); any other count
    a Fibonacci spiral over the upper half sphere.
    """
    if count < 1:
        raise ValueError(f"need at least one approach axis, got {count}")
    if task_dim == 2:
        angles = np.pi * np.arange(count) / count
        return np.column_stack([np.cos(angles), np.sin(angles), np.zeros(count)])
    if count == 3:
        return np.eye(3)
    if count == 13:
        cube = [np.array(v, dtype=float) for v in np.ndindex(3, 3, 3)]
        found: list[NDArray[np.float64]] = []
        for v in cube:
            d = v - 1.0
            if not d.any():
                continue
            d /= np.linalg.norm(d)
            d *= np.sign(d[np.flatnonzero(d)[0]])  # first non-zero component positive
            if not any(np.allclose(d, e) for e in found):
                found.append(d)
        return np.array(found) + 0.0  # no negative zeros
    k = np.arange(count)
    z = 1.0 - (k + 0.5) / count
    r = np.sqrt(1.0 - z * z)
    phi = k * np.pi * (3.0 - math.sqrt(5.0))
    return np.column_stack([r * np.cos(phi), r * np.sin(phi), z])


def shoulder_and_reach(model: ManipulatorModel) -> tuple[NDArray[np.float64], float]:
    """The shoulder (the outermost joint origin that no joint moves, base frame) and the
    reach from it: the sum of the distances between the following joint origins and to
    the end effector [m] (no end effector can be further from the shoulder)."""
    a = model.arrays
    n = model.n_joints
    rng = np.random.default_rng(0)
    samples = [np.zeros(n)] + [rng.uniform(-math.pi, math.pi, n) for _ in range(3)]
    origins = []
    for q in samples:
        o = np.empty((n, 3))
        kern.forward_kinematics(q, a.joint_xyz, a.joint_rot, a.joint_axis, a.ee_offset, o, np.empty((n, 3)),
                                np.empty((n, 3, 3)), np.empty(3))
        origins.append(o)
    shoulder = 0
    for i in range(n):
        if all(np.allclose(o[i], origins[0][i], atol=1e-12) for o in origins):
            shoulder = i
        else:
            break
    reach = float(sum(np.linalg.norm(a.joint_xyz[i]) for i in range(shoulder + 1, n)) + np.linalg.norm(a.ee_offset))
    point: NDArray[np.float64] = np.round(origins[0][shoulder], 12) + 0.0  # no round-off residue, no -0.0
    return point, reach


def start_ee_position(model: ManipulatorModel) -> NDArray[np.float64]:
    """End effector at the start pose (base at the origin, identity attitude) [m]."""
    a = model.arrays
    n = model.n_joints
    ee = np.empty(3)
    kern.forward_kinematics(np.array(model.q0_rad), a.joint_xyz, a.joint_rot, a.joint_axis, a.ee_offset,
                            np.empty((n, 3)), np.empty((n, 3)), np.empty((n, 3, 3)), ee)
    return ee


def sigma_ratio(model: ManipulatorModel, q_rad: NDArray[np.float64], settings: IKSettings | None = None) -> float:
    """sigma_ratio = σ_min(M (I − J⁺J)) / ‖M‖ at q, as the IK computes it (task and
    reaction rows; J⁺ damped only within ``jacobian_sigma_m`` of a kinematic singularity)."""
    s = settings or IKSettings()
    a = model.arrays
    q = np.ascontiguousarray(q_rad, dtype=float)
    return float(_sigma_at(q, a.joint_xyz, a.joint_rot, a.joint_axis, a.link_mass, a.link_com, a.link_inertia,
                           a.ee_offset, a.base_mass, a.base_inertia, a.task_rows, a.reaction_rows,
                           s.jacobian_sigma_m, s.jacobian_damping_m))


def evaluate_points(model: ManipulatorModel, points_m: NDArray[np.float64], axes: NDArray[np.float64],
                    settings: WorkspaceSettings | None = None, workers: int | None = None) -> PointResult:
    """Test every (point, axis) pair (see the module docstring).

    Args:
        model: the manipulator (its start pose ``q0_rad`` is where each approach starts).
        points_m: (P, 3) capture points, task frame [m] (planar: z is ignored, use 0).
        axes: (D, 3) approach directions (normalised here; d and -d test the same).
        settings: the test's parameters (defaults when None).
        workers: threads running the compiled kernel (it releases the GIL); None: one
            per CPU.
    """
    s = settings or WorkspaceSettings()
    pts = np.ascontiguousarray(np.atleast_2d(np.asarray(points_m, dtype=float)))
    dirs = np.atleast_2d(np.asarray(axes, dtype=float)).copy()
    if pts.shape[1] != 3 or dirs.shape[1] != 3:
        raise ValueError(f"points and axes need 3 columns, got {pts.shape} and {dirs.shape}")
    norms = np.linalg.norm(dirs, axis=1)
    if np.any(norms <= 0.0) or not np.all(np.isfinite(dirs)) or not np.all(np.isfinite(pts)):
        raise ValueError("axes must be finite non-zero vectors and points finite")
    dirs = np.ascontiguousarray(dirs / norms[:, None])
    if model.task_dim == 2:
        pts = pts.copy()
        pts[:, 2] = 0.0
        dirs[:, 2] = 0.0
        if np.any(np.linalg.norm(dirs, axis=1) < 1e-12):
            raise ValueError("planar model: an axis along z has no component in the task plane")
        dirs = np.ascontiguousarray(dirs / np.linalg.norm(dirs, axis=1)[:, None])
    a = model.arrays
    n = model.n_joints
    params = settings_vector(s.ik, "lse", s.dt_s, K_P, K_D)
    base_half = 0.5 * np.asarray(model.base_size_m, dtype=float) + s.base_clearance_m
    if model.task_dim == 2:
        base_half[2] = math.inf  # the planar arm moves in z = 0: only x, y decide
    pair_out = np.zeros((pts.shape[0], dirs.shape[0], _N_PA))
    point_out = np.zeros((pts.shape[0], _N_PT))
    q_at = np.zeros((pts.shape[0], n))
    order = np.arange(pts.shape[0], dtype=np.int64)
    q0 = np.array(model.q0_rad, dtype=float)
    vector = s.vector()

    def run(bounds: tuple[int, int]) -> None:
        _map_points(order, bounds[0], bounds[1], pts, dirs, q0, vector, params, a.joint_xyz, a.joint_rot,
                    a.joint_axis, a.link_mass, a.link_com, a.link_inertia, a.ee_offset, a.base_mass, a.base_inertia,
                    a.task_rows, a.reaction_rows, a.q_min, a.q_max, a.qd_max, a.qdd_max, base_half, pair_out,
                    point_out, q_at)

    count = pts.shape[0]
    threads = max(1, min(workers or os.cpu_count() or 1, count))
    chunk = max(1, min(_CHUNK_POINTS, count // threads))
    ranges = [(i, min(i + chunk, count)) for i in range(0, count, chunk)]
    if threads == 1:
        for bounds in ranges:
            run(bounds)
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(run, ranges))
    failures = pair_out[:, :, _PA_FLAGS].astype(np.int64)
    return PointResult(
        points_m=pts,
        axes=dirs,
        trackable=failures == 0,
        failures=failures,
        sigma_ratio_min=pair_out[:, :, _PA_SIGMA],
        error_max_m=pair_out[:, :, _PA_ERR],
        attitude_change_max_rad=pair_out[:, :, _PA_ATT],
        joint_rate_fraction_max=pair_out[:, :, _PA_RATE],
        approach_failures=point_out[:, _PT_FLAGS].astype(np.int64),
        q_at_point_rad=q_at,
        sigma_ratio_at_point=point_out[:, _PT_SIGMA_AT],
    )


@dataclass(frozen=True)
class WorkspaceMap:
    """The reactionless workspace of a model on a grid (see the module docstring).

    Attributes:
        model: model name; task_dim: 2 (grid over x-y) or 3 (x-y-z).
        grid_axes_m: per task axis, the cell-centre coordinates [m] (2 or 3 arrays).
        cell_size_m: cell edge [m]; cell_measure: cell area [m²] or volume [m³].
        fraction: grid-shaped (N, N[, N]) trackable fraction of the axes per cell
            (indexing ``[ix, iy(, iz)]``; 0 where not simulated).
        simulated: grid-shaped bool, the cell was simulated (centre within the reach
            and outside the base box + clearance).
        shoulder_m: (3,) shoulder; reach_m: reach from it.
        axes: (D, 3) the approach axes.
        points: the simulated points' :class:`PointResult` (in the order of the
            ``simulated`` cells, C order).
        start: the :class:`PointResult` of the start end-effector position (off the grid).
        settings: the test's parameters; runtime_s: wall time of the map [s].
    """

    model: str
    task_dim: int
    grid_axes_m: tuple[NDArray[np.float64], ...]
    cell_size_m: float
    cell_measure: float
    fraction: NDArray[np.float64]
    simulated: NDArray[np.bool_]
    shoulder_m: NDArray[np.float64]
    reach_m: float
    axes: NDArray[np.float64]
    points: PointResult
    start: PointResult
    settings: WorkspaceSettings
    runtime_s: float

    @property
    def size(self) -> float:
        """Area [m²] or volume [m³] of the cells with a fraction >= FRACTION_THRESHOLD."""
        return float(np.count_nonzero(self.fraction >= FRACTION_THRESHOLD) * self.cell_measure)

    @property
    def size_weighted(self) -> float:
        """Area [m²] or volume [m³] of the cells weighted by their trackable fraction."""
        return float(self.fraction.sum() * self.cell_measure)

    @property
    def reach_measure(self) -> float:
        """Area of the reach disc π R² [m²] or volume of the reach ball 4/3 π R³ [m³]."""
        r = self.reach_m
        return math.pi * r * r if self.task_dim == 2 else 4.0 / 3.0 * math.pi * r ** 3

    def size_per_axis(self) -> NDArray[np.float64]:
        """(D,) area [m²] or volume [m³] of the cells where each axis is trackable."""
        counts: NDArray[np.float64] = self.points.trackable.sum(axis=0) * self.cell_measure
        return counts

    def failure_counts(self, approach_only: bool = False) -> dict[str, int]:
        """Simulated (point, axis) pairs failing each criterion (a pair may fail several;
        a run stops at its first certain failure); ``approach_only``: points whose
        approach failed, by criterion."""
        f = self.points.approach_failures if approach_only else self.points.failures
        return {name: int(np.count_nonzero(f & bit)) for bit, name in FAILURE_NAMES.items()}

    def summary(self) -> dict[str, object]:
        """The map as plain data (JSON-ready, SI units); keys documented in docs/robot.md."""
        s = self.settings
        tracked = self.points.trackable
        attitude = self.points.attitude_change_max_rad[tracked]
        return {
            "model": self.model,
            "task_dim": self.task_dim,
            "size_unit": "m^2" if self.task_dim == 2 else "m^3",
            "resolution": int(self.fraction.shape[0]),
            "cell_size_m": self.cell_size_m,
            "cell_measure": self.cell_measure,
            "directions": int(self.axes.shape[0]),
            "approach_axes": self.axes.tolist(),
            "shoulder_m": self.shoulder_m.tolist(),
            "reach_m": self.reach_m,
            "reach_size": self.reach_measure,
            "cells": int(self.fraction.size),
            "cells_simulated": int(np.count_nonzero(self.simulated)),
            "fraction_threshold": FRACTION_THRESHOLD,
            "cells_in_workspace": int(np.count_nonzero(self.fraction >= FRACTION_THRESHOLD)),
            "workspace_size": self.size,
            "workspace_size_weighted": self.size_weighted,
            "coverage": self.size / self.reach_measure,
            "coverage_weighted": self.size_weighted / self.reach_measure,
            "size_per_axis": self.size_per_axis().tolist(),
            "start_ee_m": self.start.points_m[0].tolist(),
            "start_fraction": float(self.start.fraction[0]),
            "start_sigma_ratio": float(self.start.sigma_ratio_at_point[0]),
            "pairs_trackable": int(np.count_nonzero(tracked)),
            "pairs_simulated": int(tracked.size),
            "failures": self.failure_counts(),
            "approach_failures": self.failure_counts(approach_only=True),
            "max_attitude_change_trackable_rad": float(attitude.max()) if attitude.size else None,
            "settings": {
                "dt_s": s.dt_s,
                "speed_m_s": s.speed_m_s,
                "half_length_m": s.half_length_m,
                "ramp_m": s.ramp_m,
                "approach_speed_m_s": s.approach_speed_m_s,
                "approach_accel_m_s2": s.approach_accel_m_s2,
                "settle_s": s.settle_s,
                "position_tolerance_m": s.position_tolerance_m,
                "base_clearance_m": s.base_clearance_m,
                "sigma_threshold": s.ik.sigma_threshold,
            },
            "grid_axes_m": [axis.tolist() for axis in self.grid_axes_m],
            "fraction": self.fraction.tolist(),
            "runtime_s": self.runtime_s,
        }


def grid_axes(model: ManipulatorModel, resolution: int) -> tuple[tuple[NDArray[np.float64], ...], float]:
    """Cell-centre coordinates per task axis over the cube of side 2R about the shoulder,
    and the cell edge [m]."""
    if resolution < 1:
        raise ValueError(f"resolution must be at least 1 cell per axis, got {resolution}")
    shoulder, reach = shoulder_and_reach(model)
    h = 2.0 * reach / resolution
    offsets = -reach + (np.arange(resolution) + 0.5) * h
    return tuple(shoulder[i] + offsets for i in range(model.task_dim)), h


def map_workspace(model: ManipulatorModel, resolution: int | None = None, axes_count: int | None = None,
                  settings: WorkspaceSettings | None = None, workers: int | None = None) -> WorkspaceMap:
    """The reactionless workspace of ``model`` on a grid of ``resolution`` cells per axis
    (default 41 planar, 21 spatial) with ``axes_count`` approach axes (16 / 13), run on
    ``workers`` threads (one per CPU when None)."""
    s = settings or WorkspaceSettings()
    started = time.perf_counter()
    res = resolution or DEFAULT_RESOLUTION[model.task_dim]
    count = axes_count or DEFAULT_AXES[model.task_dim]
    axes = approach_axes(model.task_dim, count)
    coords, h = grid_axes(model, res)
    shoulder, reach = shoulder_and_reach(model)
    mesh = np.meshgrid(*coords, indexing="ij")
    shape = mesh[0].shape
    pts = np.zeros((mesh[0].size, 3))
    for i, m in enumerate(mesh):
        pts[:, i] = m.ravel()
    half = 0.5 * np.asarray(model.base_size_m) + s.base_clearance_m
    inside_base = np.all(np.abs(pts[:, : model.task_dim]) < half[: model.task_dim], axis=1)
    within = np.linalg.norm(pts - shoulder, axis=1) <= reach
    simulated = within & ~inside_base
    start = start_ee_position(model)
    both = evaluate_points(model, np.vstack([start[None], pts[simulated]]), axes, s, workers)
    fraction = np.zeros(pts.shape[0])
    fraction[simulated] = both.fraction[1:]
    return WorkspaceMap(
        model=model.name,
        task_dim=model.task_dim,
        grid_axes_m=coords,
        cell_size_m=h,
        cell_measure=h ** model.task_dim,
        fraction=fraction.reshape(shape),
        simulated=simulated.reshape(shape),
        shoulder_m=shoulder,
        reach_m=reach,
        axes=both.axes,
        points=both.select(slice(1, None)),
        start=both.select(slice(0, 1)),
        settings=s,
        runtime_s=time.perf_counter() - started,
    )
