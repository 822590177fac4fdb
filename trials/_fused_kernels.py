"""The fused servo tick's two compiled calls (numba, ``cache=True``): see :mod:`trials.fused`.

``pre_plant`` is the tick up to the plant (the simulated participant, the device, the
mapping, the slave controller), ``post_plant`` the tick after it (the guidance law with its
fixtures, the force framing, the safety layer, what the simulated hand sees, the trial
log's row). Both compose the stages' own kernels (``haptics._kernels``,
``guidance._kernels``, ``robot._kernels``) by calling them: a change to a stage's kernel
reaches the fused tick unchanged. What the stages keep in Python scalars is lifted into
the scalar vector ``sc`` (layout ``C_*``, ``L_*``) by :class:`trials.fused.FusedTick`
and lowered back when Python code runs again.

The stages' arrays are not copied: the kernels reach them through a table of their
addresses (``tab``, layout ``A_*``), viewed with :func:`_at` (untracked, like
``robot._kernels._view``: :class:`trials.fused.FusedTick` holds every array it lists,
and rebuilds the table whenever Python code ran, since that code may have replaced one).
One argument per table instead of one per array: a numba call costs about 0.1 µs per
array argument, and the tick touches some ninety arrays.
"""

from __future__ import annotations

import math

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_untracked
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from capture_trainer.compiled import kernel
from capture_trainer.kernel_cache import depends_on
from guidance import _kernels as gk
from haptics import _kernels as hk
from robot import _kernels as rk

# the kernels below compile the stages' kernels into themselves: their cache must go
# stale with those modules too, not only with this file
depends_on(__file__, gk, hk, rk)

# ---------------------------------------------------------------- the address table
(A_OP_S, A_OP_P, A_OP_VEC, A_OP_COEF, A_OP_NOISE, A_OP_RING,
 A_DEV_ZOH, A_DEV_STOPS, A_DEV_POS, A_DEV_VEL, A_DEV_DRIVE, A_DEV_HAND, A_SAFE_OUT, A_SAFE_ST, A_SAFE_CFG,
 A_CMD_DEV_POS, A_CMD_DEV_VEL, A_CMD_HAND, A_CMD_CALC, A_CMD_ACT, A_SEEN_TP, A_SEEN_TV, A_SEEN_EP, A_SEEN_EV,
 A_MAP_SR, A_MAP_R, A_MAP_OFF, A_MAP_HELD, A_REN_SR,
 A_CMD_POS, A_CMD_VEL, A_CMD_ACC, A_GUIDE, A_SIGMA, A_TNEXT,
 A_Q, A_QD, A_BASE_POS, A_BASE_QUAT, A_BASE_W, A_BASE_V, A_MOMENTUM, A_EXT_F, A_EXT_P,
 A_JOINT_XYZ, A_JOINT_ROT, A_JOINT_AXIS, A_LINK_MASS, A_LINK_COM, A_LINK_INERTIA, A_EE_OFFSET, A_BASE_INERTIA,
 A_TASK_ROWS, A_REACTION_ROWS, A_Q_MIN, A_Q_MAX, A_QD_MAX, A_QDD_MAX, A_SL_PARAMS, A_SL_QDD, A_GOOD_Q, A_GOOD_QD,
 A_GOOD_QDD, A_SL_STATUS, A_SL_DIAG, A_JAC_PINV, A_SL_ARENA,
 A_EE, A_EE_V, A_TARGET_P, A_TARGET_V, A_TARGET_A, A_FORCE_ON_DEBRIS, A_CONTACT_POINT, A_SHOULDER,
 A_DG_GAINS, A_DG_E0, A_DG_DE0, A_DG_SINCE, A_WALL_LO, A_WALL_HI, A_WALL_BACK, A_JL_LO, A_JL_HI,
 A_ROW,
 A_RAW, A_BEFORE, A_ARM_ARENA, A_ATTITUDE, A_TORQUE, A_ARM_XYZ, A_ARM_ROT, A_ARM_AXIS, A_ARM_EE_OFFSET,
 A_ARM_BASE_INERTIA, A_DEBRIS, A_CHUNK, A_CHUNK_FLAGS, A_ROWTAB, A_DEBRIS_STATE) = range(100)
N_ADDRESSES = 100

# ---------------------------------------------------------------- the scalar vector
# constants (set when the tick is lifted)
(C_DT, C_HAS_DEVICE, C_PUSHES_ARM, C_N, C_BASE_MASS, C_INV_SCALE, C_INV_FORCE_SCALE, C_NOISE_DRAWS, C_RING_CAP,
 C_OP_INTENT, C_OP_MARGIN, C_OP_LOOKAHEAD, C_OP_HOLDING_GAP, C_DEV_DT) = range(14)
C_WS_LOW, C_WS_HIGH = 14, 17
# lifted state
(L_DEV_T, L_OP_ENGAGED, L_OP_NEXT_PLAN, L_OP_RELEASE, L_OP_LAST_GAP, L_OP_N_PERCEPTS, L_CLUTCHED, L_ATTACHED,
 L_SLAVE_FAULTS, L_REPLANNED, L_LAW_COUNT) = range(20, 31)
