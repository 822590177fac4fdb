"""Compiled kernels (numba, ``cache=True``) for the free-floating arm: no Python in the tick.

Everything here works on plain float64 arrays of a :class:`robot.models.KinematicArrays`
and on small fixed-size matrices; the hot entry point :func:`controller_step` does one
servo tick of the slave controller (dynamics terms, eq. 10, eq. 6 with damping, limits
and base feedback, integration) in a single call, because on 3x3 matrices the cost of
numpy calls from Python (tens of microseconds each) would dominate a 1 kHz tick.
Nor does the tick allocate: the kernels take their scratch arrays from a work arena
(one float64 array of :func:`arena_size` floats, preallocated by the caller of
:func:`controller_step` and :func:`plant_readout`) as a stack, each kernel working at
``arena[top:]`` and handing the rest on to the kernels it calls (see :func:`_empty`);
the other public kernels allocate one arena per call.

Conventions:
    * base frame: origin at the base centre of mass; task frame: inertial frame.
    * zero system momentum (linear and angular), the free-floating assumption of the
      Generalized Jacobian.
    * joint i rotates about its axis through its frame origin; frames as in robot.models.

Notation used below (all base-frame coordinates, base at rest in the origin):
``o_j`` joint origin, ``k_j`` joint axis, ``r_ci`` link centre of mass, ``r_e`` end
effector. Suffix sums over the links outboard of joint j (``i >= j``) of the link masses
``Mbar_j``, first moments ``Sbar_j = sum m_i r_ci`` and inertias about the base origin
``Kbar_j = sum I_i + m_i (|r_ci|^2 I - r_ci r_ci^T)`` give, in O(n):

    linear momentum   P = m v0 + w0 x c + Jt qd,    Jt[:, j] = k_j x (Sbar_j - Mbar_j o_j)
    angular momentum  L = Hw w0 + c x v0 + Hq qd,   Hq[:, j] = Kbar_j k_j - Sbar_j x (k_j x o_j)

with ``c = Sbar_0`` and ``Hw = I_base + Kbar_0``. Setting P = L = 0:

    w0 = Om qd,   Om = -(Hw + [c]x[c]x / m)^-1 (Hq - [c]x Jt / m)
    v0 = V qd,    V = ([c]x Om - Jt) / m
    v_e = Jg qd,  Jg = V - [r_e]x Om + Je,   Je[:, j] = k_j x (r_e - o_j)

``Jg`` is the Generalized Jacobian (base-frame components), ``Om`` the base angular
velocity map. The time derivatives along the motion (the bias terms of eq. 1 and 2) are
the directional derivatives of ``Jg(q) qd`` and ``Om(q) qd`` along ``qd``, in forward mode
in one more O(n) pass over what the maps' pass recorded of each link (exact, no step;
see :func:`_maps_tangent_in`), plus the rotation of the base frame:

    J qdd + Jdot qd :  x_dd = R0 (Jg qdd + d/dq[Jg qd] qd + w0 x (Jg qd))
    T = M qdd + n   :  M = R0 I0 Om,   n = R0 (I0 d/dq[Om qd] qd + w0 x I0 w0)

where ``T`` is the rate of change of the base's own angular momentum about its centre of
mass, i.e. the reaction torque the arm exerts on the base (eq. 2), task frame.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.core.imputils import impl_ret_untracked
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from capture_trainer.compiled import kernel

# Rows of the tangent of the momentum maps along a joint-space direction d (see
# _maps_tangent_in): d/dt (Om d), d/dt (Jg d), d re/dt, d cg/dt.
T_DOM_D, T_DJG_D, T_DRE, T_DCG = range(4)
N_TANGENT = 4
# What _floating_base_maps_in records of each link for the tangent (a row of (n,
# LINK_RECORD)): R I Rᵀ (9, row-major), r_c (3), the suffix sums Kbar_j (9), Sbar_j (3),
# Mbar_j (1) and Jt_j (3), base frame.
L_RIR, L_RC, L_KBAR, L_SBAR, L_MBAR, L_JT = 0, 9, 12, 21, 24, 25
LINK_RECORD = 28
# Tikhonov λ of M+ in the reaction-first solve, relative to ||M||: there M Mᵀ is singular
# (to round-off at an exact reaction singularity, where λ = 1e-12 ||M|| let its cofactor
# inverse divide by an exact zero), so λ² bounds its condition by 1e10 (6 digits left)
_REACTION_FIRST_LAMBDA = 1e-5

# Smallest task scale of the reactionless saturation (solve_ik): below zero the task's
# acceleration is reversed, which is how an arm whose joint rate sits on its limit slows
# its end effector down without pushing on the base.
_TASK_SCALE_MIN = -math.inf

# Layout of the float parameter vector of controller_step (see robot.slave).
P_DT, P_KP, P_KD, P_SOLVER, P_SIGMA_THRESHOLD, P_DAMP_MAX, P_J_SIGMA_M, P_J_DAMP_M = range(8)
P_K_ATT, P_K_RATE, P_K_NULL, P_K_LIMIT, P_FEEDBACK, P_K_SIGMA, P_FEEDBACK_MAX, P_MOMENTUM = range(8, 16)
P_BASE_RATE_MAX = 16  # the base angular-rate bound [rad/s] (inf: off); see controller_step
N_PARAMS = 17

# Layout of the float status vector written by controller_step.
S_EE, S_EE_V, S_TORQUE = 0, 3, 6
S_SIGMA_RATIO, S_SINGULAR, S_LIMITED, S_RESIDUAL, S_M_NORM, S_FAULT = 9, 10, 11, 12, 13, 14
# the base-rate bound: the predicted |base angular velocity| after the tick [rad/s], the
# bound engaged (0/1), the task scale it chose (1: the task untouched)
S_BASE_RATE, S_RATE_BOUNDED, S_RATE_SCALE = 15, 16, 17
N_STATUS = 18

# params[P_MOMENTUM]: what system angular momentum the dynamics terms assume.
MOMENTUM_ZERO, MOMENTUM_MEASURED, MOMENTUM_GIVEN = 0.0, 1.0, 2.0

SOLVER_LSE = 0.0  # eq. 6; at a reaction singularity the reaction gives way (task kept)
SOLVER_PINV = 1.0
SOLVER_LSE_REACTION_FIRST = 2.0  # eq. 6; at a reaction singularity the task gives way


@kernel(error_model="numpy")
def arena_size(n):
    """Floats of work arena the kernels need for an arm of ``n`` joints.

    The deepest chain (controller_step -> sigma_ascent's forward difference ->
    _sigma_ratio_base -> _lse_factor) takes fewer than ``2 n^2 + 130 n + 150`` floats for
    up to 3 task and 3 reaction rows besides the IK's factor cache (:data:`FACTOR_SLOTS`
    slots of ``n^2 + 21 n + 17``, and 2). Measured over three 12 s bench trials (DG, NG,
    APF): 1125 for the 7-joint arm with the slope forced to its difference (651 with
    the exact slope), 293 for the planar 3R (no spare direction); this leaves a margin.
    """
    return 4 * n * n + 160 * n + 300 + 8 * (n * n + 21 * n + 17) + 2


@intrinsic
def _view(typingctx, arena, start, shape):
    """``arena[start:start + prod(shape)]`` as a C-contiguous array of ``shape`` (no checks).

    ``arena[a:b].reshape(shape)`` would do, but numba's reshape computes the strides in
    an opaque C helper, so every index into the result costs a multiplication by a
    run-time stride and no loop over a small fixed shape gets unrolled; here the
    strides are products of the (often constant) extents. The view is *untracked*: it
    holds no reference to the arena (no atomic reference counting on every use), so it
    is valid only while the arena is alive. Hence views are taken only from an arena
    received as an argument (alive for the whole call), never from one allocated in the
    same function (numba frees that after its last use), and never returned.
    """
    if not (isinstance(arena, types.Array) and arena.ndim == 1 and arena.layout == "C"
            and arena.dtype == types.float64 and isinstance(start, types.Integer)
            and isinstance(shape, types.BaseTuple)
            and all(isinstance(extent, types.Integer) for extent in shape)):  # type: ignore[attr-defined]
        return None
    view_type = arena.copy(ndim=len(shape), layout="C")

    def codegen(context, builder, sig, args):
        arena_type, start_type, shape_type = sig.args
        ary = make_array(arena_type)(context, builder, args[0])
        offset = context.cast(builder, args[1], start_type, types.intp)
        dims = [context.cast(builder, extent, extent_type, types.intp)
                for extent, extent_type in zip(cgutils.unpack_tuple(builder, args[2]), shape_type)]
        strides: list[object] = []
        stride = ary.itemsize
        for extent in reversed(dims):
            strides.insert(0, stride)
            stride = builder.mul(stride, extent)
        view = make_array(sig.return_type)(context, builder)
        populate_array(view, data=builder.gep(ary.data, [offset]), shape=dims, strides=strides,
                       itemsize=ary.itemsize, meminfo=None, parent=None)
        return impl_ret_untracked(context, builder, sig.return_type, view._getvalue())

    return view_type(arena, start, shape), codegen


@intrinsic
def _untracked(typingctx, array):
    """``array`` itself, untracked (no reference to its memory, as :func:`_view`'s views):
    valid while the caller holds the array, with no reference counting wherever it is
    passed on. For a kernel's array arguments, whose caller holds them for the call."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, args[0])
        out = make_array(sig.return_type)(context, builder)
        populate_array(out, data=src.data, shape=src.shape, strides=src.strides, itemsize=src.itemsize, meminfo=None,
                       parent=None)
        return impl_ret_untracked(context, builder, sig.return_type, out._getvalue())

    return array(array), codegen


@kernel(error_model="numpy", inline="always")
def _empty(arena, top, shape):
    """``np.empty(shape)`` without the heap: a view of the work arena at ``arena[top:]``.

    Returns the view (untracked, see :func:`_view`) and the new top. A kernel takes its
    scratch arrays one after the other this way and passes the final top on to the
    kernels it calls, so their scratch lies above its own and is reused once they
    return (``top`` is a value: the caller's does not move). What a kernel hands back
    must therefore live in arrays its caller owns, never in its own part of the arena.
    """
    size = 1
    for extent in shape:
        size *= extent
    end = top + size
    if end > arena.shape[0]:
        raise ValueError("robot._kernels: work arena too small (allocate arena_size(n) floats)")
    return _view(arena, top, shape), end  # type: ignore[call-arg]  # numba supplies typingctx


@kernel(error_model="numpy", inline="always")
def _full(arena, top, shape, value):
    """``np.full(shape, value)`` taken from the work arena (see :func:`_empty`)."""
    out, end = _empty(arena, top, shape)
    flat = _view(arena, top, (end - top,))  # type: ignore[call-arg, var-annotated]  # numba supplies typingctx
    for i in range(end - top):
        flat[i] = value
    return out, end


@kernel(error_model="numpy", inline="always")
def _zeros(arena, top, shape):
    """``np.zeros(shape)`` taken from the work arena (see :func:`_empty`)."""
    return _full(arena, top, shape, 0.0)


@kernel(error_model="numpy", inline="always")
def _ones(arena, top, shape):
    """``np.ones(shape)`` taken from the work arena (see :func:`_empty`)."""
    return _full(arena, top, shape, 1.0)


@kernel(error_model="numpy")
def _axis_rotation(x: float, y: float, z: float, angle: float, out: np.ndarray) -> None:
    """Rodrigues: rotation by ``angle`` about the unit axis ``(x, y, z)``."""
    c = math.cos(angle)
    s = math.sin(angle)
    t = 1.0 - c
    out[0, 0] = t * x * x + c
    out[0, 1] = t * x * y - s * z
    out[0, 2] = t * x * z + s * y
    out[1, 0] = t * x * y + s * z
    out[1, 1] = t * y * y + c
    out[1, 2] = t * y * z - s * x
    out[2, 0] = t * x * z - s * y
    out[2, 1] = t * y * z + s * x
    out[2, 2] = t * z * z + c


@kernel(error_model="numpy")
def _cross(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    x = a[1] * b[2] - a[2] * b[1]
    y = a[2] * b[0] - a[0] * b[2]
    z = a[0] * b[1] - a[1] * b[0]
    out[0] = x
    out[1] = y
    out[2] = z


@kernel(error_model="numpy", inline="always")
def _cross3(a0, a1, a2, b0, b1, b2):
    """``a x b`` of two vectors given by their components (scalars: no array in a hot loop)."""
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True, error_model="numpy")
def forward_kinematics(q, joint_xyz, joint_rot, joint_axis, ee_offset, origins, axes, rots, ee):
    """Joint origins, world axes, link rotations and the end effector, base frame.

    Args:
        q: (n,) joint angles [rad].
        origins: out (n, 3) joint origins [m]; axes: out (n, 3) unit axes;
        rots: out (n, 3, 3) link rotations (base <- link); ee: out (3,) end effector [m].
    """
    arena = np.empty(arena_size(q.shape[0]))
    _forward_kinematics_in(arena, 0, q, joint_xyz, joint_rot, joint_axis, ee_offset, origins, axes, rots, ee)


@kernel(error_model="numpy")
def _forward_kinematics_in(arena, top, q, joint_xyz, joint_rot, joint_axis, ee_offset, origins, axes, rots, ee):
    """:func:`forward_kinematics` with its scratch from ``arena[top:]``."""
    n = q.shape[0]
    rot, top = _zeros(arena, top, (3, 3))
    for r in range(3):
        rot[r, r] = 1.0
    pos, top = _zeros(arena, top, (3,))
    tmp, top = _empty(arena, top, (3, 3))
    jr, top = _empty(arena, top, (3, 3))
    for i in range(n):
        for r in range(3):
            pos_r = pos[r]
            for c in range(3):
                pos_r += rot[r, c] * joint_xyz[i, c]
            origins[i, r] = pos_r
        for r in range(3):
            pos[r] = origins[i, r]
        # rot <- rot @ joint_rot[i] @ Rot(axis, q)
        for r in range(3):
            for c in range(3):
                acc = 0.0
                for k in range(3):
                    acc += rot[r, k] * joint_rot[i, k, c]
                tmp[r, c] = acc
        _axis_rotation(joint_axis[i, 0], joint_axis[i, 1], joint_axis[i, 2], q[i], jr)
        for r in range(3):
            for c in range(3):
                acc = 0.0
                for k in range(3):
                    acc += tmp[r, k] * jr[k, c]
                rot[r, c] = acc
                rots[i, r, c] = acc
        for r in range(3):
            acc = 0.0
            for k in range(3):
                acc += tmp[r, k] * joint_axis[i, k]
            axes[i, r] = acc
    for r in range(3):
        acc = pos[r]
        for k in range(3):
            acc += rot[r, k] * ee_offset[k]
        ee[r] = acc


@njit(cache=True, error_model="numpy")
def floating_base_maps(q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia, ee_offset,
                       base_mass, base_inertia, jg, om, re):
    """Generalized Jacobian and base angular-velocity map under zero momentum, base frame.

    Args:
        q: (n,) joint angles [rad].
        jg: out (3, n) Generalized Jacobian: EE velocity (inertial, base-frame components)
            per joint rate [m/s per rad/s].
        om: out (3, n) base angular velocity per joint rate (base frame).
        re: out (3,) end-effector position relative to the base centre of mass [m].
    """
    arena = np.empty(arena_size(q.shape[0]))
    n = q.shape[0]
    _floating_base_maps_in(arena, 0, q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                           ee_offset, base_mass, base_inertia, jg, om, re, np.empty((3, 3)), np.empty(3),
                           np.empty((n, 3)), np.empty((n, 3)), np.empty((n, LINK_RECORD)))


@kernel(error_model="numpy")
def _floating_base_maps_in(arena, top, q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                           ee_offset, base_mass, base_inertia, jg, om, re, ainv, cg, origins, axes, links):
    """:func:`floating_base_maps` with its scratch from ``arena[top:]``; also ``ainv``
    (3, 3), the inverse of the locked system's inertia about the system centre of mass,
    ``cg`` (3,), that centre of mass relative to the base's, the forward kinematics'
    joint ``origins`` and ``axes`` (n, 3), base frame, and ``links`` (n,
    :data:`LINK_RECORD`): what :func:`_maps_tangent_in` needs of each link (``R I Rᵀ``,
    ``r_c``, the suffix sums ``Kbar_j``, ``Sbar_j``, ``Mbar_j`` and ``Jt_j``)."""
    n = q.shape[0]
    rots, top = _empty(arena, top, (n, 3, 3))
    _forward_kinematics_in(arena, top, q, joint_xyz, joint_rot, joint_axis, ee_offset, origins, axes, rots, re)
    kbar, top = _zeros(arena, top, (3, 3))
    sbar, top = _zeros(arena, top, (3,))
    mbar = 0.0
    jt, top = _empty(arena, top, (3, n))
    hq, top = _empty(arena, top, (3, n))
    rc, top = _empty(arena, top, (3,))
    ri, top = _empty(arena, top, (3, 3, 3))
    for j in range(n - 1, -1, -1):
        # add link j to the suffix sums
        for r in range(3):
            acc = origins[j, r]
            for k in range(3):
                acc += rots[j, r, k] * link_com[j, k]
            rc[r] = acc
            links[j, L_RC + r] = acc
        m = link_mass[j]
        r2 = rc[0] * rc[0] + rc[1] * rc[1] + rc[2] * rc[2]
        for r in range(3):  # the products R[r, k] I[k, l] of R I Rᵀ, each formed once
            for k in range(3):
                for l in range(3):
                    ri[r, k, l] = rots[j, r, k] * link_inertia[j, k, l]
        for r in range(3):
            for c in range(3):
                acc = 0.0
                for k in range(3):
                    for l in range(3):
                        acc += ri[r, k, l] * rots[j, c, l]
                kbar[r, c] += acc - m * rc[r] * rc[c]
                links[j, L_RIR + 3 * r + c] = acc
            kbar[r, r] += m * r2
            sbar[r] += m * rc[r]
        mbar += m
        for r in range(3):
            for c in range(3):
                links[j, L_KBAR + 3 * r + c] = kbar[r, c]
            links[j, L_SBAR + r] = sbar[r]
        links[j, L_MBAR] = mbar
        k0, k1, k2 = axes[j, 0], axes[j, 1], axes[j, 2]
        o0, o1, o2 = origins[j, 0], origins[j, 1], origins[j, 2]
        jt[0, j], jt[1, j], jt[2, j] = _cross3(k0, k1, k2, sbar[0] - mbar * o0, sbar[1] - mbar * o1,
                                               sbar[2] - mbar * o2)
        for r in range(3):
            links[j, L_JT + r] = jt[r, j]
        x0, x1, x2 = _cross3(k0, k1, k2, o0, o1, o2)
        x0, x1, x2 = _cross3(sbar[0], sbar[1], sbar[2], x0, x1, x2)
        hq[0, j] = kbar[0, 0] * k0 + kbar[0, 1] * k1 + kbar[0, 2] * k2 - x0
        hq[1, j] = kbar[1, 0] * k0 + kbar[1, 1] * k1 + kbar[1, 2] * k2 - x1
        hq[2, j] = kbar[2, 0] * k0 + kbar[2, 1] * k1 + kbar[2, 2] * k2 - x2
    mtot = base_mass + mbar
    c0, c1, c2 = sbar[0], sbar[1], sbar[2]
    cc = c0 * c0 + c1 * c1 + c2 * c2
    a, top = _empty(arena, top, (3, 3))
    for r in range(3):
        for c in range(3):
            a[r, c] = base_inertia[r, c] + kbar[r, c] + sbar[r] * sbar[c] / mtot
        a[r, r] -= cc / mtot
    _inverse3(a, ainv)
    for r in range(3):
        cg[r] = sbar[r] / mtot
    s0, s1, s2 = sbar[0], sbar[1], sbar[2]
    e0, e1, e2 = re[0], re[1], re[2]
    for j in range(n):
        x0, x1, x2 = _cross3(s0, s1, s2, jt[0, j], jt[1, j], jt[2, j])
        b0 = hq[0, j] - x0 / mtot
        b1 = hq[1, j] - x1 / mtot
        b2 = hq[2, j] - x2 / mtot
        for r in range(3):
            om[r, j] = -(ainv[r, 0] * b0 + ainv[r, 1] * b1 + ainv[r, 2] * b2)
        w0, w1, w2 = om[0, j], om[1, j], om[2, j]
        x0, x1, x2 = _cross3(w0, w1, w2, e0, e1, e2)  # Om_j x r_e
        y0, y1, y2 = _cross3(axes[j, 0], axes[j, 1], axes[j, 2], e0 - origins[j, 0], e1 - origins[j, 1],
                             e2 - origins[j, 2])  # Je_j
        jg[0, j] = ((s1 * w2 - s2 * w1) - jt[0, j]) / mtot + x0 + y0  # (c x Om_j - Jt_j) / m + ...
        jg[1, j] = ((s2 * w0 - s0 * w2) - jt[1, j]) / mtot + x1 + y1
        jg[2, j] = ((s0 * w1 - s1 * w0) - jt[2, j]) / mtot + x2 + y2


@kernel(error_model="numpy")
def _maps_tangent_in(arena, top, d, link_mass, base_mass, links, origins, axes, om, re, ainv, tan, dainv, djg, dom):
    """The derivatives of the momentum maps along a joint-space direction ``d`` (n,)
    [rad/s], ``q(t) = q + t d``, at the ``q`` of the :func:`_floating_base_maps_in` pass
    that filled ``links``, ``origins``, ``axes``, ``om``, ``re`` and ``ainv`` (base frame).
    Forward mode: exact, no step, O(n).

    Out: ``tan`` (:data:`N_TANGENT`, 3), the rows :data:`T_DOM_D` ``d/dt (Om(q) d)``, :data:`T_DJG_D` ``d/dt (Jg(q) d)``, :data:`T_DRE`
    ``d re/dt``, :data:`T_DCG` ``d cg/dt``; ``dainv`` (3, 3), ``d A⁻¹/dt``; and, when
    they have n columns (else 0), the whole maps' derivatives ``djg`` = ``d Jg/dt`` and
    ``dom`` = ``d Om/dt`` (3, n).

    Each quantity's tangent follows it: link ``j`` turns at ``w_j = sum_{i<=j} k_i d_i``,
    so ``k_j' = w_j x k_j``, a point fixed in link ``j`` moves at ``o_j' + w_j x (p −
    o_j)`` (``o_j' = o_{j-1}' + w_{j-1} x (o_j − o_{j-1})``) and ``(R I Rᵀ)' = [w]x R I Rᵀ
    − R I Rᵀ [w]x``; hence the suffix sums' ``Kbar'``, ``Sbar'``, and ``Jt_j' = k_j' x
    (Sbar_j − Mbar_j o_j) + k_j x (Sbar_j' − Mbar_j o_j')``, ``Hq_j' = Kbar_j' k_j + Kbar_j
    k_j' − Sbar_j' x (k_j x o_j) − Sbar_j x (k_j' x o_j + k_j x o_j')``. With ``A' =
    Kbar' + (Sbar' Sbarᵀ + Sbar Sbar'ᵀ)/m − 2 (Sbar . Sbar')/m I`` and ``(A⁻¹)' = −A⁻¹ A'
    A⁻¹``: ``Om_j' = −A⁻¹ (A' Om_j + Hq_j' − (Sbar' x Jt_j + Sbar x Jt_j')/m)`` and
    ``Jg_j' = (Sbar' x Om_j + Sbar x Om_j' − Jt_j')/m + Om_j' x re + Om_j x re' + k_j' x
    (re − o_j) + k_j x (re' − o_j')``. The sums over the joints are contracted with ``d``
    as they are formed. Scratch from ``arena[top:]``."""
    n = d.shape[0]
    columns = djg.shape[1] == n
    w_link, top = _empty(arena, top, (n, 3))
    do, top = _empty(arena, top, (n, 3))
    wx, wy, wz = 0.0, 0.0, 0.0
    vx, vy, vz = 0.0, 0.0, 0.0
    px, py, pz = 0.0, 0.0, 0.0
    for j in range(n):  # outwards: the links' rates w_j and the joint origins' o_j'
        ox, oy, oz = origins[j, 0], origins[j, 1], origins[j, 2]
        ux, uy, uz = _cross3(wx, wy, wz, ox - px, oy - py, oz - pz)
        vx, vy, vz = vx + ux, vy + uy, vz + uz
        do[j, 0], do[j, 1], do[j, 2] = vx, vy, vz
        wx, wy, wz = wx + axes[j, 0] * d[j], wy + axes[j, 1] * d[j], wz + axes[j, 2] * d[j]
        w_link[j, 0], w_link[j, 1], w_link[j, 2] = wx, wy, wz
        px, py, pz = ox, oy, oz
    ux, uy, uz = _cross3(wx, wy, wz, re[0] - px, re[1] - py, re[2] - pz)
    dre0, dre1, dre2 = vx + ux, vy + uy, vz + uz
    tan[T_DRE, 0], tan[T_DRE, 1], tan[T_DRE, 2] = dre0, dre1, dre2
    # inwards: Kbar', Sbar' and each joint's Jt_j', Hq_j'
    dkbar, top = _zeros(arena, top, (3, 3))
    dsbar, top = _zeros(arena, top, (3,))
    wxm, top = _empty(arena, top, (3, 3))
    djt, top = _empty(arena, top, (3, n))
    dhq, top = _empty(arena, top, (3, n))
    for j in range(n - 1, -1, -1):
        m = link_mass[j]
        w0, w1, w2 = w_link[j, 0], w_link[j, 1], w_link[j, 2]
        k0, k1, k2 = axes[j, 0], axes[j, 1], axes[j, 2]
        o0, o1, o2 = origins[j, 0], origins[j, 1], origins[j, 2]
        rc0, rc1, rc2 = links[j, L_RC], links[j, L_RC + 1], links[j, L_RC + 2]
        u0, u1, u2 = _cross3(w0, w1, w2, rc0 - o0, rc1 - o1, rc2 - o2)
        dc0, dc1, dc2 = do[j, 0] + u0, do[j, 1] + u1, do[j, 2] + u2
        for c in range(3):  # [w]x (R I Rᵀ), column by column
            wxm[0, c], wxm[1, c], wxm[2, c] = _cross3(w0, w1, w2, links[j, L_RIR + c], links[j, L_RIR + 3 + c],
                                                      links[j, L_RIR + 6 + c])
        for r in range(3):
            for c in range(3):  # R I Rᵀ [w]x = −([w]x R I Rᵀ)ᵀ (symmetric times skew)
                dkbar[r, c] += wxm[r, c] + wxm[c, r]
        # the point mass: m (2 (r_c . r_c') I − r_c' r_cᵀ − r_c r_c'ᵀ)
        dot2 = 2.0 * m * (rc0 * dc0 + rc1 * dc1 + rc2 * dc2)
        dkbar[0, 0] += dot2 - 2.0 * m * dc0 * rc0
        dkbar[1, 1] += dot2 - 2.0 * m * dc1 * rc1
        dkbar[2, 2] += dot2 - 2.0 * m * dc2 * rc2
        dkbar[0, 1] -= m * (dc0 * rc1 + rc0 * dc1)
        dkbar[0, 2] -= m * (dc0 * rc2 + rc0 * dc2)
        dkbar[1, 2] -= m * (dc1 * rc2 + rc1 * dc2)
        dkbar[1, 0] = dkbar[0, 1]
        dkbar[2, 0] = dkbar[0, 2]
        dkbar[2, 1] = dkbar[1, 2]
        dsbar[0] += m * dc0
        dsbar[1] += m * dc1
        dsbar[2] += m * dc2
        sb0, sb1, sb2 = links[j, L_SBAR], links[j, L_SBAR + 1], links[j, L_SBAR + 2]
        mb = links[j, L_MBAR]
        dk0, dk1, dk2 = _cross3(w0, w1, w2, k0, k1, k2)
        a0, a1, a2 = _cross3(dk0, dk1, dk2, sb0 - mb * o0, sb1 - mb * o1, sb2 - mb * o2)
        b0, b1, b2 = _cross3(k0, k1, k2, dsbar[0] - mb * do[j, 0], dsbar[1] - mb * do[j, 1],
                             dsbar[2] - mb * do[j, 2])
        djt[0, j], djt[1, j], djt[2, j] = a0 + b0, a1 + b1, a2 + b2
        x0, x1, x2 = _cross3(k0, k1, k2, o0, o1, o2)
        e0, e1, e2 = _cross3(dk0, dk1, dk2, o0, o1, o2)
        f0, f1, f2 = _cross3(k0, k1, k2, do[j, 0], do[j, 1], do[j, 2])
        a0, a1, a2 = _cross3(dsbar[0], dsbar[1], dsbar[2], x0, x1, x2)
        b0, b1, b2 = _cross3(sb0, sb1, sb2, e0 + f0, e1 + f1, e2 + f2)
        for r in range(3):
            dhq[r, j] = (dkbar[r, 0] * k0 + dkbar[r, 1] * k1 + dkbar[r, 2] * k2
                         + links[j, L_KBAR + 3 * r] * dk0 + links[j, L_KBAR + 3 * r + 1] * dk1
                         + links[j, L_KBAR + 3 * r + 2] * dk2)
        dhq[0, j] -= a0 + b0
        dhq[1, j] -= a1 + b1
        dhq[2, j] -= a2 + b2
    mtot = base_mass + links[0, L_MBAR]
    s0, s1, s2 = links[0, L_SBAR], links[0, L_SBAR + 1], links[0, L_SBAR + 2]
    ds0, ds1, ds2 = dsbar[0], dsbar[1], dsbar[2]
    # A' and (A⁻¹)' = −A⁻¹ A' A⁻¹
    sds = 2.0 * (s0 * ds0 + s1 * ds1 + s2 * ds2) / mtot
    da, top = _empty(arena, top, (3, 3))
    for r in range(3):
        for c in range(3):
            da[r, c] = dkbar[r, c] + (dsbar[r] * links[0, L_SBAR + c] + links[0, L_SBAR + r] * dsbar[c]) / mtot
        da[r, r] -= sds
    tmp, top = _empty(arena, top, (3, 3))
    for r in range(3):
        for c in range(3):
            tmp[r, c] = ainv[r, 0] * da[0, c] + ainv[r, 1] * da[1, c] + ainv[r, 2] * da[2, c]
    for r in range(3):
        for c in range(3):
            dainv[r, c] = -(tmp[r, 0] * ainv[0, c] + tmp[r, 1] * ainv[1, c] + tmp[r, 2] * ainv[2, c])
    for r in range(3):
        tan[T_DCG, r] = dsbar[r] / mtot
        tan[T_DOM_D, r] = 0.0
        tan[T_DJG_D, r] = 0.0
    e0, e1, e2 = re[0], re[1], re[2]
    for j in range(n):
        w0, w1, w2 = om[0, j], om[1, j], om[2, j]
        # Om_j' = −A⁻¹ (A' Om_j + b_j'), b_j' = Hq_j' − (Sbar' x Jt_j + Sbar x Jt_j') / m
        x0, x1, x2 = _cross3(ds0, ds1, ds2, links[j, L_JT], links[j, L_JT + 1], links[j, L_JT + 2])
        y0, y1, y2 = _cross3(s0, s1, s2, djt[0, j], djt[1, j], djt[2, j])
        g0 = da[0, 0] * w0 + da[0, 1] * w1 + da[0, 2] * w2 + dhq[0, j] - (x0 + y0) / mtot
        g1 = da[1, 0] * w0 + da[1, 1] * w1 + da[1, 2] * w2 + dhq[1, j] - (x1 + y1) / mtot
        g2 = da[2, 0] * w0 + da[2, 1] * w1 + da[2, 2] * w2 + dhq[2, j] - (x2 + y2) / mtot
        v0 = -(ainv[0, 0] * g0 + ainv[0, 1] * g1 + ainv[0, 2] * g2)
        v1 = -(ainv[1, 0] * g0 + ainv[1, 1] * g1 + ainv[1, 2] * g2)
        v2 = -(ainv[2, 0] * g0 + ainv[2, 1] * g1 + ainv[2, 2] * g2)
        # Jg_j'
        k0, k1, k2 = axes[j, 0], axes[j, 1], axes[j, 2]
        dk0, dk1, dk2 = _cross3(w_link[j, 0], w_link[j, 1], w_link[j, 2], k0, k1, k2)
        a0, a1, a2 = _cross3(ds0, ds1, ds2, w0, w1, w2)
        b0, b1, b2 = _cross3(s0, s1, s2, v0, v1, v2)
        c0, c1, c2 = _cross3(v0, v1, v2, e0, e1, e2)
        f0, f1, f2 = _cross3(w0, w1, w2, dre0, dre1, dre2)
        x0, x1, x2 = _cross3(dk0, dk1, dk2, e0 - origins[j, 0], e1 - origins[j, 1], e2 - origins[j, 2])
        y0, y1, y2 = _cross3(k0, k1, k2, dre0 - do[j, 0], dre1 - do[j, 1], dre2 - do[j, 2])
        h0 = (a0 + b0 - djt[0, j]) / mtot + c0 + f0 + x0 + y0
        h1 = (a1 + b1 - djt[1, j]) / mtot + c1 + f1 + x1 + y1
        h2 = (a2 + b2 - djt[2, j]) / mtot + c2 + f2 + x2 + y2
        dj = d[j]
        tan[T_DOM_D, 0] += v0 * dj
        tan[T_DOM_D, 1] += v1 * dj
        tan[T_DOM_D, 2] += v2 * dj
        tan[T_DJG_D, 0] += h0 * dj
        tan[T_DJG_D, 1] += h1 * dj
        tan[T_DJG_D, 2] += h2 * dj
        if columns:
            dom[0, j], dom[1, j], dom[2, j] = v0, v1, v2
            djg[0, j], djg[1, j], djg[2, j] = h0, h1, h2


@kernel(error_model="numpy")
def _inverse3(a, out):
    """Inverse of a 3x3 matrix by cofactors (used on symmetric positive definite ones)."""
    c00 = a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1]
    c01 = a[1, 2] * a[2, 0] - a[1, 0] * a[2, 2]
    c02 = a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]
    det = a[0, 0] * c00 + a[0, 1] * c01 + a[0, 2] * c02
    inv = 1.0 / det
    out[0, 0] = c00 * inv
    out[1, 0] = c01 * inv
    out[2, 0] = c02 * inv
    out[0, 1] = (a[0, 2] * a[2, 1] - a[0, 1] * a[2, 2]) * inv
    out[1, 1] = (a[0, 0] * a[2, 2] - a[0, 2] * a[2, 0]) * inv
    out[2, 1] = (a[0, 1] * a[2, 0] - a[0, 0] * a[2, 1]) * inv
    out[0, 2] = (a[0, 1] * a[1, 2] - a[0, 2] * a[1, 1]) * inv
    out[1, 2] = (a[0, 2] * a[1, 0] - a[0, 0] * a[1, 2]) * inv
    out[2, 2] = (a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]) * inv


