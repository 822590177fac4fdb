"""A capture scene without a physics engine, for arms whose world has no debris.

An arm over the link (``capture-trainer arm serve`` or a real arm) simulates no debris,
so :class:`ProximityScene` stands in for :class:`robot.pybullet_debris.PyBulletDebris`:
the debris follows its closed-form path, "contact" is the surface distance
``|ee − p| − contact_radius ≤ 0``, nothing is pushed, and once the tool closes the
fixture keeps its offset from the end effector. Outcomes stay defined; the trial log's
metadata says ``contact_model: proximity``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robot.debris import DebrisReading, Payload
from scenarios.motion import TargetMotion


class ProximityScene:
    """A :class:`robot.debris.CaptureScene` from a closed-form path and a distance test.

    Args:
        motion: the fixture centre's path.
        contact_radius_m: the fixture's radius plus the tool tip's [m].
    """

    physical = False
    contact_model = "proximity"

    def __init__(self, motion: TargetMotion, contact_radius_m: float) -> None:
        self.motion = motion
        self.contact_radius_m = float(contact_radius_m)
        self.reading = DebrisReading()
        self._t_s = math.nan
        self._ee = np.zeros(3)
        self._offset = np.zeros(3)
        self._move(0.0)

    def _move(self, t_s: float) -> None:
        r = self.reading
        self._t_s = t_s
        if not r.attached:
            self.motion.state(t_s, r.point_m, r.point_velocity_m_s, r.point_acceleration_m_s2)

    def read(self, t_s: float, ee_position_m: NDArray[np.float64], ee_velocity_m_s: NDArray[np.float64]) -> None:
        """The debris at ``t_s`` and the distance test against the end effector."""
        r = self.reading
        self._ee[:] = ee_position_m
        if r.attached:
            np.add(ee_position_m, self._offset, out=r.point_m)
            r.point_velocity_m_s[:] = ee_velocity_m_s
            r.point_acceleration_m_s2[:] = 0.0
        else:
            self._move(t_s)
        np.subtract(r.point_m, ee_position_m, out=r.offset_m)
        r.gap_m = float(np.linalg.norm(r.offset_m)) - self.contact_radius_m
        r.in_contact = r.attached or r.gap_m <= 0.0
        if r.in_contact and not r.attached:
            offset = r.point_m - ee_position_m
            norm = float(np.linalg.norm(offset))
            r.contact_normal[:] = offset / norm if norm > 0.0 else 0.0
            r.contact_point_m[:] = 0.5 * (r.point_m + ee_position_m)

    def state(self, t_s: float, pos_out: NDArray[np.float64], vel_out: NDArray[np.float64],
              acc_out: NDArray[np.float64]) -> None:
        """The fixture centre at ``t_s`` (before the first tick's read: its path)."""
        if t_s != self._t_s and not self.reading.attached:
            self._move(t_s)
        r = self.reading
        pos_out[:] = r.point_m
        vel_out[:] = r.point_velocity_m_s
        acc_out[:] = r.point_acceleration_m_s2

    def sample(self, times_s: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """The path (closed form)."""
        return self.motion.sample(times_s)

    def attach(self) -> Payload:
        """The fixture keeps its offset from the end effector; no mass is known."""
        self.reading.attached = True
        self._offset[:] = self.reading.point_m - self._ee
        return Payload(0.0, np.zeros(3), np.zeros((3, 3)))

    def close(self) -> None:
        """Nothing to release."""
