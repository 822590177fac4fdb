"""Compiled per-tick kernels (numba, ``cache=True``) of the simulated participant and device.

The Python classes (:mod:`haptics.operators`, :mod:`haptics.simulated`) own the state in
small preallocated float64 arrays and call one kernel per servo tick; the kernels write
into those arrays and allocate nothing. Each kernel performs the same floating-point
operations, in the same order, as the plain-Python form documented in its class, so the
results are identical to the last bit (``math`` functions map to the same libm calls).

Layouts (indices into the arrays the classes own):

* operator scalar state ``s``: ``S_*``;
* operator parameters ``p`` (from ``ParticipantParams``): ``P_*``;
* operator vectors ``vec`` (rows of 3, device frame): ``V_*``;
* quintic plan coefficients ``coef`` (3, 6): axis k, ``c_0 .. c_5``;
* the Gaussian draw buffer ``noise`` (flat), read at ``s[S_NOISE_I]``.
"""

from __future__ import annotations

import math

from capture_trainer.compiled import kernel

# Operator scalar state.
S_LAST_T, S_PLAN_T0, S_PLAN_T, S_GRIP, S_ACTIVE_N, S_GUIDED, S_COMPLIANCE = range(7)
S_K, S_B, S_M, S_NOISE_I, S_COCON, S_EVENT_T = range(7, 13)
N_STATE = 13

# Operator parameters used per tick.
P_YIELD_FORCE, P_DISAGREE, P_YIELD_TAU, P_RELAXED_GRIP, P_RESIST_GAIN = range(5)
P_NOISE_TAU, P_NOISE_CONST, P_NOISE_GAIN, P_TOOL_MASS, P_HAS_INTENT = range(5, 10)
P_CC_RATE, P_CC_DECAY, P_CC_DELTA, P_CC_MAX = range(10, 14)
P_EVENT_DEV, P_EVENT_LATENCY, P_EVENT_REFRACTORY = range(14, 17)
N_PARAMS = 17

# Operator vectors.
V_X_HAND, V_X_EQ, V_WANT, V_NOISE, V_YIELD_X, V_YIELD_V, V_GOAL_X, V_GOAL_V = range(8)
N_VECTORS = 8


@kernel
def plan_state(s, vec, coef, t_s, k):  # type: ignore[no-untyped-def]
    """Planned position [m], velocity [m/s], acceleration [m/s²] of axis ``k`` at ``t_s``."""
    tau = t_s - s[S_PLAN_T0]
    big_t = s[S_PLAN_T]
    if tau >= big_t:
        v = vec[V_GOAL_V, k]
        return vec[V_GOAL_X, k] + v * (tau - big_t), v, 0.0
    if tau < 0.0:
        tau = 0.0
    c0 = coef[k, 0]
    c1 = coef[k, 1]
    c2 = coef[k, 2]
    c3 = coef[k, 3]
    c4 = coef[k, 4]
    c5 = coef[k, 5]
    x = c0 + tau * (c1 + tau * (c2 + tau * (c3 + tau * (c4 + tau * c5))))
    v = c1 + tau * (2.0 * c2 + tau * (3.0 * c3 + tau * (4.0 * c4 + tau * 5.0 * c5)))
    a = 2.0 * c2 + tau * (6.0 * c3 + tau * (12.0 * c4 + tau * 20.0 * c5))
    return x, v, a