# the participant's clutch decision (HumanOperator._maybe_clutch): constants, then lifted
L_OP_HOLDING = 31
C_OP_MIN_DURATION, C_OP_FITTS_A, C_OP_FITTS_B, C_OP_FITTS_W, C_OP_DWELL = range(32, 37)
L_OP_REACH_T, L_OP_REACH_X, L_OP_REACH_V = 37, 38, 41
# the slave's base-rate bound (SlaveController.step's bookkeeping): ticks it engaged since
# the lift, the first and the last of them [s]
L_RATE_TICKS, L_RATE_FIRST, L_RATE_LAST = 44, 45, 46
# the plant's read-out (plant_read): the arm's step [s]; the scene is a PyBullet debris (0/1)
C_ARM_DT, C_HAS_DEBRIS = 47, 48
# the arm carries the debris: its reading from the arm's read-out (rk.carried_reading), 0/1
C_CARRIED = 49
# the native plant step's return code (plant_native; robot.pybullet_native's codes)
C_NATIVE_CODE = 50
# the participant's Python part of this period has run (EVENT_PLAN): no event check once
L_PREPARED = 51
# the quiet tick (quiet_tick): the contact query's margin [m] (PyBulletDebris.settle's),
# the capture monitor's reach squared [m^2] and shoulder [m], the target's radius [m]
# (ServoTick's reach test), where the debris buffer keeps the fixture centre and its
# velocity; then its outputs: pre_plant's event, the gap [m], the monitor's "left the
# reach" (0/1), the distance to the target [m], the row's flag bits
C_Q_MARGIN, C_Q_REACH2, C_Q_SHOULDER, C_Q_RADIUS, C_Q_POINT, C_Q_POINT_V = 52, 53, 54, 57, 58, 59
L_Q_EVENT, L_Q_GAP, L_Q_LEFT_REACH, L_Q_DISTANCE, L_Q_BITS = 60, 61, 62, 63, 64
# quiet_run's count of the ticks that ran whole
L_Q_RAN = 65
# the capture monitor's hold gap [m] (CaptureRules.hold_gap_m): after a contact, a tool
# that near may be holding the debris (CaptureMonitor.update), so the tick is not quiet
C_Q_HOLD_GAP = 66
# the law: up to MAX_TERMS terms of TERM_SIZE slots from LAW0: kind, scale, then its own
LAW0, TERM_SIZE, MAX_TERMS = 67, 8, 6
N_SCALARS = LAW0 + TERM_SIZE * MAX_TERMS
# term kinds
T_NONE, T_DG, T_APF, T_WALLS, T_REACH, T_JOINTS, T_REACTION = range(7)
# DG's slots after kind and scale: path kind, alpha, w, replan interval, t0, last plan
D_KIND, D_ALPHA, D_W, D_INTERVAL, D_T0, D_LAST_PLAN = range(2, 8)

#: pre_plant's answers
GO, EVENT = 0, 1
#: pre_plant's answer when the participant only re-plans or refills its noise draws this
#: period: Python runs that part alone (``HumanOperator.prepare_drive``), sets
#: ``sc[L_PREPARED]`` and calls pre_plant again, instead of the whole tick staged
EVENT_PLAN = 2
#: The capture stage's steady states a quiet tick runs in: nothing touched yet and the
#: tool beyond the contact query's margin; the tool closed on the debris; after a contact
#: that ended, the tool beyond the margin and the monitor's hold gap.
QUIET_APART, QUIET_CLOSED, QUIET_PARTED = 1, 2, 3
#: quiet_tick's answers: the whole tick ran; pre_plant's event (nothing done); the plant
#: stepped (or failed: C_NATIVE_CODE), the rest of the tick is Python's
Q_DONE, Q_PRE, Q_PLANT = 0, 1, 2


@intrinsic
def _at(typingctx, table, index, shape, like):  # type: ignore[no-untyped-def]
    """The array at address ``table[index]`` (a C-contiguous array of ``shape`` and of
    ``like``'s type: 0.0 for float64, 0 for int64), untracked: valid while whoever owns
    it keeps it (the table's builder does)."""
    if not (isinstance(table, types.Array) and table.ndim == 1 and table.dtype == types.int64
            and isinstance(index, types.Integer) and isinstance(shape, types.BaseTuple)
            and all(isinstance(extent, types.Integer) for extent in shape)):  # type: ignore[attr-defined]
        return None
    dtype = types.float64 if isinstance(like, types.Float) else types.int64
    view_type = types.Array(dtype, len(shape), "C")

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        table_type, index_type, shape_type, _ = sig.args
        ary = make_array(table_type)(context, builder, args[0])
        offset = context.cast(builder, args[1], index_type, types.intp)
        address = builder.load(builder.gep(ary.data, [offset]))
        data = builder.inttoptr(address, context.get_data_type(dtype).as_pointer())
        dims = [context.cast(builder, extent, extent_type, types.intp)
                for extent, extent_type in zip(cgutils.unpack_tuple(builder, args[2]), shape_type)]
        itemsize = context.get_constant(types.intp, 8)
        strides: list[object] = []
        stride = itemsize
        for extent in reversed(dims):
            strides.insert(0, stride)
            stride = builder.mul(stride, extent)
        view = make_array(sig.return_type)(context, builder)
        populate_array(view, data=data, shape=dims, strides=strides, itemsize=itemsize, meminfo=None, parent=None)
        return impl_ret_untracked(context, builder, sig.return_type, view._getvalue())

    return view_type(table, index, shape, like), codegen


