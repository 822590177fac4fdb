"""Compiled per-tick kernels (numba, ``cache=True``) of the guidance laws and the force framing.

Each kernel performs the same floating-point operations, in the same order, as the
documented Python form in its law's module, and writes into caller-owned arrays (no
allocation). Frames and units as in the calling law (task frame, SI).
"""

from __future__ import annotations

import math

from capture_trainer.compiled import kernel

#: ``CapturePath`` damping kinds (kernel codes).
UNDER, CRITICAL, OVER = 0, 1, 2


@kernel
def capture_basis(kind, alpha, w, k_p, tau_s):  # type: ignore[no-untyped-def]
    """``(φ1, φ2, φ1', φ2')`` of ``ε̈ + k_d ε̇ + k_p ε = 0`` at ``tau_s`` (``CapturePath.basis``)."""
    tau = tau_s
    if tau < 0.0:
        tau = 0.0
    a = alpha
    if kind == UNDER:
        decay = math.exp(-a * tau)
        cos_wt = math.cos(w * tau)
        sin_wt = math.sin(w * tau)
        return (
            decay * (cos_wt + a / w * sin_wt),
            decay * sin_wt / w,
            -decay * k_p / w * sin_wt,
            decay * (cos_wt - a / w * sin_wt),
        )
    if kind == CRITICAL:
        decay = math.exp(-a * tau)
        return (decay * (1.0 + a * tau), tau * decay, -a * a * tau * decay, decay * (1.0 - a * tau))
    r1 = -a + w
    r2 = -a - w
    e1 = math.exp(r1 * tau)
    e2 = math.exp(r2 * tau)
    span = r1 - r2
    return (
        (r1 * e2 - r2 * e1) / span,
        (e1 - e2) / span,
        r1 * r2 * (e2 - e1) / span,
        (r1 * e1 - r2 * e2) / span,
    )


@kernel
def dynamic_guidance_force(  # type: ignore[no-untyped-def]
    kind, alpha, w, k_p, k_d, m, c, tau_s, e0, de0, xt, vt, at, xe, ve, out
):
    """Eq. 11 along the capture path (``DynamicGuidance._evaluate``); returns the
    distance [m] from the end effector to the path and writes the force [N] into ``out``."""
    phi1, phi2, dphi1, dphi2 = capture_basis(kind, alpha, w, k_p, tau_s)
    kp_gain = m * k_p
    kd_gain = m * k_d + c
    deviation_sq = 0.0
    for i in range(3):
        eps = phi1 * e0[i] + phi2 * de0[i]
        deps = dphi1 * e0[i] + dphi2 * de0[i]
        p = xt[i] + eps
        v = vt[i] + deps
        a = at[i] - k_p * eps - k_d * deps
        pos_err = p - xe[i]
        deviation_sq += pos_err * pos_err
        out[i] = kp_gain * pos_err + kd_gain * (v - ve[i]) + m * a + c * v
    return math.sqrt(deviation_sq)


@kernel
def frame_force(sr, force, out):  # type: ignore[no-untyped-def]
    """``ForceRenderer.render``: ``out = sr @ force`` with ``sr = force_scale R_dev<-task``.

    Args:
        sr: (3, 3) scaled rotation, task to device frame.
        force: (3,) task-frame force on the hand [N].
        out: (3,) written with the device-frame force [N] (not limited: NaN stays NaN).
    """
    fx = force[0]
    fy = force[1]
    fz = force[2]
    out[0] = sr[0, 0] * fx + sr[0, 1] * fy + sr[0, 2] * fz
    out[1] = sr[1, 0] * fx + sr[1, 1] * fy + sr[1, 2] * fz
    out[2] = sr[2, 0] * fx + sr[2, 1] * fy + sr[2, 2] * fz


@kernel
def takeover(out, hand, deviation_m, max_deviation_m, takeover_force_n, hold_s, since, t_s):  # type: ignore[no-untyped-def]
    """``DynamicGuidance``'s take-over test against the guidance force in ``out``.

    The person takes charge when the end effector is farther than ``max_deviation_m``
    from the path (``0`` disables it), or when the part of the hand's force ``hand`` that
    does not help the guidance (all of it minus its positive component along ``out``)
    exceeds ``takeover_force_n`` for ``hold_s``. ``since[0]``: when that started [s]
    (NaN: not now), updated in place.
    """
    if max_deviation_m > 0.0 and deviation_m > max_deviation_m:
        return True
    gx = out[0]
    gy = out[1]
    gz = out[2]
    hx = hand[0]
    hy = hand[1]
    hz = hand[2]
    gnorm = math.sqrt(gx * gx + gy * gy + gz * gz)
    if gnorm > 1e-9:
        q = (hx * gx + hy * gy + hz * gz) / gnorm
        helping = q if q > 0.0 else 0.0
        hx -= helping * gx / gnorm
        hy -= helping * gy / gnorm
        hz -= helping * gz / gnorm
    if math.sqrt(hx * hx + hy * hy + hz * hz) <= takeover_force_n:
        since[0] = math.nan
        return False
    if since[0] != since[0]:
        since[0] = t_s
    return t_s - since[0] >= hold_s


@kernel
def dynamic_guidance_step(  # type: ignore[no-untyped-def]
    kind, alpha, w, gains, tau_s, e0, de0, xt, vt, at, xe, ve, hand, since, t_s, test, out
):
    """One tick of ``DynamicGuidance.force`` on the current path: the force (eq. 11) into
    ``out`` and, when ``test`` (the re-plan interval has passed), the take-over test.

    ``gains``: ``[k_p, k_d, m, c, max_path_deviation_m, takeover_force_n, takeover_hold_s]``.
    Returns True when the path must be re-planned.
    """
    deviation = dynamic_guidance_force(
        kind, alpha, w, gains[0], gains[1], gains[2], gains[3], tau_s, e0, de0, xt, vt, at, xe, ve, out
    )
    if not test:
        return False
    return takeover(out, hand, deviation, gains[4], gains[5], gains[6], since, t_s)