@kernel(error_model="numpy")
def _spd_inverse(s, k, out):
    """Inverse of the leading k x k block (k <= 3) of a symmetric positive definite s."""
    if k == 1:
        out[0, 0] = 1.0 / s[0, 0]
    elif k == 2:
        det = s[0, 0] * s[1, 1] - s[0, 1] * s[1, 0]
        out[0, 0] = s[1, 1] / det
        out[1, 1] = s[0, 0] / det
        out[0, 1] = -s[0, 1] / det
        out[1, 0] = -s[1, 0] / det
    else:
        _inverse3(s, out)


@kernel(error_model="numpy")
def _sym_eig_extremes(s, k):
    """Smallest and largest eigenvalue of the leading k x k block of a symmetric s."""
    if k == 1:
        return s[0, 0], s[0, 0]
    if k == 2:
        half_tr = 0.5 * (s[0, 0] + s[1, 1])
        d = 0.5 * (s[0, 0] - s[1, 1])
        rad = math.sqrt(d * d + s[0, 1] * s[0, 1])
        return half_tr - rad, half_tr + rad
    # 3x3: trigonometric method (Smith 1961)
    p1 = s[0, 1] * s[0, 1] + s[0, 2] * s[0, 2] + s[1, 2] * s[1, 2]
    qm = (s[0, 0] + s[1, 1] + s[2, 2]) / 3.0
    if p1 <= 1e-300:
        lo = min(s[0, 0], min(s[1, 1], s[2, 2]))
        hi = max(s[0, 0], max(s[1, 1], s[2, 2]))
        return lo, hi
    a0 = s[0, 0] - qm
    a1 = s[1, 1] - qm
    a2 = s[2, 2] - qm
    p2 = a0 * a0 + a1 * a1 + a2 * a2 + 2.0 * p1
    p = math.sqrt(p2 / 6.0)
    b00, b11, b22 = a0 / p, a1 / p, a2 / p
    b01, b02, b12 = s[0, 1] / p, s[0, 2] / p, s[1, 2] / p
    detb = b00 * (b11 * b22 - b12 * b12) - b01 * (b01 * b22 - b12 * b02) + b02 * (b01 * b12 - b11 * b02)
    rr = 0.5 * detb
    if rr <= -1.0:
        phi = math.pi / 3.0
    elif rr >= 1.0:
        phi = 0.0
    else:
        phi = math.acos(rr) / 3.0
    e_hi = qm + 2.0 * p * math.cos(phi)
    e_lo = qm + 2.0 * p * math.cos(phi + 2.0 * math.pi / 3.0)
    return e_lo, e_hi