# the views below are returned by functions that make them: inlined, as a kernel without
# reference counting may return only the arrays it was given (capture_trainer.compiled)
@kernel(inline="always")
def _af(tab, index, shape):  # type: ignore[no-untyped-def]
    """The float64 array of ``shape`` at ``tab[index]`` (:func:`_at`)."""
    return _at(tab, index, shape, 0.0)  # type: ignore[call-arg]  # numba supplies typingctx


@kernel(inline="always")
def _ai(tab, index, shape):  # type: ignore[no-untyped-def]
    """The int64 array of ``shape`` at ``tab[index]`` (:func:`_at`)."""
    return _at(tab, index, shape, 0)  # type: ignore[call-arg]  # numba supplies typingctx


@kernel(inline="always")
def _v3(tab, index):  # type: ignore[no-untyped-def]
    """The (3,) float64 array at ``tab[index]``."""
    return _at(tab, index, (3,), 0.0)  # type: ignore[call-arg]  # numba supplies typingctx


@kernel
def _would_clutch(tab, sc, t_s):  # type: ignore[no-untyped-def]
    """Whether ``HumanOperator._maybe_clutch`` may clutch at ``t_s``: its trigger (near a
    face with the plan going through it), then its veto (the target within reach before a
    re-index would be over). Conservative: the veto is taken over a horizon a nanosecond
    shorter, so a compiled rounding can only send a tick to Python, never keep one from it."""
    x = _v3(tab, A_DEV_POS)
    v = _v3(tab, A_DEV_VEL)
    s = _af(tab, A_OP_S, (hk.N_STATE,))
    vec = _af(tab, A_OP_VEC, (hk.N_VECTORS, 3))
    coef = _af(tab, A_OP_COEF, (3, 6))
    margin = sc[C_OP_MARGIN]
    ahead = sc[C_OP_LOOKAHEAD]
    run_on = t_s + ahead - (s[hk.S_PLAN_T0] + s[hk.S_PLAN_T])
    if run_on < 0.0:
        run_on = 0.0
    trigger = False
    for k in range(3):
        near = x[k] + v[k] * ahead
        end = vec[hk.V_GOAL_X, k] + vec[hk.V_GOAL_V, k] * run_on
        if (near > sc[C_WS_HIGH + k] - margin and end > sc[C_WS_HIGH + k]) or \
                (near < sc[C_WS_LOW + k] + margin and end < sc[C_WS_LOW + k]):
            trigger = True
    if not trigger:
        return False
    dist2 = 0.0
    for k in range(3):
        end = vec[hk.V_GOAL_X, k] + vec[hk.V_GOAL_V, k] * run_on
        low, high = sc[C_WS_LOW + k], sc[C_WS_HIGH + k]
        if end > high or end < low:
            x0 = hk.plan_state(s, vec, coef, t_s, k)[0] + vec[hk.V_YIELD_X, k]
            x1 = min(high - 2.0 * margin, max(low + 2.0 * margin, x0 + 0.5 * (low + high) - end))
            dist2 += (x1 - x0) * (x1 - x0)
    duration = max(sc[C_OP_MIN_DURATION],
                   sc[C_OP_FITTS_A] + sc[C_OP_FITTS_B] * math.log2(1.0 + math.sqrt(dist2) / sc[C_OP_FITTS_W]))
    reachable = hk.reachable_within(sc[L_OP_REACH_X:L_OP_REACH_X + 3], sc[L_OP_REACH_V:L_OP_REACH_V + 3],
                                    t_s - sc[L_OP_REACH_T], sc[C_WS_LOW:C_WS_LOW + 3], sc[C_WS_HIGH:C_WS_HIGH + 3],
                                    duration + sc[C_OP_DWELL] - 1e-9)
    return not reachable  # reachable in time: Python would keep going


@kernel
def _operator_event(tab, sc, t_s):  # type: ignore[no-untyped-def]
    """Whether ``HumanOperator.drive`` at ``t_s`` runs Python this period: :data:`EVENT`
    for a clutch or a release (the buttons change: the whole tick runs stage by stage),
    :data:`EVENT_PLAN` for a re-plan or a noise refill alone (``prepare_drive`` does
    it), :data:`GO` for none. The clutch test is ``HumanOperator._maybe_clutch``'s."""
    s = _af(tab, A_OP_S, (hk.N_STATE,))
    if sc[L_OP_ENGAGED] != 0.0:
        if sc[C_OP_INTENT] != 0.0 and sc[L_OP_NEXT_PLAN] < math.inf:
            if sc[L_OP_HOLDING] == 0.0 and not sc[L_OP_LAST_GAP] < sc[C_OP_HOLDING_GAP]:
                if _would_clutch(tab, sc, t_s):
                    return EVENT
    elif t_s >= sc[L_OP_RELEASE]:
        return EVENT
    if s[hk.S_NOISE_I] > sc[C_NOISE_DRAWS] - 3 or t_s >= sc[L_OP_NEXT_PLAN] or t_s >= s[hk.S_EVENT_T]:
        return EVENT_PLAN
    return GO


