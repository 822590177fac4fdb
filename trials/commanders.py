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

import math
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from capture_trainer import trial_log
from guidance.rendering import ForceRenderer
from haptics.device import BUTTON_ENGAGE, Device, DeviceState, SimulatedHand
from haptics.mapping import WorkspaceMapping
from robot.debris import DebrisReading
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
BIT_CONTACT = _bit(trial_log.FLAG_CONTACT)
BIT_CAPTURED = _bit(trial_log.FLAG_CAPTURED)


class Commander(Protocol):
    """The participant's seat in the tick. Arrays are (3,) float64, owned by the tick.

    Attributes:
        device_position_m, device_velocity_m_s: the stylus [m], [m/s], device frame
            (zeros without a device).
        hand_force_n: the hand's force on the stylus [N], task frame (zeros if unknown).
        calculated_dev_n: the guidance force framed for the device [N], device frame.
        actuated_dev_n: what the device was told after its safety layer [N], device frame.
        clutched: the stylus is decoupled from the arm.
        buttons: the device's buttons as last read (``haptics.device`` bits; 0 without a
            device); the servo maps the second (``BUTTON_TRAINER``) to the task's "next".
    """

    device_position_m: Vec3
    device_velocity_m_s: Vec3
    hand_force_n: Vec3
    calculated_dev_n: Vec3
    actuated_dev_n: Vec3
    buttons: int

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

    def captured(self, t_s: float, ee_position_m: Vec3, ee_velocity_m_s: Vec3) -> None:
        """The tool has just closed on the debris (task frame end effector)."""
        ...


class _Buffers:
    def __init__(self) -> None:
        self.device_position_m = np.zeros(3)
        self.device_velocity_m_s = np.zeros(3)
        self.hand_force_n = np.zeros(3)
        self.calculated_dev_n = np.zeros(3)
        self.actuated_dev_n = np.zeros(3)
        #: the device's buttons as last read (``haptics.device`` bits; 0 without a device)
        self.buttons = 0


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
        self.buttons = state.buttons
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

    def captured(self, t_s: float, ee_position_m: Vec3, ee_velocity_m_s: Vec3) -> None:
        """The person keeps commanding the arm, now carrying the payload."""


class ControllerCommander(_Buffers):
    """The automatic capture (AS): the slave is commanded with the target's state at ``t``
    (eq. 10). After the capture the payload coasts: the command continues the end
    effector's state at the capture ``t_c``, ``x = x_c + v_c (t − t_c)``, ``a = 0``. That
    is what a free-floating arm can do without turning its base: a payload moving in a
    straight line at constant velocity keeps its angular momentum about any point, so the
    arm's light links need not compensate anything, while bringing a payload much heavier
    than the arm to rest off the line through the system's centre of mass would need its
    angular momentum to go somewhere, and only the base can take it (a reaction
    singularity of the combined system; measured on the planar arm with a 10x payload:
    sigma_ratio 0.003 and 71° of base rotation within 1 s). Stabilising and moving the
    payload is the job of the post-capture behaviours.

    With a physical debris the command is the point ``standoff_m`` short of the fixture
    centre, toward the end effector (``p − s (p − ee)/|p − ee|``, with the debris'
    velocity and acceleration): the tool comes to rest *on* the fixture's surface at the
    debris' velocity instead of pressing toward its centre, which would push the debris
    with the arm's full stiffness. With ``standoff_m = 0`` it is the paper's law (eq. 10 on
    the debris centre).

    Args:
        target: the debris' motion (task frame).
        standoff_m: the contact radius to stop short by [m].
        reading: the scene's reading (its ``offset_m`` = fixture − end effector), needed
            when ``standoff_m > 0``.
    """

    def __init__(self, target: TargetMotion, standoff_m: float = 0.0, reading: DebrisReading | None = None) -> None:
        super().__init__()
        if standoff_m > 0.0 and reading is None:
            raise ValueError("a standoff needs the scene's reading")
        self.target = target
        self.standoff_m = float(standoff_m)
        self._reading = reading
        self._captured_at_s = math.nan
        self._coast_from_m = np.zeros(3)
        self._coast_v_m_s = np.zeros(3)

    def captured(self, t_s: float, ee_position_m: Vec3, ee_velocity_m_s: Vec3) -> None:
        """Coast from the end effector's state at the capture."""
        self._captured_at_s = t_s
        self._coast_from_m[:] = ee_position_m
        self._coast_v_m_s[:] = ee_velocity_m_s

    @property
    def clutched(self) -> bool:
        return False

    def start(self, ee0_m: Vec3) -> None:
        """Nothing to anchor: the command is the target itself."""

    def command(self, t_s: float, pos_out: Vec3, vel_out: Vec3, acc_out: Vec3) -> None:
        if self._captured_at_s != self._captured_at_s:
            self.target.state(t_s, pos_out, vel_out, acc_out)
            if self._reading is not None and self.standoff_m > 0.0:
                offset = self._reading.offset_m
                norm = math.sqrt(offset[0] * offset[0] + offset[1] * offset[1] + offset[2] * offset[2])
                if norm > 0.0:
                    scale = self.standoff_m / norm
                    for i in range(3):
                        pos_out[i] -= scale * offset[i]
            return
        np.multiply(self._coast_v_m_s, t_s - self._captured_at_s, out=pos_out)
        pos_out += self._coast_from_m
        vel_out[:] = self._coast_v_m_s
        acc_out[:] = 0.0

    def render(self, guidance_task_n: Vec3) -> None:
        """Nobody feels a force."""

    def actuate(self, t_s: float, target_pos_m: Vec3, target_vel_m_s: Vec3, ee_pos_m: Vec3,
                ee_vel_m_s: Vec3) -> None:
        """No device."""

    def flag_bits(self) -> int:
        return 0

    def zero_force(self) -> None:
        """No device."""
