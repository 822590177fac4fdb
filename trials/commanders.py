"""Who commands the slave in a trial: a hand on a device, or the automatic controller.

The servo tick (:mod:`trials.tick`) is the same for every condition; what differs is the
commander in place of the participant:

* :class:`HapticCommander`: a person (or a simulated participant) on a device. It reads
  the stylus (device frame), maps it to the task-frame command through the clutch, frames
  the guidance force for the device and sends it through the device's safety layer (the
  one limiter), and shows a simulated hand the scene.
* :class:`ControllerCommander`: the paper's automatic capture (AS). The command is the
  target's own position, velocity and acceleration at ``t`` (eq. 10 then drives position
  and velocity errors to zero together); no force is felt by anyone.

Both fill caller-owned (3,) arrays and allocate nothing per tick.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from capture_trainer import trial_log
from guidance.rendering import ForceRenderer
from haptics.device import BUTTON_ENGAGE, Device, DeviceState, SimulatedHand
from haptics.mapping import WorkspaceMapping
from scenarios.motion import TargetMotion

Vec3 = NDArray[np.float64]


def _bit(name: str) -> int:
    return 1 << trial_log.FLAGS.index(name)


BIT_ENGAGED = _bit(trial_log.FLAG_ENGAGED)
BIT_CLUTCH = _bit(trial_log.FLAG_CLUTCH)
BIT_SATURATED = _bit(trial_log.FLAG_SATURATED)
BIT_FAULT = _bit(trial_log.FLAG_FAULT)
BIT_WATCHDOG = _bit(trial_log.FLAG_WATCHDOG)
BIT_REPLAN = _bit(trial_log.FLAG_REPLAN)
BIT_SINGULAR = _bit(trial_log.FLAG_SINGULAR)
BIT_LIMITED = _bit(trial_log.FLAG_LIMITED)


class Commander(Protocol):
    """The participant's seat in the tick. Arrays are (3,) float64, owned by the tick.

    Attributes:
        device_position_m, device_velocity_m_s: the stylus [m], [m/s], device frame
            (zeros without a device).
        hand_force_n: the hand's force on the stylus [N], task frame (zeros if unknown).
        calculated_dev_n: the guidance force framed for the device [N], device frame.
        actuated_dev_n: what the device was told after its safety layer [N], device frame.
        clutched: the stylus is decoupled from the arm.
    """

    device_position_m: Vec3
    device_velocity_m_s: Vec3
    hand_force_n: Vec3
    calculated_dev_n: Vec3
    actuated_dev_n: Vec3

    @property
    def clutched(self) -> bool: ...

    def start(self, ee0_m: Vec3) -> None:
        """Before the first tick: the end effector's start [m], task frame, where the
        command is anchored."""
        ...

    def command(self, t_s: float, pos_out: Vec3, vel_out: Vec3, acc_out: Vec3) -> None:
        """The slave's command at ``t_s`` [m], [m/s], [m/s^2], task frame."""
        ...

    def render(self, guidance_task_n: Vec3) -> None:
        """Frame the guidance force (task frame) for the device into ``calculated_dev_n``."""
        ...

    def actuate(self, t_s: float, target_pos_m: Vec3, target_vel_m_s: Vec3, ee_pos_m: Vec3,
                ee_vel_m_s: Vec3) -> None:
        """Send ``calculated_dev_n`` through the safety layer to the device; show the
        scene (task frame) to a simulated hand."""
        ...

    def flag_bits(self) -> int:
        """The engaged / clutch / saturated / fault / watchdog bits of ``trial_log.FLAGS``."""
        ...

    def zero_force(self) -> None:
        """Command zero force now (after a fault); never raises."""
        ...


class _Buffers:
    def __init__(self) -> None:
        self.device_position_m = np.zeros(3)
        self.device_velocity_m_s = np.zeros(3)
        self.hand_force_n = np.zeros(3)
        self.calculated_dev_n = np.zeros(3)
        self.actuated_dev_n = np.zeros(3)