@kernel
def pre_plant(tab, sc, t_s):  # type: ignore[no-untyped-def]
    """The tick up to the plant at ``t_s``: the participant's drive and the device's step
    (``SimulatedDevice.read``), the stylus mapped to the command
    (``HapticCommander.command``), the slave controller (``SlaveController.step`` up to
    ``arm.send``). Returns :data:`EVENT` (having changed nothing) when the participant
    runs Python this period (:data:`EVENT_PLAN`: its re-plan or noise refill alone),
    else :data:`GO`."""
    n = int(sc[C_N])
    if sc[C_HAS_DEVICE] != 0.0:
        t_dev = sc[L_DEV_T]
        if sc[L_PREPARED] != 0.0:
            sc[L_PREPARED] = 0.0
        else:
            event = _operator_event(tab, sc, t_dev)
            if event != GO:
                return event
        pos = _v3(tab, A_DEV_POS)
        vel = _v3(tab, A_DEV_VEL)
        force = _v3(tab, A_SAFE_OUT)
        drive = _v3(tab, A_DEV_DRIVE)
        hand = _v3(tab, A_DEV_HAND)
        hk.operator_drive(_af(tab, A_OP_S, (hk.N_STATE,)), _af(tab, A_OP_P, (hk.N_PARAMS,)),
                          _af(tab, A_OP_VEC, (hk.N_VECTORS, 3)), _af(tab, A_OP_COEF, (3, 6)),
                          _af(tab, A_OP_NOISE, (int(sc[C_NOISE_DRAWS]),)), t_dev, pos, vel, force, drive)
        hk.device_step(_af(tab, A_DEV_ZOH, (8,)), _af(tab, A_DEV_STOPS, (2, 3)), pos, vel, drive,
                       force, hand)
        t_dev += sc[C_DEV_DT]
        sc[L_DEV_T] = t_dev
        safety = _af(tab, A_SAFE_ST, (hk.N_SAFETY_STATE,))
        if math.isfinite(t_dev):
            safety[hk.SF_HB] = t_dev  # the device channel's heartbeat
        dev_pos = _v3(tab, A_CMD_DEV_POS)
        dev_vel = _v3(tab, A_CMD_DEV_VEL)
        for i in range(3):
            dev_pos[i] = pos[i]
            dev_vel[i] = vel[i]
        cmd_pos = _v3(tab, A_CMD_POS)
        cmd_vel = _v3(tab, A_CMD_VEL)
        if sc[L_CLUTCHED] != 0.0:
            held = _v3(tab, A_MAP_HELD)
            for i in range(3):
                cmd_pos[i] = held[i]
                cmd_vel[i] = 0.0
        else:
            hk.map_to_task(_af(tab, A_MAP_SR, (3, 3)), _v3(tab, A_MAP_OFF), _v3(tab, A_MAP_HELD), False,
                           pos, vel, cmd_pos, cmd_vel)
        hk.map_r(_af(tab, A_MAP_R, (3, 3)), hand, sc[C_INV_FORCE_SCALE], _v3(tab, A_CMD_HAND))
    if sc[C_PUSHES_ARM] != 0.0 and sc[L_ATTACHED] == 0.0:  # the contact force on the tool, coming step
        ext_f = _v3(tab, A_EXT_F)
        ext_p = _v3(tab, A_EXT_P)
        on_debris = _v3(tab, A_FORCE_ON_DEBRIS)
        point = _v3(tab, A_CONTACT_POINT)
        for i in range(3):
            ext_f[i] = -on_debris[i]
            ext_p[i] = point[i]
    status = _af(tab, A_SL_STATUS, (rk.N_STATUS,))
    jac_pinv = _af(tab, A_JAC_PINV, (n, 3))
    rk.controller_step(
        _af(tab, A_Q, (n,)), _af(tab, A_QD, (n,)), _v3(tab, A_BASE_POS), _af(tab, A_BASE_QUAT, (4,)),
        _v3(tab, A_BASE_W), _v3(tab, A_BASE_V), 1.0, _v3(tab, A_MOMENTUM), _v3(tab, A_EXT_F), _v3(tab, A_EXT_P),
        _v3(tab, A_CMD_POS), _v3(tab, A_CMD_VEL), _v3(tab, A_CMD_ACC),
        _af(tab, A_JOINT_XYZ, (n, 3)), _af(tab, A_JOINT_ROT, (n, 3, 3)), _af(tab, A_JOINT_AXIS, (n, 3)),
        _af(tab, A_LINK_MASS, (n,)), _af(tab, A_LINK_COM, (n, 3)), _af(tab, A_LINK_INERTIA, (n, 3, 3)),
        _v3(tab, A_EE_OFFSET), sc[C_BASE_MASS], _af(tab, A_BASE_INERTIA, (3, 3)),
        _ai(tab, A_TASK_ROWS, (int(tab[A_TASK_ROWS + N_ADDRESSES]),)),
        _ai(tab, A_REACTION_ROWS, (int(tab[A_REACTION_ROWS + N_ADDRESSES]),)),
        _af(tab, A_Q_MIN, (n,)), _af(tab, A_Q_MAX, (n,)), _af(tab, A_QD_MAX, (n,)),
        _af(tab, A_QDD_MAX, (n,)), _af(tab, A_SL_PARAMS, (rk.N_PARAMS,)), _af(tab, A_SL_QDD, (n,)),
        _af(tab, A_GOOD_Q, (n,)), _af(tab, A_GOOD_QD, (n,)), _af(tab, A_GOOD_QDD, (n,)), status,
        _af(tab, A_SL_DIAG, (8,)), jac_pinv, _af(tab, A_SL_ARENA, (int(tab[A_SL_ARENA + N_ADDRESSES]),)))
    if status[rk.S_RATE_BOUNDED] > 0.0:  # SlaveController.step: the bound's ticks, first and last
        if sc[L_RATE_TICKS] == 0.0:
            sc[L_RATE_FIRST] = t_s
        sc[L_RATE_TICKS] += 1.0
        sc[L_RATE_LAST] = t_s
    if status[rk.S_FAULT] > 0.0:  # SlaveController.step: counted, no non-finite map downstream
        sc[L_SLAVE_FAULTS] += 1.0
        for j in range(n):
            for i in range(3):
                jac_pinv[j, i] = 0.0
    _v3(tab, A_SIGMA)[0] = status[rk.S_SIGMA_RATIO]
    return GO


