"""The servo tick: one function, whatever clock drives it (docs/architecture.md).

    commander.command (stylus -> task frame, or the controller) -> slave.step (eq. 10 +
    eq. 6) -> arm.advance + arm.measure -> scene.read + target.state -> capture monitor
    (contact, hold, the tool closing) -> law.force (eq. 11 | APF | none) ->
    commander.render (task -> device frame) -> commander.actuate (safety layer, force
    out) -> recorder.append_row

The parts come in one frozen, typed bundle (:class:`TrialParts`) whose fields are the
seam protocols. Every array the tick touches is allocated once in ``__init__``; the
stages fill them in place and hand the recorder one preallocated row. When a stage
raises, the tick commands zero force, latches :attr:`ServoTick.fault` and re-raises, so
the clock that drives it stops and the caller sees the error.

Time: tick ``k`` advances the plant from ``t = k dt`` to ``t + dt``; what it records
(plant read-outs, target, forces) is stamped ``t + dt``. The command is taken at ``t``.

Timing for ``capture-trainer bench servo`` is a hook around the stages
(:class:`StageTimer`), not code inside them.

When every part has a compiled kernel the tick runs fused (:mod:`trials.fused`: two
compiled calls around the plant, the same kernels on the same arrays); the choice is
:attr:`ServoTick.path`, recorded in the trial log's metadata.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
from numpy.typing import NDArray

from capture_trainer import trial_log
from capture_trainer.errors import TrialError
from guidance.law import GuidanceLaw
from guidance.state import GuidanceState
from robot.arm import ArmBackend, ArmMeasurement
from robot.debris import CaptureScene, Payload, ReleasesPayload
from robot.slave import SlaveController, SlaveStatus
from scenarios.motion import TargetMotion
from trials.behaviours.machine import MACHINE_OUTCOMES
from trials.capture_event import CaptureMonitor, CaptureRules
from trials.commanders import (BIT_CAPTURED, BIT_CONTACT, BIT_FAULT, BIT_LIMITED, BIT_REPLAN, BIT_SINGULAR,
                               Commander)
from trials.compensators import Compensator
from trials.delay import DelayedLink, DelayLine
from trials.fused import STAGED_ON_REQUEST, FusedTick, TickPath, choose_path
from trials.proximity import ProximityScene

if TYPE_CHECKING:
    from trials.behaviours.phase import PostCapturePhase

#: Stage names, in tick order, for the per-stage timing of ``capture-trainer bench servo``.
STAGES = ("device", "slave", "plant", "target", "capture", "guidance", "render", "command", "record")
#: Capture rules of a tick built without any (tools and benchmarks): the defaults of a scenario.
DEFAULT_ENVELOPE_RADIUS_M = 0.012


class TickRecorder(Protocol):
    """What the tick needs of a recorder: one preallocated row of ``trial_log`` float
    columns and the flag bits, appended once per tick without blocking."""

    row: NDArray[np.float64]
    flag_bits: int
    write_error: str | None

    @property
    def flag_columns(self) -> tuple[str, ...]: ...

    def append_row(self) -> None: ...


class SnapshotSink(Protocol):
    """A display snapshot (``trials.snapshot.SharedSnapshot``): named slots, published."""

    staging: NDArray[np.float64]
    offsets: dict[str, slice | int]

    def publish(self) -> None: ...


@dataclass(frozen=True)
class TrialParts:
    """The seams of one trial, assembled by ``trials.runner``.

    Attributes:
        commander: the participant's seat: a hand on a device or the controller.
        slave: the one slave-control path (eq. 10 -> eq. 6 -> joint command).
        arm: any arm backend (simulated plant or a real-arm link).
        target: the debris' capture point, task frame (the scene itself when there is one).
        law: the guidance law (task frame; ``none`` for the controller).
        recorder: the trial log's row buffer.
        scene: the debris and the capture tool (``robot.debris.CaptureScene``); None: a
            :class:`trials.proximity.ProximityScene` on ``target``.
        link: the delayed link between the operator's side and the arm's side
            (:class:`trials.delay.DelayedLink`); None: no delay.
        compensator: what the operator's side makes of the delayed state and the contact
            force (:mod:`trials.compensators`); None: neither delay compensation nor
            contact feedback.
        post: the behaviours after the capture (:mod:`trials.behaviours.phase`: the
            admittance controller, the fixtures, the task machine); None: the commander
            keeps commanding after the capture.
    """

    commander: Commander
    slave: SlaveController
    arm: ArmBackend
    target: TargetMotion
    law: GuidanceLaw
    recorder: TickRecorder
    scene: CaptureScene | None = None
    link: DelayedLink | None = None
    compensator: Compensator | None = None
    post: PostCapturePhase | None = None


@dataclass(frozen=True)
class TickLimits:
    """When a trial ends.

    Attributes:
        dt_s: servo period [s].
        max_ticks: the time limit in ticks.
        target_radius_m: subtracted from the distance; reached when it is <= 0 [m] (the
            paper's reach; with a scene, its contact radius).
        end_after_reach_s: how long the trial goes on after the capture or, without one,
            after the first contact [s] (``inf``: to the time limit).
        capture: when the tool closes; None: a scenario's defaults with ``end_after_reach_s``.
    """

    dt_s: float
    max_ticks: int
    target_radius_m: float
    end_after_reach_s: float
    capture: CaptureRules | None = None

    def capture_rules(self) -> CaptureRules:
        """:attr:`capture`, or the defaults."""
        if self.capture is not None:
            return self.capture
        return CaptureRules(envelope_radius_m=max(DEFAULT_ENVELOPE_RADIUS_M, 2.0 * self.target_radius_m),
                            capture_speed_m_s=0.05, hold_s=0.1, hold_gap_m=0.001, window_s=self.end_after_reach_s)


class StageTimer:
    """Per-stage wall times of the last ``capacity`` ticks [s] (benchmarks only).

    ``stamps[i, 0]`` is the tick's start and ``stamps[i, s + 1]`` the end of stage ``s``;
    ``names`` are the stages' names (:data:`STAGES`, or ``trials.fused.FUSED_STAGES`` for
    a fused tick).
    """

    def __init__(self, capacity: int, names: tuple[str, ...] = STAGES) -> None:
        self.capacity = capacity
        self.names = names
        self.stamps = np.zeros((capacity, len(names) + 1))
        self.count = 0

    def run(self, stages: tuple[Callable[[], None], ...], end: Callable[[], bool]) -> bool:
        """Run the stages, stamping the clock around each, then the end test."""
        clock = time.perf_counter
        stamps = self.stamps[self.count % self.capacity]
        stamps[0] = clock()
        for index, stage in enumerate(stages, start=1):
            stage()
            stamps[index] = clock()
        self.count += 1
        return end()


class ServoTick:
    """One servo period of a trial; call it once per period until it returns False.

    Args:
        parts, limits: the trial's seams and when it ends.
        staged: run stage by stage even when the parts would allow the fused tick (the
            reference path: tests and ``bench servo``).
    """

    def __init__(self, parts: TrialParts, limits: TickLimits, staged: bool = False) -> None:
        self.parts = parts
        self.limits = limits
        self.dt_s = limits.dt_s
        self.max_ticks = limits.max_ticks
        self.k = 0
        self.fault: BaseException | None = None
        self.reached_at_s = math.nan
        self.end_reason = "time_limit"
        self.snapshot: SnapshotSink | None = None
        self.snapshot_every = 10
        self.timer: StageTimer | None = None
        self._t = 0.0
        self._t_next_s = 0.0
        self._t_next = np.zeros(1)
        self._sigma = np.ones(1)
        self._cmd_pos, self._cmd_vel, self._cmd_acc = np.zeros(3), np.zeros(3), np.zeros(3)
        self.link = parts.link
        self.compensator = parts.compensator
        self._guide = np.zeros(3)
        self._contact_hand = np.zeros(3)
        # the force felt: guidance alone (the same array), or guidance plus contact feedback
        feedback = self.compensator is not None and self.compensator.contact_force_scale > 0.0
        self._felt = np.zeros(3) if feedback else self._guide
        self._last_publish_wall_s = 0.0
        self._last_publish_k = 0
        self._worst_period_s = 0.0
        recorder = parts.recorder
        if tuple(recorder.flag_columns) != trial_log.FLAGS:
            raise TrialError(f"the recorder's flag columns must be trial_log.FLAGS, got {recorder.flag_columns}")
        self._m: ArmMeasurement = parts.arm.measure()
        self._status: SlaveStatus = parts.slave.status
        self.ee0_m = self._m.ee_position_m.copy()
        self.scene: CaptureScene = parts.scene or ProximityScene(parts.target, limits.target_radius_m)
        #: the contact pushes the arm itself (the debris in the arm's own world), so the
        #: slave's dynamics take the contact force on the tool into account
        self._pushes_arm = self.scene.contact_model == "physics"
        self.monitor = CaptureMonitor(limits.capture_rules())
        self.payload: Payload | None = None
        self._reading = self.scene.reading
        # the target is the scene's fixture: its reading's arrays, refilled by scene.read
        reading = self._reading
        self._target_pos, self._target_vel = reading.point_m, reading.point_velocity_m_s
        self._target_acc = reading.point_acceleration_m_s2
        self.scene.read(0.0, self._m.ee_position_m, self._m.ee_velocity_m_s)
        self._delay_setup()
        parts.commander.start(self.ee0_m)
        self.guidance_state = GuidanceState.for_joints(parts.arm.n_joints)
        self._row_parts: tuple[NDArray[np.float64], ...] = ()
        self.post = parts.post
        self._post_row = parts.post.row if parts.post is not None else np.array(trial_log.POST_CAPTURE_IDLE)
        # the master force the arm's side used (the mixed command's f_m); the phase reads
        # the hand's force as it arrived over the command path
        self._master_row = parts.post.master_force_n if parts.post is not None else np.zeros(1)
        if parts.post is not None:
            parts.post.hand_force_n = self._slave_hand
        self._share(self._m)
        self._stages = (self._command, self._slave, self._plant, self._target, self._capture, self._guidance,
                        self._render, self._actuate, self._record)
        #: which path the tick takes (fused or staged, and why)
        self.path: TickPath = STAGED_ON_REQUEST if staged else choose_path(parts)
        self._fused = FusedTick(self) if self.path.fused else None

    @property
    def fused(self) -> FusedTick | None:
        """The fused form of this tick (None on the staged path)."""
        return self._fused

    def _delay_setup(self) -> None:
        """The arrays each side of the link uses: without a link the slave reads the
        commander's arrays and the operator's side the arm's; with one, each side reads
        its own copies, refilled by the link (the slave starts holding the end effector
        where it is; the operator starts seeing the start)."""
        m = self._m
        hand = self.parts.commander.hand_force_n
        if self.link is None:
            self._slave_cmd = (self._cmd_pos, self._cmd_vel, self._cmd_acc)
            self._slave_hand = hand
            return
        self._slave_cmd = (m.ee_position_m.copy(), np.zeros(3), np.zeros(3))
        self._slave_hand = np.zeros(3)  # the hand's force as it arrived on the arm's side
        self._command_sent = (self._cmd_pos, self._cmd_vel, self._cmd_acc, hand)
        self._command_received = (*self._slave_cmd, self._slave_hand)
        self._seen = np.concatenate((m.ee_position_m, m.ee_velocity_m_s, self._target_pos, self._target_vel,
                                     self._target_acc, self._reading.force_on_debris_n))
        # a predicting compensator keeps what arrived (the ghost) apart from what it shows
        predicts = self.compensator is not None and self.compensator.predicts
        self._delayed = self._seen.copy() if predicts else self._seen
        self._delayed_views = tuple(self._delayed[3 * i:3 * i + 3] for i in range(6))
        self._command_out = np.zeros(DelayedLink.COMMAND_WIDTH)
        self._state_out = np.zeros(DelayedLink.STATE_WIDTH)

    def _seen_parts(self, m: ArmMeasurement) -> tuple[NDArray[np.float64], ...]:
        """End effector and debris as the operator's side sees them (position, velocity;
        position, velocity, acceleration; the contact force on the debris)."""
        if self.link is None:
            return (m.ee_position_m, m.ee_velocity_m_s, self._target_pos, self._target_vel, self._target_acc,
                    self._reading.force_on_debris_n)
        seen = self._seen
        return (seen[0:3], seen[3:6], seen[6:9], seen[9:12], seen[12:15], seen[15:18])

    def _share(self, m: ArmMeasurement) -> None:
        """Point the guidance state and the recorder's row parts at the arrays the stages
        refill in place (the arm's read-outs, the target, the stylus, the IK's map):
        nothing is copied per tick. Called again only if the arm hands out a new
        measurement instance."""
        commander, state = self.parts.commander, self.guidance_state
        seen = self._seen_views = self._seen_parts(m)
        state.ee_position_m, state.ee_velocity_m_s = seen[0], seen[1]
        state.target_position_m, state.target_velocity_m_s, state.target_acceleration_m_s2 = seen[2:5]
        state.device_position_m, state.device_velocity_m_s = commander.device_position_m, commander.device_velocity_m_s
        state.hand_force_n = commander.hand_force_n
        state.joint_position_rad = m.q_rad
        state.jacobian_pinv = self._status.jacobian_pinv
        state.command_position_m, state.sigma_ratio = self._cmd_pos, self._sigma
        self._row_parts = (
            self._t_next, m.ee_position_m, m.ee_velocity_m_s, self._target_pos, self._target_vel,
            self._slave_cmd[0], self._slave_cmd[1], commander.device_position_m, commander.device_velocity_m_s, self._guide,
            commander.calculated_dev_n, commander.actuated_dev_n, m.base_torque_n_m, m.base_attitude_rad,
            m.base_angular_velocity_rad_s, self._sigma, m.q_rad, m.qd_rad_s, self._reading.force_on_debris_n,
            self._reading.angular_velocity_rad_s, self._post_row, commander.hand_force_n, self._master_row,
        )
        self._m = m

    # -------------------------------------------------------------------- the tick
    def __call__(self) -> bool:
        """Run one period; False once the trial is over (time limit, capture window, fault)."""
        return self._run(1)

    def run_ticks(self, most: int) -> tuple[bool, int]:
        """Run between one and ``most`` periods (``haptics.device.BatchTick``, for a
        headless clock): quiet fused ticks back to back in one compiled call
        (:meth:`trials.fused.FusedTick.quiet`), any other tick alone. Returns whether the
        trial goes on and how many periods ran (0 once it is over)."""
        k = self.k
        alive = self._run(most)
        return alive, self.k - k

    def _run(self, most: int) -> bool:
        if self.k >= self.max_ticks or self.fault is not None:
            return False
        fused = self._fused
        try:
            if fused is not None:
                if self.timer is not None:
                    alive = self.timer.run(fused.stages, self._end)
                else:
                    quiet = fused.quiet(most)
                    if quiet is None:
                        fused.pre()
                        fused.plant()
                        fused.post()
                        alive = self._end()
                    else:
                        alive = quiet
                if not alive:
                    fused.lower()
                return alive
            if self.timer is not None:
                return self.timer.run(self._stages, self._end)
            for stage in self._stages:
                stage()
            return self._end()
        except BaseException as error:
            self.fault = error
            if fused is not None:
                fused.lower()
            self.parts.commander.zero_force()
            raise

    def _command(self) -> None:
        self._t = self.k * self.dt_s
        self.parts.commander.command(self._t, self._cmd_pos, self._cmd_vel, self._cmd_acc)
        if self.link is not None:
            self._cross(self.link.command, self._t, self._command_sent, self._command_out, self._command_received)
        if self.post is not None and self.post.active:  # after the capture the behaviours command, arm side
            self.post.command(self._t, self._m, self._status, *self._slave_cmd)

    def _slave(self) -> None:
        x, v, a = self._slave_cmd
        slave = self.parts.slave
        if self._pushes_arm and not self._reading.attached:  # the contact force on the tool, coming step
            np.negative(self._reading.force_on_debris_n, out=slave.external_force_n)
            slave.external_point_m[:] = self._reading.contact_point_m
        self._status = slave.step(self._t, x, v, a)
        self._sigma[0] = self._status.sigma_ratio

    def _plant(self) -> None:
        arm = self.parts.arm
        arm.advance()
        m = arm.measure()
        if m is not self._m:
            self._share(m)

    def _target(self) -> None:
        self._t_next_s = self._t + self.dt_s
        self._t_next[0] = self._t_next_s
        m = self._m
        self.scene.read(self._t_next_s, m.ee_position_m, m.ee_velocity_m_s)
        if self.link is not None:
            self._cross(self.link.state, self._t_next_s, (m.ee_position_m, m.ee_velocity_m_s, self._target_pos,
                                                          self._target_vel, self._target_acc,
                                                          self._reading.force_on_debris_n),
                        self._state_out, self._delayed_views)
            compensator = self.compensator
            if compensator is not None and compensator.predicts:
                compensator.view(self._t_next_s, (self._cmd_pos, self._cmd_vel, self._cmd_acc),
                                 self._delayed_views, self.link.state.age_s, self._seen_views)

    @staticmethod
    def _cross(line: DelayLine, t_s: float, sent: tuple[NDArray[np.float64], ...], buffer: NDArray[np.float64],
               received: tuple[NDArray[np.float64], ...]) -> None:
        """Send ``sent`` (3-vectors) over ``line`` at ``t_s``; unpack what arrives into
        ``received`` (held when nothing newer arrived)."""
        np.concatenate(sent, out=buffer)
        line.send(t_s, buffer)
        if line.receive(t_s, buffer):
            for i, part in enumerate(received):
                part[:] = buffer[3 * i:3 * i + 3]

    def _capture(self) -> None:
        m = self._m
        post = self.post
        if post is not None and post.release_requested:  # the task's ``open`` asked: the tool opens now
            self._release(post, m)
        if self.monitor.update(self._t_next_s, self._reading, m.ee_position_m, m.ee_velocity_m_s):
            self.payload = self.scene.attach()
            self.parts.slave.attach_payload(self.payload)
            self.parts.commander.captured(self._t_next_s, m.ee_position_m, m.ee_velocity_m_s)
            if self.compensator is not None:  # what the hand feels after it (trials.contact_modes)
                self.compensator.captured(self._t_next_s)
            if post is not None:
                scene = self.scene if hasattr(self.scene, "apply_payload_force") else None
                post.captured(self._t_next_s, m, self._status, scene, self.payload.mass_kg,  # type: ignore[arg-type]
                              self._reading, isinstance(self.scene, ReleasesPayload))

    def _release(self, post: PostCapturePhase, m: ArmMeasurement) -> None:
        """Open the tool (once; like the closing, not a steady-state tick): the scene lets
        the debris go with the tool's motion, the slave's model sheds the payload, the
        monitor needs the capture rules to fire again before the tool closes again."""
        scene = self.scene
        assert isinstance(scene, ReleasesPayload)  # the post phase asks only of a scene that can (captured)
        release = scene.release(self._t_next_s)
        self.parts.slave.detach_payload()
        self.monitor.released(self._t_next_s)
        post.released(self._t_next_s, release, m)

    def _guidance(self) -> None:
        self.guidance_state.t_s = self._t_next_s
        self._guide[:] = self.parts.law.force(self.guidance_state)
        if self._felt is not self._guide:
            self._contact_feedback()

    def _contact_feedback(self) -> None:
        """Guidance plus the contact force on the tool as the operator's side has it
        (``−force_on_debris``, scaled), observed and shaped by the compensator on the
        hand's motion (the command position, task frame)."""
        compensator = self.compensator
        assert compensator is not None
        contact = self._contact_hand
        np.multiply(self._seen_views[5], -compensator.contact_force_scale, out=contact)
        compensator.shape(self._t_next_s, contact, self._cmd_pos)
        np.add(self._guide, contact, out=self._felt)

    def _render(self) -> None:
        self.parts.commander.render(self._felt)

    def _actuate(self) -> None:
        ee, ee_v, target, target_v, _, _ = self._seen_views
        self.parts.commander.actuate(self._t_next_s, target, target_v, ee, ee_v)

    def _record(self) -> None:
        parts, status = self.parts, self._status
        commander, recorder = parts.commander, parts.recorder
        np.concatenate(self._row_parts, out=recorder.row)
        recorder.flag_bits = (
            commander.flag_bits()
            | (BIT_FAULT if status.fault else 0)
            | (BIT_REPLAN if parts.law.replanned else 0)
            | (BIT_SINGULAR if status.singular else 0)
            | (BIT_LIMITED if status.limited else 0)
            | (BIT_CAPTURED if self._reading.attached else BIT_CONTACT if self._reading.in_contact else 0)
        )
        recorder.append_row()
        self.k += 1

    def _end(self, distance_m: float | None = None) -> bool:
        """The window after the capture or the first contact elapsed, the debris left the
        reach untouched, the time limit, or a failed write. Before the target is reached,
        the reach test takes ``distance_m`` (:meth:`_distance_m`, as the fused tick's
        compiled call computed it) when given."""
        t_next = self._t_next_s
        if self.reached_at_s != self.reached_at_s:
            if (self._distance_m() if distance_m is None else distance_m) <= 0.0:
                self.reached_at_s = t_next
        if self.snapshot is not None and self.k % self.snapshot_every == 0:
            self._publish(self.snapshot)
        if self.parts.recorder.write_error is not None:
            self.end_reason = "write_failed"
            if self._fused is not None:
                self._fused.lower()  # the safety layer's own state, before it commands zero
            self.parts.commander.zero_force()
            return False
        if self.post is not None and self.post.active:  # the task after the capture sets the end
            if self.post.over(t_next):
                self.end_reason = "task_done"
                return False
            return self.k < self.max_ticks
        if self.monitor.over(t_next):
            self.end_reason = "capture_window_done" if self.monitor.touched else "left_reach"
            return False
        return self.k < self.max_ticks

    def finish_outcome(self, aborted_reason: str | None = None) -> str:
        """Decide the trial's outcome (once; ``trials.capture_event``): call when it is over.

        A fused tick gives the stage objects their state back first (the trial may have
        been stopped between ticks), so the device closes from its true state."""
        if self._fused is not None:
            self._fused.lower()
        if self.post is not None:
            self.post.abort(aborted_reason or f"the trial ended ({self.end_reason})")
        if aborted_reason is None and self.end_reason in ("write_failed", "fault"):
            aborted_reason = self.end_reason
        if aborted_reason is None and self.fault is not None:
            aborted_reason = f"fault: {self.fault!r}"
        m = self._m
        return self.monitor.finish(self.k * self.dt_s, self._reading, m.ee_position_m, m.ee_velocity_m_s,
                                   aborted_reason)

    def _distance_m(self) -> float:
        """|end effector - target| - radius [m]."""
        ex, ey, ez = self._m.ee_position_m.tolist()  # plain floats: cheaper per tick than numpy scalars
        tx, ty, tz = self._target_pos.tolist()
        dx, dy, dz = ex - tx, ey - ty, ez - tz
        return math.sqrt(dx * dx + dy * dy + dz * dz) - self.limits.target_radius_m

    # -------------------------------------------------------------------- display
    def _publish(self, snapshot: SnapshotSink) -> None:
        values, field = snapshot.staging, snapshot.offsets
        m, commander = self._m, self.parts.commander
        values[field["t_s"]] = self._t_next_s
        values[field["ee_position_m"]] = m.ee_position_m
        values[field["ee_velocity_m_s"]] = m.ee_velocity_m_s
        values[field["target_position_m"]] = self._target_pos
        values[field["target_velocity_m_s"]] = self._target_vel
        values[field["command_position_m"]] = self._cmd_pos
        values[field["guidance_force_n"]] = self._guide
        values[field["dev_force_calc_n"]] = commander.calculated_dev_n
        values[field["dev_force_act_n"]] = commander.actuated_dev_n
        values[field["base_torque_n_m"]] = m.base_torque_n_m
        values[field["base_attitude_rad"]] = m.base_attitude_rad
        values[field["distance_m"]] = self._distance_m()
        values[field["flags"]] = self.parts.recorder.flag_bits
        values[field["phase"]] = 1
        values[field["reached_at_s"]] = self.reached_at_s
        values[field["first_contact_s"]] = self.monitor.first_contact_s
        values[field["captured_at_s"]] = self.monitor.captured_at_s
        values[field["released_at_s"]] = self.monitor.released_at_s
        values[field["sigma_ratio"]] = self._sigma[0]
        values[field["ghost_ee_position_m"]] = self._delayed_views[0] if self.link is not None else math.nan
        predicts = self.link is not None and self.compensator is not None and self.compensator.predicts
        values[field["virtual_ee_position_m"]] = self._seen_views[0] if predicts else math.nan
        values[field["links"]] = self.parts.arm.link_positions_m().ravel()
        # the post-capture phase: the row the recorder got, the machine's end, the fixtures
        row, post = self._post_row, self.post
        values[field["post_state_index"]] = row[0]
        values[field["post_behaviour_index"]] = row[1]
        values[field["attractor_m"]] = row[2:5]
        values[field["wrench_force_n"]] = row[5:8]
        values[field["wrench_limit_n"]] = row[11]
        outcome = "" if post is None else post.machine.outcome
        values[field["post_outcome"]] = 1 + MACHINE_OUTCOMES.index(outcome) if outcome else 0
        world = None if post is None else post.world
        posts = values[field["posts_m"]]
        posts[:] = math.nan
        if world is not None:
            values[field["pin_m"]] = world.pin_m
            shown = min(len(world.post_positions_m), posts.size // 3)
            posts[:3 * shown] = world.post_positions_m[:shown].ravel()
        else:
            values[field["pin_m"]] = math.nan
        now = time.perf_counter()
        if self._last_publish_wall_s > 0.0:
            rate = (self.k - self._last_publish_k) / max(now - self._last_publish_wall_s, 1e-9)
            values[field["servo_rate_hz"]] = rate
            self._worst_period_s = max(self._worst_period_s, 1.0 / max(rate, 1e-9))
            values[field["servo_worst_period_ms"]] = 1e3 * self._worst_period_s
        self._last_publish_wall_s = now
        self._last_publish_k = self.k
        snapshot.publish()
