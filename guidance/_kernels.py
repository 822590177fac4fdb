"""Compiled per-tick kernels (numba, ``cache=True``) of the guidance laws.

Each kernel performs the same floating-point operations, in the same order, as the
documented Python form in its law's module, and writes into caller-owned arrays (no
allocation). Frames and units as in the calling law (task frame, SI).
"""

from __future__ import annotations

import math

from numba import njit

#: Smallest positive normal double (``sys.float_info.min``).
SMALLEST_NORMAL = 2.2250738585072014e-308

#: ``CapturePath`` damping kinds (kernel codes).
UNDER, CRITICAL, OVER = 0, 1, 2


@njit(cache=True)
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


@njit(cache=True)
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


_T27 = 134217729.0  # 2**27 + 1: Veltkamp split of a double into two 26-bit halves


@njit(cache=True)
def hypot3(x, y, z):  # type: ignore[no-untyped-def]
    """``math.hypot(x, y, z)`` to the last bit: CPython's ``vector_norm`` (3.8+).

    The largest magnitude scales the components to [0.5, 1); the squares are summed
    with error-free transforms and the root gets one Newton correction, so the result
    is within one ulp of the true norm and never overflows or underflows on the way.
    """
    ax = abs(x)
    ay = abs(y)
    az = abs(z)
    mx = 0.0
    found_nan = False
    for v in (ax, ay, az):
        found_nan |= v != v
        if v > mx:
            mx = v
    if math.isinf(mx):
        return mx
    if found_nan:
        return math.nan
    if mx == 0.0:
        return mx
    max_e = math.frexp(mx)[1]
    csum = 1.0
    frac1 = 0.0
    frac2 = 0.0
    frac3 = 0.0
    if max_e < -1023:  # subnormal scale: divide by the largest instead (CPython's fallback)
        for v in (ax, ay, az):
            x = v / mx
            x = x * x
            oldcsum = csum
            csum += x
            frac1 += (oldcsum - csum) + x
        return mx * math.sqrt(csum - 1.0 + frac1)
    scale = math.ldexp(1.0, -max_e)
    for v in (ax, ay, az):
        x = v * scale
        t = x * _T27
        hi = t - (t - x)
        lo = x - hi
        x = hi * hi
        oldcsum = csum
        csum += x
        frac1 += (oldcsum - csum) + x
        x = 2.0 * hi * lo
        oldcsum = csum
        csum += x
        frac2 += (oldcsum - csum) + x
        frac3 += lo * lo
    h = math.sqrt(csum - 1.0 + (frac1 + frac2 + frac3))
    x = h
    t = x * _T27
    hi = t - (t - x)
    lo = x - hi
    x = -hi * hi
    oldcsum = csum
    csum += x
    frac1 += (oldcsum - csum) + x
    x = -2.0 * hi * lo
    oldcsum = csum
    csum += x
    frac2 += (oldcsum - csum) + x
    x = -lo * lo
    oldcsum = csum
    csum += x
    frac3 += (oldcsum - csum) + x
    x = csum - 1.0 + (frac1 + frac2 + frac3)
    return (h + x / (2.0 * h)) / scale


@njit(cache=True)
def clamp_norm3(x, y, z, limit):  # type: ignore[no-untyped-def]
    """``guidance.rendering.clamp_norm3`` compiled (the same operations)."""
    norm = hypot3(x, y, z)
    if norm <= limit:
        return x, y, z, False
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        return 0.0, 0.0, 0.0, True
    k = limit / norm
    if k < SMALLEST_NORMAL:
        return x / norm * limit, y / norm * limit, z / norm * limit, True
    return x * k, y * k, z * k, True


@njit(cache=True)
def _clip(x, limit):  # type: ignore[no-untyped-def]
    """Python's ``min(max(x, -limit), limit)`` (same tie and signed-zero choices)."""
    if -limit > x:
        x = -limit
    if limit < x:
        x = limit
    return x


@njit(cache=True)
def render_force(sr, force, state, calc, act, max_force, norm_mode, rate, dt_s):  # type: ignore[no-untyped-def]
    """``ForceRenderer.render`` (see there): map, ramp, saturate, rate-limit.

    Args:
        sr: (3, 3) ``force_scale R`` (task to device frame).
        force: (3,) task-frame force [N].
        state: (2,) ``[on_time_s, ramp_time_s]``; ``on_time_s`` advanced in place.
        calc, act: (3,) calculated and actuated device forces [N], written in place
            (``act`` also holds the previous output for the rate limit).
        max_force: saturation limit [N]; norm_mode: True = norm, False = per axis.
        rate: largest rate of change of ``act`` [N/s] (negative: no rate limit).
        dt_s: period [s].

    Returns:
        0 ok, 1 saturated (or rate-limited), 2 fault (non-finite input); the ramp gain.
    """
    fx = force[0]
    fy = force[1]
    fz = force[2]
    cx = sr[0, 0] * fx + sr[0, 1] * fy + sr[0, 2] * fz
    cy = sr[1, 0] * fx + sr[1, 1] * fy + sr[1, 2] * fz
    cz = sr[2, 0] * fx + sr[2, 1] * fy + sr[2, 2] * fz
    if not (math.isfinite(cx) and math.isfinite(cy) and math.isfinite(cz) and math.isfinite(dt_s)):
        for i in range(3):
            calc[i] = 0.0
            act[i] = 0.0
        return 2, 0.0
    calc[0] = cx
    calc[1] = cy
    calc[2] = cz
    dt = 0.0 if 0.0 > dt_s else dt_s
    ramp = state[1]
    if ramp > 0.0:
        gain = state[0] / ramp
        if not gain < 1.0:
            gain = 1.0
        state[0] += dt
    else:
        gain = 1.0
    x = gain * cx
    y = gain * cy
    z = gain * cz
    if norm_mode:
        x, y, z, saturated = clamp_norm3(x, y, z, max_force)
    else:
        if x != x or y != y or z != z:
            x = y = z = 0.0
            saturated = True
        else:
            ox = x
            oy = y
            oz = z
            x = _clip(x, max_force)
            y = _clip(y, max_force)
            z = _clip(z, max_force)
            saturated = x != ox or y != oy or z != oz
    if rate >= 0.0:
        max_step = rate * dt
        px = act[0]
        py = act[1]
        pz = act[2]
        dx = x - px
        dy = y - py
        dz = z - pz
        step = math.sqrt(dx * dx + dy * dy + dz * dz)
        if not step <= max_step:
            k = max_step / step
            x = px + dx * k
            y = py + dy * k
            z = pz + dz * k
            saturated = True
    act[0] = x
    act[1] = y
    act[2] = z
    return (1 if saturated else 0), gain


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def one_sided_wall(depth, outward_speed, stiffness, damping):  # type: ignore[no-untyped-def]
    """Magnitude of a one-sided wall's push back [N] for a penetration ``depth`` > 0 [m].

    ``outward_speed`` [m/s] only adds damping when moving further in the forbidden region.
    """
    return stiffness * depth + damping * (outward_speed if not 0.0 > outward_speed else 0.0)


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
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
