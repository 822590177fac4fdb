"""The arm seam: what the slave controller and the servo tick need from any arm.

Timestamped joint commands go out, timestamped joint states (and the base state where
the backend knows it) come in, and once per servo period the owner advances the arm and
reads its measurement (end effector, base torque and attitude); only plain SI data
crosses, so a network bridge to a real arm controller implements :class:`ArmBackend`
exactly as :class:`robot.pybullet_arm.PyBulletArm` does. Backends register by name in
``robot.backends.ARM_BACKENDS``; the contract test (``tests/robot/test_arm_contract.py``)
runs over every registered backend.

Sign conventions and units at this boundary: joint angles [rad] and rates [rad/s] in the
URDF joint sense (right-handed about ``Link.joint_axis``); base quantities in the task
(inertial) frame; times [s] on the backend's clock. A backend must refuse a command with
a non-finite value or the wrong length (raise :class:`capture_trainer.errors.ArmError`);
the controller in addition never sends one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import ArmError


def _zeros(n: int) -> NDArray[np.float64]:
    return np.zeros(n)


@dataclass
class JointCommand:
    """A joint-space set-point for one servo period.

    Attributes:
        t_s: time the command was computed [s] (the controller's clock).
        q_rad: (n,) joint position set-point [rad].
        qd_rad_s: (n,) joint rate set-point [rad/s] (what a velocity-controlled arm tracks).
        qdd_rad_s2: (n,) joint acceleration feed-forward [rad/s^2].
    """

    t_s: float
    q_rad: NDArray[np.float64]
    qd_rad_s: NDArray[np.float64]
    qdd_rad_s2: NDArray[np.float64]

    @classmethod
    def zeros(cls, n_joints: int) -> JointCommand:
        """A command buffer of ``n_joints`` joints, all zero, at t = 0."""
        return cls(0.0, _zeros(n_joints), _zeros(n_joints), _zeros(n_joints))

    def check(self, n_joints: int) -> None:
        """Raise :class:`ArmError` unless every field has ``n_joints`` finite values."""
        for name in ("q_rad", "qd_rad_s", "qdd_rad_s2"):
            value = getattr(self, name)
            if value.shape != (n_joints,):
                raise ArmError(f"joint command {name} must have shape ({n_joints},), got {value.shape}")
            if not np.all(np.isfinite(value)):
                raise ArmError(f"joint command {name} holds a non-finite value: {value.tolist()}")
        if not np.isfinite(self.t_s):
            raise ArmError(f"joint command time must be finite, got {self.t_s}")


@dataclass
class BaseState:
    """The spacecraft base, task frame (where the backend knows it).

    Attributes:
        position_m: (3,) base centre of mass [m].
        orientation_xyzw: (4,) base attitude quaternion (x, y, z, w), task <- base.
        velocity_m_s: (3,) base centre-of-mass velocity [m/s].
        angular_velocity_rad_s: (3,) base angular velocity [rad/s].
    """

    position_m: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    orientation_xyzw: NDArray[np.float64] = field(default_factory=lambda: np.array([0.0, 0.0, 0.0, 1.0]))
    velocity_m_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    angular_velocity_rad_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))


@dataclass
class ArmState:
    """One reading of the arm.

    Backends may return the same instance refilled on every call (no allocation per
    tick): copy what you keep beyond the current tick.

    Attributes:
        t_s: time of the reading [s] (the backend's clock).
        q_rad: (n,) joint angles [rad]; qd_rad_s: (n,) joint rates [rad/s].
        base: the base state, or ``None`` when the backend does not know it (a real arm
            without attitude telemetry): the controller then runs without base feedback.
    """

    t_s: float
    q_rad: NDArray[np.float64]
    qd_rad_s: NDArray[np.float64]
    base: BaseState | None = None


@dataclass
class ArmMeasurement:
    """Read-outs of the arm after a servo period, task frame. ``measure()`` may refill
    one instance per call (copy what you keep).

    Attributes:
        n_joints: number of joints.
        t_s: time of the reading [s] (the backend's clock).
        ee_position_m: (3,) end-effector position [m] (forward kinematics of the
            measured joint and base state).
        ee_velocity_m_s: (3,) end-effector velocity [m/s].
        base_torque_n_m: (3,) torque the arm exerted on the base over the last period,
            about the base centre of mass [N m] (eq. 2's T as the arm realised it; zero
            where the backend cannot measure it).
        base_attitude_rad: (3,) base attitude as a rotation vector from its initial
            attitude [rad].
        base_angular_velocity_rad_s: (3,) [rad/s].
        q_rad: (n,) [rad]; qd_rad_s: (n,) [rad/s].
    """

    n_joints: int
    t_s: float = 0.0
    ee_position_m: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    ee_velocity_m_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    base_torque_n_m: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    base_attitude_rad: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    base_angular_velocity_rad_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    q_rad: NDArray[np.float64] = field(init=False)
    qd_rad_s: NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        self.q_rad = np.zeros(self.n_joints)
        self.qd_rad_s = np.zeros(self.n_joints)


@runtime_checkable
class ArmBackend(Protocol):
    """What the slave controller and the tick drive. No simulator type crosses this seam.

    Per servo period the owner calls ``state()`` (through the controller), ``send()``,
    ``advance()`` and ``measure()``. A simulated arm moves only in ``advance()``; a real
    arm runs on its own clock, ``send`` hands the command over and ``advance`` waits for
    (or takes) the state of the next period.
    """

    @property
    def n_joints(self) -> int:
        """Number of joints."""
        ...

    def state(self) -> ArmState:
        """The latest joint (and base) state; may be one instance refilled per call."""
        ...

    def send(self, command: JointCommand) -> None:
        """Hand over a joint command; raises ArmError on a malformed or non-finite one."""
        ...

    def advance(self) -> None:
        """Let one servo period pass (a simulated plant steps; a real arm delivers the
        state of its next period)."""
        ...

    def measure(self) -> ArmMeasurement:
        """Read-outs after the last period (may be one instance, refilled per call)."""
        ...

    def link_positions_m(self) -> NDArray[np.float64]:
        """(n_joints + 2, 3) points for drawing, task frame: base centre, joint origins,
        end effector. A fresh array (display rate, not per tick)."""
        ...

    def close(self) -> None:
        """Release the backend (idempotent)."""
        ...