@intrinsic
def _call_step(typingctx, function, plant, mode):  # type: ignore[no-untyped-def]
    """``int function(void *plant, int64 mode)`` called at the address ``function``
    (``ct_plant_step`` of ``robot/native/pb_plant.c``); the addresses are arguments, not
    globals, so the kernel that calls it stays cacheable."""
    if not all(isinstance(arg, types.Integer) for arg in (function, plant, mode)):
        return None

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        i8p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [i8p, ir.IntType(64)])
        callee = builder.inttoptr(context.cast(builder, args[0], sig.args[0], types.int64), fnty.as_pointer())
        result = builder.call(callee, [builder.inttoptr(context.cast(builder, args[1], sig.args[1], types.int64), i8p),
                                       context.cast(builder, args[2], sig.args[2], types.int64)])
        return context.cast(builder, result, types.int32, types.int64)

    return types.int64(function, plant, mode), codegen


@kernel
def _arm_readout(tab, sc):  # type: ignore[no-untyped-def]
    """``plant_readout`` (``PyBulletArm.measure``'s kernel) of the state just loaded
    into the arm's buffers, into the measurement."""
    n = int(sc[C_N])
    size = 2 * n + 13
    rk.plant_readout(_af(tab, A_RAW, (size,)), _af(tab, A_BEFORE, (size,)), True, _af(tab, A_ARM_XYZ, (n, 3)),
                     _af(tab, A_ARM_ROT, (n, 3, 3)), _af(tab, A_ARM_AXIS, (n, 3)), _v3(tab, A_ARM_EE_OFFSET),
                     _af(tab, A_ARM_BASE_INERTIA, (3, 3)), sc[C_ARM_DT], _v3(tab, A_EE), _v3(tab, A_EE_V),
                     _v3(tab, A_ATTITUDE), _v3(tab, A_TORQUE),
                     _af(tab, A_ARM_ARENA, (int(tab[A_ARM_ARENA + N_ADDRESSES]),)))


@kernel
def _carried_read(tab, sc):  # type: ignore[no-untyped-def]
    """The carried debris' reading off the arm's state just loaded; its gap [m]."""
    n = int(sc[C_N])
    return rk.carried_reading(_af(tab, A_DEBRIS, (rk.N_DEBRIS,)), _af(tab, A_RAW, (2 * n + 13,)),
                              _af(tab, A_ARM_XYZ, (n, 3)), _af(tab, A_ARM_ROT, (n, 3, 3)), _af(tab, A_ARM_AXIS, (n, 3)),
                              _v3(tab, A_ARM_EE_OFFSET), _v3(tab, A_EE), True,
                              _af(tab, A_ARM_ARENA, (int(tab[A_ARM_ARENA + N_ADDRESSES]),)))


@kernel
def plant_read(tab, sc, arm, debris):  # type: ignore[no-untyped-def]
    """The plant's read-outs after the step, from PyBullet's tuples: the arm's
    (``PyBulletArm.advance_raw``'s five: ``plant_load`` into its state buffers, then
    ``plant_readout``, ``PyBulletArm.measure``'s kernel, into the measurement) and, with a
    PyBullet debris (``sc[C_HAS_DEBRIS]``), the debris' (``PyBulletDebris.query``'s four:
    ``debris_reading``, ``PyBulletDebris.read``'s kernel, with the end effector just
    read; without one, or once the arm carries it (``sc[C_CARRIED]``:
    ``carried_reading`` off the arm's state just loaded), any four tuples of those
    types). Returns the debris' surface gap
    [m] (NaN without a debris). Two tuple arguments, not nine: each argument costs the
    call its own dispatch."""
    n = int(sc[C_N])
    size = 2 * n + 13
    rk.plant_load(_af(tab, A_RAW, (size,)), _af(tab, A_BEFORE, (size,)), arm[0], arm[1], arm[2], arm[3], arm[4])
    _arm_readout(tab, sc)
    if sc[C_HAS_DEBRIS] == 0.0:
        return math.nan
    if sc[C_CARRIED] != 0.0:
        return _carried_read(tab, sc)
    return rk.debris_reading(_af(tab, A_DEBRIS, (rk.N_DEBRIS,)), debris[0], debris[1], debris[2], debris[3],
                             _v3(tab, A_EE), True)