@kernel
def operator_drive(s, p, vec, coef, noise, t_s, x, v, f, out):  # type: ignore[no-untyped-def]
    """One period of ``HumanOperator.drive`` after any re-planning (see that method).

    Args:
        s, p, vec, coef, noise: the operator's arrays (module docstring); ``s`` and
            ``vec`` are updated. At least 3 draws must remain in ``noise``.
        t_s: time [s].
        x, v: (3,) stylus (= hand) position [m] and velocity [m/s], device frame.
        f: (3,) force the device applies to the stylus [N].
        out: (3,) written with the drive force [N].
    """
    dt = t_s - s[S_LAST_T]
    if dt < 0.0:
        dt = 0.0
    s[S_LAST_T] = t_s
    f0 = f[0]
    f1 = f[1]
    f2 = f[2]
    felt = math.sqrt(f0 * f0 + f1 * f1 + f2 * f2)
    w0 = vec[V_WANT, 0]
    w1 = vec[V_WANT, 1]
    w2 = vec[V_WANT, 2]
    want = math.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
    if felt > 1e-9 and want > 1e-9:
        cos = (f0 * w0 + f1 * w1 + f2 * w2) / (felt * want)
    else:
        cos = 0.0
    yield_force = p[P_YIELD_FORCE]
    if felt >= yield_force:
        s[S_GUIDED] = 1.0
    guided = s[S_GUIDED] != 0.0
    compliance = s[S_COMPLIANCE]
    disagree = p[P_DISAGREE]
    yield_tau = p[P_YIELD_TAU]
    drive = compliance * (1.0 - disagree * (0.5 - 0.5 * cos)) if guided else 0.0
    rate = drive * dt / yield_tau
    if rate > 1.0:
        rate = 1.0
    reassert = (compliance - drive) * dt / yield_tau if guided else 0.0
    if reassert > 1.0:
        reassert = 1.0
    grip_target = 1.0 - drive * (1.0 - p[P_RELAXED_GRIP])
    if guided:
        ratio = felt / yield_force
        against = (0.5 - 0.5 * cos) * (ratio if ratio < 1.0 else 1.0)
        grip_target += disagree * against * (p[P_RESIST_GAIN] - 1.0)
    a_grip = dt / yield_tau
    if a_grip > 1.0:
        a_grip = 1.0
    grip = s[S_GRIP] + a_grip * (grip_target - s[S_GRIP])
    s[S_GRIP] = grip
    # Co-contraction adds to the grip: the active impedance is scaled by g = grip + c.
    cocon = s[S_COCON]
    g = grip + cocon
    slack = g - 1.0
    ff = g if g < 1.0 else 1.0
    alpha = dt / p[P_NOISE_TAU]
    if alpha > 1.0:
        alpha = 1.0
    sd = p[P_NOISE_CONST] + p[P_NOISE_GAIN] * s[S_ACTIVE_N]
    kick = sd * math.sqrt(2.0 * alpha)
    k_h = s[S_K]
    b_h = s[S_B]
    m_ff = s[S_M] + p[P_TOOL_MASS]
    has_intent = p[P_HAS_INTENT] != 0.0
    noise_i = int(s[S_NOISE_I])
    active2 = 0.0
    delta = p[P_CC_DELTA]
    eps2 = 0.0
    dev2 = 0.0
    for k in range(3):
        xk = x[k]
        vk = v[k]
        if has_intent:
            xp, vp, ap = plan_state(s, vec, coef, t_s, k)
            yx = vec[V_YIELD_X, k]
            yv = vec[V_YIELD_V, k]
            yx += rate * ((xk - xp) - yx) - reassert * yx
            yv += rate * ((vk - vp) - yv) - reassert * yv
            vec[V_YIELD_X, k] = yx
            vec[V_YIELD_V, k] = yv
            x_eq = xp + yx
            v_eq = vp + yv
            dev2 += (xk - xp) * (xk - xp)
        else:
            x_eq = xk
            v_eq = 0.0
            vp = 0.0
            ap = 0.0
        vec[V_X_EQ, k] = x_eq
        vec[V_X_HAND, k] = xk
        n = vec[V_NOISE, k]
        n += alpha * -n + kick * noise[noise_i]
        noise_i += 1
        vec[V_NOISE, k] = n
        active = k_h * (x_eq - xk) + b_h * (v_eq - vk)
        if has_intent:
            vec[V_WANT, k] = m_ff * ap + b_h * (vp - vk)
        err = (xk - x_eq) + delta * (vk - v_eq)
        eps2 += err * err
        active2 += g * g * active * active
        out[k] = k_h * x_eq + b_h * v_eq + slack * active + n + ff * m_ff * ap
    s[S_NOISE_I] = noise_i
    s[S_ACTIVE_N] = math.sqrt(active2)
    # V-shaped adaptation of co-contraction (Franklin et al. 2008), in time: it rises
    # with the error's magnitude |ε|, ε = e + δ ė against the intended trajectory, and
    # falls at a constant rate without error; 0 <= c <= c_max.
    # Event-triggered intermittent control (Gawthrop et al. 2011): a hand pushed off its
    # plan by more than the threshold is felt (proprioception) and corrected by a new
    # submovement once the correction latency has passed, no sooner than the refractory
    # interval after the current submovement's start.
    if has_intent and s[S_EVENT_T] == math.inf and dev2 > p[P_EVENT_DEV] * p[P_EVENT_DEV]:
        due = t_s + p[P_EVENT_LATENCY]
        earliest = s[S_PLAN_T0] + p[P_EVENT_REFRACTORY]
        s[S_EVENT_T] = due if due > earliest else earliest
    if has_intent:
        cocon += dt * (p[P_CC_RATE] * math.sqrt(eps2) - p[P_CC_DECAY])
        if cocon < 0.0:
            cocon = 0.0
        elif cocon > p[P_CC_MAX]:
            cocon = p[P_CC_MAX]
        s[S_COCON] = cocon


