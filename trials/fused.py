"""The fused servo tick: the same tick as :class:`trials.tick.ServoTick`'s stages, in two
compiled calls around the plant (docs/architecture.md, "The fused tick").

Per tick, when the trial's parts allow it (:func:`choose_path`):

    pre_plant  (compiled)  participant drive, device step, mapping, slave controller
    plant      (compiled + Python)  one compiled call: the joint command, PyBullet's
                           step and one state request per body through PyBullet's C
                           API (robot.pybullet_native; where it cannot be reached,
                           arm.send, the step and the queries in Python first), then the
                           arm's and the debris' read-outs (their own kernels); then
                           the debris' contact and thrust (Python, as staged)
    post_plant (Python + compiled)  capture monitor (Python, as staged), then the law
                           with its fixtures, framing, safety layer, the hand's view,
                           the row, written into the recorder's chunk (compiled)

A quiet tick (:meth:`FusedTick.quiet`: nothing touched and the tool beyond the contact
query's margin, or the tool closed on the debris) is all three in one compiled call
(``quiet_tick``), with the capture monitor's and the reach test's arithmetic after the
plant; the stages' Python bookkeeping follows it.

Each stage keeps its protocol and its own implementation: the staged path (the
reference) runs the stage objects, the fused path calls the same kernels those objects
call (``trials._fused_kernels``) on the same arrays; what the objects keep in Python
scalars is *lifted* into one scalar vector before fused ticks and *lowered* back into
the objects before any Python stage code runs again. Ticks on which Python must run
(the participant clutches or re-engages; the first tick; the tick after the tool
closes) run stage by stage: the tick lowers, runs the staged stages, and lifts again. A
tick on which the participant only re-plans or refills its noise draws lowers, runs
that alone (``HumanOperator.prepare_drive``), lifts and runs fused. Tests run both paths
tick for tick (``tests/trials/test_fused.py``).

The choice is explicit and typed: :class:`TickPath` says whether the trial's tick is
fused and, if not, why; it is recorded in the trial log's metadata (``tick_path``) and in
``bench servo``/``bench throughput``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import numba
import numpy as np
from numpy.typing import NDArray

from capture_trainer import trial_log
from guidance.dynamic import DynamicGuidance
from guidance.fixtures import JointLimitProximity, ReachLimit, ReactionBoundary, WorkspaceWalls
from guidance.law import GuidanceLaw, NoGuidance, Scaled, Sum
from guidance.potential import PotentialField
from guidance.rendering import ForceRenderer
from haptics import _kernels as hk
from haptics.device import BUTTON_ENGAGE
from haptics.mapping import WorkspaceMapping
from haptics.operators import HumanOperator
from haptics.simulated import SimulatedDevice
from robot import _kernels as rk
from robot.pybullet_arm import PyBulletArm
from robot.debris import DebrisReading
from robot.pybullet_debris import CONTACT_QUERY_MARGIN_M, PyBulletDebris
from robot.pybullet_native import DEBRIS_NONE, NativePlant, raise_step_error
from robot.slave import SlaveController
from trials import _fused_kernels as fk
from trials.capture_event import CaptureMonitor
from trials.recorder import TrialRecorder
from trials.commanders import (BIT_CAPTURED, BIT_CLUTCH, BIT_CONTACT, BIT_ENGAGED, BIT_FAULT, BIT_LIMITED,
                               BIT_REPLAN, BIT_SATURATED, BIT_SINGULAR, BIT_WATCHDOG, ControllerCommander,
                               HapticCommander)

#: ``trials.tick.ServoTick`` and ``trials.tick.TrialParts``: that module imports this one,
#: so they are named here only in the docstrings (no import cycle).
ServoTick = Any
TrialParts = Any

#: Stage names of the fused tick, for ``capture-trainer bench servo``.
FUSED_STAGES = ("pre_plant", "plant", "post_plant")
#: What each of them contains (``bench servo``'s JSON says it).
FUSED_STAGE_CONTENTS = {
    "pre_plant": "one compiled call: operator drive, device step and heartbeat, mapping (stylus to task "
                 "command, hand force to task frame), slave controller (eq. 10, eq. 6, integration); the "
                 "automatic capture's commander in Python before it; a tick that must run Python (clutch, "
                 "first tick, closing step) runs whole, stage by stage, here; a re-plan alone runs in Python "
                 "before the call",
    "plant": "the PyBullet world of arm and debris body: one compiled call that sends the joint-rate motors' "
             "command, steps and reads arm and debris through PyBullet's C API (plant_path; else arm.send, "
             "stepSimulation and PyBullet's queries in Python, then the compiled read-outs): the arm's read-out "
             "(joint and base state, end effector, base torque) and the debris' (fixture pose and velocities, "
             "offset, gap); the penalty contact near the fixture and a thrust (Python)",
    "post_plant": "the capture monitor (Python), then one compiled call: law and fixtures, framing, safety "
                  "layer, what the simulated hand sees, the row and flags, written into the recorder's chunk",
}

if (fk.BIT_ENGAGED, fk.BIT_CLUTCH, fk.BIT_SATURATED, fk.BIT_FAULT, fk.BIT_WATCHDOG, fk.BIT_REPLAN,
        fk.BIT_SINGULAR, fk.BIT_LIMITED) != (BIT_ENGAGED, BIT_CLUTCH, BIT_SATURATED, BIT_FAULT, BIT_WATCHDOG,
                                            BIT_REPLAN, BIT_SINGULAR, BIT_LIMITED):  # pragma: no cover
    raise ImportError("trials._fused_kernels' flag bits disagree with trial_log.FLAGS")


@dataclass(frozen=True)
class TickPath:
    """Which path a trial's servo tick takes.

    Attributes:
        fused: the tick runs as two compiled calls around the plant (:mod:`trials.fused`).
        reason: what is fused, or why the tick runs stage by stage.
    """

    fused: bool
    reason: str

    def as_dict(self) -> dict[str, object]:
        """Plain data for the trial log's metadata and the bench JSON."""
        return {"fused": self.fused, "reason": self.reason}