@kernel
def one_sided_wall(depth, outward_speed, stiffness, damping):  # type: ignore[no-untyped-def]
    """Magnitude of a one-sided wall's push back [N] for a penetration ``depth`` > 0 [m].

    ``outward_speed`` [m/s] only adds damping when moving further in the forbidden region.
    """
    return stiffness * depth + damping * (outward_speed if not 0.0 > outward_speed else 0.0)


@kernel
def workspace_walls(lower, upper, back, stiffness, damping, pos, vel, out):  # type: ignore[no-untyped-def]
    """``WorkspaceWalls.force``: one-sided spring-dampers at the box walls (device frame),
    mapped back to the task frame by ``back`` (3, 3); written into ``out``."""
    f0 = 0.0
    f1 = 0.0
    f2 = 0.0
    for i in range(3):
        p = pos[i]
        f = 0.0
        if p > upper[i]:
            f = -one_sided_wall(p - upper[i], vel[i], stiffness, damping)
        elif p < lower[i]:
            f = one_sided_wall(lower[i] - p, -vel[i], stiffness, damping)
        if i == 0:
            f0 = f
        elif i == 1:
            f1 = f
        else:
            f2 = f
    for i in range(3):
        out[i] = back[i, 0] * f0 + back[i, 1] * f1 + back[i, 2] * f2



# Python's ``x ** 2`` calls C ``pow``, which differs from ``x * x`` in the last bit now and
# then; the fixtures below take the exponent ``two`` (= 2.0) as an argument so that the
# compiler cannot turn the ``pow`` call into a multiplication: bit-identical to Python.


@kernel
def reach_limit(wall_m, stiffness, damping, xe, base, ve, two, out):  # type: ignore[no-untyped-def]
    """``ReachLimit.force``: inward push beyond the sphere of radius ``wall_m`` about
    ``base`` (task frame), written into ``out``; ``two`` = 2.0 (see above)."""
    dx = xe[0] - base[0]
    dy = xe[1] - base[1]
    dz = xe[2] - base[2]
    r = math.sqrt(dx ** two + dy ** two + dz ** two)
    depth = r - wall_m
    if depth <= 0.0:
        out[0] = 0.0
        out[1] = 0.0
        out[2] = 0.0
        return
    outward = (ve[0] * dx + ve[1] * dy + ve[2] * dz) / r
    magnitude = one_sided_wall(depth, outward, stiffness, damping)
    out[0] = -magnitude * dx / r
    out[1] = -magnitude * dy / r
    out[2] = -magnitude * dz / r


@kernel
def joint_limit_proximity(lower_wall, upper_wall, stiffness, q, jacobian_pinv, two, out):  # type: ignore[no-untyped-def]
    """``JointLimitProximity.force``: each joint inside its margin pushes the end effector
    along the normalised row of ``jacobian_pinv`` that moves it away; the sum into
    ``out``; ``two`` = 2.0 (see above)."""
    fx = 0.0
    fy = 0.0
    fz = 0.0
    for i in range(q.shape[0]):
        qi = q[i]
        depth_up = qi - upper_wall[i]
        depth_down = lower_wall[i] - qi
        if depth_up > 0.0:
            depth = depth_up
            sign = -1.0
        elif depth_down > 0.0:
            depth = depth_down
            sign = 1.0
        else:
            continue
        r0 = jacobian_pinv[i, 0]
        r1 = jacobian_pinv[i, 1]
        r2 = jacobian_pinv[i, 2]
        norm = math.sqrt(r0 ** two + r1 ** two + r2 ** two)
        if norm < 1e-12:
            continue
        gain = sign * stiffness * depth / norm
        fx += gain * r0
        fy += gain * r1
        fz += gain * r2
    out[0] = fx
    out[1] = fy
    out[2] = fz


@kernel
def potential_field(k_n_m, saturation_m, xe, xt, out):  # type: ignore[no-untyped-def]
    """``PotentialField.force`` without obstacles: ``k (x_t − x_e)``, its magnitude capped
    at ``k d_sat`` beyond ``saturation_m`` (NaN: no cap), into ``out`` [N], task frame."""
    dx = xt[0] - xe[0]
    dy = xt[1] - xe[1]
    dz = xt[2] - xe[2]
    gain = k_n_m
    if saturation_m == saturation_m:
        d = math.sqrt(dx * dx + dy * dy + dz * dz)
        if d > saturation_m:
            gain *= saturation_m / d
    out[0] = gain * dx
    out[1] = gain * dy
    out[2] = gain * dz


@kernel
def reaction_boundary(stiffness, margin, threshold, sigma, xe, x_cmd, out):  # type: ignore[no-untyped-def]
    """``ReactionBoundary.force``: ``−k w (x_cmd − x_e)`` with the weight ``w`` of the
    gauge ``sigma`` (``ReactionBoundary.weight``), into ``out`` [N], task frame."""
    if sigma >= margin:
        w = 0.0
    elif sigma <= threshold:
        w = 1.0
    else:
        w = (margin - sigma) / (margin - threshold)
    if w == 0.0:
        out[0] = 0.0
        out[1] = 0.0
        out[2] = 0.0
        return
    gain = stiffness * w
    for i in range(3):
        out[i] = (xe[i] - x_cmd[i]) * gain