@kernel
def reachable_within(reach_x, reach_v, lag_s, low, high, horizon_s):  # type: ignore[no-untyped-def]
    """Whether a point at ``reach_x + reach_v lag_s`` [m] moving at ``reach_v`` [m/s]
    (device frame: the target in the hand's frame) is inside the box ``low``..``high``
    [m] at some time in ``[0, horizon_s]`` from now (slab test); False for a NaN lag."""
    if lag_s != lag_s:
        return False
    enter, leave = 0.0, horizon_s
    for k in range(3):
        vel = reach_v[k]
        pos = reach_x[k] + vel * lag_s
        lo, hi = low[k], high[k]
        if abs(vel) < 1e-12:
            if pos < lo or pos > hi:
                return False
            continue
        t_a, t_b = (lo - pos) / vel, (hi - pos) / vel
        if t_a > t_b:
            t_a, t_b = t_b, t_a
        enter = max(enter, t_a)
        leave = min(leave, t_b)
        if enter > leave:
            return False
    return True


@kernel
def store_percept(ring, row, t_s, tp, tv, ep, ev, vec):  # type: ignore[no-untyped-def]
    """Write one percept row: t, target pos/vel, ee pos/vel, the hand's position."""
    ring[row, 0] = t_s
    for k in range(3):
        ring[row, 1 + k] = tp[k]
        ring[row, 4 + k] = tv[k]
        ring[row, 7 + k] = ep[k]
        ring[row, 10 + k] = ev[k]
        ring[row, 13 + k] = vec[V_X_HAND, k]


@kernel
def device_step(zoh, stops, pos, vel, drive, force, hand):  # type: ignore[no-untyped-def]
    """One ZOH period of ``SimulatedDevice`` (see ``SimulatedDevice.read``).

    Args:
        zoh: (8,) ``φ11, φ12, φ21, φ22, γ1, γ2, K_h, B_h``.
        stops: (2, 3) lower and upper end stops [m], device frame.
        pos, vel: (3,) stylus state [m, m/s], device frame; advanced in place.
        drive: (3,) the operator's drive force [N].
        force: (3,) the actuated device force [N].
        hand: (3,) written with the hand's force on the stylus [N].
    """
    p11 = zoh[0]
    p12 = zoh[1]
    p21 = zoh[2]
    p22 = zoh[3]
    g1 = zoh[4]
    g2 = zoh[5]
    kh = zoh[6]
    bh = zoh[7]
    for k in range(3):
        x = pos[k]
        v = vel[k]
        d = drive[k]
        hand[k] = d - kh * x - bh * v
        u = force[k] + d
        xn = p11 * x + p12 * v + g1 * u
        vn = p21 * x + p22 * v + g2 * u
        if xn < stops[0, k]:
            xn = stops[0, k]
            if vn < 0.0:
                vn = 0.0
        elif xn > stops[1, k]:
            xn = stops[1, k]
            if vn > 0.0:
                vn = 0.0
        pos[k] = xn
        vel[k] = vn