@kernel(error_model="numpy")
def _maps_times_rates(arena, top, q, qd, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                      ee_offset, base_mass, base_inertia, l_b, jg, om, re, vee, w, ainv, rho, origins, axes, links,
                      tan, dainv):
    """floating_base_maps at q, plus the base rate ``w = Om qd + A⁻¹ L`` and the end
    effector's velocity ``vee = Jg qd + (A⁻¹ L) x rho`` relative to the system's centre of
    mass (base frame), for a system angular momentum ``l_b`` about that centre (base
    frame; zero: the zero-momentum maps). Also ``ainv`` = A⁻¹ (the locked system's
    inverse inertia), ``rho``, the end effector relative to the system's centre of
    mass, the joint ``origins`` and ``axes`` (n, 3) and the ``links`` record at q (see
    :func:`_floating_base_maps_in`), and the maps' tangent along ``qd`` (``tan``,
    ``dainv``: see :func:`_maps_tangent_in`). Scratch from ``arena[top:]``."""
    cg, top = _empty(arena, top, (3,))
    _floating_base_maps_in(arena, top, q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                           ee_offset, base_mass, base_inertia, jg, om, re, ainv, cg, origins, axes, links)
    no_columns, top_t = _empty(arena, top, (3, 0))
    _maps_tangent_in(arena, top_t, qd, link_mass, base_mass, links, origins, axes, om, re, ainv, tan, dainv,
                     no_columns, no_columns)
    lam, top = _empty(arena, top, (3,))
    for r in range(3):
        lam[r] = ainv[r, 0] * l_b[0] + ainv[r, 1] * l_b[1] + ainv[r, 2] * l_b[2]
        rho[r] = re[r] - cg[r]
    for r in range(3):
        acc_v = lam[(r + 1) % 3] * rho[(r + 2) % 3] - lam[(r + 2) % 3] * rho[(r + 1) % 3]
        acc_w = lam[r]
        for j in range(q.shape[0]):
            acc_v += jg[r, j] * qd[j]
            acc_w += om[r, j] * qd[j]
        vee[r] = acc_v
        w[r] = acc_w


@njit(cache=True, error_model="numpy")
def dynamics_terms(q, qd, rot0, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia, ee_offset,
                   base_mass, base_inertia, l_b, jac, jdqd, mmat, nvec, re_b, vee_b):
    """J, J̇q̇ (eq. 1) and M, n (eq. 2) in the task frame, all three rows.

    Args:
        q, qd: (n,) joint angles [rad] and rates [rad/s].
        rot0: (3, 3) base attitude (task <- base).
        jac: out (3, n) Generalized Jacobian [m/rad]; jdqd: out (3,) bias J̇q̇ [m/s^2].
        mmat: out (3, n) reaction map [N m s^2/rad]; nvec: out (3,) velocity term [N m].
        l_b: (3,) the system's angular momentum about its centre of mass, base frame
            [kg m^2/s] (zeros: the zero-momentum model of the paper).
        re_b: out (3,) EE position relative to the base CoM, base frame [m].
        vee_b: out (3,) EE velocity relative to the system's centre of mass,
            ``Jg qd + (A⁻¹ L) x rho``, base-frame components [m/s].
    """
    n = q.shape[0]
    arena = np.empty(arena_size(n))
    zero3 = np.zeros(3)
    _dynamics_terms_in(arena, 0, q, qd, rot0, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                       ee_offset, base_mass, base_inertia, l_b, 0.0, zero3, zero3, zero3, jac, jdqd, mmat, nvec, re_b,
                       vee_b, np.empty(3), np.empty((n, 3)), np.empty((n, 3)), np.empty((n, LINK_RECORD)),
                       np.empty((3, n)), np.empty((3, 3)))


@kernel(error_model="numpy")
def _dynamics_terms_in(arena, top, q, qd, rot0, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                       ee_offset, base_mass, base_inertia, l_b, infer, wm_b, f_b, pf_b, jac, jdqd, mmat, nvec, re_b,
                       vee_b, w_b, origins, axes, links, om, ainv):
    """:func:`dynamics_terms` with its scratch from ``arena[top:]``; also, at q, the
    forward kinematics' joint ``origins`` and ``axes`` (n, 3, base frame), the maps'
    ``links`` record (n, :data:`LINK_RECORD`), the base angular velocity map ``om`` (3, n)
    and ``ainv`` (3, 3), the locked system's inverse inertia (base frame): what
    :func:`_maps_tangent_in` takes.

    ``infer`` > 0: ``l_b`` is an output, the momentum that makes the model's base rate the
    measured ``wm_b`` (base frame): ``A (wm_b − Om qd)``, from the same evaluation of the
    maps at ``q`` (no extra cost but a 3x3 inverse). ``w_b``: out (3,), the model's base
    rate ``Om qd + A⁻¹ l_b`` (base frame).

    With a system angular momentum ``L`` (``l_b`` in the base frame, constant in the task
    frame, so ``d l_b/dt = −w x l_b``): the base rate is ``w = Om qd + A⁻¹ l_b`` and
    ``ẇ = Om q̈ + ∂_q(Om qd + A⁻¹ l_b) qd − A⁻¹ (w x l_b)``; the end effector's velocity
    relative to the system's centre of mass ``Jg qd + (A⁻¹ l_b) x rho`` likewise. The
    centre of mass moves uniformly (linear momentum is conserved), which adds nothing to
    the accelerations. The directional derivatives along ``qd`` at fixed ``l_b`` come
    from the maps' tangent (forward mode, exact); the ``−A⁻¹ (w x l_b)`` terms are added
    in closed form.

    An external force ``f_b`` [N] at ``pf_b`` [m] (base frame, the point relative to the
    base's centre of mass; a contact on the tool) changes the momenta: ``dP/dt = f`` moves
    the centre of mass (``f/M`` on the end effector) and ``dL/dt = (pf − c) x f`` turns the
    locked system (``A⁻¹ (pf − c) x f`` on the base rate, and its lever on the end
    effector): closed-form terms of ``ẇ`` and ``J̇q̇``."""
    n = q.shape[0]
    jg, top = _empty(arena, top, (3, n))
    rho, top = _empty(arena, top, (3,))
    tan, top = _empty(arena, top, (N_TANGENT, 3))
    dainv, top = _empty(arena, top, (3, 3))
    _maps_times_rates(arena, top, q, qd, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                      ee_offset, base_mass, base_inertia, l_b, jg, om, re_b, vee_b, w_b, ainv, rho, origins, axes, links,
                      tan, dainv)
    if infer > 0:  # l_b was zero: w_b = Om qd; now the momentum the measured rate implies
        lam, top = _empty(arena, top, (3,))
        a_sys, top = _empty(arena, top, (3, 3))
        _inverse3(ainv, a_sys)
        for r in range(3):
            lam[r] = wm_b[r] - w_b[r]
        for r in range(3):
            l_b[r] = a_sys[r, 0] * lam[0] + a_sys[r, 1] * lam[1] + a_sys[r, 2] * lam[2]
            w_b[r] = wm_b[r]
        cr, top = _empty(arena, top, (3,))
        _cross(lam, rho, cr)
        for r in range(3):
            vee_b[r] += cr[r]
    # the derivatives of w and vee along qd at fixed l_b, from the maps' tangent:
    # (Om qd)' + (A⁻¹)' l_b and (Jg qd)' + (A⁻¹)' l_b x rho + A⁻¹ l_b x (re' − cg')
    dj, top = _empty(arena, top, (3,))
    dw, top = _empty(arena, top, (3,))
    dlam, top = _empty(arena, top, (3,))
    lam_b, top = _empty(arena, top, (3,))
    drho, top = _empty(arena, top, (3,))
    turn, top = _empty(arena, top, (3,))
    for r in range(3):
        dlam[r] = dainv[r, 0] * l_b[0] + dainv[r, 1] * l_b[1] + dainv[r, 2] * l_b[2]
        lam_b[r] = ainv[r, 0] * l_b[0] + ainv[r, 1] * l_b[1] + ainv[r, 2] * l_b[2]
        drho[r] = tan[T_DRE, r] - tan[T_DCG, r]
        dw[r] = tan[T_DOM_D, r] + dlam[r]
    _cross(dlam, rho, dj)
    _cross(lam_b, drho, turn)
    for r in range(3):
        dj[r] += turn[r] + tan[T_DJG_D, r]
    if f_b[0] != 0.0 or f_b[1] != 0.0 or f_b[2] != 0.0:  # an external force changes the momenta
        mtot = base_mass
        for j in range(n):
            mtot += link_mass[j]
        arm_f, top_f = _empty(arena, top, (3,))
        for r in range(3):
            arm_f[r] = pf_b[r] - (re_b[r] - rho[r])  # the point of action from the system's centre of mass
        tq, top_f = _empty(arena, top_f, (3,))
        _cross(arm_f, f_b, tq)
        df, top_f = _empty(arena, top_f, (3,))
        for r in range(3):
            df[r] = ainv[r, 0] * tq[0] + ainv[r, 1] * tq[1] + ainv[r, 2] * tq[2]
            dw[r] += df[r]
        _cross(df, rho, tq)
        for r in range(3):
            dj[r] += tq[r] + f_b[r] / mtot
    if l_b[0] != 0.0 or l_b[1] != 0.0 or l_b[2] != 0.0:  # the momentum turns with the base
        wl, top_l = _empty(arena, top, (3,))
        _cross(w_b, l_b, wl)
        dl, top_l = _empty(arena, top_l, (3,))
        for r in range(3):
            dl[r] = ainv[r, 0] * wl[0] + ainv[r, 1] * wl[1] + ainv[r, 2] * wl[2]
            dw[r] -= dl[r]
        _cross(dl, rho, wl)
        for r in range(3):
            dj[r] -= wl[r]
    tmp, top = _empty(arena, top, (3,))
    _cross(w_b, vee_b, tmp)
    for r in range(3):
        tmp[r] += dj[r]
    for r in range(3):
        jdqd[r] = rot0[r, 0] * tmp[0] + rot0[r, 1] * tmp[1] + rot0[r, 2] * tmp[2]
        for j in range(n):
            jac[r, j] = rot0[r, 0] * jg[0, j] + rot0[r, 1] * jg[1, j] + rot0[r, 2] * jg[2, j]
    # M = R0 I0 Om ; n = R0 (I0 dw + w x I0 w)
    i0w, top = _empty(arena, top, (3,))
    for r in range(3):
        i0w[r] = base_inertia[r, 0] * w_b[0] + base_inertia[r, 1] * w_b[1] + base_inertia[r, 2] * w_b[2]
    _cross(w_b, i0w, tmp)
    for r in range(3):
        tmp[r] += base_inertia[r, 0] * dw[0] + base_inertia[r, 1] * dw[1] + base_inertia[r, 2] * dw[2]
    r0i0, top = _empty(arena, top, (3, 3))
    for r in range(3):
        for c in range(3):
            r0i0[r, c] = rot0[r, 0] * base_inertia[0, c] + rot0[r, 1] * base_inertia[1, c] + rot0[r, 2] * base_inertia[2, c]
    for r in range(3):
        nvec[r] = rot0[r, 0] * tmp[0] + rot0[r, 1] * tmp[1] + rot0[r, 2] * tmp[2]
        for j in range(n):
            mmat[r, j] = r0i0[r, 0] * om[0, j] + r0i0[r, 1] * om[1, j] + r0i0[r, 2] * om[2, j]


@kernel(error_model="numpy")
def acceleration_bounds(q, qd, q_min, q_max, qd_max, qdd_max, dt, lo, hi):
    """Per-joint acceleration bounds for this tick from position, rate and acceleration limits.

    The rate bound tightens near a position limit to the braking curve of the sampled
    motion, ``v = a (sqrt(dt²/4 + 2 d / a) − dt/2)`` (d: distance to the limit, a: the
    acceleration limit): stepping ``q += q̇ dt`` after ``q̇ += q̈ dt`` stops within
    ``v²/(2a) + v dt/2``, so the continuous ``sqrt(2 a d)`` would overrun the limit by up
    to ``v dt/2`` and the plant's own joint stop would then kick the base.
    """
    n = q.shape[0]
    half_dt = 0.5 * dt
    for i in range(n):
        a = qdd_max[i]
        slack = a * dt * dt  # the whole-step remainder of the sampled stop (<= a dt^2 / 8)
        up = max(q_max[i] - q[i] - slack, 0.0)
        down = max(q[i] - q_min[i] - slack, 0.0)
        v_hi = min(qd_max[i], a * (math.sqrt(half_dt * half_dt + 2.0 * up / a) - half_dt))
        v_lo = -min(qd_max[i], a * (math.sqrt(half_dt * half_dt + 2.0 * down / a) - half_dt))
        a_hi = min(qdd_max[i], (v_hi - qd[i]) / dt)
        a_lo = max(-qdd_max[i], (v_lo - qd[i]) / dt)
        if a_lo > a_hi:  # outside the envelope: brake as hard as allowed toward it
            mid = min(max(-qd[i] / dt, -qdd_max[i]), qdd_max[i])
            a_lo = mid
            a_hi = mid
        lo[i] = a_lo
        hi[i] = a_hi


@kernel(error_model="numpy")
def _select_rows(src, rows, free, out):
    """out[a, j] = src[rows[a], j] * free[j] (task or reaction rows of the free joints)."""
    for a in range(rows.shape[0]):
        for j in range(src.shape[1]):
            out[a, j] = src[rows[a], j] * free[j]


@kernel(error_model="numpy")
def _gram(mat, out):
    """out[:k, :k] = mat mat^T for a k x n mat."""
    k = mat.shape[0]
    for a in range(k):
        for b in range(k):
            acc = 0.0
            for j in range(mat.shape[1]):
                acc += mat[a, j] * mat[b, j]
            out[a, b] = acc


@kernel(error_model="numpy")
def _damping_squared(sigma, threshold, damping_max):
    """Squared damping: 0 above the threshold, rising smoothly to damping_max^2 at sigma 0."""
    if sigma >= threshold:
        return 0.0
    ratio = sigma / threshold
    return (1.0 - ratio * ratio) * damping_max * damping_max


@kernel(error_model="numpy")
def _damped_pinv(arena, top, jf, j_sigma, j_damp, jp):
    """Damped pseudoinverse ``jp = Jᵀ (J Jᵀ + λ² I)⁻¹`` (n x m) of an m x n ``jf`` (m <= 3).

    ``λ`` is zero while ``σ_min(J) >= j_sigma`` [m/rad] (then ``jp`` is the exact
    pseudoinverse) and rises smoothly to ``j_damp`` at ``σ_min = 0``. Returns ``λ²`` and
    the largest eigenvalue of ``J Jᵀ``. Scratch from ``arena[top:]``.
    """
    m = jf.shape[0]
    jjt, top = _zeros(arena, top, (3, 3))
    _gram(jf, jjt)
    e_lo, e_hi = _sym_eig_extremes(jjt, m)
    lam2 = _damping_squared(math.sqrt(max(e_lo, 0.0)), j_sigma, j_damp)
    for a in range(m):  # J Jᵀ + λ² I, J Jᵀ formed once
        jjt[a, a] += lam2
    _pinv_of_gram(arena, top, jf, jjt, jp)
    return lam2, e_hi


@kernel(error_model="numpy")
def _null_projector(pinv, mat, out):
    """``out = I − pinv mat`` (n x n) for an n x k ``pinv`` of a k x n ``mat``."""
    n = out.shape[0]
    for i in range(n):
        for j in range(n):
            acc = 0.0
            for a in range(mat.shape[0]):
                acc += pinv[i, a] * mat[a, j]
            out[i, j] = (1.0 if i == j else 0.0) - acc


@kernel(error_model="numpy")
def _regularised_pinv(arena, top, mat, lam2, out):
    """``out = matᵀ (mat matᵀ + lam2 I)⁻¹`` (n x k) of a k x n ``mat`` (k <= 3); scratch from ``arena[top:]``."""
    k = mat.shape[0]
    g, top = _zeros(arena, top, (3, 3))
    _gram(mat, g)
    for a in range(k):
        g[a, a] += lam2
    _pinv_of_gram(arena, top, mat, g, out)


@kernel(error_model="numpy")
def _pinv_of_gram(arena, top, mat, g, out):
    """``out = matᵀ g⁻¹`` (n x k) of a k x n ``mat`` (k <= 3) and a symmetric positive
    definite ``g`` (the leading k x k block of a 3 x 3: ``mat matᵀ + λ² I``); scratch from
    ``arena[top:]``."""
    k = mat.shape[0]
    gi, top = _zeros(arena, top, (3, 3))
    _spd_inverse(g, k, gi)
    for j in range(mat.shape[1]):
        for a in range(k):
            acc = 0.0
            for b in range(k):
                acc += mat[b, j] * gi[b, a]
            out[j, a] = acc


@njit(cache=True, error_model="numpy")
def jjt_of(jf):
    """J Jᵀ (3 x 3 work matrix, leading m x m block used) of an m x n ``jf``; a new array
    (the kernels form it in their work arena instead)."""
    out = np.zeros((3, 3))
    _gram(jf, out)
    return out