@kernel
def plant_native(tab, sc, step, plant, debris_mode):  # type: ignore[no-untyped-def]
    """The plant stage through PyBullet's C API: ``ct_plant_step`` at the address
    ``step`` on the plant ``plant`` (``robot.pybullet_native.NativePlant``: the joint
    command out, one step, the arm's state into its buffers and, by ``debris_mode``, the
    debris' into ``tab[A_DEBRIS_STATE]``), then :func:`plant_read`'s read-outs on those
    arrays. Its code goes to ``sc[C_NATIVE_CODE]`` (not 0: nothing was read, NaN
    returned); returns the debris' surface gap [m] (NaN without a debris)."""
    code = _call_step(step, plant, debris_mode)  # type: ignore[call-arg, var-annotated]  # numba: typingctx
    sc[C_NATIVE_CODE] = code
    if code != 0:
        return math.nan
    _arm_readout(tab, sc)
    if sc[C_HAS_DEBRIS] == 0.0:
        return math.nan
    if sc[C_CARRIED] != 0.0:
        return _carried_read(tab, sc)
    state = _af(tab, A_DEBRIS_STATE, (13,))
    return rk.debris_reading(_af(tab, A_DEBRIS, (rk.N_DEBRIS,)), state[0:3], state[3:7], state[7:10], state[10:13],
                             _v3(tab, A_EE), True)


@kernel
def _law(tab, sc, t_s, out):  # type: ignore[no-untyped-def]
    """The law's force at ``t_s`` into ``out`` (``Sum`` of the terms, each ``Scaled`` by
    its scale); True when a term re-planned. DG is ``DynamicGuidance.force``."""
    n = int(sc[C_N])
    ee = _v3(tab, A_EE)
    ee_v = _v3(tab, A_EE_V)
    tp = _v3(tab, A_TARGET_P)
    tv = _v3(tab, A_TARGET_V)
    ta = _v3(tab, A_TARGET_A)
    fx = 0.0
    fy = 0.0
    fz = 0.0
    replanned = False
    for i in range(MAX_TERMS):
        base = LAW0 + TERM_SIZE * i
        kind = int(sc[base])
        if kind == T_NONE:
            break
        term = out  # each term's force, read out at once: the sum is kept in floats (Sum.force)
        x = 0.0
        y = 0.0
        z = 0.0
        if kind == T_DG:
            gains = _af(tab, A_DG_GAINS, (7,))
            e0 = _v3(tab, A_DG_E0)
            de0 = _v3(tab, A_DG_DE0)
            since = _af(tab, A_DG_SINCE, (1,))
            path_kind = int(sc[base + D_KIND])
            alpha = sc[base + D_ALPHA]
            w = sc[base + D_W]
            if gk.dynamic_guidance_step(path_kind, alpha, w, gains, t_s - sc[base + D_T0], e0, de0, tp, tv, ta, ee,
                                        ee_v, _v3(tab, A_CMD_HAND), since, t_s,
                                        t_s - sc[base + D_LAST_PLAN] >= sc[base + D_INTERVAL], term):
                for k in range(3):  # DynamicGuidance._plan
                    e0[k] = ee[k] - tp[k]
                    de0[k] = ee_v[k] - tv[k]
                sc[base + D_T0] = t_s
                sc[base + D_LAST_PLAN] = t_s
                since[0] = math.nan
                replanned = True
                sc[L_LAW_COUNT] += 1.0
                gk.dynamic_guidance_force(path_kind, alpha, w, gains[0], gains[1], gains[2], gains[3],
                                          t_s - sc[base + D_T0], e0, de0, tp, tv, ta, ee, ee_v, term)
            x = term[0]
            y = term[1]
            z = term[2]
        elif kind == T_APF:
            gk.potential_field(sc[base + 2], sc[base + 3], ee, tp, term)
            x = term[0]
            y = term[1]
            z = term[2]
        elif kind == T_WALLS:
            gk.workspace_walls(_v3(tab, A_WALL_LO), _v3(tab, A_WALL_HI), _af(tab, A_WALL_BACK, (3, 3)),
                               sc[base + 2], sc[base + 3], _v3(tab, A_CMD_DEV_POS), _v3(tab, A_CMD_DEV_VEL), term)
            x = term[0]
            y = term[1]
            z = term[2]
        elif kind == T_REACH:
            gk.reach_limit(sc[base + 2], sc[base + 3], sc[base + 4], ee, _v3(tab, A_SHOULDER), ee_v, 2.0, term)
            x = term[0]
            y = term[1]
            z = term[2]
        elif kind == T_JOINTS:
            gk.joint_limit_proximity(_af(tab, A_JL_LO, (n,)), _af(tab, A_JL_HI, (n,)), sc[base + 2],
                                     _af(tab, A_Q, (n,)), _af(tab, A_JAC_PINV, (n, 3)), 2.0, term)
            x = term[0]
            y = term[1]
            z = term[2]
        elif kind == T_REACTION:
            gk.reaction_boundary(sc[base + 2], sc[base + 3], sc[base + 4], _af(tab, A_SIGMA, (1,))[0], ee,
                                 _v3(tab, A_CMD_POS), term)
            x = term[0]
            y = term[1]
            z = term[2]
        g = sc[base + 1]
        if g != 1.0:  # Scaled
            x = g * x
            y = g * y
            z = g * z
        fx += x
        fy += y
        fz += z
    out[0] = fx
    out[1] = fy
    out[2] = fz
    return replanned