class HapticCommander(_Buffers):
    """A hand on a device: stylus -> task command, guidance -> device force.

    Args:
        device: an opened :class:`haptics.device.Device`.
        mapping: device <-> task frame mapping (its offset is set by :meth:`start`).
        renderer: frames task forces for the device (no limiting: the device's safety
            layer alone limits).
        hand: the device's simulated hand, when it has one (it feels the hand's force
            and sees the scene).
    """

    def __init__(self, device: Device, mapping: WorkspaceMapping, renderer: ForceRenderer,
                 hand: SimulatedHand | None = None) -> None:
        super().__init__()
        self.device = device
        self.mapping = mapping
        self.renderer = renderer
        self.hand = hand
        self._zero3 = np.zeros(3)
        self._seen_target_pos = np.zeros(3)
        self._seen_target_vel = np.zeros(3)
        self._seen_ee_pos = np.zeros(3)
        self._seen_ee_vel = np.zeros(3)
        self._ee0_m = np.zeros(3)
        self._anchored = False

    @property
    def clutched(self) -> bool:
        return self.mapping.clutched

    def start(self, ee0_m: Vec3) -> None:
        """Anchor the stylus' first reading (on the first tick) at ``ee0_m`` [m]."""
        self._ee0_m[:] = ee0_m
        self._anchored = False

    def _anchor(self, state: DeviceState, pos_out: Vec3, vel_out: Vec3) -> None:
        """Map the stylus' first reading to the end effector's start: no jump at t = 0.

        The mapping is also run once unclutched, so that a stylus whose engage button is
        not held on the first tick holds the arm where it is (not at the task origin).
        """
        mapping = self.mapping
        mapping.reset()
        mapping.offset_m[:] = self._ee0_m - mapping.scale * (mapping.rotation_task_from_device @ state.position_m)
        mapping.to_task(state.position_m, state.velocity_m_s, pos_out, vel_out)
        self._anchored = True

    def command(self, t_s: float, pos_out: Vec3, vel_out: Vec3, acc_out: Vec3) -> None:
        state: DeviceState = self.device.read()
        self.device_position_m[:] = state.position_m
        self.device_velocity_m_s[:] = state.velocity_m_s
        if not self._anchored:
            self._anchor(state, pos_out, vel_out)
        # The engage button is a dead-man switch: held, the arm follows the stylus;
        # released, the stylus is clutched (free to re-centre) and the arm holds.
        mapping = self.mapping
        mapping.set_clutch(not (state.buttons & BUTTON_ENGAGE))
        mapping.to_task(state.position_m, state.velocity_m_s, pos_out, vel_out)
        if self.hand is not None:
            mapping.to_task_force(self.hand.hand_force_n, self.hand_force_n)

    def render(self, guidance_task_n: Vec3) -> None:
        # Clutched, the stylus is decoupled from the arm: no guidance is rendered, and the
        # safety layer's rate limit ramps the force out.
        self.renderer.render(self._zero3 if self.mapping.clutched else guidance_task_n, self.calculated_dev_n)

    def actuate(self, t_s: float, target_pos_m: Vec3, target_vel_m_s: Vec3, ee_pos_m: Vec3,
                ee_vel_m_s: Vec3) -> None:
        self.actuated_dev_n[:] = self.device.command_force(self.calculated_dev_n)
        hand = self.hand
        if hand is not None:
            to_device = self.mapping.to_device_state
            to_device(target_pos_m, target_vel_m_s, self._seen_target_pos, self._seen_target_vel)
            to_device(ee_pos_m, ee_vel_m_s, self._seen_ee_pos, self._seen_ee_vel)
            hand.perceive(t_s, self._seen_target_pos, self._seen_target_vel, self._seen_ee_pos, self._seen_ee_vel)

    def flag_bits(self) -> int:
        safety = self.device.safety
        return (
            (BIT_ENGAGED if safety.engaged else 0)
            | (BIT_CLUTCH if self.mapping.clutched else 0)
            | (BIT_SATURATED if safety.saturated else 0)
            | (BIT_FAULT if safety.fault else 0)
            | (BIT_WATCHDOG if safety.watchdog else 0)
        )

    def zero_force(self) -> None:
        try:
            self.device.command_force(self._zero3)
        except Exception:  # noqa: BLE001 - the error that caused the fault is the one to report
            pass


class ControllerCommander(_Buffers):
    """The automatic capture (AS): the slave is commanded with the target's state at ``t``.

    Args:
        target: the debris' motion (task frame).
    """

    def __init__(self, target: TargetMotion) -> None:
        super().__init__()
        self.target = target

    @property
    def clutched(self) -> bool:
        return False

    def start(self, ee0_m: Vec3) -> None:
        """Nothing to anchor: the command is the target itself."""

    def command(self, t_s: float, pos_out: Vec3, vel_out: Vec3, acc_out: Vec3) -> None:
        self.target.state(t_s, pos_out, vel_out, acc_out)

    def render(self, guidance_task_n: Vec3) -> None:
        """Nobody feels a force."""

    def actuate(self, t_s: float, target_pos_m: Vec3, target_vel_m_s: Vec3, ee_pos_m: Vec3,
                ee_vel_m_s: Vec3) -> None:
        """No device."""

    def flag_bits(self) -> int:
        return 0

    def zero_force(self) -> None:
        """No device."""
