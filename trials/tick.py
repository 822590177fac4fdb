"""The servo tick: one function, whatever clock drives it (ARCHITECTURE "One servo tick").

    device.read() -> mapping.to_task -> slave.step (eq. 10 + eq. 6) -> arm.step
    -> arm.measure -> target.state -> law.force (eq. 11 | APF | none)
    -> renderer.render -> device.command_force (safety layer) -> recorder.append_row

Every array the tick touches is allocated once in ``__init__``; the tick fills them in
place and hands the recorder one preallocated row. When a stage raises, the tick sends
zero force to the device, latches :attr:`ServoTick.fault` and re-raises, so the clock
that drives it stops and the caller sees the error.

Time: tick ``k`` advances the plant from ``t = k dt`` to ``t + dt``; what it records
(plant read-outs, target, forces) is stamped ``t + dt``. The automatic condition (AS)
commands the slave with the target at ``t``, as a controller with a current measurement.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from capture_trainer import trial_log
from capture_trainer.errors import TrialError
from guidance.rendering import RenderedForce
from guidance.state import GuidanceState
from haptics.device import BUTTON_ENGAGE

_BIT_ENGAGED, _BIT_CLUTCH, _BIT_SATURATED, _BIT_FAULT, _BIT_WATCHDOG, _BIT_REPLAN, _BIT_SINGULAR, _BIT_LIMITED = (
    1 << trial_log.FLAGS.index(name)
    for name in (
        trial_log.FLAG_ENGAGED,
        trial_log.FLAG_CLUTCH,
        trial_log.FLAG_SATURATED,
        trial_log.FLAG_FAULT,
        trial_log.FLAG_WATCHDOG,
        trial_log.FLAG_REPLAN,
        trial_log.FLAG_SINGULAR,
        trial_log.FLAG_LIMITED,
    )
)

#: Stage names, in tick order, for the per-stage timing of ``capture-trainer bench servo``.
STAGES = ("device", "slave", "plant", "target", "guidance", "render", "command", "record")


class _NoSafety:
    """The safety flags of a trial without a device (the automatic condition)."""

    engaged = saturated = fault = watchdog = False


@dataclass
class TickProfile:
    """Per-stage wall times of the last ``capacity`` ticks [s] (benchmarks only)."""

    capacity: int

    def __post_init__(self) -> None:
        self.stamps = np.full((self.capacity, len(STAGES) + 1), 0.0)  # committed now, not mid-run
        self.count = 0


class ServoTick:
    """One servo period of a trial; call it once per period until it returns False.

    Args:
        dt_s: servo period [s].
        max_ticks: the time limit in ticks.
        device: a ``haptics.device.Device`` (None for the automatic condition).
        mapping: a ``haptics.mapping.WorkspaceMapping`` (device <-> task frame).
        slave: a ``robot.slave.SlaveController``.
        arm: a ``robot.pybullet_arm.PyBulletArm`` (``step`` and ``measure``).
        target: a ``scenarios.motion.TargetMotion``.
        law: a ``guidance.law.GuidanceLaw`` (task frame).
        renderer: a ``guidance.rendering.ForceRenderer`` (task -> device frame).
        recorder: a ``trials.recorder.TrialRecorder`` with the ``trial_log`` columns.
        target_radius_m: subtracted from the distance; reached when it is <= 0.
        end_after_reach_s: the trial ends this long after the first reach.
    """

    def __init__(
        self,
        *,
        dt_s: float,
        max_ticks: int,
        device: Any | None,
        mapping: Any,
        slave: Any,
        arm: Any,
        target: Any,
        law: Any,
        renderer: Any,
        recorder: Any,
        target_radius_m: float,
        end_after_reach_s: float,
    ) -> None:
        self.dt_s = float(dt_s)
        self.max_ticks = int(max_ticks)
        self.device = device
        self.mapping = mapping
        self.slave = slave
        self.arm = arm
        self.target = target
        self.law = law
        self.renderer = renderer
        self.recorder = recorder
        self.radius_m = float(target_radius_m)
        self.end_after_reach_s = float(end_after_reach_s)
        self.k = 0
        self.fault: BaseException | None = None
        self.reached_at_s = math.nan
        self.end_reason = "time_limit"
        self.snapshot: Any | None = None
        self.snapshot_every = 10
        self.profile: TickProfile | None = None
        self._last_publish_wall_s = 0.0
        self._last_publish_k = 0
        self._worst_period_s = 0.0
        self._perceive = getattr(device, "perceive", None)
        self._hand_force = getattr(device, "hand_force_n", None)
        self._safety = getattr(device, "safety", None) or _NoSafety()
        # preallocated signals
        n = arm.n_joints
        self.guidance_state = GuidanceState.for_joints(n)
        self._t_next = np.zeros(1)
        self._sigma = np.ones(1)
        self._target_pos = np.zeros(3)
        self._target_vel = np.zeros(3)
        self._target_acc = np.zeros(3)
        self._cmd_pos = np.zeros(3)
        self._cmd_vel = np.zeros(3)
        self._cmd_acc = np.zeros(3)
        self._dev_pos = np.zeros(3)
        self._dev_vel = np.zeros(3)
        self._percept_target = np.zeros(3)
        self._percept_target_v = np.zeros(3)
        self._percept_ee = np.zeros(3)
        self._percept_ee_v = np.zeros(3)
        self._zero3 = np.zeros(3)
        self._guide = np.zeros(3)
        self._rendered = RenderedForce()
        self._actuated = self._rendered.actuated_dev_n
        measurement = arm.measure()
        self._measurement = measurement
        self._ee0 = measurement.ee_position_m.copy()
        target.state(0.0, self._target_pos, self._target_vel, self._target_acc)
        self._row_parts = (
            self._t_next,
            measurement.ee_position_m,
            measurement.ee_velocity_m_s,
            self._target_pos,
            self._target_vel,
            self._cmd_pos,
            self._cmd_vel,
            self._dev_pos,
            self._dev_vel,
            self._guide,
            self._rendered.calculated_dev_n,
            self._actuated,
            measurement.base_torque_n_m,
            measurement.base_attitude_rad,
            measurement.base_angular_velocity_rad_s,
            self._sigma,
            measurement.q_rad,
            measurement.qd_rad_s,
        )
        if tuple(recorder.flag_columns) != trial_log.FLAGS:
            raise TrialError(f"the recorder's flag columns must be trial_log.FLAGS, got {recorder.flag_columns}")
        # The guidance state shares the arrays the stages refill in place (the plant's
        # read-outs, the target, the stylus, the IK's map): nothing is copied per tick.
        gs = self.guidance_state
        gs.ee_position_m = measurement.ee_position_m
        gs.ee_velocity_m_s = measurement.ee_velocity_m_s
        gs.target_position_m = self._target_pos
        gs.target_velocity_m_s = self._target_vel
        gs.target_acceleration_m_s2 = self._target_acc
        gs.device_position_m = self._dev_pos
        gs.device_velocity_m_s = self._dev_vel
        gs.joint_position_rad = measurement.q_rad

    # -------------------------------------------------------------------- the tick
    def __call__(self) -> bool:
        """Run one period; False once the trial is over (time limit or capture window)."""
        if self.k >= self.max_ticks or self.fault is not None:
            return False
        try:
            return self._tick()
        except BaseException as error:
            self.fault = error
            self._zero_force()
            raise

    def _tick(self) -> bool:
        profile = self.profile
        clock = time.perf_counter
        if profile is not None:
            stamps = profile.stamps[profile.count % profile.capacity]
            stamps[0] = clock()
        dt = self.dt_s
        t = self.k * dt
        t_next = t + dt
        device = self.device
        cmd_pos, cmd_vel, cmd_acc = self._cmd_pos, self._cmd_vel, self._cmd_acc
        # 1. device -> task frame (or the controller alone: the target at t)
        if device is not None:
            state = device.read()
            self._dev_pos[:] = state.position_m
            self._dev_vel[:] = state.velocity_m_s
            if self.k == 0:
                self._anchor(state)
            # The engage button is a dead-man switch: held, the arm follows the stylus;
            # released, the stylus is clutched (free to re-centre) and the arm holds.
            self.mapping.set_clutch(not (state.buttons & BUTTON_ENGAGE))
            self.mapping.to_task(state.position_m, state.velocity_m_s, cmd_pos, cmd_vel)
        else:
            cmd_pos[:] = self._target_pos
            cmd_vel[:] = self._target_vel
            cmd_acc[:] = self._target_acc
        if profile is not None:
            stamps[1] = clock()
        # 2. slave-control path: eq. 10, reactionless IK (eq. 6), joint command to the arm
        status = self.slave.step(t, cmd_pos, cmd_vel, cmd_acc)
        if profile is not None:
            stamps[2] = clock()
        # 3. plant
        self.arm.step()
        m = self.arm.measure()
        if profile is not None:
            stamps[3] = clock()
        # 4. target at t + dt
        tp, tv, ta = self._target_pos, self._target_vel, self._target_acc
        self.target.state(t_next, tp, tv, ta)
        if profile is not None:
            stamps[4] = clock()
        # 5. guidance (task frame)
        gs = self.guidance_state
        gs.t_s = t_next
        if gs.jacobian_pinv is not status.jacobian_pinv:
            gs.jacobian_pinv = status.jacobian_pinv  # first tick: the slave's own buffer
        if self._hand_force is not None:
            self.mapping.to_task_force(self._hand_force, gs.hand_force_n)
        self._guide[:] = self.law.force(gs)
        if profile is not None:
            stamps[5] = clock()
        # 6. rendering: task -> device frame, saturation, ramp, non-finite guard
        # Clutched (engage button released), the stylus is decoupled from the arm: no
        # guidance is rendered, and the renderer's rate limit ramps the force out.
        rendered = self.renderer.render(self._zero3 if self.mapping.clutched else self._guide, dt)
        self._rendered.calculated_dev_n[:] = rendered.calculated_dev_n
        if profile is not None:
            stamps[6] = clock()
        # 7. device: safety layer and force out; the simulated hand sees the scene
        if device is not None:
            self._actuated[:] = device.command_force(rendered.actuated_dev_n)
            if self._perceive is not None:
                mapping = self.mapping
                mapping.to_device_state(tp, tv, self._percept_target, self._percept_target_v)
                mapping.to_device_state(m.ee_position_m, m.ee_velocity_m_s, self._percept_ee, self._percept_ee_v)
                self._perceive(
                    t_next,
                    self._percept_target,
                    self._percept_target_v,
                    self._percept_ee,
                    self._percept_ee_v,
                )
        if profile is not None:
            stamps[7] = clock()
        # 8. record
        self._t_next[0] = t_next
        self._sigma[0] = status.sigma_ratio
        recorder = self.recorder
        np.concatenate(self._row_parts, out=recorder.row)
        safety = self._safety
        recorder.flag_bits = (
            (_BIT_ENGAGED if safety.engaged else 0)
            | (_BIT_CLUTCH if self.mapping.clutched else 0)
            | (_BIT_SATURATED if rendered.saturated or safety.saturated else 0)
            | (_BIT_FAULT if rendered.fault or status.fault or safety.fault else 0)
            | (_BIT_WATCHDOG if safety.watchdog else 0)
            | (_BIT_REPLAN if getattr(self.law, "replanned", False) else 0)
            | (_BIT_SINGULAR if status.singular else 0)
            | (_BIT_LIMITED if status.limited else 0)
        )
        recorder.append_row()
        self.k += 1
        if profile is not None:
            stamps[8] = clock()
            profile.count += 1
        # 9. the end: capture window elapsed after the first reach, or the time limit
        dx = m.ee_position_m[0] - tp[0]
        dy = m.ee_position_m[1] - tp[1]
        dz = m.ee_position_m[2] - tp[2]
        if self.reached_at_s != self.reached_at_s and math.sqrt(dx * dx + dy * dy + dz * dz) - self.radius_m <= 0.0:
            self.reached_at_s = t_next
        if self.snapshot is not None and self.k % self.snapshot_every == 0:
            self._publish(m)
        if t_next >= self.reached_at_s + self.end_after_reach_s:
            self.end_reason = "capture_window_done"
            return False
        return self.k < self.max_ticks

    def _anchor(self, state: Any) -> None:
        """Map the stylus' first reading to the end effector's start: no jump at t = 0.

        The mapping is also run once unclutched, so that a stylus whose engage button is
        not held on the first tick holds the arm where it is (not at the task origin).
        """
        mapping = self.mapping
        mapping.reset()
        mapping.offset_m[:] = self._ee0 - mapping.scale * (
            mapping.rotation_task_from_device @ state.position_m
        )
        mapping.to_task(state.position_m, state.velocity_m_s, self._cmd_pos, self._cmd_vel)

    def _zero_force(self) -> None:
        if self.device is not None:
            try:
                self.device.command_force(self._zero3)
            except Exception:  # noqa: BLE001 - the original error is the one to report
                pass

    # -------------------------------------------------------------------- display
    def _publish(self, m: Any) -> None:
        snapshot = self.snapshot
        values = snapshot.staging
        field = snapshot.offsets
        values[field["t_s"]] = self._t_next[0]
        values[field["ee_position_m"]] = m.ee_position_m
        values[field["ee_velocity_m_s"]] = m.ee_velocity_m_s
        values[field["target_position_m"]] = self._target_pos
        values[field["target_velocity_m_s"]] = self._target_vel
        values[field["command_position_m"]] = self._cmd_pos
        values[field["guidance_force_n"]] = self._guide
        values[field["dev_force_calc_n"]] = self._rendered.calculated_dev_n
        values[field["dev_force_act_n"]] = self._actuated
        values[field["base_torque_n_m"]] = m.base_torque_n_m
        values[field["base_attitude_rad"]] = m.base_attitude_rad
        ee, tp = m.ee_position_m, self._target_pos
        values[field["distance_m"]] = (
            math.hypot(ee[0] - tp[0], ee[1] - tp[1], ee[2] - tp[2]) - self.radius_m
        )
        values[field["flags"]] = self.recorder.flag_bits  # FLAG_BITS is trial_log.FLAGS
        values[field["phase"]] = 1
        values[field["reached_at_s"]] = self.reached_at_s
        values[field["links"]] = self.arm.link_positions_m().ravel()
        now = time.perf_counter()
        if self._last_publish_wall_s > 0.0:
            rate = (self.k - self._last_publish_k) / max(now - self._last_publish_wall_s, 1e-9)
            values[field["servo_rate_hz"]] = rate
            period = 1.0 / max(rate, 1e-9)
            self._worst_period_s = max(self._worst_period_s, period)
            values[field["servo_worst_period_ms"]] = 1e3 * self._worst_period_s
        self._last_publish_wall_s = now
        self._last_publish_k = self.k
        snapshot.publish()
