"""The simulated device: the impedance model of eq. 8 held by an operator model.

Li & Yan 2019, eq. 8, write the device as ``m ẍ + c ẋ = f_e − f_d`` with ``f_d`` the
force of the device's actuator and ``f_e`` the hand's. This project's convention
(``haptics.device``) commands the force applied **to the stylus**, ``f_dev = −f_d``, so

    (m + M_h) ẍ + (c + B_h) ẋ + K_h x = f_dev + K_h x_eq + B_h v_eq + n      (device frame)

where the hand's endpoint mass ``M_h`` moves with the stylus, and
``f_e = K_h (x_eq − x) + B_h (v_eq − v) + n − M_h ẍ`` is what the hand applies
(``haptics.operators``). Without an operator (``operator=None``) this is eq. 8 exactly
with ``f_e = 0``. Each ``read()`` advances one period with the exact zero-order-hold
discretisation of this linear system (matrix exponential, computed once per trial), so
a constant force on the bare mass-damper gives the closed-form response to rounding.
Beyond the usable workspace the stylus meets mechanical end stops (1.5x the usable box),
where the velocity into the stop is removed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import expm

from haptics._kernels import device_step
from haptics.device import BUTTON_ENGAGE, DeviceSpec, DeviceState
from haptics.operators import Operator
from haptics.safety import SafetyConfig, SafetyLayer

#: A Touch-class device (3D Systems Touch datasheet: 3.3 N peak, 0.88 N continuous,
#: 160 x 120 x 70 mm usable workspace, 1 kHz servo, 6 DOF sensed, 3 actuated).
TOUCH_LIKE_SPEC = DeviceSpec(
    name="simulated",
    model="Touch (simulated)",
    vendor="capture-trainer",
    workspace_min_m=(-0.08, -0.06, -0.035),
    workspace_max_m=(0.08, 0.06, 0.035),
    max_force_n=3.3,
    continuous_force_n=0.88,
    rate_hz=1000.0,
    input_dof=6,
    output_dof=3,
    max_force_rate_n_s=1000.0,
)

#: Apparent mass of a Touch at the stylus tip [kg] (datasheet: < 45 g).
TOUCH_TIP_MASS_KG = 0.045
#: Viscous friction of the linkage [N s/m] (small; the datasheet gives < 0.26 N friction).
TOUCH_DAMPING_N_S_M = 0.1
#: End stops sit this many times beyond the usable workspace half-extents.
END_STOP_FACTOR = 1.5


@functools.lru_cache(maxsize=256)
def zoh_discretise(mass_kg: float, damping_n_s_m: float, stiffness_n_m: float, dt_s: float) -> tuple[
    tuple[float, float, float, float], tuple[float, float]
]:
    """Exact ZOH discretisation of ``M ẍ + C ẋ + K x = u`` for one period ``dt_s``.

    Computed once per process for each set of arguments (every trial resets a device
    with the same few hand impedances; scipy's ``expm`` of the 3x3 took 1-8 ms a call on
    a busy machine); the result is a tuple of floats, so callers cannot change it.

    Returns:
        ``(φ11, φ12, φ21, φ22)`` and ``(γ1, γ2)`` such that
        ``[x, v]_{k+1} = Φ [x, v]_k + Γ u_k``.
    """
    a = np.zeros((3, 3))
    a[0, 1] = 1.0
    a[1, 0] = -stiffness_n_m / mass_kg
    a[1, 1] = -damping_n_s_m / mass_kg
    a[1, 2] = 1.0 / mass_kg
    e = expm(a * dt_s)
    return (float(e[0, 0]), float(e[0, 1]), float(e[1, 0]), float(e[1, 1])), (float(e[0, 2]), float(e[1, 2]))


class SimulatedDevice:
    """A Touch-like device with simulated dynamics and a simulated hand.

    Args:
        spec: device limits (used by the safety layer and for the end stops).
        operator: who holds the stylus (``haptics.operators``); ``None`` = nobody
            (a free stylus: eq. 8 with ``f_e = 0``).
        dt_s: period [s] advanced by each ``read()``.
        seed: trial seed given to the operator (its noise and choices for this trial).
        mass_kg, damping_n_s_m: the device's ``m`` and ``c`` of eq. 8.
        initial_position_m: (3,) stylus position at reset [m], device frame.
        safety_config: the safety layer's tuning (the one limiter). The simulated
            participant engages on reset (it holds the stylus from the start), so forces
            ramp in from t=0.

    A ``haptics.device.Device`` and a ``haptics.device.SimulatedHand``. Per period:
    ``read()``, ``command_force(f)``, ``perceive(...)`` (what the hand sees for the next
    period). Nothing here allocates per tick beyond Python floats.
    """

    def __init__(
        self,
        spec: DeviceSpec = TOUCH_LIKE_SPEC,
        operator: Operator | None = None,
        dt_s: float = 1e-3,
        seed: int | None = None,
        mass_kg: float = TOUCH_TIP_MASS_KG,
        damping_n_s_m: float = TOUCH_DAMPING_N_S_M,
        initial_position_m: Sequence[float] = (0.0, 0.0, 0.0),
        safety_config: SafetyConfig | None = None,
    ) -> None:
        if not (dt_s > 0.0 and math.isfinite(dt_s)):
            raise ValueError(f"dt_s must be positive, got {dt_s}")
        if not (mass_kg > 0.0 and damping_n_s_m >= 0.0):
            raise ValueError("mass_kg must be > 0 and damping_n_s_m >= 0")
        self.spec = spec
        self.operator = operator
        self.dt_s = float(dt_s)
        self.seed = seed
        self.mass_kg = float(mass_kg)
        self.damping_n_s_m = float(damping_n_s_m)
        self.initial_position_m = np.array(initial_position_m, dtype=float).reshape(3)
        self.safety = SafetyLayer(spec, safety_config)
        lo = np.array(spec.workspace_min_m, dtype=float)
        hi = np.array(spec.workspace_max_m, dtype=float)
        mid = 0.5 * (lo + hi)
        half = 0.5 * (hi - lo) * END_STOP_FACTOR
        self._stops = np.array([mid - half, mid + half])
        # phi11, phi12, phi21, phi22, gamma1, gamma2, K_h, B_h (haptics._kernels.device_step)
        self._zoh = np.zeros(8)
        z = np.zeros(3)
        device_step(self._zoh, self._stops, z.copy(), z.copy(), z, z, z.copy())  # load it now
        self.state = DeviceState()
        self._drive = np.zeros(3)
        self._hand_force = np.zeros(3)
        if operator is not None:
            operator.set_workspace(spec.workspace_min_m, spec.workspace_max_m)
        self.reset()

    def reset(self) -> None:
        """Back to t = 0 with the stylus at rest at ``initial_position_m``."""
        self.t_s = 0.0
        self.state.t_s = 0.0
        self.state.position_m[:] = self.initial_position_m
        self.state.velocity_m_s[:] = 0.0
        self.state.buttons = BUTTON_ENGAGE
        self._drive[:] = 0.0
        self._hand_force[:] = 0.0
        self.safety.reset()
        self.safety.set_engaged(True)
        self.safety.heartbeat(0.0)
        self._force = self.safety.force_n
        hand_m = hand_b = hand_k = 0.0
        if self.operator is not None:
            self.operator.reset(0.0, self.state.position_m, self.seed)
            hand_m, hand_b, hand_k = self.operator.impedance()
        phi, gamma = zoh_discretise(self.mass_kg + hand_m, self.damping_n_s_m + hand_b, hand_k, self.dt_s)
        self._zoh[:] = (*phi, *gamma, hand_k, hand_b)

    def __enter__(self) -> SimulatedDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.safety.ramp_to_zero(self.t_s)

    def clock(self) -> None:
        """None: any clock may drive this device (paced for a person, free-running headless)."""
        return None

    @property
    def hand_force_n(self) -> NDArray[np.float64]:
        """The hand's force on the stylus over the last period [N], device frame.

        ``K (x_eq − x) + B (v_eq − v) + n + M_ff a_plan`` (the operator's active
        force, without the hand's own inertia); zeros without an operator. What a
        force sensor in the stylus would read if the hand had no mass.
        """
        return self._hand_force

    @property
    def last_force_n(self) -> NDArray[np.float64]:
        """The force actuated on the last ``command_force`` [N], device frame."""
        return self._force

    def perceive(
        self,
        t_s: float,
        target_position_dev_m: NDArray[np.float64],
        target_velocity_dev_m_s: NDArray[np.float64],
        ee_position_dev_m: NDArray[np.float64],
        ee_velocity_dev_m_s: NDArray[np.float64],
    ) -> None:
        """Show the operator the target and end effector (device frame, m and m/s)."""
        if self.operator is not None:
            self.operator.perceive(
                t_s, target_position_dev_m, target_velocity_dev_m_s, ee_position_dev_m, ee_velocity_dev_m_s
            )

    def read(self) -> DeviceState:
        """Advance one period under the last actuated force and the hand; return the state.

        The returned ``DeviceState`` is reused (refilled on every call).
        """
        st = self.state
        pos = st.position_m
        vel = st.velocity_m_s
        drive = self._drive
        if self.operator is not None:
            self.operator.drive(self.t_s, pos, vel, self._force, drive)
            st.buttons = self.operator.buttons  # the hand presses and releases the clutch
        # [x, v] <- Phi [x, v] + Gamma (f + drive) per axis, then the end stops; the
        # hand's force is drive - K_h x - B_h v (compiled: haptics._kernels.device_step).
        device_step(self._zoh, self._stops, pos, vel, drive, self._force, self._hand_force)
        self.t_s += self.dt_s
        st.t_s = self.t_s
        self.safety.heartbeat(self.t_s)
        return st

    def command_force(self, force_n: NDArray[np.float64]) -> NDArray[np.float64]:
        """Pass ``force_n`` (3,) [N], device frame, through the safety layer; return what is actuated."""
        self._force = self.safety.filter(self.t_s, force_n)
        return self._force