# Eq. 6's factors over one free set, kept in a slot of a factor cache (see _lse_factor).
# Cache header: a clock (the slots' last use), ||M|| (-1: not yet computed); then the slots.
_C_CLOCK, _C_M_NORM, _C_HEAD = 0, 1, 2
# Slot header: key (free set and solver; -1: empty), last use, then what the solve
# reports in diag (sigma_ratio, ||M||, J damping, M-projection damping) and its branch.
_F_KEY, _F_USED, _F_SIGMA, _F_M_NORM, _F_DAMP_J, _F_DAMP_M, _F_BRANCH = range(7)
_F_HEAD = 8
# the branches: the J pseudoinverse only (pinv, or M = 0); eq. 6; the reaction first
_B_PINV, _B_LSE, _B_REACTION_FIRST = 0.0, 1.0, 2.0
#: slots of the factor cache of one controller tick: the IK re-solves the same free sets
#: (the two parts, the unscaled and the scaled attempt, the base-rate bound's second
#: solve); measured on the 7-joint arm's saturated ticks, 8 slots hold every free set
#: of a tick (about 5 distinct among 22 solves)
FACTOR_SLOTS = 8


@kernel(error_model="numpy")
def _slot_size(n):
    """Floats of one factor slot for ``n`` joints (up to 3 task and 3 reaction rows)."""
    return _F_HEAD + 21 * n + n * n + 9


@kernel(error_model="numpy")
def _factor_cache_size(n, slots):
    """Floats of a factor cache of ``slots`` slots (and its header)."""
    return _C_HEAD + slots * _slot_size(n)


@kernel(error_model="numpy")
def _factor_cache_clear(cache, n):
    """Empty every slot: the cache is valid for one (J, M) and one set of IK settings."""
    size = _slot_size(n)
    cache[_C_CLOCK] = 0.0
    cache[_C_M_NORM] = -1.0
    for at in range(_C_HEAD, cache.shape[0] - size + 1, size):
        cache[at + _F_KEY] = -1.0
        cache[at + _F_USED] = 0.0


@kernel(error_model="numpy", inline="always")
def _slot_views(cache, at, n, m, r):
    """The factor slot at ``cache[at:]`` as its arrays (untracked views of ``cache``):
    jf (m, n), jp (n, m), mf (r, n), am (3, n), h (3, 3), mp (n, r), qm (n, n), jq (m, n),
    jqp (n, m)."""
    o = at + _F_HEAD
    jf = _view(cache, o, (m, n))  # type: ignore[call-arg, var-annotated]  # numba supplies typingctx
    o += 3 * n
    jp = _view(cache, o, (n, m))
    o += 3 * n
    mf = _view(cache, o, (r, n))
    o += 3 * n
    am = _view(cache, o, (3, n))
    o += 3 * n
    h = _view(cache, o, (3, 3))
    o += 9
    mp = _view(cache, o, (n, r))
    o += 3 * n
    qm = _view(cache, o, (n, n))
    o += n * n
    jq = _view(cache, o, (m, n))
    o += 3 * n
    jqp = _view(cache, o, (n, m))
    return jf, jp, mf, am, h, mp, qm, jq, jqp


@kernel(error_model="numpy")
def _lse_factor(arena, top, cache, jac, mmat, task_rows, reaction_rows, free, solver, sigma_threshold, damp_max,
                j_sigma, j_damp):
    """What one damped eq. 6 solve over the free joints computes before it meets its
    right-hand sides (:func:`_lse_apply`): ``J⁺`` (damped), ``A = M P`` (``P = I − J⁺J``), the
    gauge ``sigma_ratio``, ``(A Mᵀ + λ² I)⁻¹`` (eq. 6) or, with the reaction first,
    ``M⁺``, ``Q = I − M⁺M``, ``J Q`` and ``(J Q)⁺_λ``. Returns the offset in ``cache`` of the
    slot holding them: found there when this free set and solver were factored before
    (the same ``jac``, ``mmat`` and settings: the cache is cleared for each), else
    computed into the least recently used slot. Scratch from ``arena[top:]``.
    """
    n = free.shape[0]
    m = task_rows.shape[0]
    r = reaction_rows.shape[0]
    size = _slot_size(n)
    key = solver
    bit = 4.0
    for j in range(n):
        if free[j] != 0.0:
            key += bit
        bit *= 2.0
    clock = cache[_C_CLOCK] + 1.0
    cache[_C_CLOCK] = clock
    at = -1
    oldest = math.inf
    for slot in range(_C_HEAD, cache.shape[0] - size + 1, size):
        if cache[slot + _F_KEY] == key:
            cache[slot + _F_USED] = clock
            return slot
        if cache[slot + _F_USED] < oldest:
            oldest = cache[slot + _F_USED]
            at = slot
    cache[at + _F_KEY] = key
    cache[at + _F_USED] = clock
    jf, jp, mf, am, h, mp, qm, jq, jqp = _slot_views(cache, at, n, m, r)
    _select_rows(jac, task_rows, free, jf)
    lam2, jjt_max = _damped_pinv(arena, top, jf, j_sigma, j_damp, jp)
    cache[at + _F_DAMP_J] = math.sqrt(lam2)
    # ||M|| (all joints: once per cache) and sigma of A = M P (free joints)
    if cache[_C_M_NORM] < 0.0:
        ones, top_m = _ones(arena, top, (n,))
        _select_rows(mmat, reaction_rows, ones, mf)
        mmt, top_m = _zeros(arena, top_m, (3, 3))
        _gram(mf, mmt)
        cache[_C_M_NORM] = math.sqrt(max(_sym_eig_extremes(mmt, r)[1], 0.0))
    m_norm = cache[_C_M_NORM]
    _select_rows(mmat, reaction_rows, free, mf)
    # A = M P = M − (M J⁺) J: P = I − J⁺J is never formed (O(n) here, not O(n²))
    mjp, top = _empty(arena, top, (3, 3))
    for a in range(r):
        for b in range(m):
            acc = 0.0
            for k in range(n):
                acc += mf[a, k] * jp[k, b]
            mjp[a, b] = acc
    for a in range(r):
        for j in range(n):
            acc = mf[a, j]
            for b in range(m):
                acc -= mjp[a, b] * jf[b, j]
            am[a, j] = acc
    aat, top = _zeros(arena, top, (3, 3))
    _gram(am[:r], aat)
    e_lo, e_hi = _sym_eig_extremes(aat, r)
    sigma = math.sqrt(max(e_lo, 0.0))
    sigma_ratio = sigma / m_norm if m_norm > 0.0 else 1.0
    cache[at + _F_SIGMA] = sigma_ratio
    cache[at + _F_M_NORM] = m_norm
    cache[at + _F_DAMP_M] = 0.0
    cache[at + _F_BRANCH] = _B_PINV
    if solver == SOLVER_PINV or m_norm <= 0.0:
        return at
    if solver == SOLVER_LSE_REACTION_FIRST and sigma_ratio < sigma_threshold:
        lam2 += _damping_squared(sigma_ratio, sigma_threshold, damp_max * math.sqrt(max(jjt_max, 0.0)))
        # the reaction first (see _lse_apply): M+ = M^T (M M^T + λ² I)^-1, Q = I - M+ M, (J Q)+
        # damped. Here M M^T is singular or nearly so: λ keeps the cofactor inverse's
        # condition at or below 1 / _REACTION_FIRST_LAMBDA², and _lse_apply refines the
        # solution once against the reaction rows
        _regularised_pinv(arena, top, mf, (_REACTION_FIRST_LAMBDA * m_norm) ** 2, mp)
        _null_projector(mp, mf, qm)
        for a in range(m):
            for j in range(n):
                acc = 0.0
                for k in range(n):
                    acc += jf[a, k] * qm[k, j]
                jq[a, j] = acc
        _regularised_pinv(arena, top, jq, lam2, jqp)
        cache[at + _F_DAMP_M] = math.sqrt(lam2)
        cache[at + _F_BRANCH] = _B_REACTION_FIRST
        return at
    lam2 = _damping_squared(sigma_ratio, sigma_threshold, damp_max * m_norm)
    if cache[at + _F_DAMP_J] > 0.0:
        # J⁺ damped: P is no projector, so solve with M Aᵀ = M P Mᵀ instead of A Aᵀ
        # (equal for a projector), which keeps the reaction rows exact
        for a in range(r):
            for b in range(r):
                acc = 0.0
                for j in range(n):
                    acc += am[a, j] * mf[b, j]
                aat[a, b] = acc
    for a in range(r):
        aat[a, a] += lam2
    cache[at + _F_DAMP_M] = math.sqrt(lam2)
    for a in range(3):
        for b in range(3):
            h[a, b] = 0.0
    _spd_inverse(aat, r, h)
    cache[at + _F_BRANCH] = _B_LSE
    return at


@kernel(error_model="numpy")
def _reaction_residual(mf, nvec, qdd, r, out):
    """``out[:r] = M qdd + n``: the reaction rows' residual [N m] (``mf``: M over the free
    joints, ``nvec``: the rows' right-hand side)."""
    for a in range(r):
        acc = nvec[a]
        for j in range(mf.shape[1]):
            acc += mf[a, j] * qdd[j]
        out[a] = acc


@kernel(error_model="numpy")
def _lse_apply(arena, top, cache, at, m, r, rhs, nvec, z, free, qdd, diag):
    """One damped eq. 6 solve over the free joints from the factors in the slot at
    ``cache[at:]`` (:func:`_lse_factor`) for ``m`` task and ``r`` reaction rows; writes qdd
    (zero on fixed joints).

    ``rhs`` = x_dd - J̇q̇ - J qdd_fixed (task rows), ``nvec`` = n + M qdd_fixed - T_des
    (reaction rows). ``z`` is a secondary joint acceleration projected into the null
    space of J (and, for LSE, then corrected for reaction). ``diag`` out: sigma_ratio,
    ||M||, J damping used, M-projection damping used. Scratch from ``arena[top:]``.

    Eq. 6: ``qdd = q̈₀ − Aᵀ (A Mᵀ + λ² I)⁻¹ (M q̈₀ + n)`` with ``q̈₀ = J⁺ rhs + P z``.
    With the reaction first (the solution near a reaction singularity):
    ``qdd = M⁺ y + (J Q)⁺_λ (rhs − J M⁺ y) + (Q − (J Q)⁺ J Q) z`` with ``y = −nvec``
    (``M qdd + nvec = 0``), ``Q = I − M⁺ M``. Where ``[J; M]`` has full rank and ``λ = 0``
    this is the same minimum-norm solution as eq. 6; as ``[J; M]`` loses rank the
    damping ``λ`` acts on the task, so the base keeps feeling nothing and the end
    effector lags in the singular direction (the residual is reported).
    """
    n = qdd.shape[0]
    jf, jp, mf, am, h, mp, qm, jq, jqp = _slot_views(cache, at, n, m, r)
    diag[0] = cache[at + _F_SIGMA]
    diag[1] = cache[at + _F_M_NORM]
    diag[2] = cache[at + _F_DAMP_J]
    diag[3] = cache[at + _F_DAMP_M]
    branch = cache[at + _F_BRANCH]
    if branch == _B_REACTION_FIRST:
        q1, top = _zeros(arena, top, (n,))
        for j in range(n):
            acc = 0.0
            for a in range(r):
                acc -= mp[j, a] * nvec[a]
            q1[j] = acc
        e, top = _zeros(arena, top, (3,))
        for a in range(m):
            acc = rhs[a]
            for j in range(n):
                acc -= jf[a, j] * q1[j]
            e[a] = acc
        zf, top = _empty(arena, top, (n,))
        for j in range(n):
            zf[j] = z[j] * free[j]
        jqz, top = _zeros(arena, top, (3,))
        for a in range(m):
            acc = 0.0
            for j in range(n):
                acc += jq[a, j] * zf[j]
            jqz[a] = acc
        for i in range(n):
            acc = q1[i]
            for a in range(m):
                acc += jqp[i, a] * (e[a] - jqz[a])
            for j in range(n):
                acc += qm[i, j] * zf[j]
            qdd[i] = acc * free[i]
        # one step of iterative refinement against the reaction rows (M+ is regularised,
        # see _lse_factor): qdd -= M+ (M qdd + n); its leak λ²/σ² in a direction of
        # singular value σ becomes its square
        y1, top = _zeros(arena, top, (3,))
        _reaction_residual(mf, nvec, qdd, r, y1)
        for i in range(n):
            acc = 0.0
            for a in range(r):
                acc += mp[i, a] * y1[a]
            qdd[i] -= acc * free[i]
        return
    # q̈₀ = J⁺ rhs + P z = J⁺ (rhs − J z) + z over the free joints
    e, top = _empty(arena, top, (3,))
    for a in range(m):
        acc = rhs[a]
        for j in range(n):
            acc -= jf[a, j] * z[j] * free[j]
        e[a] = acc
    for i in range(n):
        acc = z[i] * free[i]
        for a in range(m):
            acc += jp[i, a] * e[a]
        qdd[i] = acc
    if branch != _B_LSE:
        return
    # y = M qdd0 + n ;  qdd -= A^T H y
    y, top = _zeros(arena, top, (3,))
    _reaction_residual(mf, nvec, qdd, r, y)
    hy, top = _zeros(arena, top, (3,))
    for a in range(r):
        hy[a] = h[a, 0] * y[0] + h[a, 1] * y[1] + h[a, 2] * y[2]
    for j in range(n):
        acc = 0.0
        for a in range(r):
            acc += am[a, j] * hy[a]
        qdd[j] -= acc


@kernel(error_model="numpy")
def _solve_parts(arena, top, cache, jac, jdqd, xdd, mmat, nvec, t_des, task_rows, reaction_rows, free, fixed, z,
                 solver, sigma_threshold, damp_max, j_sigma, j_damp, c, d, diag):
    """Eq. 6 over the free joints, split into its two parts (``c + d`` is the solution).

    ``c`` holds the fixed joints at their values and cancels what does not scale: the
    velocity term ``n``, the desired base torque and the fixed joints' share of task and
    reaction. ``d`` is the part that scales with the task: ``x_dd − J̇q̇`` and the
    secondary ``z`` (with its reaction correction). The damping of both solves depends
    only on the free set, so eq. 6 is linear in what is split and ``c + s d`` meets the
    reaction rows for every ``s`` while the task rows get ``s (x_dd − J̇q̇)``. Both
    solves share one factorisation, from the factor ``cache`` (:func:`_lse_factor`).
    Scratch from ``arena[top:]``.
    """
    n = c.shape[0]
    m = task_rows.shape[0]
    r = reaction_rows.shape[0]
    rhs, top = _empty(arena, top, (m,))
    nv, top = _empty(arena, top, (r,))
    zero_z, top = _zeros(arena, top, (n,))
    for a in range(m):
        acc = 0.0
        for j in range(n):
            acc -= jac[task_rows[a], j] * fixed[j]
        rhs[a] = acc
    for a in range(r):
        acc = nvec[reaction_rows[a]] - t_des[reaction_rows[a]]
        for j in range(n):
            acc += mmat[reaction_rows[a], j] * fixed[j]
        nv[a] = acc
    at = _lse_factor(arena, top, cache, jac, mmat, task_rows, reaction_rows, free, solver, sigma_threshold,
                     damp_max, j_sigma, j_damp)
    _lse_apply(arena, top, cache, at, m, r, rhs, nv, zero_z, free, c, diag)
    for j in range(n):
        c[j] = c[j] * free[j] + fixed[j]
    for a in range(m):
        rhs[a] = xdd[task_rows[a]] - jdqd[task_rows[a]]
    for a in range(r):
        nv[a] = 0.0
    _lse_apply(arena, top, cache, at, m, r, rhs, nv, z, free, d, diag)
    for j in range(n):
        d[j] *= free[j]


@kernel(error_model="numpy")
def _task_scale(c, d, lo, hi, qdd_max, free):
    """Largest ``s`` in [_TASK_SCALE_MIN, 1] with ``lo <= c + s d <= hi`` on the free joints; -inf if none."""
    s_lo = _TASK_SCALE_MIN
    s_hi = 1.0
    for j in range(c.shape[0]):
        if free[j] == 0.0:
            continue
        tol = 1e-12 * qdd_max[j]
        up = hi[j] + tol - c[j]
        down = lo[j] - tol - c[j]
        dj = d[j]
        if abs(dj) <= 1e-15 * qdd_max[j]:
            if up < 0.0 or down > 0.0:
                return -math.inf
        elif dj > 0.0:
            s_hi = min(s_hi, up / dj)
            s_lo = max(s_lo, down / dj)
        else:
            s_hi = min(s_hi, down / dj)
            s_lo = max(s_lo, up / dj)
    if s_hi < s_lo:
        return -math.inf
    return s_hi


@kernel(error_model="numpy")
def _worst_joint(sol, lo, hi, qdd_max, free):
    """The free joint furthest outside its bounds (relative to its limit); -1 if none.

    A joint whose bounds have collapsed to one value (it must brake at that rate to stop
    at its position limit) comes first: no scale of the task can be traded against it.
    """
    worst = -1
    worst_excess = 1e-12
    for j in range(sol.shape[0]):
        if free[j] > 0.0:
            excess = max(sol[j] - hi[j], lo[j] - sol[j]) / qdd_max[j]
            if excess > 1e-12 and hi[j] - lo[j] <= 1e-12 * qdd_max[j]:
                excess += 1e6
            if excess > worst_excess:
                worst_excess = excess
                worst = j
    return worst