#: The staged path asked for (tests, ``bench servo``'s reference run).
STAGED_ON_REQUEST = TickPath(False, "staged on request")


@dataclass(frozen=True)
class _Term:
    kind: int
    scale: float
    law: GuidanceLaw


def _law_terms(law: GuidanceLaw) -> tuple[_Term, ...] | str:
    """The law as fused terms (a ``Sum`` of laws, each maybe ``Scaled``), or why not."""
    members = law.laws if type(law) is Sum else (law,)
    terms: list[_Term] = []
    for member in members:
        scale = 1.0
        inner = member
        if type(member) is Scaled:
            scale, inner = member.authority, member.law
        kinds = {DynamicGuidance: fk.T_DG, WorkspaceWalls: fk.T_WALLS, ReachLimit: fk.T_REACH,
                 JointLimitProximity: fk.T_JOINTS, ReactionBoundary: fk.T_REACTION}
        if type(inner) is NoGuidance:
            continue  # a zero term: the sum is the same
        if type(inner) is PotentialField:
            if inner.obstacles:
                return "a potential field with obstacles has no kernel"
            kind = fk.T_APF
        elif type(inner) in kinds:
            kind = kinds[type(inner)]
        else:
            return f"the law {type(inner).__name__} has no kernel"
        if any(term.kind == kind for term in terms):
            return f"two {type(inner).__name__} terms"
        terms.append(_Term(kind, scale, inner))
    if len(terms) > fk.MAX_TERMS:
        return f"more than {fk.MAX_TERMS} law terms"
    return tuple(terms)


def choose_path(parts: TrialParts) -> TickPath:
    """The fused path when every part of the trial has a kernel, else the staged one and
    why (a real or mouse device, a delayed link, a compensator, the post-capture
    behaviours, an arm over the network link, a law without a kernel)."""
    if parts.link is not None:
        return TickPath(False, "a delayed link")
    if parts.compensator is not None:
        return TickPath(False, "a compensator")
    if parts.post is not None:
        return TickPath(False, "the post-capture behaviours")
    if type(parts.arm) is not PyBulletArm:
        return TickPath(False, f"the arm {type(parts.arm).__name__} is not the in-process PyBullet plant")
    if type(parts.slave) is not SlaveController:
        return TickPath(False, f"the slave {type(parts.slave).__name__} has no kernel")
    commander = parts.commander
    if type(commander) is HapticCommander:
        device = commander.device
        if type(device) is not SimulatedDevice:
            return TickPath(False, f"the device {type(device).__name__} is not the simulated one")
        if type(device.operator) is not HumanOperator or commander.hand is not device:
            return TickPath(False, "the simulated device is not held by the operator model")
        if type(commander.mapping) is not WorkspaceMapping or type(commander.renderer) is not ForceRenderer:
            return TickPath(False, "a mapping or renderer without a kernel")
        who = "participant, device, mapping, slave | law, framing, safety, hand's view, row"
    elif type(commander) is ControllerCommander:
        who = "slave | row (the controller commands in Python)"
    else:
        return TickPath(False, f"the commander {type(commander).__name__} has no kernel")
    terms = _law_terms(parts.law)
    if isinstance(terms, str):
        return TickPath(False, terms)
    return TickPath(True, f"fused: {who}")


def _entry(kernel: Any, *example: Any) -> Any:
    """The machine code of the compiled ``kernel`` for the types of ``example`` (compiled,
    or loaded from numba's cache, here): called with arguments of those types it skips
    the dispatcher's type resolution, about half of a call's cost from Python (0.23 of
    0.47 µs, measured on this class of machine), which a tick pays three times. It does
    not check its arguments' types (an array of another dtype would be read as these):
    every call site passes the table and scalars made in ``__init__``, never replaced, and
    plain ints and floats."""
    signature = tuple(numba.typeof(value) for value in example)
    kernel.compile(signature)
    return kernel.get_overload(signature)


def _address(array: NDArray[np.float64] | NDArray[np.int64] | NDArray[np.uint64], dtype: type) -> int:
    if array.dtype != dtype or not array.flags.c_contiguous:
        raise TypeError(f"the fused tick needs C-contiguous {dtype.__name__} arrays, got {array.dtype} "
                        f"{array.shape}")
    return int(array.__array_interface__["data"][0])


def _quiet_state(monitor: CaptureMonitor, reading: DebrisReading, debris: PyBulletDebris) -> int:
    """The capture stage's steady state for a quiet tick (:meth:`FusedTick.quiet`), or 0:
    :data:`trials._fused_kernels.QUIET_CLOSED` while the tool is closed on the debris
    (the monitor's update has nothing to do, ``settle`` keeps the contact),
    :data:`trials._fused_kernels.QUIET_APART` while nothing has touched, no contact is
    open and nothing pushes the debris (the update only tests whether it left the reach,
    ``settle`` only keeps the gap unless the tool comes within the contact query's margin,
    which the compiled call tests after the step), :data:`trials._fused_kernels.QUIET_PARTED`
    once a contact has ended, the same but that the update only ends any hold unless the
    tool comes within the hold gap (tested in the call too)."""
    if monitor.closed:
        return fk.QUIET_CLOSED if reading.attached else 0
    if reading.in_contact or reading.attached or debris.thrusting:
        return 0
    if monitor.untouched:
        return fk.QUIET_APART
    return fk.QUIET_PARTED if monitor.parted else 0