@kernel
def post_plant(tab, sc, t_next, slot, scene_bits):  # type: ignore[no-untyped-def]
    """The tick after the plant and the capture monitor, at ``t_next``: the law
    (``law.force``), the framing (``HapticCommander.render``), the safety layer and what
    the hand sees (``HapticCommander.actuate``), the row (``ServoTick._record``).
    ``A_ROWTAB``: the row's parts, in order, as address and length pairs. Returns the
    flag bits: the kernel's (device, mapping, slave, law) and ``scene_bits`` (the
    scene's). With ``slot >= 0`` the row and the bits also go where the recorder keeps
    row ``slot`` of its current chunks (``TrialRecorder.row_slot``: ``A_CHUNK``, the
    float chunk, columns x rows; ``A_CHUNK_FLAGS``, its flags), ``append_row``'s copy."""
    guide = _v3(tab, A_GUIDE)
    replanned = _law(tab, sc, t_next, guide)
    sc[L_REPLANNED] = 1.0 if replanned else 0.0
    bits = 0
    if sc[C_HAS_DEVICE] != 0.0:
        calc = _v3(tab, A_CMD_CALC)
        if sc[L_CLUTCHED] != 0.0:
            for i in range(3):
                calc[i] = 0.0
        else:
            gk.frame_force(_af(tab, A_REN_SR, (3, 3)), guide, calc)
        safety = _af(tab, A_SAFE_ST, (hk.N_SAFETY_STATE,))
        out = _v3(tab, A_SAFE_OUT)
        hk.safety_filter(safety, _af(tab, A_SAFE_CFG, (hk.N_SAFETY_CONFIG,)), sc[L_DEV_T], calc, out)
        act = _v3(tab, A_CMD_ACT)
        for i in range(3):
            act[i] = out[i]
        r = _af(tab, A_MAP_R, (3, 3))
        off = _v3(tab, A_MAP_OFF)
        inv_scale = sc[C_INV_SCALE]
        seen_tp = _v3(tab, A_SEEN_TP)
        seen_tv = _v3(tab, A_SEEN_TV)
        seen_ep = _v3(tab, A_SEEN_EP)
        seen_ev = _v3(tab, A_SEEN_EV)
        hk.map_state_rt(r, _v3(tab, A_TARGET_P), _v3(tab, A_TARGET_V), off, inv_scale, seen_tp, seen_tv)
        hk.map_state_rt(r, _v3(tab, A_EE), _v3(tab, A_EE_V), off, inv_scale, seen_ep, seen_ev)
        cap = int(sc[C_RING_CAP])
        count = int(sc[L_OP_N_PERCEPTS])
        hk.store_percept(_af(tab, A_OP_RING, (cap, 16)), count % cap, t_next, seen_tp, seen_tv, seen_ep,
                         seen_ev, _af(tab, A_OP_VEC, (hk.N_VECTORS, 3)))
        sc[L_OP_N_PERCEPTS] = count + 1
        bits |= BIT_ENGAGED if safety[hk.SF_ENGAGED] != 0.0 else 0
        bits |= BIT_CLUTCH if sc[L_CLUTCHED] != 0.0 else 0
        bits |= BIT_SATURATED if safety[hk.SF_SATURATED] != 0.0 else 0
        bits |= BIT_FAULT if safety[hk.SF_FAULT] != 0.0 else 0
        bits |= BIT_WATCHDOG if safety[hk.SF_WATCHDOG] != 0.0 else 0
    _af(tab, A_TNEXT, (1,))[0] = t_next
    row = _af(tab, A_ROW, (int(tab[A_ROW + N_ADDRESSES]),))
    rowtab = _ai(tab, A_ROWTAB, (int(tab[A_ROWTAB + N_ADDRESSES]),))
    at = 0
    for p in range(rowtab.shape[0] // 2):
        size = int(rowtab[2 * p + 1])
        part = _af(rowtab, 2 * p, (size,))
        for i in range(size):
            row[at + i] = part[i]
        at += size
    status = _af(tab, A_SL_STATUS, (rk.N_STATUS,))
    bits |= BIT_FAULT if status[rk.S_FAULT] > 0.0 else 0
    bits |= BIT_REPLAN if replanned else 0
    bits |= BIT_SINGULAR if status[rk.S_SINGULAR] > 0.0 else 0
    bits |= BIT_LIMITED if status[rk.S_LIMITED] > 0.0 else 0
    bits |= scene_bits
    if slot >= 0:
        columns = row.shape[0]
        chunk = _af(tab, A_CHUNK, (columns, int(tab[A_CHUNK + N_ADDRESSES]) // columns))
        for i in range(columns):
            chunk[i, slot] = row[i]
        _ai(tab, A_CHUNK_FLAGS, (int(tab[A_CHUNK_FLAGS + N_ADDRESSES]),))[slot] = bits  # uint64 memory, bits < 2**63
    return bits


@kernel
def quiet_tick(tab, sc, t_s, step, plant, debris_mode, t_next, slot, scene_bits, state):  # type: ignore[no-untyped-def]
    """A whole tick in one call, when the capture stage is in a steady state
    (``state``: :data:`QUIET_APART`, :data:`QUIET_CLOSED`, :data:`QUIET_PARTED`):
    :func:`pre_plant` at ``t_s``, :func:`plant_native` (``step``, ``plant``,
    ``debris_mode``), :func:`post_plant` at ``t_next`` into row ``slot`` with
    ``scene_bits``. Returns :data:`Q_PRE` after a ``pre_plant`` event (in
    ``sc[L_Q_EVENT]``; nothing changed), :data:`Q_PLANT` after the plant when the rest
    needs Python (a failed step; apart or parted, the tool within the contact query's
    margin: ``PyBulletDebris.settle`` queries the contact; parted, within the monitor's
    hold gap: ``CaptureMonitor.update`` may hold), else :data:`Q_DONE` with the flag bits
    in ``sc[L_Q_BITS]``. The gap goes to ``sc[L_Q_GAP]``, ``|ee − target| − radius``
    (the tick's reach test) to ``sc[L_Q_DISTANCE]``; apart, also the capture monitor's
    leaving test (``CaptureMonitor._leaving_reach``) to ``sc[L_Q_LEFT_REACH]``, in the same
    operations."""
    event = pre_plant(tab, sc, t_s)
    if event != GO:
        sc[L_Q_EVENT] = event
        return Q_PRE
    gap = plant_native(tab, sc, step, plant, debris_mode)
    sc[L_Q_GAP] = gap
    if sc[C_NATIVE_CODE] != 0.0:
        return Q_PLANT
    if state != QUIET_CLOSED and (gap < sc[C_Q_MARGIN] or (state == QUIET_PARTED and gap <= sc[C_Q_HOLD_GAP])):
        return Q_PLANT
    sc[L_Q_BITS] = post_plant(tab, sc, t_next, slot, scene_bits)
    ee = _v3(tab, A_EE)
    target = _v3(tab, A_TARGET_P)
    dx = ee[0] - target[0]
    dy = ee[1] - target[1]
    dz = ee[2] - target[2]
    sc[L_Q_DISTANCE] = math.sqrt(dx * dx + dy * dy + dz * dz) - sc[C_Q_RADIUS]
    if state == QUIET_APART:
        debris = _af(tab, A_DEBRIS, (rk.N_DEBRIS,))
        at = int(sc[C_Q_POINT])
        at_v = int(sc[C_Q_POINT_V])
        ox = debris[at] - sc[C_Q_SHOULDER]
        oy = debris[at + 1] - sc[C_Q_SHOULDER + 1]
        oz = debris[at + 2] - sc[C_Q_SHOULDER + 2]
        away = ox * debris[at_v] + oy * debris[at_v + 1] + oz * debris[at_v + 2]
        sc[L_Q_LEFT_REACH] = 1.0 if ox * ox + oy * oy + oz * oz > sc[C_Q_REACH2] and away > 0.0 else 0.0
    return Q_DONE


@kernel
def quiet_run(tab, sc, k0, dt, step, plant, debris_mode, slot0, scene_bits, state, most, t_stop,  # type: ignore[no-untyped-def]
              watch_reach):
    """Up to ``most`` quiet ticks back to back (:func:`quiet_tick`): tick ``k0 + i`` at
    ``t = (k0 + i) dt`` [s] (the servo tick's own ``k * dt`` and ``t + dt``) into row
    ``slot0 + i``. It stops after a tick whose end test the caller must run
    (``ServoTick._end``): apart, the debris left the reach; with ``watch_reach``, the tool
    reached the target (distance <= 0); ``t_next >= t_stop`` [s] (the capture window's
    end). Returns the last tick's answer: :data:`Q_DONE` when every tick it began ran
    whole, else that tick's :data:`Q_PRE` or :data:`Q_PLANT`; ``sc[L_Q_RAN]`` counts the
    ticks that ran whole, and the ``L_Q_*`` outputs are the last whole tick's, but for
    the gap after :data:`Q_PLANT` (that tick's)."""
    for i in range(most):
        t = (k0 + i) * dt
        t_next = t + dt
        answer = quiet_tick(tab, sc, t, step, plant, debris_mode, t_next, slot0 + i, scene_bits, state)
        if answer != Q_DONE:
            sc[L_Q_RAN] = i
            return answer
        if ((state == QUIET_APART and sc[L_Q_LEFT_REACH] != 0.0) or (watch_reach and sc[L_Q_DISTANCE] <= 0.0)
                or t_next >= t_stop):
            sc[L_Q_RAN] = i + 1
            return Q_DONE
    sc[L_Q_RAN] = most
    return Q_DONE


# The flag bits (trials.commanders' BIT_*, from capture_trainer.trial_log.FLAGS), bound
# here as compile-time constants; trials.fused checks they agree.
BIT_ENGAGED, BIT_CLUTCH, BIT_SATURATED, BIT_FAULT, BIT_WATCHDOG = 1, 2, 4, 8, 16
BIT_REPLAN, BIT_SINGULAR, BIT_LIMITED = 32, 64, 128