@kernel
def map_to_task(sr, off, held, reanchor, pos, vel, out_pos, out_vel):  # type: ignore[no-untyped-def]
    """``WorkspaceMapping.to_task`` unclutched: x = o + s R p, v = s R v (device -> task).

    Args:
        sr: (3, 3) ``s R``. off: (3,) offset [m], re-anchored in place when ``reanchor``.
        held: (3,) the last mapped task position [m], updated.
        pos, vel: (3,) stylus position [m] and velocity [m/s], device frame.
        out_pos, out_vel: (3,) written with the task-frame command.
    """
    px = pos[0]
    py = pos[1]
    pz = pos[2]
    rx = sr[0, 0] * px + sr[0, 1] * py + sr[0, 2] * pz
    ry = sr[1, 0] * px + sr[1, 1] * py + sr[1, 2] * pz
    rz = sr[2, 0] * px + sr[2, 1] * py + sr[2, 2] * pz
    if reanchor:
        off[0] = held[0] - rx
        off[1] = held[1] - ry
        off[2] = held[2] - rz
    x = off[0] + rx
    y = off[1] + ry
    z = off[2] + rz
    held[0] = x
    held[1] = y
    held[2] = z
    out_pos[0] = x
    out_pos[1] = y
    out_pos[2] = z
    vx = vel[0]
    vy = vel[1]
    vz = vel[2]
    out_vel[0] = sr[0, 0] * vx + sr[0, 1] * vy + sr[0, 2] * vz
    out_vel[1] = sr[1, 0] * vx + sr[1, 1] * vy + sr[1, 2] * vz
    out_vel[2] = sr[2, 0] * vx + sr[2, 1] * vy + sr[2, 2] * vz


@kernel
def map_rt(r, vec, off, gain, out):  # type: ignore[no-untyped-def]
    """out = gain Rᵀ (vec − off): task -> device frame (``off`` zeros for vectors)."""
    x = vec[0] - off[0]
    y = vec[1] - off[1]
    z = vec[2] - off[2]
    out[0] = gain * (r[0, 0] * x + r[1, 0] * y + r[2, 0] * z)
    out[1] = gain * (r[0, 1] * x + r[1, 1] * y + r[2, 1] * z)
    out[2] = gain * (r[0, 2] * x + r[1, 2] * y + r[2, 2] * z)


@kernel
def map_state_rt(r, pos, vel, off, gain, out_pos, out_vel):  # type: ignore[no-untyped-def]
    """A point and its velocity task -> device frame in one call (see :func:`map_rt`)."""
    map_rt(r, pos, off, gain, out_pos)
    for i in range(3):
        out_vel[i] = gain * (r[0, i] * vel[0] + r[1, i] * vel[1] + r[2, i] * vel[2])


@kernel
def map_r(r, vec, gain, out):  # type: ignore[no-untyped-def]
    """out = gain R vec: device -> task frame."""
    x = vec[0]
    y = vec[1]
    z = vec[2]
    out[0] = gain * (r[0, 0] * x + r[0, 1] * y + r[0, 2] * z)
    out[1] = gain * (r[1, 0] * x + r[1, 1] * y + r[1, 2] * z)
    out[2] = gain * (r[2, 0] * x + r[2, 1] * y + r[2, 2] * z)


# ----------------------------------------------------------------- the safety layer
# ``haptics.safety.SafetyLayer.filter`` in one compiled call, for the fused servo tick
# (``trials.fused``). The layer's Python attributes are packed into a state vector by
# ``SafetyLayer.pack_state`` and unpacked by ``SafetyLayer.unpack_state``; its tuning into
# a constant vector by ``SafetyLayer.pack_config``.

# Safety state vector.
SF_HB = 0  # MAX_CHANNELS heartbeat times [s]
SF_LAST_T, SF_ENERGY, SF_ENGAGED, SF_GAIN, SF_SATURATED, SF_RATE_LIMITED = range(8, 14)
SF_FAULT, SF_WATCHDOG, SF_WD_T0, SF_WD_FX, SF_WD_FY, SF_WD_FZ, SF_OK_SINCE, SF_N_CHANNELS = range(14, 22)
N_SAFETY_STATE = 22

# Safety constants.
SC_PERIOD, SC_MAX_GAP, SC_STALE, SC_RECOVER, SC_WD_RAMP, SC_RAMP_IN, SC_RAMP_OUT = range(7)
SC_THERMAL_TAU, SC_DERATE_START, SC_PEAK, SC_CONT, SC_LIMIT, SC_AXIS, SC_RATE = range(7, 14)
N_SAFETY_CONFIG = 14