class FusedTick:
    """The fused form of one :class:`trials.tick.ServoTick` (module docstring).

    Args:
        tick: the tick (its parts must have passed :func:`choose_path`).
    """

    def __init__(self, tick: ServoTick) -> None:
        parts = tick.parts
        self.tick = tick
        self.parts = parts
        terms = _law_terms(parts.law)
        assert not isinstance(terms, str)
        self.terms: tuple[_Term, ...] = terms
        self.haptic = type(parts.commander) is HapticCommander
        self.sc = np.zeros(fk.N_SCALARS)
        # the same floats for the tick's own reads and writes of one scalar: a memoryview
        # item is a Python float, about half as dear to get or set as a numpy element
        self._scalars = cast("memoryview[float]", self.sc.data)
        self.tab = np.zeros(2 * fk.N_ADDRESSES, dtype=np.int64)
        self.rowtab = np.zeros(0, dtype=np.int64)
        # the array each entry of the table holds (None: not written yet)
        self._held: list[NDArray[np.float64] | NDArray[np.int64] | None] = [None] * fk.N_ADDRESSES
        self._row_parts: tuple[NDArray[np.float64], ...] | None = None  # those rowtab lists
        self.safety_state = np.zeros(hk.N_SAFETY_STATE)
        self.safety_config = np.zeros(hk.N_SAFETY_CONFIG)
        self._dummy = np.zeros(16)  # the table's entry for what a trial has not got
        self._dummy_address = _address(self._dummy, np.float64)
        self._dummy_int = np.zeros(3, dtype=np.int64)
        self._plant_read = False  # the plant stage's read-outs in one compiled call (set with the table)
        # the trial recorder's chunks, written by post_plant: rows [start, end) are in the
        # chunks the table points at (end 0: point it first)
        self._slots = parts.recorder if type(parts.recorder) is TrialRecorder else None
        self._chunk: tuple[NDArray[np.float64], NDArray[np.uint64]] | None = None
        self._slot_start = 0
        self._slot_end = 0
        self._debris: PyBulletDebris | None = None
        # the three compiled calls of a tick, each by its machine-code entry
        self._pre_plant = _entry(fk.pre_plant, self.tab, self.sc, 0.0)
        self._plant_native = _entry(fk.plant_native, self.tab, self.sc, 0, 0, 0)
        self._post_plant = _entry(fk.post_plant, self.tab, self.sc, 0.0, 0, 0)
        self._quiet_run = _entry(fk.quiet_run, self.tab, self.sc, 0, 0.0, 0, 0, 0, 0, 0, 0, 0, 0.0, False)
        # the plant step through PyBullet's C API (robot.pybullet_native), when the arm
        # has one for the slave's command array; plant_path says which the stage takes
        self._native: NativePlant | None = None
        self.plant_path = "python: not lifted yet"
        self.lifted = False
        self._restage = False  # the next tick runs staged (the tool has just closed)
        self.ran_python = False  # this tick ran its stages in Python (an event)
        self.fused_ticks = 0
        self.staged_ticks = 0
        self.prepared_ticks = 0  # of the fused ticks: the participant's re-plan ran in Python first
        # of the fused ticks: whole in one compiled call (quiet): apart before any contact,
        # parted after one, closed
        self.quiet_apart_ticks = 0
        self.quiet_parted_ticks = 0
        self.quiet_closed_ticks = 0
        self.quiet_calls = 0  # the compiled calls those ran in (more than one tick a call: a batch)
        self.stages = (self.pre, self.plant, self.post)
        if self.haptic:
            device = parts.commander.device
            self.safety_config[:] = device.safety.pack_config()

    @property
    def quiet_ticks(self) -> int:
        """The ticks that ran whole in one compiled call (:meth:`quiet`), in every state."""
        return self.quiet_apart_ticks + self.quiet_parted_ticks + self.quiet_closed_ticks

    # ------------------------------------------------------------------ lift / lower
    def _table(self) -> None:
        """Every array the kernels touch, by address (gone over at each lift: Python stage
        code may have replaced one, e.g. the slave's model arrays on a capture). An entry
        is written only when its array is another object than the one it holds (each
        address costs a microsecond or two to take, and a lift follows every tick that
        ran staged); entries a trial has not got point at a dummy."""
        tick, parts = self.tick, self.parts
        tab = self.tab
        held = self._held
        seen = [False] * fk.N_ADDRESSES

        def put(index: int, array: NDArray[np.float64] | NDArray[np.int64], dtype: type = np.float64) -> None:
            seen[index] = True
            if held[index] is not array:  # held keeps it alive: no other array can have its id
                tab[index] = _address(array, dtype)
                tab[index + fk.N_ADDRESSES] = array.size
                held[index] = array

        commander = parts.commander
        if self.haptic:
            assert isinstance(commander, HapticCommander)
            device = commander.device
            assert isinstance(device, SimulatedDevice)
            operator = device.operator
            assert isinstance(operator, HumanOperator)
            mapping = commander.mapping
            put(fk.A_OP_S, operator._s)
            put(fk.A_OP_P, operator._p)
            put(fk.A_OP_VEC, operator._vec)
            put(fk.A_OP_COEF, operator._coef)
            put(fk.A_OP_NOISE, operator._noise_buf)
            put(fk.A_OP_RING, operator._ring)
            put(fk.A_DEV_ZOH, device._zoh)
            put(fk.A_DEV_STOPS, device._stops)
            put(fk.A_DEV_POS, device.state.position_m)
            put(fk.A_DEV_VEL, device.state.velocity_m_s)
            put(fk.A_DEV_DRIVE, device._drive)
            put(fk.A_DEV_HAND, device._hand_force)
            put(fk.A_SAFE_OUT, device.safety.force_n)
            put(fk.A_SAFE_ST, self.safety_state)
            put(fk.A_SAFE_CFG, self.safety_config)
            put(fk.A_SEEN_TP, commander._seen_target_pos)
            put(fk.A_SEEN_TV, commander._seen_target_vel)
            put(fk.A_SEEN_EP, commander._seen_ee_pos)
            put(fk.A_SEEN_EV, commander._seen_ee_vel)
            put(fk.A_MAP_SR, mapping._sr)
            put(fk.A_MAP_R, mapping._r)
            put(fk.A_MAP_OFF, mapping.offset_m)
            put(fk.A_MAP_HELD, mapping._held_task_m)
            put(fk.A_REN_SR, np.ascontiguousarray(commander.renderer._sr))  # a constant: a copy will do
        put(fk.A_CMD_DEV_POS, commander.device_position_m)
        put(fk.A_CMD_DEV_VEL, commander.device_velocity_m_s)
        put(fk.A_CMD_HAND, commander.hand_force_n)
        put(fk.A_CMD_CALC, commander.calculated_dev_n)
        put(fk.A_CMD_ACT, commander.actuated_dev_n)
        put(fk.A_CMD_POS, tick._cmd_pos)
        put(fk.A_CMD_VEL, tick._cmd_vel)
        put(fk.A_CMD_ACC, tick._cmd_acc)
        put(fk.A_GUIDE, tick._guide)
        put(fk.A_SIGMA, tick._sigma)
        put(fk.A_TNEXT, tick._t_next)
        arm = parts.arm
        assert isinstance(arm, PyBulletArm)
        state = arm.state()
        base = state.base
        assert base is not None
        put(fk.A_Q, state.q_rad)
        put(fk.A_QD, state.qd_rad_s)
        put(fk.A_BASE_POS, base.position_m)
        put(fk.A_BASE_QUAT, base.orientation_xyzw)
        put(fk.A_BASE_W, base.angular_velocity_rad_s)
        put(fk.A_BASE_V, base.velocity_m_s)
        slave = parts.slave
        a = slave._a
        put(fk.A_MOMENTUM, slave._momentum_l)
        put(fk.A_EXT_F, slave.external_force_n)
        put(fk.A_EXT_P, slave.external_point_m)
        put(fk.A_JOINT_XYZ, a.joint_xyz)
        put(fk.A_JOINT_ROT, a.joint_rot)
        put(fk.A_JOINT_AXIS, a.joint_axis)
        put(fk.A_LINK_MASS, a.link_mass)
        put(fk.A_LINK_COM, a.link_com)
        put(fk.A_LINK_INERTIA, a.link_inertia)
        put(fk.A_EE_OFFSET, a.ee_offset)
        put(fk.A_BASE_INERTIA, a.base_inertia)
        put(fk.A_TASK_ROWS, a.task_rows, np.int64)
        put(fk.A_REACTION_ROWS, a.reaction_rows, np.int64)
        put(fk.A_Q_MIN, a.q_min)
        put(fk.A_Q_MAX, a.q_max)
        put(fk.A_QD_MAX, a.qd_max)
        put(fk.A_QDD_MAX, a.qdd_max)
        put(fk.A_SL_PARAMS, slave._params)
        put(fk.A_SL_QDD, slave._qdd)
        good = slave.last_command
        put(fk.A_GOOD_Q, good.q_rad)
        put(fk.A_GOOD_QD, good.qd_rad_s)
        put(fk.A_GOOD_QDD, good.qdd_rad_s2)
        put(fk.A_SL_STATUS, slave._status_vec)
        put(fk.A_SL_DIAG, slave._diag)
        put(fk.A_JAC_PINV, slave._jac_pinv)
        put(fk.A_SL_ARENA, slave._arena)
        m = tick._m
        reading = tick._reading
        put(fk.A_EE, m.ee_position_m)
        put(fk.A_EE_V, m.ee_velocity_m_s)
        put(fk.A_TARGET_P, tick._target_pos)
        put(fk.A_TARGET_V, tick._target_vel)
        put(fk.A_TARGET_A, tick._target_acc)
        put(fk.A_FORCE_ON_DEBRIS, reading.force_on_debris_n)
        put(fk.A_CONTACT_POINT, reading.contact_point_m)
        put(fk.A_SHOULDER, tick.guidance_state.arm_base_position_m)
        # the plant's read-outs (plant_read): the arm's buffers, model and measurement, the debris'
        raw, before, arena = arm.readout_buffers
        put(fk.A_RAW, raw)
        put(fk.A_BEFORE, before)
        put(fk.A_ARM_ARENA, arena)
        put(fk.A_ATTITUDE, m.base_attitude_rad)
        put(fk.A_TORQUE, m.base_torque_n_m)
        arm_arrays = arm.model.arrays
        put(fk.A_ARM_XYZ, arm_arrays.joint_xyz)
        put(fk.A_ARM_ROT, arm_arrays.joint_rot)
        put(fk.A_ARM_AXIS, arm_arrays.joint_axis)
        put(fk.A_ARM_EE_OFFSET, arm_arrays.ee_offset)
        put(fk.A_ARM_BASE_INERTIA, arm_arrays.base_inertia)
        # the compiled read-out writes the measurement the tick shares, and the debris'
        # buffer when the scene is the PyBullet debris; otherwise the plant stage runs
        # the arm's and the scene's own read-outs
        self._plant_read = m is arm._measurement and raw.size == 2 * arm.n_joints + 13
        self._debris = tick.scene if type(tick.scene) is PyBulletDebris else None
        if self._debris is not None:
            put(fk.A_DEBRIS, self._debris.readout_buffer)
        self._bind_native(arm)
        if self._native is not None:
            put(fk.A_DEBRIS_STATE, self._native.debris_state)
        for term in self.terms:
            law = term.law
            if isinstance(law, DynamicGuidance):
                put(fk.A_DG_GAINS, law._gains)
                put(fk.A_DG_E0, law.path.e0_m)
                put(fk.A_DG_DE0, law.path.de0_m_s)
                put(fk.A_DG_SINCE, law._takeover_since_s)
            elif isinstance(law, WorkspaceWalls):
                put(fk.A_WALL_LO, law._lower)
                put(fk.A_WALL_HI, law._upper)
                put(fk.A_WALL_BACK, law._back)
            elif isinstance(law, JointLimitProximity):
                put(fk.A_JL_LO, law._lower_wall)
                put(fk.A_JL_HI, law._upper_wall)
        put(fk.A_ROW, parts.recorder.row)
        row_parts = tick._row_parts
        if row_parts is not self._row_parts:  # ServoTick._share makes a new tuple of them
            rowtab = np.zeros(2 * len(row_parts), dtype=np.int64)
            for i, part in enumerate(row_parts):
                rowtab[2 * i] = _address(part, np.float64)
                rowtab[2 * i + 1] = part.size
            if sum(part.size for part in row_parts) != parts.recorder.row.size:
                raise ValueError("the row's parts do not fill the recorder's row")
            self.rowtab = rowtab
            self._row_parts = row_parts  # held: the parts stay alive while the table lists them
        put(fk.A_ROWTAB, self.rowtab, np.int64)
        dummy = self._dummy
        for index in range(fk.N_ADDRESSES):
            if not seen[index] and held[index] is not dummy:
                tab[index] = self._dummy_address
                tab[index + fk.N_ADDRESSES] = dummy.size
                held[index] = dummy
        self._slot_end = 0  # the recorder's chunk: point the kernel at it again at the next row

    def _bind_native(self, arm: PyBulletArm) -> None:
        """The arm's native plant step for the slave's command array (its debris bound),
        or the reason the plant stage keeps PyBullet's Python calls."""
        self._native = None
        if not self._plant_read:
            self.plant_path = "python: the arm's measurement is not the tick's"
            return
        native = arm.native_plant(self.parts.slave.last_command.qd_rad_s)
        if isinstance(native, str):
            self.plant_path = f"python: {native}"
            return
        debris = self._debris
        if debris is None:
            native.bind_debris(None)
        else:
            native.bind_debris(debris.body_id, *debris.coasting_velocities)
        self._native = native
        self.plant_path = "native: PyBullet's C API (robot/native/pb_plant.c)"

    def lift(self) -> bool:
        """Take the stages' Python state into the kernels' vectors; False when the next
        tick must run staged (a first tick, a pending re-anchoring or closing)."""
        tick, parts, sc = self.tick, self.parts, self.sc
        slave = parts.slave
        if tick.k == 0 or slave._closing or not slave._have_good:
            return False
        sc[:] = 0.0
        sc[fk.C_DT] = tick.dt_s
        sc[fk.C_PUSHES_ARM] = 1.0 if tick._pushes_arm else 0.0
        sc[fk.C_N] = parts.arm.n_joints
        sc[fk.C_BASE_MASS] = slave._a.base_mass
        sc[fk.L_ATTACHED] = 1.0 if tick._reading.attached else 0.0
        sc[fk.C_ARM_DT] = parts.arm.dt_s
        commander = parts.commander
        if self.haptic:
            assert isinstance(commander, HapticCommander)
            device = commander.device
            assert isinstance(device, SimulatedDevice)
            operator = device.operator
            assert isinstance(operator, HumanOperator)
            mapping = commander.mapping
            if not commander._anchored or mapping._reanchor or operator._n_percepts == 0:
                return False
            params = operator.params
            sc[fk.C_HAS_DEVICE] = 1.0
            sc[fk.C_INV_SCALE] = mapping._inv_scale
            sc[fk.C_INV_FORCE_SCALE] = mapping._inv_force_scale
            sc[fk.C_NOISE_DRAWS] = operator._noise_buf.size
            sc[fk.C_RING_CAP] = operator._cap
            sc[fk.C_OP_INTENT] = 1.0 if params.has_intent else 0.0
            sc[fk.C_OP_MARGIN] = params.clutch_margin_m
            sc[fk.C_OP_LOOKAHEAD] = params.clutch_lookahead_s
            sc[fk.C_OP_HOLDING_GAP] = 2.0 * params.surface_offset_m
            sc[fk.C_OP_MIN_DURATION] = params.min_duration_s
            sc[fk.C_OP_FITTS_A] = params.fitts_a_s
            sc[fk.C_OP_FITTS_B] = params.fitts_b_s
            sc[fk.C_OP_FITTS_W] = params.fitts_width_m
            sc[fk.C_OP_DWELL] = params.clutch_dwell_s
            sc[fk.C_DEV_DT] = device.dt_s
            sc[fk.C_WS_LOW:fk.C_WS_LOW + 3] = operator._ws_low
            sc[fk.C_WS_HIGH:fk.C_WS_HIGH + 3] = operator._ws_high
            sc[fk.L_DEV_T] = device.t_s
            sc[fk.L_OP_ENGAGED] = 1.0 if operator.buttons & BUTTON_ENGAGE else 0.0
            sc[fk.L_OP_NEXT_PLAN] = operator._next_plan_t
            sc[fk.L_OP_RELEASE] = operator._release_t
            sc[fk.L_OP_LAST_GAP] = operator._last_gap_m
            sc[fk.L_OP_HOLDING] = 1.0 if operator._holding else 0.0
            sc[fk.L_OP_REACH_T] = operator._reach_t
            sc[fk.L_OP_REACH_X:fk.L_OP_REACH_X + 3] = operator._reach_x
            sc[fk.L_OP_REACH_V:fk.L_OP_REACH_V + 3] = operator._reach_v
            sc[fk.L_OP_N_PERCEPTS] = operator._n_percepts
            sc[fk.L_CLUTCHED] = 1.0 if mapping.clutched else 0.0
            device.safety.pack_state(self.safety_state)
        for i, term in enumerate(self.terms):
            base = fk.LAW0 + fk.TERM_SIZE * i
            sc[base] = term.kind
            sc[base + 1] = term.scale
            law = term.law
            if isinstance(law, DynamicGuidance):
                if not law._planned:
                    return False
                path = law.path
                sc[base + fk.D_KIND] = path._kind
                sc[base + fk.D_ALPHA] = path._alpha
                sc[base + fk.D_W] = path._w
                sc[base + fk.D_INTERVAL] = law.replan_interval_s
                sc[base + fk.D_T0] = path.t0_s
                sc[base + fk.D_LAST_PLAN] = law._last_plan_s
            elif isinstance(law, PotentialField):
                sc[base + 2] = law.k_n_m
                sc[base + 3] = math.nan if law.saturation_distance_m is None else law.saturation_distance_m
            elif isinstance(law, WorkspaceWalls):
                sc[base + 2] = law.stiffness_n_m
                sc[base + 3] = law.damping_n_s_m
            elif isinstance(law, ReachLimit):
                sc[base + 2] = law._wall_m
                sc[base + 3] = law.stiffness_n_m
                sc[base + 4] = law.damping_n_s_m
            elif isinstance(law, JointLimitProximity):
                sc[base + 2] = law.stiffness_n_rad
            elif isinstance(law, ReactionBoundary):
                sc[base + 2] = law.stiffness_n_m
                sc[base + 3] = law.margin
                sc[base + 4] = law.threshold
        self._table()
        sc[fk.C_HAS_DEBRIS] = 0.0 if self._debris is None else 1.0
        if self._debris is not None:  # the quiet tick's capture stage (quiet_tick)
            shoulder, reach2 = tick.monitor.leaving_test
            sc[fk.C_Q_MARGIN] = CONTACT_QUERY_MARGIN_M
            sc[fk.C_Q_HOLD_GAP] = tick.monitor.rules.hold_gap_m
            sc[fk.C_Q_REACH2] = reach2
            sc[fk.C_Q_SHOULDER:fk.C_Q_SHOULDER + 3] = shoulder
            sc[fk.C_Q_RADIUS] = tick.limits.target_radius_m
            sc[fk.C_Q_POINT], sc[fk.C_Q_POINT_V] = self._debris.point_slots
        self.lifted = True
        return True

    def lower(self) -> None:
        """Give the stages back the state the kernels advanced (before Python stage code)."""
        if not self.lifted:
            return
        self.lifted = False
        tick, parts, sc = self.tick, self.parts, self.sc
        commander = parts.commander
        if self.haptic:
            assert isinstance(commander, HapticCommander)
            device = commander.device
            assert isinstance(device, SimulatedDevice)
            operator = device.operator
            assert isinstance(operator, HumanOperator)
            device.t_s = device.state.t_s = float(sc[fk.L_DEV_T])
            operator._n_percepts = int(sc[fk.L_OP_N_PERCEPTS])
            device.safety.unpack_state(self.safety_state)
        slave = parts.slave
        faults = int(sc[fk.L_SLAVE_FAULTS])
        slave.fault_count += faults
        sc[fk.L_SLAVE_FAULTS] = 0.0
        status = slave.status
        sv = slave._status_vec
        status.t_s = tick._t
        status.sigma_ratio = float(sv[rk.S_SIGMA_RATIO])
        status.singular = bool(sv[rk.S_SINGULAR] > 0.0)
        status.limited = bool(sv[rk.S_LIMITED] > 0.0)
        status.residual = float(sv[rk.S_RESIDUAL])
        status.fault = bool(sv[rk.S_FAULT] > 0.0)
        status.base_rate_rad_s = float(sv[rk.S_BASE_RATE])
        status.rate_bounded = bool(sv[rk.S_RATE_BOUNDED] > 0.0)
        status.rate_scale = float(sv[rk.S_RATE_SCALE])
        bounded = int(sc[fk.L_RATE_TICKS])
        if bounded > 0:
            if slave.rate_bound_ticks == 0:
                slave.rate_bound_first_s = float(sc[fk.L_RATE_FIRST])
            slave.rate_bound_ticks += bounded
            slave.rate_bound_last_s = float(sc[fk.L_RATE_LAST])
            sc[fk.L_RATE_TICKS] = 0.0
        slave.last_command.t_s = tick._t
        tick.guidance_state.t_s = tick._t_next_s
        replanned = bool(sc[fk.L_REPLANNED] != 0.0)
        added = int(sc[fk.L_LAW_COUNT])
        sc[fk.L_LAW_COUNT] = 0.0
        for i, term in enumerate(self.terms):
            law = term.law
            if isinstance(law, DynamicGuidance):
                base = fk.LAW0 + fk.TERM_SIZE * i
                law.path.t0_s = float(sc[base + fk.D_T0])
                law._last_plan_s = float(sc[base + fk.D_LAST_PLAN])
                law.replanned = replanned
                law.replan_count += added
        self._wrappers(parts.law, replanned)

    @staticmethod
    def _wrappers(law: GuidanceLaw, replanned: bool) -> None:
        """``Sum`` and ``Scaled`` take their members' re-plan state, as their ``force`` does."""
        members = law.laws if type(law) is Sum else (law,)
        for member in members:
            if type(member) is Scaled:
                member.replanned = member.law.replanned
                member.replan_count = member.law.replan_count
        if type(law) is Sum:
            law.replanned = replanned
            law.replan_count = sum(m.replan_count for m in law._replanners)

    # ------------------------------------------------------------------ the tick
    def _staged(self) -> None:
        """This tick in Python, stage by stage (the reference), then lift again."""
        self.lower()
        tick = self.tick
        for stage in tick._stages:
            stage()
        self.ran_python = True
        self.staged_ticks += 1
        self.lift()

    def pre(self) -> None:
        """Participant, device, mapping, slave (compiled); or the whole tick staged."""
        self.ran_python = False
        if self._restage or (not self.lifted and not self.lift()):
            self._restage = False
            self._staged()
            return
        tick = self.tick
        t = tick._t = tick.k * tick.dt_s
        if not self.haptic:
            tick.parts.commander.command(t, tick._cmd_pos, tick._cmd_vel, tick._cmd_acc)
        self._answer(self._pre_plant(self.tab, self.sc, t), t)

    def _answer(self, event: int, t: float) -> None:
        """What ``pre_plant``'s answer at ``t`` asks for: nothing more (:data:`GO`), the
        participant's Python part alone, or the whole tick staged."""
        if event == fk.EVENT_PLAN:  # the participant re-plans (or refills its noise) only
            event = self._prepared(t)
        if event != fk.GO:
            self._staged()
            return
        self.fused_ticks += 1

    def _prepared(self, t: float) -> int:
        """The participant's Python part of this period alone
        (``HumanOperator.prepare_drive``: the re-plan or the noise refill), between a
        lower and a lift, then ``pre_plant`` again without its event check: what the
        staged tick's device stage does before its compiled drive, without the other
        eight stages in Python. Returns ``pre_plant``'s answer."""
        self.lower()
        commander = self.parts.commander
        assert isinstance(commander, HapticCommander)  # EVENT_PLAN comes only from the participant
        device = commander.device
        assert isinstance(device, SimulatedDevice)
        operator = device.operator
        assert isinstance(operator, HumanOperator)
        operator.prepare_drive(device.t_s, device.state.position_m, device.state.velocity_m_s)
        if not self.lift():  # cannot happen (nothing lift checks has changed); staged then
            raise RuntimeError("the fused tick could not lift after the participant's re-plan")
        self.prepared_ticks += 1
        self._scalars[fk.L_PREPARED] = 1.0
        return int(self._pre_plant(self.tab, self.sc, t))

    def plant(self) -> None:
        """The PyBullet world: the joint command out, one step, the arm's and the debris'
        read-outs (the plant stage of the fused tick): in one compiled call that steps
        through PyBullet's C API (:meth:`_native_plant`), or PyBullet's calls in Python and
        the read-outs' arithmetic in one compiled call
        (:func:`trials._fused_kernels.plant_read`: the arm's and the debris' own kernels)."""
        if self.ran_python:
            return
        tick, parts = self.tick, self.parts
        arm = parts.arm
        native = self._native
        if native is not None and self._native_plant(native, arm, tick):
            return
        arm.send(parts.slave.last_command)
        t_next = tick._t_next_s = tick._t + tick.dt_s
        if self._plant_read:
            assert isinstance(arm, PyBulletArm)  # choose_path: the in-process plant
            state = arm.advance_raw()
            debris = self._debris
            if debris is None:
                fk.plant_read(self.tab, self.sc, state, state[1:])
                m = tick._m
                tick.scene.read(t_next, m.ee_position_m, m.ee_velocity_m_s)
                return
            body = debris.query(t_next)
            if body is None:  # carried: the kernel reads its motion off the arm's
                self._scalars[fk.C_CARRIED] = 1.0
                gap = fk.plant_read(self.tab, self.sc, state, state[1:])
                debris.settle(debris.centre_m, gap, tick._m.ee_velocity_m_s)
                return
            self._scalars[fk.C_CARRIED] = 0.0
            gap = fk.plant_read(self.tab, self.sc, state, body)
            debris.settle(body[0], gap, tick._m.ee_velocity_m_s)
            return
        arm.advance()
        m = arm.measure()
        if m is not tick._m:  # a new measurement instance: Python must re-point everything
            self.lower()
            tick._share(m)
        tick.scene.read(t_next, m.ee_position_m, m.ee_velocity_m_s)

    def _native_plant(self, native: NativePlant, arm: PyBulletArm, tick: ServoTick) -> bool:
        """:meth:`plant` through the native step (:func:`trials._fused_kernels.plant_native`);
        False when this tick needs the Python calls (a new command array, a closed arm,
        the tick of the merge, a carried proxy kept in place), then nothing was done."""
        targets = self.parts.slave.last_command.qd_rad_s
        if targets is not native.targets:
            return False
        if not arm.ready_to_step_natively(native):
            return False
        t_next = tick._t + tick.dt_s
        debris = self._debris
        scalars = self._scalars
        if debris is None:
            mode = DEBRIS_NONE
        else:
            mode = debris.native_read(t_next)
            if mode < 0:
                return False
            scalars[fk.C_CARRIED] = 1.0 if mode == DEBRIS_NONE else 0.0
        tick._t_next_s = t_next
        gap = self._plant_native(self.tab, self.sc, native.step_address, native.address, mode)
        self._stepped(native, arm, debris, mode, gap, targets)
        return True

    def _stepped(self, native: NativePlant, arm: PyBulletArm, debris: PyBulletDebris | None, mode: int,
                 gap: float, targets: NDArray[np.float64], steps: int = 1) -> None:
        """The plant stage's Python after ``steps`` native steps: a failure raised, the
        arm's bookkeeping, then the debris' contact and thrust (``settle``, with the last
        step's gap) or the scene's read."""
        scalars = self._scalars
        if scalars[fk.C_NATIVE_CODE] != 0.0:
            raise_step_error(int(scalars[fk.C_NATIVE_CODE]), targets)
        arm.stepped_natively(targets, steps)
        tick = self.tick
        if debris is None:
            m = tick._m
            tick.scene.read(tick._t_next_s, m.ee_position_m, m.ee_velocity_m_s)
        else:
            debris.settle(debris.centre_m if mode == DEBRIS_NONE else native.debris_centre_m, gap,
                          tick._m.ee_velocity_m_s)

    def quiet(self, most: int = 1) -> bool | None:
        """Up to ``most`` whole ticks in one compiled call (:func:`trials._fused_kernels.quiet_run`
        of :func:`~trials._fused_kernels.quiet_tick`) when nothing in them needs Python:
        the plant steps natively, the rows go into the recorder's current chunk, and the
        capture stage is in a steady state (:func:`_quiet_state`: the tool beyond the
        contact query's margin before any contact, or after one and beyond the hold gap;
        or the tool closed on the debris). The
        Python left is the stages' bookkeeping (the arm's clock, the debris' gap, the
        monitor's leaving test, computed in the call), done once for the ticks that ran,
        and the end test of the last. Returns whether the trial goes on, or None when the
        first tick is not quiet, before anything ran: the caller then runs :meth:`pre`,
        :meth:`plant`, :meth:`post` and the end test. A tick found not quiet inside the
        call (a participant's event; the tool within the margin after the step) goes on
        in Python from there, as :meth:`pre` or :meth:`plant` would.

        More than one tick a call (a headless clock's batch, :meth:`ServoTick.run_ticks`)
        runs only where nothing between two ticks may differ from one tick a call: the
        participant drives the simulated device (no Python commander per tick), the debris
        is not thrust, no live snapshot is published; the call stops at the recorder's
        chunk, the trial's last tick and every tick whose end test could end the trial or
        record the reach (``quiet_run``), and a failed write is seen after the call."""
        native, recorder, debris = self._native, self._slots, self._debris
        if self._restage or not self.lifted or native is None or recorder is None or debris is None:
            return None
        tick = self.tick
        reading = tick._reading
        monitor = tick.monitor
        state = _quiet_state(monitor, reading, debris)
        rows = recorder.rows
        if not state or rows >= self._slot_end:
            return None
        targets = self.parts.slave.last_command.qd_rad_s
        arm = self.parts.arm
        if targets is not native.targets or not arm.ready_to_step_natively(native):
            return None
        k, dt = tick.k, tick.dt_s
        t = k * dt
        t_next = t + dt
        mode = debris.native_read(t_next)
        if mode < 0:
            return None
        self.ran_python = False
        tick._t = t
        t_stop = math.inf
        if not self.haptic:
            tick.parts.commander.command(t, tick._cmd_pos, tick._cmd_vel, tick._cmd_acc)
            most = 1
        elif most > 1:
            if debris.thrusting or tick.snapshot is not None:
                most = 1
            else:
                most = min(most, self._slot_end - rows, tick.max_ticks - k)
                t_stop = monitor.window_end_s  # untouched, the leaving test ends it instead
        scalars = self._scalars
        scalars[fk.C_CARRIED] = 1.0 if mode == DEBRIS_NONE else 0.0
        scene_bits = BIT_CAPTURED if reading.attached else 0  # apart: no contact (quiet)
        answer = self._quiet_run(self.tab, self.sc, k, dt, native.step_address, native.address, mode,
                                 rows - self._slot_start, scene_bits, state, most, t_stop,
                                 tick.reached_at_s != tick.reached_at_s)
        ran = int(scalars[fk.L_Q_RAN])
        if ran:  # the bookkeeping of the ticks that ran whole, once: only the last one's state shows
            self.quiet_calls += 1
            self.fused_ticks += ran
            k += ran
            t = (k - 1) * dt
            t_next = t + dt
            tick._t, tick._t_next_s = t, t_next
            if answer == fk.Q_PLANT:  # the next tick's settle follows at once and overwrites the gap
                arm.stepped_natively(targets, ran)
            else:
                self._stepped(native, arm, debris, mode, scalars[fk.L_Q_GAP], targets, ran)
            if state == fk.QUIET_CLOSED:
                self.quiet_closed_ticks += ran
            else:
                monitor.apart(scalars[fk.L_Q_LEFT_REACH] != 0.0)  # parted: the answer unused
                if state == fk.QUIET_APART:
                    self.quiet_apart_ticks += ran
                else:
                    self.quiet_parted_ticks += ran
            recorder.flag_bits = int(scalars[fk.L_Q_BITS])
            recorder.commit_rows(ran)
            tick.k = k
            if answer == fk.Q_DONE:
                if ran > 1:
                    debris.native_read(t_next)  # its clock at the last tick's
                return bool(tick._end(scalars[fk.L_Q_DISTANCE]))
            t = k * dt  # the tick the call stopped in
            t_next = t + dt
            debris.native_read(t_next)
            tick._t = t
        if answer == fk.Q_PRE:
            self._answer(int(scalars[fk.L_Q_EVENT]), t)
            self.plant()
            self.post()
            return bool(tick._end())
        self.fused_ticks += 1
        tick._t_next_s = t_next
        self._stepped(native, arm, debris, mode, scalars[fk.L_Q_GAP], targets)
        self.post()  # Q_PLANT
        return bool(tick._end())

    def post(self) -> None:
        """The capture monitor (Python), then law, framing, safety, hand, row (compiled);
        the row goes straight into the recorder's chunk when the recorder is the trial
        recorder (:meth:`trials.recorder.TrialRecorder.row_slot`), else through
        ``append_row``."""
        if self.ran_python:
            return
        tick, parts = self.tick, self.parts
        if not self.lifted:  # the plant handed out a new measurement
            self.lift()
        payload = tick.payload
        # the staged stage itself: the monitor and, on the capture, the scene, the slave
        # and the commander take the payload (none of them reads the lifted state)
        tick._capture()
        if tick.payload is not payload:
            self._restage = True  # the closing step runs staged
        reading = tick._reading
        scene_bits = BIT_CAPTURED if reading.attached else BIT_CONTACT if reading.in_contact else 0
        recorder = self._slots
        if recorder is None:
            bits = self._post_plant(self.tab, self.sc, tick._t_next_s, -1, scene_bits)
            parts.recorder.flag_bits = bits
            parts.recorder.append_row()
        else:
            rows = recorder.rows
            if rows >= self._slot_end:  # a new chunk (or a new table): point the kernel at it
                self._point_chunk(recorder)
            recorder.flag_bits = self._post_plant(self.tab, self.sc, tick._t_next_s, rows - self._slot_start,
                                                  scene_bits)
            recorder.commit_row()
        tick.k += 1

    def _point_chunk(self, recorder: TrialRecorder) -> None:
        """The table's entries for the recorder's current chunks (row_slot)."""
        floats, flags, offset = recorder.row_slot()
        self.tab[fk.A_CHUNK] = _address(floats, np.float64)
        self.tab[fk.A_CHUNK + fk.N_ADDRESSES] = floats.size
        self.tab[fk.A_CHUNK_FLAGS] = _address(flags, np.uint64)
        self.tab[fk.A_CHUNK_FLAGS + fk.N_ADDRESSES] = flags.size
        if floats.shape != (recorder.row.size, flags.size):
            raise ValueError(f"the recorder's chunk is {floats.shape}, not ({recorder.row.size}, {flags.size})")
        self._chunk = (floats, flags)  # held while the table points at them
        self._slot_start = recorder.rows - offset
        self._slot_end = self._slot_start + flags.size