@njit(cache=True, error_model="numpy")
def solve_ik(jac, jdqd, mmat, nvec, xdd, t_des, q, qd, task_rows, reaction_rows, q_min, q_max, qd_max, qdd_max,
             dt, solver, sigma_threshold, damp_max, j_sigma, j_damp, k_null, k_limit, z_extra, qdd, diag):
    """Reactionless IK (eq. 6) or minimum-norm pseudoinverse, with limits (SNS-style).

    Per-joint acceleration bounds come from the position, rate and acceleration limits.
    When the eq. 6 solution leaves them:

    * ``lse``: the reaction rows stay a hard constraint and the **task is scaled**
      (saturation in the null space with task scaling, Flacco et al. 2012): the
      solution is ``c + s d`` (see :func:`_solve_parts`) with the largest ``s`` in [0, 1]
      that keeps every joint within its bounds; the joint that saturates first is fixed
      at its bound and the rest re-solved as long as the joints left free can still
      carry the task and the reaction constraint together (``[J; M]`` of full rank,
      e.g. never for the planar 3R, whose reactionless motion is unique), keeping the
      largest scale found. The task then lags (the residual is reported), the base
      feels nothing. Scales below zero (down to ``_TASK_SCALE_MIN``) reverse the task
      acceleration: that is how a joint sitting on its rate limit is kept there without
      pushing on the base. Free sets at a reaction singularity are not used. Only at a
      (damped) reaction singularity of the whole arm, where the reaction is given up
      anyway, or when no scale is feasible, does it fall back to the ``pinv`` rule.
    * ``pinv`` (and that fallback): joints that would leave their bounds are fixed at
      the bound one at a time and the task re-solved with the others, so the task
      survives while the others can carry it.

    The result is always clipped to the bounds and ``limited`` reported.

    Args:
        jac, jdqd, mmat, nvec: dynamics terms (3 rows each, task frame).
        xdd: (3,) desired EE acceleration [m/s^2]; t_des: (3,) desired base torque [N m]
            (base feedback; zero for pure eq. 6).
        solver: SOLVER_LSE (eq. 6) or SOLVER_PINV (eq. 3 with the null-space term below).
        k_null: null-space joint-rate damping [1/s]; k_limit: joint-limit repulsion [1/s^2].
        z_extra: (n,) further secondary joint acceleration [rad/s^2] (e.g. the ascent
            of sigma_ratio from :func:`sigma_ascent`), projected like the rest.
        qdd: out (n,) joint accelerations [rad/s^2].
        diag: out (8,): sigma_ratio, ||M||, J damping, M P damping, limited (0/1),
            residual ||J qdd + J̇q̇ - x_dd|| [m/s^2], iterations, reaction residual [N m].
    """
    n = q.shape[0]
    arena = np.empty(arena_size(n))
    cache = np.empty(_factor_cache_size(n, FACTOR_SLOTS))
    _factor_cache_clear(cache, n)
    _solve_ik_in(arena, 0, cache, jac, jdqd, mmat, nvec, xdd, t_des, q, qd, task_rows, reaction_rows, q_min, q_max,
                 qd_max, qdd_max, dt, solver, sigma_threshold, damp_max, j_sigma, j_damp, k_null, k_limit, z_extra, qdd,
                 diag)


@kernel(error_model="numpy")
def _solve_ik_in(arena, top, cache, jac, jdqd, mmat, nvec, xdd, t_des, q, qd, task_rows, reaction_rows, q_min,
                 q_max, qd_max, qdd_max, dt, solver, sigma_threshold, damp_max, j_sigma, j_damp, k_null, k_limit,
                 z_extra, qdd, diag):
    """:func:`solve_ik` with its scratch from ``arena[top:]`` and its factorisations from
    the factor ``cache`` (:func:`_lse_factor`: cleared for these ``jac`` and ``mmat``)."""
    n = q.shape[0]
    m = task_rows.shape[0]
    r = reaction_rows.shape[0]
    lo, top = _empty(arena, top, (n,))
    hi, top = _empty(arena, top, (n,))
    acceleration_bounds(q, qd, q_min, q_max, qd_max, qdd_max, dt, lo, hi)
    z, top = _empty(arena, top, (n,))
    for j in range(n):
        mid = 0.5 * (q_max[j] + q_min[j])
        half = 0.5 * (q_max[j] - q_min[j])
        u = (q[j] - mid) / half
        # null-space secondary: damp self-motion, push gently away from position limits
        z[j] = -k_null * qd[j] - k_limit * u * u * u + z_extra[j]
    free, top = _ones(arena, top, (n,))
    fixed, top = _zeros(arena, top, (n,))
    c, top = _empty(arena, top, (n,))
    d, top = _empty(arena, top, (n,))
    sol, top = _empty(arena, top, (n,))
    best, top = _empty(arena, top, (n,))
    no_torque, top = _zeros(arena, top, (3,))
    _solve_parts(arena, top, cache, jac, jdqd, xdd, mmat, nvec, t_des, task_rows, reaction_rows, free, fixed, z,
                 solver, sigma_threshold, damp_max, j_sigma, j_damp, c, d, diag)
    sigma_full = diag[0]  # the gauge of the full arm, not of the joints left free
    for j in range(n):
        sol[j] = c[j] + d[j]
    iterations = 1
    limited = 0.0
    worst = _worst_joint(sol, lo, hi, qdd_max, free)
    if worst >= 0:
        limited = 1.0
        scaled = False
        if solver == SOLVER_LSE_REACTION_FIRST or (solver == SOLVER_LSE and sigma_full >= sigma_threshold):
            # reaction hard, task scaled: keep the best scale over the free sets tried
            # (a free set is used only if it is no nearer a reaction singularity than the
            # whole arm). The base feedback torque is dropped while saturated: it must not
            # cost the task.
            sigma_floor = min(sigma_threshold, 0.5 * sigma_full)
            _solve_parts(arena, top, cache, jac, jdqd, xdd, mmat, nvec, no_torque, task_rows, reaction_rows, free,
                         fixed, z, solver, sigma_threshold, damp_max, j_sigma, j_damp, c, d, diag)
            best_s = -math.inf
            n_free = n
            for _ in range(n):
                if iterations == 1 or diag[0] >= sigma_floor:
                    s = _task_scale(c, d, lo, hi, qdd_max, free)
                    if s > best_s:
                        best_s = s
                        for j in range(n):
                            best[j] = c[j] + s * d[j]
                    if s >= 1.0:
                        break
                worst = _worst_joint(sol, lo, hi, qdd_max, free)
                if worst < 0 or n_free - 1 < m + r:
                    break
                free[worst] = 0.0
                fixed[worst] = hi[worst] if sol[worst] > hi[worst] else lo[worst]
                n_free -= 1
                iterations += 1
                _solve_parts(arena, top, cache, jac, jdqd, xdd, mmat, nvec, no_torque, task_rows, reaction_rows, free,
                             fixed, z, solver, sigma_threshold, damp_max, j_sigma, j_damp, c, d, diag)
                for j in range(n):
                    sol[j] = c[j] + d[j]
            if best_s > -math.inf:
                scaled = True
                for j in range(n):
                    sol[j] = best[j]
            else:
                for j in range(n):
                    free[j] = 1.0
                    fixed[j] = 0.0
        if not scaled:
            # keep the task: fix saturating joints one by one, re-solve with the rest
            for _ in range(n + 1):
                iterations += 1
                _solve_parts(arena, top, cache, jac, jdqd, xdd, mmat, nvec, t_des, task_rows, reaction_rows, free,
                             fixed, z, solver, sigma_threshold, damp_max, j_sigma, j_damp, c, d, diag)
                for j in range(n):
                    sol[j] = c[j] + d[j]
                worst = _worst_joint(sol, lo, hi, qdd_max, free)
                if worst < 0:
                    break
                free[worst] = 0.0
                fixed[worst] = hi[worst] if sol[worst] > hi[worst] else lo[worst]
    for j in range(n):
        v = sol[j]
        if v > hi[j]:
            v = hi[j]
            limited = 1.0
        elif v < lo[j]:
            v = lo[j]
            limited = 1.0
        qdd[j] = v
    diag[0] = sigma_full
    diag[4] = limited
    diag[5] = _row_residual(jac, jdqd, xdd, task_rows, qdd, n)
    diag[6] = iterations
    diag[7] = _row_residual(mmat, nvec, t_des, reaction_rows, qdd, n)


@kernel(error_model="numpy")
def _row_residual(a_mat, b_vec, target, rows, qdd, n):
    """|A qdd + b − target| over ``rows`` (``n`` joints): the task (eq. 2's J, J̇q̇, ẍ) or
    the reaction (eq. 1's M, n, τ_des) residual of the IK's solution."""
    total = 0.0
    for a in range(rows.shape[0]):
        acc = b_vec[rows[a]] - target[rows[a]]
        for j in range(n):
            acc += a_mat[rows[a], j] * qdd[j]
        total += acc * acc
    return math.sqrt(total)


@kernel(error_model="numpy")
def _sigma_ratio_base(arena, top, q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia, ee_offset,
                      base_mass, base_inertia, task_rows, reaction_rows, j_sigma, j_damp, diag):
    """sigma_ratio at q (base frame: it is invariant to the base attitude); diag: work (8,);
    scratch from ``arena[top:]``."""
    n = q.shape[0]
    jg, top = _empty(arena, top, (3, n))
    om, top = _empty(arena, top, (3, n))
    re, top = _empty(arena, top, (3,))
    ainv, top = _empty(arena, top, (3, 3))
    origins, top = _empty(arena, top, (n, 3))
    axes, top = _empty(arena, top, (n, 3))
    links, top = _empty(arena, top, (n, LINK_RECORD))
    cache, top = _empty(arena, top, (_factor_cache_size(n, 1),))
    at = _sigma_factor_base(arena, top, q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                            ee_offset, base_mass, base_inertia, task_rows, reaction_rows, j_sigma, j_damp, cache, jg,
                            om, re, ainv, origins, axes, links)
    diag[0] = cache[at + _F_SIGMA]
    return diag[0]


@kernel(error_model="numpy")
def _sigma_factor_base(arena, top, q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia, ee_offset,
                       base_mass, base_inertia, task_rows, reaction_rows, j_sigma, j_damp, cache, jg, om, re, ainv,
                       origins, axes, links):
    """The maps at q (into ``jg``, ``om``, ``re``, ``ainv``, ``origins``, ``axes``,
    ``links``; base frame) and the factorisation of eq. 6 over all joints that gives
    sigma_ratio (pseudoinverse branch), into a cleared one-slot ``cache``; returns the
    slot's offset. Scratch from ``arena[top:]``."""
    n = q.shape[0]
    cg, top = _empty(arena, top, (3,))
    _floating_base_maps_in(arena, top, q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                           ee_offset, base_mass, base_inertia, jg, om, re, ainv, cg, origins, axes, links)
    mm, top = _empty(arena, top, (3, n))
    for r in range(3):
        for j in range(n):
            mm[r, j] = base_inertia[r, 0] * om[0, j] + base_inertia[r, 1] * om[1, j] + base_inertia[r, 2] * om[2, j]
    ones, top = _ones(arena, top, (n,))
    _factor_cache_clear(cache, n)
    return _lse_factor(arena, top, cache, jg, mm, task_rows, reaction_rows, ones, SOLVER_PINV, 0.0, 0.0, j_sigma,
                       j_damp)


@kernel(error_model="numpy")
def _sym_eigvec(s, k, lam, out):
    """A unit eigenvector (into ``out``) of the leading k x k block (k <= 3) of a
    symmetric ``s`` for its simple eigenvalue ``lam``: the null vector of ``s − lam I``, by
    the largest cross product of two of its rows (k = 3)."""
    if k == 1:
        out[0] = 1.0
        return
    if k == 2:
        a0, a1 = s[0, 1], lam - s[0, 0]
        b0, b1 = lam - s[1, 1], s[1, 0]
        if a0 * a0 + a1 * a1 >= b0 * b0 + b1 * b1:
            out[0], out[1] = a0, a1
        else:
            out[0], out[1] = b0, b1
    else:
        b00, b11, b22 = s[0, 0] - lam, s[1, 1] - lam, s[2, 2] - lam
        b01, b02, b12 = s[0, 1], s[0, 2], s[1, 2]
        out[0], out[1], out[2] = _cross3(b00, b01, b02, b01, b11, b12)
        best = out[0] * out[0] + out[1] * out[1] + out[2] * out[2]
        x0, x1, x2 = _cross3(b00, b01, b02, b02, b12, b22)
        size = x0 * x0 + x1 * x1 + x2 * x2
        if size > best:
            best = size
            out[0], out[1], out[2] = x0, x1, x2
        x0, x1, x2 = _cross3(b01, b11, b12, b02, b12, b22)
        if x0 * x0 + x1 * x1 + x2 * x2 > best:
            out[0], out[1], out[2] = x0, x1, x2
    size = 0.0
    for a in range(k):
        size += out[a] * out[a]
    size = math.sqrt(size)
    for a in range(k):
        out[a] /= size


# the eigenvalue gap (relative to the largest) below which an extreme eigenvalue is taken
# as repeated: its derivative is then no single number, and sigma_ascent differences instead
_SIMPLE_EIGEN_GAP = 1e-8


@kernel(error_model="numpy")
def _middle_gaps(s, k, lo, hi):
    """The gaps of the extreme eigenvalues ``lo`` and ``hi`` of the leading k x k block of
    a symmetric ``s`` to the rest of its spectrum (``inf`` for k = 1)."""
    if k == 1:
        return math.inf, math.inf
    if k == 2:
        return hi - lo, hi - lo
    mid = s[0, 0] + s[1, 1] + s[2, 2] - lo - hi
    return mid - lo, hi - mid


@kernel(error_model="numpy")
def _sigma_slope(arena, top, v, link_mass, base_mass, base_inertia, task_rows, reaction_rows, rot0, cache, at, links,
                 origins, axes, om_b, re_b, ainv):
    """The derivative of sigma_ratio along the joint-space direction ``v`` at q, exact
    (no step); NaN where no such formula applies (the caller differences instead).

    ``cache[at:]`` is the slot of the factorisation of eq. 6 over all joints at q (its
    ``J⁺`` and ``A = M P``, ``P = I − J⁺J``; ``J``, ``M`` the rows of ``R0 Jg``, ``R0 I0 Om``),
    and ``links``, ``origins``, ``axes``, ``om_b``, ``re_b``, ``ainv`` the base-frame maps
    at q (:func:`_maps_tangent_in` turns them into ``J' = R0 Jg'`` and ``M' = R0 I0
    Om'`` along v). With ``σ² = λ_min(A Aᵀ)`` (eigenvector ``u``, simple) and ``J`` not
    damped (``P`` a projector, ``P J⁺ = 0``): ``A' = M' P + M P'`` with ``P' = −J⁺ J' P −
    P J'ᵀ J⁺ᵀ``, and ``Aᵀ u = P Mᵀ u``, so ``(σ²)' = 2 uᵀ A' Aᵀ u = 2 (uᵀ M' a − (J⁺ᵀ Mᵀ
    u) . (J' a))`` with ``a = Aᵀ u``. Likewise ``(‖M‖²)' = 2 wᵀ M' Mᵀ w`` for the top
    eigenvector ``w`` of ``M Mᵀ``; sigma_ratio is ``σ / ‖M‖``. NaN where ``J`` is damped
    or an eigenvalue involved is repeated (to :data:`_SIMPLE_EIGEN_GAP`) or ``σ`` is
    round-off. Scratch from ``arena[top:]``."""
    n = v.shape[0]
    m = task_rows.shape[0]
    r = reaction_rows.shape[0]
    if cache[at + _F_DAMP_J] > 0.0 or cache[_C_M_NORM] <= 0.0:
        return math.nan
    jf, jp, mf, am, h, mp, qm, jq, jqp = _slot_views(cache, at, n, m, r)
    g, top = _zeros(arena, top, (3, 3))
    _gram(am[:r], g)
    lo, hi = _sym_eig_extremes(g, r)
    gap_lo = _middle_gaps(g, r, lo, hi)[0]
    if lo <= 1e-12 * hi or gap_lo <= _SIMPLE_EIGEN_GAP * hi:
        return math.nan
    mmt, top = _zeros(arena, top, (3, 3))
    _gram(mf[:r], mmt)
    mlo, mhi = _sym_eig_extremes(mmt, r)
    if _middle_gaps(mmt, r, mlo, mhi)[1] <= _SIMPLE_EIGEN_GAP * mhi:
        return math.nan
    tan, top = _empty(arena, top, (N_TANGENT, 3))
    dainv, top = _empty(arena, top, (3, 3))
    djg, top = _empty(arena, top, (3, n))
    dom, top = _empty(arena, top, (3, n))
    _maps_tangent_in(arena, top, v, link_mass, base_mass, links, origins, axes, om_b, re_b, ainv, tan, dainv, djg,
                     dom)
    u, top = _empty(arena, top, (3,))
    _sym_eigvec(g, r, lo, u)
    w, top = _empty(arena, top, (3,))
    _sym_eigvec(mmt, r, mhi, w)
    # a = Aᵀ u, Mᵀ u, Mᵀ w (n)
    av, top = _zeros(arena, top, (n,))
    mu_v, top = _zeros(arena, top, (n,))
    mw_v, top = _zeros(arena, top, (n,))
    for b in range(r):
        for j in range(n):
            av[j] += am[b, j] * u[b]
            mu_v[j] += mf[b, j] * u[b]
            mw_v[j] += mf[b, j] * w[b]
    # the rows' derivatives, contracted: J' a (task rows), uᵀ M' a and wᵀ M' Mᵀ w
    r0i0, top = _empty(arena, top, (3, 3))
    for i in range(3):
        for c in range(3):
            r0i0[i, c] = rot0[i, 0] * base_inertia[0, c] + rot0[i, 1] * base_inertia[1, c] + rot0[i, 2] * base_inertia[2, c]
    half_dsig2 = 0.0  # (σ²)' / 2 and, below, (‖M‖²)' / 2
    for t in range(m):
        row = task_rows[t]
        ja = 0.0
        jpg = 0.0
        for j in range(n):
            ja += (rot0[row, 0] * djg[0, j] + rot0[row, 1] * djg[1, j] + rot0[row, 2] * djg[2, j]) * av[j]
            jpg += jp[j, t] * mu_v[j]
        half_dsig2 -= jpg * ja
    half_dmu2 = 0.0
    for b in range(r):
        row = reaction_rows[b]
        ma = 0.0
        mw = 0.0
        for j in range(n):
            dm = r0i0[row, 0] * dom[0, j] + r0i0[row, 1] * dom[1, j] + r0i0[row, 2] * dom[2, j]
            ma += dm * av[j]
            mw += dm * mw_v[j]
        half_dsig2 += u[b] * ma
        half_dmu2 += w[b] * mw
    sigma = math.sqrt(lo)
    mu = math.sqrt(mhi)
    return (half_dsig2 / sigma) / mu - sigma * (half_dmu2 / mu) / mhi