_T27 = 134217729.0  # 2^27 + 1: Veltkamp's split
_SMALLEST_NORMAL = 2.2250738585072014e-308


@kernel
def hypot3(x, y, z):  # type: ignore[no-untyped-def]
    """``math.hypot(x, y, z)`` of CPython 3.10/3.11 (``vector_norm``: scaled, with an
    error-free split of the squares and a final differential correction), to the bit."""
    ax = abs(x)
    ay = abs(y)
    az = abs(z)
    found_nan = x != x or y != y or z != z
    big = ax
    if ay > big:
        big = ay
    if az > big:
        big = az
    if big == math.inf:
        return big
    if found_nan:
        return math.nan
    if big == 0.0:
        return big
    _, max_e = math.frexp(big)
    if max_e < -1023:
        csum = 1.0
        frac1 = 0.0
        for v in (x, y, z):
            q = v / big
            q = q * q
            old = csum
            csum += q
            frac1 += (old - csum) + q
        return big * math.sqrt(csum - 1.0 + frac1)
    scale = math.ldexp(1.0, -max_e)
    csum = 1.0
    frac1 = 0.0
    frac2 = 0.0
    frac3 = 0.0
    for v in (x, y, z):
        q = v * scale
        t = q * _T27
        hi = t - (t - q)
        lo = q - hi
        q = hi * hi
        old = csum
        csum += q
        frac1 += (old - csum) + q
        q = 2.0 * hi * lo
        old = csum
        csum += q
        frac2 += (old - csum) + q
        frac3 += lo * lo
    h = math.sqrt(csum - 1.0 + (frac1 + frac2 + frac3))
    q = h
    t = q * _T27
    hi = t - (t - q)
    lo = q - hi
    q = -hi * hi
    old = csum
    csum += q
    frac1 += (old - csum) + q
    q = -2.0 * hi * lo
    old = csum
    csum += q
    frac2 += (old - csum) + q
    q = -lo * lo
    old = csum
    csum += q
    frac3 += (old - csum) + q
    q = csum - 1.0 + (frac1 + frac2 + frac3)
    return (h + q / (2.0 * h)) / scale


@kernel
def _safety_stale(st, cfg, t_s):  # type: ignore[no-untyped-def]
    timeout = cfg[SC_STALE]
    for ch in range(int(st[SF_N_CHANNELS])):
        if t_s - st[SF_HB + ch] > timeout:
            return True
    return False


@kernel
def _safety_watchdog_output(st, cfg, t_s, out):  # type: ignore[no-untyped-def]
    k = 1.0 - (t_s - st[SF_WD_T0]) / cfg[SC_WD_RAMP]
    if k <= 0.0:
        k = 0.0
    elif k > 1.0:
        k = 1.0
    out[0] = k * st[SF_WD_FX]
    out[1] = k * st[SF_WD_FY]
    out[2] = k * st[SF_WD_FZ]


