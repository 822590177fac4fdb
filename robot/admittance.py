"""The admittance (virtual attractor) controller of the post-capture phase (PTWL seed).

A virtual attractor pose ``x_a`` pulls the **interaction port** (the end-effector point,
which carries the captured payload) through a virtual spring-damper, and the contact
wrench from the environment pushes back; the port's commanded motion is the response of
a virtual mass to both, per task axis ``i``:

    M_i ẍ_i + D_i ẋ_i + K_i (x_i − x_a,i) = F_ext,i                         (A1)

(the seed's eqs. 1-5 with a virtual mass added, so that the commanded acceleration the
slave's eq. 10 feeds forward is finite and smooth). ``F_ext`` is the contact force the
environment (the berthing posts) exerts on the payload [N], task frame. The controller
integrates (A1) once per servo tick, semi-implicitly (damping implicit, spring explicit)::

    v⁺ = (v + dt (F_ext − K (x − x_a)) / M) / (1 + dt D / M)
    x⁺ = x + dt v⁺,      a = (v⁺ − v) / dt                                    (A2)

and hands ``(x⁺, v⁺, a)`` to the one slave-control path (:class:`robot.slave.SlaveController`,
eq. 10 then the reactionless IK, eq. 6) as its command. Free of contact the port follows
the attractor as a critically damped (for ``D = 2 sqrt(K M)``) second-order system; in
contact it presses with ``K (x_a − x)`` at equilibrium, so a wrench limit is a limit on how
far the attractor may be pushed past the contact.

The port is a point (translation only): the slave's task is the end-effector point
(planar models: x, y), so the payload's orientation is not commanded and a torque about
the port is measured and reported, not regulated.

Stability in a stiff contact: the discrete loop (A2) plus a contact of stiffness ``k_c``
and damping ``c_c`` is stable for ``dt sqrt((K + k_c)/M) ≲ 1``; with the defaults
(``M`` = 2 kg, contact about 1.8e4 N/m) that is 0.1 at 1 kHz.

Nothing here allocates after construction: the state lives in caller-visible (3,) arrays
refilled in place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

Vec3 = tuple[float, float, float]


def _vec3(value: ArrayLike, name: str, *, positive: bool, allow_zero: bool = False) -> Vec3:
    array = np.asarray(value, dtype=float)
    if array.shape == ():
        array = np.full(3, float(array))
    if array.shape != (3,):
        raise ValueError(f"{name} must be a number or 3 numbers (x, y, z), got {value!r}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and (np.any(array < 0.0) or (not allow_zero and np.any(array == 0.0))):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'} on every axis, got {value!r}")
    return (float(array[0]), float(array[1]), float(array[2]))


@dataclass(frozen=True)
class AdmittanceGains:
    """Per-axis virtual mass, damping and stiffness of (A1), task frame.

    Attributes:
        mass_kg: ``M`` [kg] (> 0 per axis).
        damping_n_s_m: ``D`` [N s/m] (> 0 per axis: the port must come to rest).
        stiffness_n_m: ``K`` [N/m] (>= 0 per axis; 0 leaves the axis free, moved by the
            contact alone).
    """

    mass_kg: Vec3 = (2.0, 2.0, 2.0)
    damping_n_s_m: Vec3 = (60.0, 60.0, 60.0)
    stiffness_n_m: Vec3 = (300.0, 300.0, 300.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mass_kg", _vec3(self.mass_kg, "mass_kg", positive=True))
        object.__setattr__(self, "damping_n_s_m", _vec3(self.damping_n_s_m, "damping_n_s_m", positive=True))
        object.__setattr__(self, "stiffness_n_m",
                           _vec3(self.stiffness_n_m, "stiffness_n_m", positive=True, allow_zero=True))

    @classmethod
    def critically_damped(cls, stiffness_n_m: ArrayLike, mass_kg: ArrayLike = 2.0) -> AdmittanceGains:
        """``D = 2 sqrt(K M)`` per axis (a damping floor of 1 N s/m on free axes)."""
        k = np.asarray(_vec3(stiffness_n_m, "stiffness_n_m", positive=True, allow_zero=True))
        m = np.asarray(_vec3(mass_kg, "mass_kg", positive=True))
        d = np.maximum(2.0 * np.sqrt(k * m), 1.0)
        return cls(_vec3(m, "mass_kg", positive=True), _vec3(d, "damping_n_s_m", positive=True),
                   _vec3(k, "stiffness_n_m", positive=True, allow_zero=True))


class AdmittanceController:
    """(A1) integrated per tick by (A2); the port command for the slave.

    Attributes (all (3,) float64, task frame, refilled in place):
        position_m, velocity_m_s, acceleration_m_s2: the commanded port state.
        attractor_m: the virtual attractor ``x_a`` [m] (behaviours move it).
        virtual_force_n: the last ``−K (x − x_a) − D ẋ`` [N] (the virtual wrench).

    Args:
        gains: the initial gains (behaviours may change them with :meth:`set_gains`).
        dt_s: servo period [s].
    """

    def __init__(self, gains: AdmittanceGains, dt_s: float) -> None:
        if not (dt_s > 0.0 and math.isfinite(dt_s)):
            raise ValueError(f"dt_s must be a positive number of seconds, got {dt_s}")
        self.dt_s = float(dt_s)
        self.position_m = np.zeros(3)
        self.velocity_m_s = np.zeros(3)
        self.acceleration_m_s2 = np.zeros(3)
        self.attractor_m = np.zeros(3)
        self.virtual_force_n = np.zeros(3)
        self._m = np.zeros(3)
        self._d = np.zeros(3)
        self._k = np.zeros(3)
        self._scratch = np.zeros(3)
        self._v_old = np.zeros(3)
        self.gains = gains
        self.set_gains(gains)

    def set_gains(self, gains: AdmittanceGains) -> None:
        """Use ``gains`` from the next :meth:`step` on (no allocation)."""
        self.gains = gains
        self._m[:] = gains.mass_kg
        self._d[:] = gains.damping_n_s_m
        self._k[:] = gains.stiffness_n_m

    def reset(self, position_m: NDArray[np.float64], velocity_m_s: NDArray[np.float64]) -> None:
        """Start from the measured port (bumpless: the attractor on the port, no virtual
        force until a behaviour moves it)."""
        self.position_m[:] = position_m
        self.velocity_m_s[:] = velocity_m_s
        self.acceleration_m_s2[:] = 0.0
        self.attractor_m[:] = position_m
        self.virtual_force_n[:] = 0.0

    def step(self, force_ext_n: NDArray[np.float64]) -> None:
        """Advance (A2) by one tick with the contact force ``force_ext_n`` [N] (task frame)
        on the port. A non-finite force is treated as zero (it never reaches the command)."""
        s, v_old = self._scratch, self._v_old
        dt = self.dt_s
        v_old[:] = self.velocity_m_s
        np.subtract(self.position_m, self.attractor_m, out=s)
        s *= self._k
        np.negative(s, out=s)  # −K (x − x_a)
        if math.isfinite(force_ext_n[0] + force_ext_n[1] + force_ext_n[2]):  # NaN and inf propagate
            s += force_ext_n
        s /= self._m
        s *= dt
        self.velocity_m_s += s
        np.multiply(self._d, dt, out=s)
        s /= self._m
        s += 1.0
        self.velocity_m_s /= s
        np.multiply(self.velocity_m_s, dt, out=s)
        self.position_m += s
        np.subtract(self.velocity_m_s, v_old, out=self.acceleration_m_s2)
        self.acceleration_m_s2 /= dt
        # the virtual wrench of this tick, for the log and the limits
        np.subtract(self.position_m, self.attractor_m, out=s)
        s *= self._k
        np.multiply(self._d, self.velocity_m_s, out=self.virtual_force_n)
        self.virtual_force_n += s
        np.negative(self.virtual_force_n, out=self.virtual_force_n)