@njit(cache=True, error_model="numpy")
def sigma_ascent(q, jac, mmat, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia, ee_offset,
                 base_mass, base_inertia, task_rows, reaction_rows, j_sigma, j_damp, gain, out):
    """Secondary joint acceleration that climbs sigma_ratio along the spare direction.

    The spare direction ``v`` spans what is left of the joint space after the task and the
    reaction constraint (the null space of ``[J; M]``, one-dimensional for the 7-joint
    arm). ``out = gain * (d sigma_ratio / d v) * v`` with the derivative exact
    (:func:`_sigma_slope`: the maps' tangent along ``v`` and the eigenvectors of the
    extreme eigenvalues, from the factorisation of eq. 6 the controller has at q), or,
    where that does not apply (``J`` damped, an extreme eigenvalue repeated), by a
    forward difference ``(σ(q + h v) − σ(q)) / h`` with ``h = 1e-4`` rad (truncation
    ``h/2 |σ''|``). Zero where no spare direction exists (planar 3R). This keeps the arm
    away from reaction singularities instead of only damping through them.
    """
    n = q.shape[0]
    arena = np.empty(arena_size(n))
    _sigma_ascent_in(arena, 0, q, jac, mmat, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                     ee_offset, base_mass, base_inertia, task_rows, reaction_rows, j_sigma, j_damp, gain, np.eye(3),
                     np.empty(_factor_cache_size(n, 1)), -1, np.empty((n, LINK_RECORD)), np.empty((n, 3)),
                     np.empty((n, 3)), np.empty((3, n)), np.empty(3), np.empty((3, 3)), out)


@kernel(error_model="numpy")
def _spare_direction_of_rows(arena, top, jac, mmat, task_rows, reaction_rows, v):
    """The spare direction (into ``v``, unit): the residual of the coordinate axis that
    keeps most of itself against the rows of ``[J; M]`` (task rows of ``jac``, reaction
    rows of ``mmat``). False (``v`` not set) where no axis keeps more than 1e-6 of its
    length (no spare direction). Scratch from ``arena[top:]``."""
    n = v.shape[0]
    m = task_rows.shape[0]
    r = reaction_rows.shape[0]
    # orthonormal basis of the rows of [J; M] (Gram-Schmidt), then the spare direction
    # is the largest residual of a coordinate axis against that basis
    rows = m + r
    basis, top = _zeros(arena, top, (rows, n))
    vec, top = _empty(arena, top, (n,))
    count = 0
    for a in range(rows):
        for j in range(n):
            vec[j] = jac[task_rows[a], j] if a < m else mmat[reaction_rows[a - m], j]
        scale = 0.0
        for j in range(n):
            scale += vec[j] * vec[j]
        scale = math.sqrt(scale)
        for b in range(count):
            dot = 0.0
            for j in range(n):
                dot += vec[j] * basis[b, j]
            for j in range(n):
                vec[j] -= dot * basis[b, j]
        norm = 0.0
        for j in range(n):
            norm += vec[j] * vec[j]
        norm = math.sqrt(norm)
        if norm > 1e-9 * scale and norm > 0.0:
            for j in range(n):
                basis[count, j] = vec[j] / norm
            count += 1
    best = -1.0
    cand, top = _empty(arena, top, (n,))
    for e in range(n):
        for j in range(n):
            cand[j] = 1.0 if j == e else 0.0
        for b in range(count):  # modified Gram-Schmidt: the residual's own projection
            dot = 0.0
            for j in range(n):
                dot += cand[j] * basis[b, j]
            for j in range(n):
                cand[j] -= dot * basis[b, j]
        norm = 0.0
        for j in range(n):
            norm += cand[j] * cand[j]
        if norm > best:
            best = norm
            for j in range(n):
                v[j] = cand[j]
    if best <= 1e-12:
        return False
    best = math.sqrt(best)
    for j in range(n):
        v[j] /= best
    return True


@kernel(error_model="numpy")
def _spare_direction_of_factors(arena, top, cache, at, n, m, r, v):
    """The spare direction (into ``v``, unit) from the factorisation of eq. 6 over all
    joints in ``cache[at:]``, as :func:`_spare_direction_of_rows` defines it, without
    an orthogonalisation: where ``J⁺`` is undamped (``P = I − J⁺J`` a projector) and
    ``H = (A Aᵀ)⁻¹`` undamped (``A = M P``: the eq. 6 branch above the threshold), the
    projector onto the null space of ``[J; M]`` is ``N = P − A⁺A = I − J⁺J − Aᵀ H A``
    (the rows of ``A`` lie in the range of ``P``). The coordinate axis ``e`` that keeps
    most of itself has the largest ``N_ee``, and its residual is ``N e``. False (``v``
    not set) where the factors are damped or of another branch, or no ``N_ee`` exceeds
    1e-12 (the caller orthogonalises the rows instead). Scratch from ``arena[top:]``."""
    if cache[at + _F_BRANCH] != _B_LSE or cache[at + _F_DAMP_J] != 0.0 or cache[at + _F_DAMP_M] != 0.0:
        return False
    jf, jp, mf, am, h, mp, qm, jq, jqp = _slot_views(cache, at, n, m, r)
    hae, top = _empty(arena, top, (3,))
    best = -1.0
    e = 0
    for j in range(n):
        kept = 1.0
        for a in range(m):
            kept -= jp[j, a] * jf[a, j]
        for a in range(r):
            acc = 0.0
            for b in range(r):
                acc += h[a, b] * am[b, j]
            kept -= am[a, j] * acc
        if kept > best:
            best = kept
            e = j
    if best <= 1e-12:
        return False
    for a in range(r):
        acc = 0.0
        for b in range(r):
            acc += h[a, b] * am[b, e]
        hae[a] = acc
    norm = 0.0
    for j in range(n):
        x = 1.0 if j == e else 0.0
        for a in range(m):
            x -= jp[j, a] * jf[a, e]
        for a in range(r):
            x -= am[a, j] * hae[a]
        v[j] = x
        norm += x * x
    norm = math.sqrt(norm)
    for j in range(n):
        v[j] /= norm
    return True


@kernel(error_model="numpy")
def _sigma_ascent_in(arena, top, q, jac, mmat, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                     ee_offset, base_mass, base_inertia, task_rows, reaction_rows, j_sigma, j_damp, gain, rot0, cache,
                     at, links, origins, axes, om_b, re_b, ainv, out):
    """:func:`sigma_ascent` with its scratch from ``arena[top:]``. ``cache[at:]``: the
    slot of the factorisation of eq. 6 over all joints at q (the controller's, of ``J =
    R0 Jg`` and ``M = R0 I0 Om``: sigma_ratio, ``J⁺``, ``A``), and ``links``,
    ``origins``, ``axes``, ``om_b``, ``re_b``, ``ainv`` the base-frame maps at q (see
    :func:`_sigma_slope`); with ``at`` < 0 these are computed here (base frame, into
    the arrays given, ``cache`` of one slot, ``rot0`` the identity)."""
    n = q.shape[0]
    m = task_rows.shape[0]
    r = reaction_rows.shape[0]
    for j in range(n):
        out[j] = 0.0
    if n <= m + r or gain == 0.0:
        return
    v, top = _zeros(arena, top, (n,))
    if not (at >= 0 and _spare_direction_of_factors(arena, top, cache, at, n, m, r, v)):
        if not _spare_direction_of_rows(arena, top, jac, mmat, task_rows, reaction_rows, v):
            return
    if at < 0:
        jg, top = _empty(arena, top, (3, n))
        at = _sigma_factor_base(arena, top, q, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                                ee_offset, base_mass, base_inertia, task_rows, reaction_rows, j_sigma, j_damp, cache,
                                jg, om_b, re_b, ainv, origins, axes, links)
    slope = _sigma_slope(arena, top, v, link_mass, base_mass, base_inertia, task_rows, reaction_rows, rot0, cache, at,
                         links, origins, axes, om_b, re_b, ainv)
    if slope != slope:  # no exact slope here: a forward difference over h
        h = 1e-4
        qp, top = _empty(arena, top, (n,))
        diag, top = _zeros(arena, top, (8,))
        for j in range(n):
            qp[j] = q[j] + h * v[j]
        s_plus = _sigma_ratio_base(arena, top, qp, joint_xyz, joint_rot, joint_axis, link_mass, link_com,
                                   link_inertia, ee_offset, base_mass, base_inertia, task_rows, reaction_rows, j_sigma,
                                   j_damp, diag)
        slope = (s_plus - cache[at + _F_SIGMA]) / h
    for j in range(n):
        out[j] = gain * slope * v[j]


@kernel(error_model="numpy")
def quat_to_matrix(qx, qy, qz, qw, out):
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    out[0, 0] = 1.0 - 2.0 * (qy * qy + qz * qz)
    out[0, 1] = 2.0 * (qx * qy - qz * qw)
    out[0, 2] = 2.0 * (qx * qz + qy * qw)
    out[1, 0] = 2.0 * (qx * qy + qz * qw)
    out[1, 1] = 1.0 - 2.0 * (qx * qx + qz * qz)
    out[1, 2] = 2.0 * (qy * qz - qx * qw)
    out[2, 0] = 2.0 * (qx * qz - qy * qw)
    out[2, 1] = 2.0 * (qy * qz + qx * qw)
    out[2, 2] = 1.0 - 2.0 * (qx * qx + qy * qy)


@kernel(error_model="numpy")
def quat_to_rotvec(quat, out):
    """Rotation vector [rad] of a quaternion (x, y, z, w), shortest rotation."""
    x, y, z, w = quat[0], quat[1], quat[2], quat[3]
    if w < 0.0:
        x, y, z, w = -x, -y, -z, -w
    s = math.sqrt(x * x + y * y + z * z)
    if s < 1e-12:
        f = 2.0 / w if w > 0.0 else 0.0
    else:
        f = 2.0 * math.atan2(s, w) / s
    out[0] = f * x
    out[1] = f * y
    out[2] = f * z


@kernel(error_model="numpy")
def controller_step(q, qd, base_pos, base_quat, base_w, base_v, have_base, momentum_l, ext_force, ext_point, x_cmd,
                    v_cmd, a_cmd, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia, ee_offset,
                    base_mass, base_inertia, task_rows, reaction_rows, q_min, q_max, qd_max, qdd_max, params, qdd,
                    q_cmd, qd_cmd, qdd_cmd, status, diag, jac_pinv, arena):
    """One servo tick of the slave controller, all in one compiled call.

    ``params[P_MOMENTUM]`` (with the base state known): ``MOMENTUM_MEASURED``: the dynamics
    terms are those of a system carrying angular momentum (after a capture the arm holds
    the debris' momentum): ``L`` about the system's centre of mass is inferred every tick
    from the measured base rate, ``A (R0ᵀ w − Om qd)``, and the end effector's velocity in
    eq. 10 is the measured one (base twist plus joint rates), which also carries the
    centre of mass's drift. ``MOMENTUM_GIVEN``: ``L`` is ``momentum_l`` (the tick the tool
    closes, when the plant does not carry the debris yet), and the desired base torque
    gains the term that makes the model's base rate equal the measured one after the
    step, ``R0 (I0 (R0ᵀ w − w_model)/dt + w_model x I0 w_model)``: the joint rates jump so
    that the closing leaves the base's rate as it was. ``MOMENTUM_ZERO``: the
    zero-momentum model of the paper.

    Forms x_dd_d with the capture law (eq. 10, e = ee - cmd), the desired base torque from
    base feedback (``-I_w (k_att theta + k_rate w)``, only when the base state is known,
    its norm capped at ``params[P_FEEDBACK_MAX]``),
    solves the IK and integrates: ``qd_cmd = qd + qdd dt``, ``q_cmd = q + qd dt + qdd dt^2/2``.

    **The base-rate bound** (``params[P_BASE_RATE_MAX]`` [rad/s], ``inf``: off): the base
    angular velocity predicted after the step (:func:`_next_base_rate`: the measured base
    rate now, the model's without a base state, plus eq. 2's torque over one step) is kept
    within the bound.
    Where the IK's solution would exceed it (it gave up the reaction: the joint bounds left no
    reactionless solution, or ``singularity_priority`` ``task`` at a reaction singularity),
    the task is scaled instead (:func:`_bound_base_rate`: the end effector lags, the base
    does not turn faster), ``status[S_RATE_BOUNDED]`` is set, ``status[S_RATE_SCALE]``
    holds the scale and ``status[S_LIMITED]`` is set when the task was scaled. Not for the
    pseudoinverse (the baseline shows what the base would feel), nor on the tick the tool
    closes (its base torque is asked for), nor while an external force acts on the tool
    (``ext_force``: a contact, whose force follows the tool's motion; scaling the task
    there stiffens the arm against the debris, measured to turn the base more). A base
    already turning faster than the bound (model-plant mismatch at the bound, a
    disturbance) is let through only the task that slows it; the base feedback's torque
    (itself limited so that it never drives the rate beyond the bound,
    :func:`_rate_limited_torque`) brings it back under.
    ``status[S_BASE_RATE]`` is the predicted rate after the step on every tick.

    Args:
        q, qd: (n,) measured joint state; base_pos (3,), base_quat (4,) xyzw,
            base_w (3,) [rad/s], base_v (3,) [m/s]: measured base state (task frame);
            have_base: 0/1.
        momentum_l: (3,) the system's angular momentum about its centre of mass, task
            frame [kg m^2/s], used when ``params[P_MOMENTUM] == MOMENTUM_GIVEN``.
        ext_force, ext_point: (3,) an external force on the arm during the coming step [N]
            and where it acts [m], task frame (a contact on the tool); zeros: none. Its
            effect on the momenta enters eq. 1 and eq. 2 (:func:`_dynamics_terms_in`), so
            the reaction constraint holds while the tool is pushed.
        x_cmd, v_cmd, a_cmd: (3,) commanded EE position, velocity, acceleration, task frame.
        params: (N_PARAMS,) see P_* indices.
        qdd: out (n,) the solution, always written.
        q_cmd, qd_cmd, qdd_cmd: out (n,) the joint command; written only when the tick has
            no fault (``status[S_FAULT] == 0``), so they keep the last good command.
        status: out (N_STATUS,) see S_* indices;
        diag: out (8,) as in :func:`solve_ik`.
        jac_pinv: out (n, 3) ``∂q/∂x``: the (damped, as in the IK) pseudoinverse of the
            Generalized Jacobian's task rows at the measured state [rad/m], task frame;
            the columns of non-task rows (planar: z) are zero.
        arena: (>= arena_size(n),) float64 work arena, contents irrelevant; the tick's
            scratch arrays live there (no heap allocation). Not to be shared by calls
            that may run at the same time.

    The arrays are taken untracked (:func:`_untracked`: the caller holds them for the
    call), so that the tick does no reference counting on them.
    """
    u: Any = _untracked  # (numba supplies its typing context)
    _controller_step_in(u(q), u(qd), u(base_pos), u(base_quat), u(base_w), u(base_v), have_base, u(momentum_l),
                        u(ext_force), u(ext_point), u(x_cmd), u(v_cmd), u(a_cmd), u(joint_xyz), u(joint_rot),
                        u(joint_axis), u(link_mass), u(link_com), u(link_inertia), u(ee_offset), base_mass,
                        u(base_inertia), u(task_rows), u(reaction_rows), u(q_min), u(q_max), u(qd_max), u(qdd_max),
                        u(params), u(qdd), u(q_cmd), u(qd_cmd), u(qdd_cmd), u(status), u(diag), u(jac_pinv),
                        u(arena))


