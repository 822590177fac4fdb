"""Target (debris capture point) motions, in closed form, task frame.

Every motion gives the capture point's position [m], velocity [m/s] and acceleration
[m/s²] at trial time ``t`` [s]:

* :class:`LinearMotion`: ``p = p0 + v t`` (the paper).
* :class:`CurvedMotion`: constant speed, the velocity turning at ``turn_rate_rad_s``
  about ``turn_axis`` (a circular arc when the axis is normal to the velocity, a helix
  otherwise).
* :class:`TumblingMotion`: the debris' centre moves linearly and the capture point, at
  ``lever_arm_m`` from the centre at ``t = 0``, rotates with the constant angular
  velocity ``omega_rad_s``: ``p = c0 + v t + R(ω t) r0``.

``state`` is the per-tick call (plain floats, writes into caller-owned (3,) arrays);
``sample`` is vectorised for drawing predicted paths.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray


class TargetMotion(Protocol):
    """The capture point's motion, task frame."""

    def state(
        self,
        t_s: float,
        pos_out: NDArray[np.float64],
        vel_out: NDArray[np.float64],
        acc_out: NDArray[np.float64],
    ) -> None:
        """Write position [m], velocity [m/s], acceleration [m/s²] at ``t_s`` into the (3,) outs."""
        ...

    def sample(self, times_s: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Positions, velocities, accelerations at ``times_s`` (n,), each (n, 3)."""
        ...


def _vec(value: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(value, dtype=float).reshape(3).copy()


def _rodrigues_terms(axis: NDArray[np.float64], vec: NDArray[np.float64]) -> tuple[NDArray[np.float64], ...]:
    """Split ``vec`` into its part along the unit ``axis``, the normal part and ``axis × normal``."""
    along = axis * float(axis @ vec)
    normal = vec - along
    return along, normal, np.cross(axis, normal)


class _SampledByState:
    """``sample`` built from ``state`` (not for the tick)."""

    def sample(self, times_s: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        times = np.atleast_1d(np.asarray(times_s, dtype=float))
        pos = np.zeros((times.size, 3))
        vel = np.zeros((times.size, 3))
        acc = np.zeros((times.size, 3))
        for n, t in enumerate(times):
            self.state(float(t), pos[n], vel[n], acc[n])  # type: ignore[attr-defined]
        return pos, vel, acc


class LinearMotion(_SampledByState):
    """Constant velocity: ``p = p0 + v t``.

    Args:
        position0_m: (3,) position at ``t = 0`` [m], task frame.
        velocity_m_s: (3,) velocity [m/s], task frame.
    """

    def __init__(self, position0_m: ArrayLike, velocity_m_s: ArrayLike) -> None:
        self.position0_m = _vec(position0_m)
        self.velocity_m_s = _vec(velocity_m_s)
        self._p0 = self.position0_m.tolist()
        self._v = self.velocity_m_s.tolist()

    def state(self, t_s: float, pos_out: NDArray[np.float64], vel_out: NDArray[np.float64], acc_out: NDArray[np.float64]) -> None:
        """See :class:`TargetMotion`."""
        p0, v = self._p0, self._v
        for i in range(3):
            pos_out[i] = p0[i] + v[i] * t_s
            vel_out[i] = v[i]
            acc_out[i] = 0.0


class CurvedMotion(_SampledByState):
    """Constant speed with the velocity turning at a constant rate about a fixed axis.

    ``v(t) = v∥ + cos(ωt) v⊥ + sin(ωt) (â × v⊥)`` and its integral.

    Args:
        position0_m: (3,) position at ``t = 0`` [m], task frame.
        velocity_m_s: (3,) velocity at ``t = 0`` [m/s], task frame.
        turn_rate_rad_s: ``ω`` [rad/s], positive counter-clockwise about ``turn_axis``.
        turn_axis: (3,) axis of the turn (normalised here), task frame.
    """

    def __init__(
        self,
        position0_m: ArrayLike,
        velocity_m_s: ArrayLike,
        turn_rate_rad_s: float,
        turn_axis: ArrayLike = (0.0, 0.0, 1.0),
    ) -> None:
        axis = _vec(turn_axis)
        norm = float(np.linalg.norm(axis))
        if not norm > 0.0:
            raise ValueError("turn_axis must be non-zero")
        self.position0_m = _vec(position0_m)
        self.velocity_m_s = _vec(velocity_m_s)
        self.turn_rate_rad_s = float(turn_rate_rad_s)
        self.turn_axis = axis / norm
        along, normal, cross = _rodrigues_terms(self.turn_axis, self.velocity_m_s)
        self._p0 = self.position0_m.tolist()
        self._along = along.tolist()
        self._normal = normal.tolist()
        self._cross = cross.tolist()

    def state(self, t_s: float, pos_out: NDArray[np.float64], vel_out: NDArray[np.float64], acc_out: NDArray[np.float64]) -> None:
        """See :class:`TargetMotion`."""
        w = self.turn_rate_rad_s
        wt = w * t_s
        cos_wt = math.cos(wt)
        sin_wt = math.sin(wt)
        if abs(wt) > 1e-6:
            s_int = sin_wt / w  # ∫ cos
            c_int = (1.0 - cos_wt) / w  # ∫ sin
        else:  # series, avoids 0/0 for a straight path
            s_int = t_s * (1.0 - wt * wt / 6.0)
            c_int = t_s * wt / 2.0
        p0, along, normal, cross = self._p0, self._along, self._normal, self._cross
        for i in range(3):
            pos_out[i] = p0[i] + along[i] * t_s + s_int * normal[i] + c_int * cross[i]
            vel_out[i] = along[i] + cos_wt * normal[i] + sin_wt * cross[i]
            acc_out[i] = w * (cos_wt * cross[i] - sin_wt * normal[i])


class TumblingMotion(_SampledByState):
    """A capture point on a tumbling debris whose centre drifts linearly.

    ``p = c0 + v t + R(ω t) r0``, ``ṗ = v + ω × r``, ``p̈ = ω × (ω × r)`` with
    ``r = R(ω t) r0`` (constant angular velocity: torque-free spin about a principal axis).

    Args:
        position0_m: (3,) capture point at ``t = 0`` [m], task frame.
        centre_velocity_m_s: (3,) velocity of the debris' centre [m/s], task frame.
        omega_rad_s: (3,) angular velocity [rad/s], task frame.
        lever_arm_m: (3,) capture point relative to the centre at ``t = 0`` [m], task frame.
    """

    def __init__(
        self,
        position0_m: ArrayLike,
        centre_velocity_m_s: ArrayLike,
        omega_rad_s: ArrayLike,
        lever_arm_m: ArrayLike,
    ) -> None:
        self.position0_m = _vec(position0_m)
        self.centre_velocity_m_s = _vec(centre_velocity_m_s)
        self.omega_rad_s = _vec(omega_rad_s)
        self.lever_arm_m = _vec(lever_arm_m)
        self.rate_rad_s = float(np.linalg.norm(self.omega_rad_s))
        axis = self.omega_rad_s / self.rate_rad_s if self.rate_rad_s > 0.0 else np.array([0.0, 0.0, 1.0])
        along, normal, cross = _rodrigues_terms(axis, self.lever_arm_m)
        self._c0 = (self.position0_m - self.lever_arm_m).tolist()
        self._v = self.centre_velocity_m_s.tolist()
        self._w = self.omega_rad_s.tolist()
        self._along = along.tolist()
        self._normal = normal.tolist()
        self._cross = cross.tolist()

    def state(self, t_s: float, pos_out: NDArray[np.float64], vel_out: NDArray[np.float64], acc_out: NDArray[np.float64]) -> None:
        """See :class:`TargetMotion`."""
        angle = self.rate_rad_s * t_s
        cos_a = math.cos(angle)
        sin_a = math.sin(angle)
        along, normal, cross = self._along, self._normal, self._cross
        r = [along[i] + cos_a * normal[i] + sin_a * cross[i] for i in range(3)]
        wx, wy, wz = self._w
        wr = (wy * r[2] - wz * r[1], wz * r[0] - wx * r[2], wx * r[1] - wy * r[0])
        wwr = (wy * wr[2] - wz * wr[1], wz * wr[0] - wx * wr[2], wx * wr[1] - wy * wr[0])
        c0, v = self._c0, self._v
        for i in range(3):
            pos_out[i] = c0[i] + v[i] * t_s + r[i]
            vel_out[i] = v[i] + wr[i]
            acc_out[i] = wwr[i]
