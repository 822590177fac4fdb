"""Workspace mapping between the device frame and the task frame, with a clutch.

Frames and signs:
    * device frame: the stylus frame of the device (Touch: x right, y up, z toward the
      user), metres, as reported by ``Device.read``;
    * task frame: the robot's inertial frame, metres (docs/architecture.md).

Maps (``R`` = ``rotation_task_from_device``, ``s`` = ``scale``, ``o`` = offset):

    x_task = o + s R x_dev          v_task = s R v_dev
    F_dev  = k_f Rᵀ F_task          (k_f = ``force_scale``)

so the power at the stylus is ``F_dev·v_dev = (k_f / s) F_task·v_task``. With
``force_scale = scale`` the map is power preserving (lossless, passive: what the hand
does on the stylus equals what the task force does on the end effector); with the
default ``force_scale = 1`` a task-frame force is felt at face value and the power is
divided by the scale; with ``force_scale = 1/scale`` a law written for task-frame errors
(e.g. the dynamic guidance of eq. 11, whose force is proportional to the task error)
produces the device-frame motion it asks for.

Clutch (indexing): while the clutch is held the stylus is decoupled: the task command
stays where it was when the clutch was pressed (zero task velocity) and no force is
sent. On release the offset is re-anchored so that the task command continues from the
held position without a jump; the person has meanwhile moved the stylus back to the
middle of its small workspace, so a small device covers a large task.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from guidance.rendering import as_rotation
from haptics._kernels import map_r, map_rt, map_state_rt, map_to_task


class WorkspaceMapping:
    """Device-frame stylus pose to task-frame command, and task force back to the device.

    Args:
        scale: task metres per device metre (> 0).
        rotation_task_from_device: (3, 3) proper rotation taking device-frame vectors to
            the task frame.
        offset_m: (3,) task-frame position [m] of the device origin (re-anchored by the
            clutch).
        force_scale: device newtons per task newton (> 0), see the module docstring.

    All per-tick methods write into caller-owned arrays and allocate nothing (compiled
    kernels: ``haptics._kernels.map_*``).
    """

    def __init__(
        self,
        scale: float = 1.0,
        rotation_task_from_device: ArrayLike = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
        offset_m: Sequence[float] | NDArray[np.float64] = (0.0, 0.0, 0.0),
        force_scale: float = 1.0,
    ) -> None:
        if not (scale > 0.0 and math.isfinite(scale)):
            raise ValueError(f"scale must be positive and finite, got {scale}")
        if not (force_scale > 0.0 and math.isfinite(force_scale)):
            raise ValueError(f"force_scale must be positive and finite, got {force_scale}")
        offset = np.array(offset_m, dtype=float)
        if offset.shape != (3,) or not np.all(np.isfinite(offset)):
            raise ValueError(f"offset_m must be 3 finite numbers, got {offset_m!r}")
        self.scale = float(scale)
        self.force_scale = float(force_scale)
        self.rotation_task_from_device = as_rotation(rotation_task_from_device, "rotation_task_from_device")
        # R and s R for the compiled per-tick maps (haptics._kernels.map_*).
        self._r = np.ascontiguousarray(self.rotation_task_from_device)
        self._sr = self.scale * self._r
        self._inv_scale = 1.0 / self.scale
        self._inv_force_scale = 1.0 / self.force_scale
        self._no_offset = np.zeros(3)
        self._initial_offset = offset.copy()
        self.offset_m = offset
        self._held_task_m = np.zeros(3)
        self._clutched = False
        self._reanchor = False
        # Load the compiled maps now (scratch buffers), not in the first servo tick.
        scratch = np.zeros(3)
        map_to_task(self._sr, scratch.copy(), scratch.copy(), False, scratch, scratch, np.zeros(3), np.zeros(3))
        map_rt(self._r, scratch, scratch, 1.0, np.zeros(3))
        map_r(self._r, scratch, 1.0, np.zeros(3))

    # -- clutch -------------------------------------------------------------------

    @property
    def clutched(self) -> bool:
        """True while the clutch is held (stylus decoupled)."""
        return self._clutched

    def set_clutch(self, held: bool) -> None:
        """Press (``True``) or release (``False``) the clutch. Idempotent.

        Pressing freezes the task command at the last mapped position; releasing
        re-anchors the offset at the next ``to_task`` call so the command does not jump.
        """
        held = bool(held)
        if held and not self._clutched:
            self._clutched = True
        elif not held and self._clutched:
            self._clutched = False
            self._reanchor = True

    def reset(self) -> None:
        """Release the clutch and restore the initial offset."""
        self.offset_m[:] = self._initial_offset
        self._clutched = False
        self._reanchor = False

    # -- device -> task -----------------------------------------------------------

    def to_task(
        self,
        position_dev_m: NDArray[np.float64],
        velocity_dev_m_s: NDArray[np.float64],
        out_pos: NDArray[np.float64],
        out_vel: NDArray[np.float64],
    ) -> None:
        """Map the stylus position [m] and velocity [m/s] (device frame) to the task frame.

        Writes ``out_pos`` [m] and ``out_vel`` [m/s] (task frame). While clutched,
        ``out_pos`` holds the task position at the moment the clutch was pressed and
        ``out_vel`` is zero.
        """
        if self._clutched:
            out_pos[0] = self._held_task_m[0]
            out_pos[1] = self._held_task_m[1]
            out_pos[2] = self._held_task_m[2]
            out_vel[0] = 0.0
            out_vel[1] = 0.0
            out_vel[2] = 0.0
            return
        map_to_task(self._sr, self.offset_m, self._held_task_m, self._reanchor, position_dev_m,
                    velocity_dev_m_s, out_pos, out_vel)
        self._reanchor = False

    # -- task -> device -----------------------------------------------------------

    def to_device_position(self, position_task_m: NDArray[np.float64], out: NDArray[np.float64]) -> None:
        """Inverse position map: task-frame point [m] to device frame [m] (current offset)."""
        map_rt(self._r, position_task_m, self.offset_m, self._inv_scale, out)

    def to_device_velocity(self, velocity_task_m_s: NDArray[np.float64], out: NDArray[np.float64]) -> None:
        """Inverse velocity map: task-frame velocity [m/s] to device frame [m/s]."""
        map_rt(self._r, velocity_task_m_s, self._no_offset, self._inv_scale, out)

    def to_device_state(self, position_task_m: NDArray[np.float64], velocity_task_m_s: NDArray[np.float64],
                        out_pos: NDArray[np.float64], out_vel: NDArray[np.float64]) -> None:
        """:meth:`to_device_position` and :meth:`to_device_velocity` in one call [m], [m/s]."""
        map_state_rt(self._r, position_task_m, velocity_task_m_s, self.offset_m, self._inv_scale, out_pos, out_vel)

    def to_device_force(self, force_task_n: NDArray[np.float64], out: NDArray[np.float64]) -> None:
        """Map a task-frame force [N] to the device-frame force on the stylus [N].

        ``F_dev = force_scale Rᵀ F_task``; zero while the clutch is held. The result is
        not clamped: the device's safety layer does that.
        """
        if self._clutched:
            out[0] = 0.0
            out[1] = 0.0
            out[2] = 0.0
            return
        map_rt(self._r, force_task_n, self._no_offset, self.force_scale, out)

    def to_task_force(self, force_dev_n: NDArray[np.float64], out: NDArray[np.float64]) -> None:
        """Inverse force map: a device-frame force [N] (e.g. the hand's) to the task frame.

        ``F_task = R F_dev / force_scale``, the inverse of :meth:`to_device_force`
        (also while clutched: the hand's force is what it is).
        """
        map_r(self._r, force_dev_n, self._inv_force_scale, out)

    def as_dict(self) -> dict[str, object]:
        """Plain-data form recorded with the trial."""
        return {
            "scale": self.scale,
            "force_scale": self.force_scale,
            "rotation_task_from_device": self.rotation_task_from_device.tolist(),
            "offset_m": self._initial_offset.tolist(),
        }