@kernel(error_model="numpy")
def _controller_step_in(q, qd, base_pos, base_quat, base_w, base_v, have_base, momentum_l, ext_force, ext_point,
                        x_cmd, v_cmd, a_cmd, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                        ee_offset, base_mass, base_inertia, task_rows, reaction_rows, q_min, q_max, qd_max, qdd_max,
                        params, qdd, q_cmd, qd_cmd, qdd_cmd, status, diag, jac_pinv, arena):
    """:func:`controller_step` on untracked arrays."""
    n = q.shape[0]
    dt = params[P_DT]
    top = 0
    rot0, top = _empty(arena, top, (3, 3))
    quat_to_matrix(base_quat[0], base_quat[1], base_quat[2], base_quat[3], rot0)
    jac, top = _empty(arena, top, (3, n))
    mmat, top = _empty(arena, top, (3, n))
    jdqd, top = _empty(arena, top, (3,))
    nvec, top = _empty(arena, top, (3,))
    re_b, top = _empty(arena, top, (3,))
    vee_b, top = _empty(arena, top, (3,))
    l_b, top = _zeros(arena, top, (3,))
    wm_b, top = _empty(arena, top, (3,))
    w_model_b, top = _empty(arena, top, (3,))
    mode = params[P_MOMENTUM] if have_base > 0 else MOMENTUM_ZERO
    momentum = mode != MOMENTUM_ZERO
    for r in range(3):
        wm_b[r] = rot0[0, r] * base_w[0] + rot0[1, r] * base_w[1] + rot0[2, r] * base_w[2]
    if mode == MOMENTUM_GIVEN:
        for r in range(3):
            l_b[r] = rot0[0, r] * momentum_l[0] + rot0[1, r] * momentum_l[1] + rot0[2, r] * momentum_l[2]
    f_b, top = _empty(arena, top, (3,))
    pf_b, top = _empty(arena, top, (3,))
    for r in range(3):
        f_b[r] = rot0[0, r] * ext_force[0] + rot0[1, r] * ext_force[1] + rot0[2, r] * ext_force[2]
        pf_b[r] = (rot0[0, r] * (ext_point[0] - base_pos[0]) + rot0[1, r] * (ext_point[1] - base_pos[1])
                   + rot0[2, r] * (ext_point[2] - base_pos[2]))
    origins, top = _empty(arena, top, (n, 3))
    axes, top = _empty(arena, top, (n, 3))
    links, top = _empty(arena, top, (n, LINK_RECORD))
    om_b, top = _empty(arena, top, (3, n))
    ainv_b, top = _empty(arena, top, (3, 3))
    infer = 1.0 if mode == MOMENTUM_MEASURED else 0.0  # (not inline: a call of over 30 arguments takes no branch)
    _dynamics_terms_in(arena, top, q, qd, rot0, joint_xyz, joint_rot, joint_axis, link_mass, link_com, link_inertia,
                       ee_offset, base_mass, base_inertia, l_b, infer, wm_b, f_b, pf_b, jac, jdqd, mmat, nvec, re_b,
                       vee_b, w_model_b, origins, axes, links, om_b, ainv_b)
    ee_meas, top = _empty(arena, top, (3,))
    ev_meas, top = _empty(arena, top, (3,))
    if momentum:  # the measured end-effector velocity (base twist and joint rates), task frame
        _ee_state_of(arena, top, origins, axes, re_b, qd, base_pos, rot0, base_v, base_w, ee_meas, ev_meas)
    # this tick's factorisations of eq. 6 (the IK's; the whole arm's first, for its J⁺)
    cache, top = _empty(arena, top, (_factor_cache_size(n, FACTOR_SLOTS),))
    _factor_cache_clear(cache, n)
    ones, top = _ones(arena, top, (n,))
    at = _lse_factor(arena, top, cache, jac, mmat, task_rows, reaction_rows, ones, params[P_SOLVER],
                     params[P_SIGMA_THRESHOLD], params[P_DAMP_MAX], params[P_J_SIGMA_M], params[P_J_DAMP_M])
    m = task_rows.shape[0]
    jp = _slot_views(cache, at, n, m, reaction_rows.shape[0])[1]
    for j in range(n):
        for r in range(3):
            jac_pinv[j, r] = 0.0
        for a in range(m):
            jac_pinv[j, task_rows[a]] = jp[j, a]
    xdd, top = _empty(arena, top, (3,))
    kp = params[P_KP]
    kd = params[P_KD]
    for r in range(3):
        ee = base_pos[r] + rot0[r, 0] * re_b[0] + rot0[r, 1] * re_b[1] + rot0[r, 2] * re_b[2]
        ev = ev_meas[r] if momentum else rot0[r, 0] * vee_b[0] + rot0[r, 1] * vee_b[1] + rot0[r, 2] * vee_b[2]
        status[S_EE + r] = ee
        status[S_EE_V + r] = ev
        xdd[r] = a_cmd[r] - kp * (ee - x_cmd[r]) - kd * (ev - v_cmd[r])
    t_des, top = _zeros(arena, top, (3,))
    if have_base > 0 and params[P_FEEDBACK] > 0:
        att, top_fb = _empty(arena, top, (3,))
        quat_to_rotvec(base_quat, att)
        u, top_fb = _empty(arena, top_fb, (3,))
        for r in range(3):
            u[r] = params[P_K_ATT] * att[r] + params[P_K_RATE] * base_w[r]
        # I_w = R0 I0 R0^T
        v, top_fb = _empty(arena, top_fb, (3,))
        for r in range(3):
            v[r] = rot0[0, r] * u[0] + rot0[1, r] * u[1] + rot0[2, r] * u[2]
        for r in range(3):
            w = base_inertia[r, 0] * v[0] + base_inertia[r, 1] * v[1] + base_inertia[r, 2] * v[2]
            u[r] = w
        for r in range(3):
            t_des[r] = -(rot0[r, 0] * u[0] + rot0[r, 1] * u[1] + rot0[r, 2] * u[2])
        # drift correction only: never ask the base for more than a small torque (after a
        # damped singularity the attitude error may be large; re-pointing is the AOCS' job)
        mag = math.sqrt(t_des[0] * t_des[0] + t_des[1] * t_des[1] + t_des[2] * t_des[2])
        if mag > params[P_FEEDBACK_MAX]:
            for r in range(3):
                t_des[r] *= params[P_FEEDBACK_MAX] / mag
    i0inv, top = _empty(arena, top, (3, 3))
    _inverse3(base_inertia, i0inv)
    # not while a contact pushes the tool: the contact force follows the tool's motion, so
    # the one-step prediction fails there and scaling the task stiffens the arm against it
    bounded = (params[P_SOLVER] != SOLVER_PINV and mode != MOMENTUM_GIVEN
               and ext_force[0] == 0.0 and ext_force[1] == 0.0 and ext_force[2] == 0.0)
    # the base rate now: the measured one where the base is known (after a contact the
    # zero-momentum model's Om qd is not the base's rate), else the model's
    w_now = wm_b if have_base > 0 else w_model_b
    if bounded and (t_des[0] != 0.0 or t_des[1] != 0.0 or t_des[2] != 0.0):
        _rate_limited_torque(rot0, i0inv, base_inertia, w_now, dt, params[P_BASE_RATE_MAX], t_des)
    if mode == MOMENTUM_GIVEN:
        _closing_torque(arena, top, rot0, wm_b, w_model_b, base_inertia, dt, t_des)
    z_extra, top = _zeros(arena, top, (n,))
    if params[P_SOLVER] != SOLVER_PINV:
        # sigma_ratio here: the whole arm's factorisation above computed it (its slot)
        _sigma_ascent_in(arena, top, q, jac, mmat, joint_xyz, joint_rot, joint_axis, link_mass, link_com,
                         link_inertia, ee_offset, base_mass, base_inertia, task_rows, reaction_rows,
                         params[P_J_SIGMA_M], params[P_J_DAMP_M], params[P_K_SIGMA], rot0, cache, at, links, origins,
                         axes, om_b, re_b, ainv_b, z_extra)
    _solve_ik_in(arena, top, cache, jac, jdqd, mmat, nvec, xdd, t_des, q, qd, task_rows, reaction_rows, q_min, q_max,
                 qd_max, qdd_max, dt, params[P_SOLVER], params[P_SIGMA_THRESHOLD], params[P_DAMP_MAX],
                 params[P_J_SIGMA_M], params[P_J_DAMP_M], params[P_K_NULL], params[P_K_LIMIT], z_extra, qdd, diag)
    # the base-rate bound (eq. 2's torque turned into the base rate after the step)
    w_next, top = _empty(arena, top, (3,))
    _next_base_rate(rot0, i0inv, base_inertia, w_now, mmat, nvec, qdd, dt, w_next)
    rate = math.sqrt(w_next[0] * w_next[0] + w_next[1] * w_next[1] + w_next[2] * w_next[2])
    limit = params[P_BASE_RATE_MAX]
    status[S_RATE_BOUNDED] = 0.0
    status[S_RATE_SCALE] = 1.0
    if bounded and rate > limit:
        status[S_RATE_BOUNDED] = 1.0
        status[S_RATE_SCALE], rate = _bound_base_rate(
            arena, top, cache, jac, jdqd, mmat, nvec, xdd, t_des, q, qd, task_rows, reaction_rows, q_min, q_max, qd_max,
            qdd_max, params, z_extra, rot0, i0inv, base_inertia, w_now, w_next, limit, qdd, diag)
    status[S_BASE_RATE] = rate
    fault = 0.0
    for j in range(n):
        if not (math.isfinite(qdd[j]) and math.isfinite(q[j]) and math.isfinite(qd[j])):
            fault = 1.0
    for r in range(3):
        if not (math.isfinite(x_cmd[r]) and math.isfinite(v_cmd[r]) and math.isfinite(a_cmd[r])):
            fault = 1.0
    for r in range(3):
        acc = nvec[r]
        for j in range(n):
            acc += mmat[r, j] * qdd[j]
        status[S_TORQUE + r] = acc
    if fault == 0.0:
        for j in range(n):
            qd_cmd[j] = qd[j] + qdd[j] * dt
            q_cmd[j] = q[j] + qd[j] * dt + 0.5 * qdd[j] * dt * dt
            qdd_cmd[j] = qdd[j]
    status[S_SIGMA_RATIO] = diag[0]
    status[S_SINGULAR] = 1.0 if diag[0] < params[P_SIGMA_THRESHOLD] else 0.0
    status[S_LIMITED] = diag[4]
    status[S_RESIDUAL] = diag[5]
    status[S_M_NORM] = diag[1]
    status[S_FAULT] = fault


@kernel(error_model="numpy")
def _next_base_rate(rot0, i0inv, base_inertia, w0, mmat, nvec, qdd, dt, out):
    """The base's angular velocity after one step [rad/s], base frame, as eq. 2 predicts it:
    ``w0 + dt I0⁻¹ (R0ᵀ (M q̈ + n) − w0 x I0 w0)`` (``M q̈ + n`` is the rate of change of
    the base's own angular momentum, task frame; ``w0`` the model's base rate now, base
    frame; ``i0inv = I0⁻¹``). With the reaction kept (``M q̈ + n = 0``) the base's
    momentum stays, and so does its rate up to the gyroscopic term."""
    t0 = nvec[0]
    t1 = nvec[1]
    t2 = nvec[2]
    for j in range(qdd.shape[0]):
        t0 += mmat[0, j] * qdd[j]
        t1 += mmat[1, j] * qdd[j]
        t2 += mmat[2, j] * qdd[j]
    h0 = base_inertia[0, 0] * w0[0] + base_inertia[0, 1] * w0[1] + base_inertia[0, 2] * w0[2]
    h1 = base_inertia[1, 0] * w0[0] + base_inertia[1, 1] * w0[1] + base_inertia[1, 2] * w0[2]
    h2 = base_inertia[2, 0] * w0[0] + base_inertia[2, 1] * w0[1] + base_inertia[2, 2] * w0[2]
    d0 = rot0[0, 0] * t0 + rot0[1, 0] * t1 + rot0[2, 0] * t2 - (w0[1] * h2 - w0[2] * h1)
    d1 = rot0[0, 1] * t0 + rot0[1, 1] * t1 + rot0[2, 1] * t2 - (w0[2] * h0 - w0[0] * h2)
    d2 = rot0[0, 2] * t0 + rot0[1, 2] * t1 + rot0[2, 2] * t2 - (w0[0] * h1 - w0[1] * h0)
    for r in range(3):
        out[r] = w0[r] + dt * (i0inv[r, 0] * d0 + i0inv[r, 1] * d1 + i0inv[r, 2] * d2)


@kernel(error_model="numpy")
def _largest_scale(a, b, c):
    """For ``w(s) = w0 + s dw`` with ``a = |dw|²``, ``b = w0·dw``, ``c = |w0|² − limit²``:
    the largest ``s`` in [0, 1] with ``|w(s)| <= limit`` where ``|w0| <= limit``, else the
    ``s`` in [0, 1] nearest to meeting it (the minimiser of ``|w(s)|``); 1 where ``w``
    does not depend on ``s``."""
    if a <= 1e-300:
        return 1.0
    if c <= 0.0:  # the root of |w(s)|^2 = limit^2 beyond s = 0
        return min(1.0, (-b + math.sqrt(max(b * b - a * c, 0.0))) / a)
    return min(1.0, max(0.0, -b / a))


@kernel(error_model="numpy")
def _rate_limited_torque(rot0, i0inv, base_inertia, w0, dt, limit, t_des):
    """Scale the desired base torque ``t_des`` (task frame: the base feedback) by the
    largest factor in [0, 1] that keeps the base rate after the step within ``limit``
    (:func:`_next_base_rate` with the reaction met, ``M q̈ + n = t_des``), or, with the
    base already faster than ``limit``, by the factor that slows it most: the feedback
    brings the attitude back no faster than the base-rate bound allows."""
    h0 = base_inertia[0, 0] * w0[0] + base_inertia[0, 1] * w0[1] + base_inertia[0, 2] * w0[2]
    h1 = base_inertia[1, 0] * w0[0] + base_inertia[1, 1] * w0[1] + base_inertia[1, 2] * w0[2]
    h2 = base_inertia[2, 0] * w0[0] + base_inertia[2, 1] * w0[1] + base_inertia[2, 2] * w0[2]
    g0 = -(w0[1] * h2 - w0[2] * h1)
    g1 = -(w0[2] * h0 - w0[0] * h2)
    g2 = -(w0[0] * h1 - w0[1] * h0)
    t0 = rot0[0, 0] * t_des[0] + rot0[1, 0] * t_des[1] + rot0[2, 0] * t_des[2]
    t1 = rot0[0, 1] * t_des[0] + rot0[1, 1] * t_des[1] + rot0[2, 1] * t_des[2]
    t2 = rot0[0, 2] * t_des[0] + rot0[1, 2] * t_des[1] + rot0[2, 2] * t_des[2]
    a = 0.0
    b = 0.0
    c = -limit * limit
    for r in range(3):
        wf = w0[r] + dt * (i0inv[r, 0] * g0 + i0inv[r, 1] * g1 + i0inv[r, 2] * g2)  # no torque
        dw = dt * (i0inv[r, 0] * t0 + i0inv[r, 1] * t1 + i0inv[r, 2] * t2)  # the torque's part
        a += dw * dw
        b += wf * dw
        c += wf * wf
    f = _largest_scale(a, b, c)
    for r in range(3):
        t_des[r] *= f


@kernel(error_model="numpy")
def _bound_base_rate(arena, top, cache, jac, jdqd, mmat, nvec, xdd, t_des, q, qd, task_rows, reaction_rows, q_min,
                     q_max, qd_max, qdd_max, params, z_extra, rot0, i0inv, base_inertia, w0, w_next, limit, qdd, diag):
    """Keep the predicted base rate within ``limit`` by scaling the task (controller_step).

    ``qdd`` (the IK's solution for the task ``xdd``, whose predicted base rate
    ``w_next`` exceeds ``limit``) is replaced by ``q̈(s) = q̈₀ + s (q̈₁ − q̈₀)``, with
    ``q̈₁`` that solution and ``q̈₀`` the IK's solution for the task scaled to nothing
    (``ẍ = J̇q̇``, i.e. ``J q̈ = 0``: the same bounds, secondary term and desired base
    torque) with the reaction first at a reaction singularity
    (``SOLVER_LSE_REACTION_FIRST`` whatever the solver: there the reaction stays hard and
    what is left of the task gives way). Both lie within the joint bounds, so every blend does (the bounds are a
    box); the task rows get ``J q̈(s) = (1 − s) J q̈₀ + s J q̈₁`` (``s (ẍ − J̇q̇)`` where
    both meet their tasks) and the predicted rate ``w(s) = w₀ + s (w₁ − w₀)`` is affine
    in ``s``: the largest ``s`` in [0, 1] with ``|w(s)| <= limit`` is a root of a
    quadratic (:func:`_largest_scale`). Where even ``s = 0`` exceeds the limit (the joint
    bounds alone force a torque on the base), ``s`` minimises ``|w(s)|`` on [0, 1]
    instead and the bound is not met (the returned rate exceeds ``limit``); where ``q̈₀``
    is not finite, ``q̈₁`` is kept (``s = 1``). ``diag`` is refreshed for the blend
    (limited set when ``s < 1``; the residuals recomputed). Returns ``(s, |w(s)|)``.
    Scratch from ``arena[top:]``; the factorisations from the tick's ``cache`` (the same J and M)."""
    n = qdd.shape[0]
    q1, top = _empty(arena, top, (n,))
    x0, top = _empty(arena, top, (3,))
    w1, top = _empty(arena, top, (3,))
    for j in range(n):
        q1[j] = qdd[j]
    for r in range(3):
        x0[r] = jdqd[r]
        w1[r] = w_next[r]
    saved, top = _empty(arena, top, (8,))
    for k in range(8):
        saved[k] = diag[k]
    limited = diag[4]
    iterations = diag[6]
    sigma = diag[0]
    _solve_ik_in(arena, top, cache, jac, jdqd, mmat, nvec, x0, t_des, q, qd, task_rows, reaction_rows, q_min, q_max,
                 qd_max, qdd_max, params[P_DT], SOLVER_LSE_REACTION_FIRST, params[P_SIGMA_THRESHOLD],
                 params[P_DAMP_MAX], params[P_J_SIGMA_M], params[P_J_DAMP_M], params[P_K_NULL], params[P_K_LIMIT],
                 z_extra, qdd, diag)
    _next_base_rate(rot0, i0inv, base_inertia, w0, mmat, nvec, qdd, params[P_DT], w_next)  # w(0)
    finite = True
    for j in range(n):
        finite = finite and math.isfinite(qdd[j])
    if not finite:  # no quiet solution here: keep the IK's (the bound not met, reported)
        rate2 = 0.0
        for r in range(3):
            w_next[r] = w1[r]
            rate2 += w1[r] * w1[r]
        for j in range(n):
            qdd[j] = q1[j]
        for k in range(8):
            diag[k] = saved[k]
        return 1.0, math.sqrt(rate2)
    a = 0.0
    b = 0.0
    c = -limit * limit
    for r in range(3):
        dr = w1[r] - w_next[r]
        a += dr * dr
        b += w_next[r] * dr
        c += w_next[r] * w_next[r]
    s = _largest_scale(a, b, c)
    rate2 = 0.0
    for r in range(3):
        wr = w_next[r] + s * (w1[r] - w_next[r])
        w_next[r] = wr
        rate2 += wr * wr
    for j in range(n):
        qdd[j] = qdd[j] + s * (q1[j] - qdd[j])
    diag[0] = sigma
    diag[4] = 1.0 if s < 1.0 else limited
    diag[5] = _row_residual(jac, jdqd, xdd, task_rows, qdd, n)
    diag[6] = iterations + diag[6]
    diag[7] = _row_residual(mmat, nvec, t_des, reaction_rows, qdd, n)
    return s, math.sqrt(rate2)


@kernel(error_model="numpy")
def _closing_torque(arena, top, rot0, wm_b, w0, base_inertia, dt, t_des):
    """Add to ``t_des`` the base torque (task frame) that brings the model's base rate
    ``w0`` to the measured ``wm_b`` (both base frame) within one step ``dt``:
    ``R0 (I0 (wm_b − w0)/dt + w0 x I0 w0)``. Scratch from ``arena[top:]``."""
    d, top = _empty(arena, top, (3,))
    iw, top = _empty(arena, top, (3,))
    g, top = _empty(arena, top, (3,))
    for r in range(3):
        d[r] = (wm_b[r] - w0[r]) / dt
        iw[r] = base_inertia[r, 0] * w0[0] + base_inertia[r, 1] * w0[1] + base_inertia[r, 2] * w0[2]
    _cross(w0, iw, g)
    for r in range(3):
        g[r] += base_inertia[r, 0] * d[0] + base_inertia[r, 1] * d[1] + base_inertia[r, 2] * d[2]
    for r in range(3):
        t_des[r] += rot0[r, 0] * g[0] + rot0[r, 1] * g[1] + rot0[r, 2] * g[2]


@kernel(error_model="numpy")
def _ee_state_in(arena, top, q, qd, base_pos, rot0, base_v, base_w, joint_xyz, joint_rot, joint_axis, ee_offset, ee,
                 ee_v):
    """End effector from a measured state, task frame: ``ee = r0 + R0 r_e(q)``,
    ``ee_v = v0 + w0 x (R0 r_e) + R0 Je(q) qd`` (forward kinematics; no momentum
    assumption). Scratch from ``arena[top:]``."""
    n = q.shape[0]
    origins, top = _empty(arena, top, (n, 3))
    axes, top = _empty(arena, top, (n, 3))
    rots, top = _empty(arena, top, (n, 3, 3))
    re, top = _empty(arena, top, (3,))
    _forward_kinematics_in(arena, top, q, joint_xyz, joint_rot, joint_axis, ee_offset, origins, axes, rots, re)
    _ee_state_of(arena, top, origins, axes, re, qd, base_pos, rot0, base_v, base_w, ee, ee_v)