@kernel
def safety_filter(st, cfg, t_s, force, out):  # type: ignore[no-untyped-def]
    """``SafetyLayer.filter(t_s, force)`` (see that method and the module docstring of
    :mod:`haptics.safety`): the same operations in the same order, on the packed state
    ``st`` and constants ``cfg``; the actuated force into ``out`` (the layer's buffer)."""
    x = force[0]
    y = force[1]
    z = force[2]
    fault = not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z))
    if not math.isfinite(t_s):
        fault = True
        last = st[SF_LAST_T]
        t_s = 0.0 if last != last else last + cfg[SC_PERIOD]
    if fault:
        x = 0.0
        y = 0.0
        z = 0.0
    st[SF_FAULT] = 1.0 if fault else 0.0
    last = st[SF_LAST_T]
    dt = cfg[SC_PERIOD] if last != last else t_s - last
    if dt < 0.0:
        dt = 0.0
    watchdog = st[SF_WATCHDOG] != 0.0
    # 5. watchdog
    if dt > cfg[SC_MAX_GAP] or _safety_stale(st, cfg, t_s):
        if not watchdog:
            watchdog = True
            st[SF_WATCHDOG] = 1.0
            st[SF_WD_T0] = t_s
            st[SF_WD_FX] = out[0]
            st[SF_WD_FY] = out[1]
            st[SF_WD_FZ] = out[2]
        st[SF_OK_SINCE] = math.nan
    elif watchdog:
        if st[SF_OK_SINCE] != st[SF_OK_SINCE]:
            st[SF_OK_SINCE] = t_s
        if t_s - st[SF_OK_SINCE] >= cfg[SC_RECOVER]:
            watchdog = False
            st[SF_WATCHDOG] = 0.0
            st[SF_GAIN] = 0.0
    if watchdog:
        _safety_watchdog_output(st, cfg, t_s, out)
        st[SF_SATURATED] = 0.0
        st[SF_RATE_LIMITED] = 0.0
        # the energy update of SafetyLayer._energy_update
        last = st[SF_LAST_T]
        dte = cfg[SC_PERIOD] if last != last else t_s - last
        if dte > 0.0:
            a = dte / cfg[SC_THERMAL_TAU]
            if a > 1.0:
                a = 1.0
            fx = out[0]
            fy = out[1]
            fz = out[2]
            f2 = fx * fx + fy * fy + fz * fz
            st[SF_ENERGY] += a * (f2 - st[SF_ENERGY])
        st[SF_LAST_T] = t_s
        return
    # 2. engage ramp
    gain = st[SF_GAIN]
    if st[SF_ENGAGED] != 0.0:
        gain = 1.0 if cfg[SC_RAMP_IN] == 0.0 else gain + dt / cfg[SC_RAMP_IN]
        if gain > 1.0:
            gain = 1.0
    else:
        gain -= dt / cfg[SC_RAMP_OUT]
        if gain < 0.0:
            gain = 0.0
    st[SF_GAIN] = gain
    if gain != 1.0:
        x *= gain
        y *= gain
        z *= gain
    # 3. saturation and the thermally derated peak (SafetyLayer._norm_limit)
    cont = cfg[SC_CONT]
    cont2 = cont * cont
    theta = cfg[SC_DERATE_START]
    head = (cont2 - st[SF_ENERGY]) / ((1.0 - theta) * cont2)
    if head >= 1.0:
        peak = cfg[SC_PEAK]
    elif head <= 0.0:
        peak = cont
    else:
        peak = cont + (cfg[SC_PEAK] - cont) * head
    clamped = False
    lim = cfg[SC_LIMIT]
    if cfg[SC_AXIS] != 0.0:
        if x > lim or x < -lim or y > lim or y < -lim or z > lim or z < -lim:
            clamped = True
            x = lim if x > lim else (-lim if x < -lim else x)
            y = lim if y > lim else (-lim if y < -lim else y)
            z = lim if z > lim else (-lim if z < -lim else z)
    elif lim < peak:
        peak = lim
    norm = hypot3(x, y, z)
    if norm > peak:
        clamped = True
        k = peak / norm
        if k < _SMALLEST_NORMAL:  # clamp_norm3 on a huge vector (finite here)
            x = x / norm * peak
            y = y / norm * peak
            z = z / norm * peak
        else:
            x *= k
            y *= k
            z *= k
        if peak < _SMALLEST_NORMAL and hypot3(x, y, z) > peak:
            # a subnormal limit: its scaled components round up to the smallest steps, whose
            # norm can exceed it; nothing but zero stays under it (clamp_norm3 does the same)
            x = 0.0
            y = 0.0
            z = 0.0
    # 4. rate limit
    px = out[0]
    py = out[1]
    pz = out[2]
    dx = x - px
    dy = y - py
    dz = z - pz
    max_step = cfg[SC_RATE] * dt
    step = math.sqrt(dx * dx + dy * dy + dz * dz)
    if step <= max_step:
        rate_limited = False
    else:
        rate_limited = True
        k = max_step / step
        x = px + dx * k
        y = py + dy * k
        z = pz + dz * k
    st[SF_RATE_LIMITED] = 1.0 if rate_limited else 0.0
    st[SF_SATURATED] = 1.0 if (clamped or rate_limited) else 0.0
    out[0] = x
    out[1] = y
    out[2] = z
    if dt > 0.0:
        a = dt / cfg[SC_THERMAL_TAU]
        if a > 1.0:
            a = 1.0
        st[SF_ENERGY] += a * ((x * x + y * y + z * z) - st[SF_ENERGY])
    st[SF_LAST_T] = t_s