@kernel(error_model="numpy")
def _ee_state_of(arena, top, origins, axes, re, qd, base_pos, rot0, base_v, base_w, ee, ee_v):
    """:func:`_ee_state_in` from the forward kinematics at q: the joint ``origins`` and
    ``axes`` (n, 3) and the end effector ``re`` (3,), base frame. Scratch from ``arena[top:]``."""
    n = qd.shape[0]
    vb, top = _zeros(arena, top, (3,))
    tmp, top = _empty(arena, top, (3,))
    tmp2, top = _empty(arena, top, (3,))
    for j in range(n):
        for r in range(3):
            tmp[r] = re[r] - origins[j, r]
        _cross(axes[j], tmp, tmp2)
        for r in range(3):
            vb[r] += tmp2[r] * qd[j]
    rw, top = _empty(arena, top, (3,))
    for r in range(3):
        rw[r] = rot0[r, 0] * re[0] + rot0[r, 1] * re[1] + rot0[r, 2] * re[2]
        ee[r] = base_pos[r] + rw[r]
    _cross(base_w, rw, tmp)
    for r in range(3):
        ee_v[r] = base_v[r] + tmp[r] + rot0[r, 0] * vb[0] + rot0[r, 1] * vb[1] + rot0[r, 2] * vb[2]


@kernel(error_model="numpy")
def plant_readout(state, before, have_before, joint_xyz, joint_rot, joint_axis, ee_offset, base_inertia, dt, ee,
                  ee_v, attitude, torque, arena):
    """Plant read-outs from a measured state (actual base twist), task frame.

    ``ee = r0 + R0 r_e(q)``, ``ee_v = v0 + w0 x (R0 r_e) + R0 Je(q) qd``: forward
    kinematics of the measured state; no momentum assumption. Also the base attitude as
    a rotation vector and the base torque over the last step (:func:`base_torque`, zero
    when ``have_before`` is false).

    Args:
        state, before: (2n + 13,) plant state after and before the last step: q (n),
            qd (n), base position (3), quaternion xyzw (4), velocity (3), angular
            velocity (3), task frame.
        ee, ee_v, attitude, torque: out (3,).
        arena: (>= arena_size(n),) float64 work arena for the scratch arrays (see
            :func:`controller_step`).
    """
    n = (state.shape[0] - 13) // 2
    q = state[:n]
    qd = state[n:2 * n]
    base_pos = state[2 * n:2 * n + 3]
    base_quat = state[2 * n + 3:2 * n + 7]
    base_v = state[2 * n + 7:2 * n + 10]
    base_w = state[2 * n + 10:2 * n + 13]
    arena = _view(arena, 0, arena.shape)  # type: ignore[call-arg]  # untracked (caller holds it): no ref counting
    top = 0
    rot0, top = _empty(arena, top, (3, 3))
    quat_to_matrix(base_quat[0], base_quat[1], base_quat[2], base_quat[3], rot0)
    _ee_state_in(arena, top, q, qd, base_pos, rot0, base_v, base_w, joint_xyz, joint_rot, joint_axis, ee_offset, ee,
                 ee_v)
    quat_to_rotvec(base_quat, attitude)
    if have_before:
        _base_torque_in(arena, top, before[2 * n + 3:2 * n + 7], before[2 * n + 10:2 * n + 13], base_w, base_inertia,
                        dt, torque)
    else:
        for r in range(3):
            torque[r] = 0.0


@njit(cache=True, error_model="numpy")
def base_torque(quat_before, w_before, w_after, base_inertia, dt, out):
    """Torque on the base [N m], task frame, from its angular momentum over one step.

    ``T = I_w (w_after - w_before) / dt + w_before x I_w w_before`` with the base
    inertia ``I_w = R I0 R^T`` at the attitude before the step: the discrete rate of
    change of the base's angular momentum about its centre of mass, matching the
    semi-implicit step of the plant (velocities change at the pre-step configuration).
    """
    arena = np.empty(arena_size(0))
    _base_torque_in(arena, 0, quat_before, w_before, w_after, base_inertia, dt, out)


@kernel(error_model="numpy")
def _base_torque_in(arena, top, quat_before, w_before, w_after, base_inertia, dt, out):
    """:func:`base_torque` with its scratch from ``arena[top:]``."""
    rot, top = _empty(arena, top, (3, 3))
    quat_to_matrix(quat_before[0], quat_before[1], quat_before[2], quat_before[3], rot)
    iw, top = _empty(arena, top, (3, 3))
    for r in range(3):
        for c in range(3):
            acc = 0.0
            for k in range(3):
                for l in range(3):
                    acc += rot[r, k] * base_inertia[k, l] * rot[c, l]
            iw[r, c] = acc
    dw, top = _empty(arena, top, (3,))
    hw, top = _empty(arena, top, (3,))
    for r in range(3):
        dw[r] = (w_after[r] - w_before[r]) / dt
    for r in range(3):
        hw[r] = iw[r, 0] * w_before[0] + iw[r, 1] * w_before[1] + iw[r, 2] * w_before[2]
    gyro, top = _empty(arena, top, (3,))
    _cross(w_before, hw, gyro)
    for r in range(3):
        out[r] = iw[r, 0] * dw[0] + iw[r, 1] * dw[1] + iw[r, 2] * dw[2] + gyro[r]


@njit(cache=True, error_model="numpy")
def link_points(q, base_pos, base_quat, joint_xyz, joint_rot, joint_axis, ee_offset, out):
    """(n + 2, 3) drawing points, task frame: base centre, each joint origin, end effector."""
    arena = np.empty(arena_size(q.shape[0]))
    _link_points_in(arena, 0, q, base_pos, base_quat, joint_xyz, joint_rot, joint_axis, ee_offset, out)


@kernel(error_model="numpy")
def _link_points_in(arena, top, q, base_pos, base_quat, joint_xyz, joint_rot, joint_axis, ee_offset, out):
    """:func:`link_points` with its scratch from ``arena[top:]``."""
    n = q.shape[0]
    origins, top = _empty(arena, top, (n, 3))
    axes, top = _empty(arena, top, (n, 3))
    rots, top = _empty(arena, top, (n, 3, 3))
    re, top = _empty(arena, top, (3,))
    _forward_kinematics_in(arena, top, q, joint_xyz, joint_rot, joint_axis, ee_offset, origins, axes, rots, re)
    rot0, top = _empty(arena, top, (3, 3))
    quat_to_matrix(base_quat[0], base_quat[1], base_quat[2], base_quat[3], rot0)
    for r in range(3):
        out[0, r] = base_pos[r]
    for i in range(n + 1):
        for r in range(3):
            if i < n:
                p0, p1, p2 = origins[i, 0], origins[i, 1], origins[i, 2]
            else:
                p0, p1, p2 = re[0], re[1], re[2]
            out[i + 1, r] = base_pos[r] + rot0[r, 0] * p0 + rot0[r, 1] * p1 + rot0[r, 2] * p2


@kernel(error_model="numpy")
def plant_load(raw, before, joint_states, position, orientation, velocity, angular):
    """The plant state buffer of :func:`plant_readout` from PyBullet's own tuples, after a
    step: ``before`` takes what ``raw`` held (the state before the step, read just before
    it), then ``raw`` takes q and qd (``joint_states[j][0]``, ``[1]``, as
    ``getJointStates`` gives them), the base position [m], quaternion xyzw, velocity
    [m/s] and angular velocity [rad/s], task frame. Copies only: the same floats as
    ``PyBulletArm``'s list assignment."""
    n = len(joint_states)
    for i in range(raw.shape[0]):
        before[i] = raw[i]
    for j in range(n):
        raw[j] = joint_states[j][0]
        raw[n + j] = joint_states[j][1]
    at = 2 * n
    for i in range(3):
        raw[at + i] = position[i]
    for i in range(4):
        raw[at + 3 + i] = orientation[i]
    for i in range(3):
        raw[at + 7 + i] = velocity[i]
        raw[at + 10 + i] = angular[i]


# Layout of a debris' read-out buffer (robot.pybullet_debris.PyBulletDebris, float64):
# its centre of mass, velocity and angular velocity; the fixture's point, velocity and
# acceleration (with a lever arm); the fixture centre minus the end effector and the
# surface gap; then the constants: the lever arm in the body frame, whether there is
# one, the contact radius, whether a thrust acts (see debris_reading).
DB_CENTRE, DB_VELOCITY, DB_SPIN, DB_POINT, DB_POINT_V, DB_POINT_A, DB_OFFSET = 0, 3, 6, 9, 12, 15, 18
DB_GAP, DB_LEVER, DB_HAS_LEVER, DB_RADIUS, DB_THRUST = 21, 22, 25, 26, 27
# once the arm carries it (carried_reading): the body's pose in the tool link's frame,
# position [m] and quaternion xyzw
DB_IN_TOOL = 28
N_DEBRIS = 35


@kernel(error_model="numpy")
def debris_reading(buf, position, orientation, velocity, angular, ee, with_gap):
    """A debris' reading from its body's centre [m], attitude (quaternion xyzw), velocity
    [m/s] and spin [rad/s] (task frame; tuples as PyBullet gives them), into ``buf``
    (layout ``DB_*``): the fixture centre ``c + R(q) l``, its velocity ``v + ω × r`` and
    its centripetal acceleration ``ω × (ω × r)`` with a lever arm ``l`` (else the
    centre's own: the reading's arrays are then views of the centre's; a thrusted body's
    acceleration is zeroed, its thrust adds to it); with ``with_gap``, the fixture centre
    minus the end effector ``ee`` and the surface gap ``|offset| - contact radius``
    [m], which it returns (else NaN). The floats of ``PyBulletDebris``' arithmetic as it
    was in Python, operation for operation (no fused multiply-adds)."""
    for i in range(3):
        buf[DB_CENTRE + i] = position[i]
        buf[DB_VELOCITY + i] = velocity[i]
        buf[DB_SPIN + i] = angular[i]
    point = DB_CENTRE
    if buf[DB_HAS_LEVER] != 0.0:
        x, y, z, q = orientation[0], orientation[1], orientation[2], orientation[3]
        lx, ly, lz = buf[DB_LEVER], buf[DB_LEVER + 1], buf[DB_LEVER + 2]
        # the lever in the task frame: R(q) l, then ω × r and ω × (ω × r)
        rx = (1.0 - 2.0 * (y * y + z * z)) * lx + 2.0 * (x * y - z * q) * ly + 2.0 * (x * z + y * q) * lz
        ry = 2.0 * (x * y + z * q) * lx + (1.0 - 2.0 * (x * x + z * z)) * ly + 2.0 * (y * z - x * q) * lz
        rz = 2.0 * (x * z - y * q) * lx + 2.0 * (y * z + x * q) * ly + (1.0 - 2.0 * (x * x + y * y)) * lz
        wx, wy, wz = angular[0], angular[1], angular[2]
        ux, uy, uz = wy * rz - wz * ry, wz * rx - wx * rz, wx * ry - wy * rx
        buf[DB_POINT] = position[0] + rx
        buf[DB_POINT + 1] = position[1] + ry
        buf[DB_POINT + 2] = position[2] + rz
        buf[DB_POINT_V] = velocity[0] + ux
        buf[DB_POINT_V + 1] = velocity[1] + uy
        buf[DB_POINT_V + 2] = velocity[2] + uz
        buf[DB_POINT_A] = wy * uz - wz * uy
        buf[DB_POINT_A + 1] = wz * ux - wx * uz
        buf[DB_POINT_A + 2] = wx * uy - wy * ux
        point = DB_POINT
    elif buf[DB_THRUST] != 0.0:
        for i in range(3):
            buf[DB_POINT_A + i] = 0.0
    if not with_gap:
        return math.nan
    dx = buf[point] - ee[0]
    dy = buf[point + 1] - ee[1]
    dz = buf[point + 2] - ee[2]
    buf[DB_OFFSET] = dx
    buf[DB_OFFSET + 1] = dy
    buf[DB_OFFSET + 2] = dz
    gap = math.sqrt(dx * dx + dy * dy + dz * dz) - buf[DB_RADIUS]
    buf[DB_GAP] = gap
    return gap


@kernel(error_model="numpy")
def matrix_to_quat(rot, out):
    """Unit quaternion (x, y, z, w) of a rotation matrix (Shepperd's method: the largest
    of the four diagonal combinations under the square root, so no cancellation)."""
    trace = rot[0, 0] + rot[1, 1] + rot[2, 2]
    if trace >= rot[0, 0] and trace >= rot[1, 1] and trace >= rot[2, 2]:
        s = 2.0 * math.sqrt(1.0 + trace)
        out[3] = 0.25 * s
        out[0] = (rot[2, 1] - rot[1, 2]) / s
        out[1] = (rot[0, 2] - rot[2, 0]) / s
        out[2] = (rot[1, 0] - rot[0, 1]) / s
    elif rot[0, 0] >= rot[1, 1] and rot[0, 0] >= rot[2, 2]:
        s = 2.0 * math.sqrt(1.0 + rot[0, 0] - rot[1, 1] - rot[2, 2])
        out[3] = (rot[2, 1] - rot[1, 2]) / s
        out[0] = 0.25 * s
        out[1] = (rot[0, 1] + rot[1, 0]) / s
        out[2] = (rot[0, 2] + rot[2, 0]) / s
    elif rot[1, 1] >= rot[2, 2]:
        s = 2.0 * math.sqrt(1.0 + rot[1, 1] - rot[0, 0] - rot[2, 2])
        out[3] = (rot[0, 2] - rot[2, 0]) / s
        out[0] = (rot[0, 1] + rot[1, 0]) / s
        out[1] = 0.25 * s
        out[2] = (rot[1, 2] + rot[2, 1]) / s
    else:
        s = 2.0 * math.sqrt(1.0 + rot[2, 2] - rot[0, 0] - rot[1, 1])
        out[3] = (rot[1, 0] - rot[0, 1]) / s
        out[0] = (rot[0, 2] + rot[2, 0]) / s
        out[1] = (rot[1, 2] + rot[2, 1]) / s
        out[2] = 0.25 * s


@kernel(error_model="numpy")
def carried_reading(buf, state, joint_xyz, joint_rot, joint_axis, ee_offset, ee, with_gap, arena):
    """:func:`debris_reading` of a debris the arm carries (merged into its last link),
    from the arm's measured state (``state``, :func:`plant_readout`'s layout) instead of
    PyBullet's link query: the body sits at ``buf[DB_IN_TOOL:]`` (position [m],
    quaternion xyzw) in the last link's frame, so, task frame, with the base at
    ``r0, R0`` and the last joint's frame at ``o_n, R_n`` (base frame, forward
    kinematics at q):

    ``c = r0 + R0 r``, ``r = o_n + R_n t``; ``R = R0 R_n R_t``;
    ``v = v0 + w0 x (R0 r) + R0 sum_j (a_j x (r - o_j)) qd_j`` (the end effector's
    velocity, :func:`_ee_state_of`, at the body's centre); ``w = w0 + R0 sum_j a_j qd_j``.

    The same rigid motion PyBullet's ``getLinkState`` gives (it agrees to round-off),
    without its call. Scratch from ``arena``. Returns the gap as
    :func:`debris_reading` does."""
    n = (state.shape[0] - 13) // 2
    qd = state[n:2 * n]
    base_pos = state[2 * n:2 * n + 3]
    base_quat = state[2 * n + 3:2 * n + 7]
    base_v = state[2 * n + 7:2 * n + 10]
    base_w = state[2 * n + 10:2 * n + 13]
    arena = _view(arena, 0, arena.shape)  # type: ignore[call-arg]  # untracked (caller holds it)
    top = 0
    origins, top = _empty(arena, top, (n, 3))
    axes, top = _empty(arena, top, (n, 3))
    rots, top = _empty(arena, top, (n, 3, 3))
    tip, top = _empty(arena, top, (3,))
    _forward_kinematics_in(arena, top, state[:n], joint_xyz, joint_rot, joint_axis, ee_offset, origins, axes, rots,
                           tip)
    rot0, top = _empty(arena, top, (3, 3))
    quat_to_matrix(base_quat[0], base_quat[1], base_quat[2], base_quat[3], rot0)
    rot_t, top = _empty(arena, top, (3, 3))
    at = DB_IN_TOOL
    quat_to_matrix(buf[at + 3], buf[at + 4], buf[at + 5], buf[at + 6], rot_t)
    last = n - 1
    r, top = _empty(arena, top, (3,))
    for i in range(3):
        r[i] = (origins[last, i] + rots[last, i, 0] * buf[at] + rots[last, i, 1] * buf[at + 1]
                + rots[last, i, 2] * buf[at + 2])
    centre, top = _empty(arena, top, (3,))
    velocity, top = _empty(arena, top, (3,))
    _ee_state_of(arena, top, origins, axes, r, qd, base_pos, rot0, base_v, base_w, centre, velocity)
    spin_b, top = _zeros(arena, top, (3,))
    for j in range(n):
        for i in range(3):
            spin_b[i] += axes[j, i] * qd[j]
    spin, top = _empty(arena, top, (3,))
    for i in range(3):
        spin[i] = base_w[i] + rot0[i, 0] * spin_b[0] + rot0[i, 1] * spin_b[1] + rot0[i, 2] * spin_b[2]
    link, top = _empty(arena, top, (3, 3))
    rot, top = _empty(arena, top, (3, 3))
    for i in range(3):
        for k in range(3):
            link[i, k] = rot0[i, 0] * rots[last, 0, k] + rot0[i, 1] * rots[last, 1, k] + rot0[i, 2] * rots[last, 2, k]
    for i in range(3):
        for k in range(3):
            rot[i, k] = link[i, 0] * rot_t[0, k] + link[i, 1] * rot_t[1, k] + link[i, 2] * rot_t[2, k]
    quat, top = _empty(arena, top, (4,))
    matrix_to_quat(rot, quat)
    return debris_reading(buf, centre, quat, velocity, spin, ee, with_gap)
