"""Force rendering: from a task-frame guidance force to the force a device is asked for.

Guidance computes and frames the force; it does not limit it. Once per servo tick
(Li & Yan 2019, Figs. 9/10 and 14/15 record the force before and after the limits):

    F_dev = force_scale * R_dev<-task @ F_task

is the *calculated* force (device frame, newtons). Everything that makes it safe to
apply (non-finite guard, saturation to the scenario's and the device's limit, engage
ramp, rate limit, thermal budget, watchdog) is done once, by the device's
``haptics.safety.SafetyLayer`` inside ``Device.command_force``; what it returns is the
*actuated* force. A NaN from a guidance law is passed on unchanged (and recorded as
calculated); the safety layer turns it into zero force and a fault.

Sign convention: every force here is the force applied **to the hand** (to the stylus),
the same convention as ``haptics.device`` and OpenHaptics' ``HD_CURRENT_FORCE``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from guidance._kernels import frame_force


def as_rotation(matrix: ArrayLike, name: str = "rotation") -> NDArray[np.float64]:
    """Validate a proper 3x3 rotation matrix (RᵀR = I, det R = +1) and return a copy."""
    r = np.array(matrix, dtype=float)
    if r.shape != (3, 3) or not np.all(np.isfinite(r)):
        raise ValueError(f"{name} must be a finite 3x3 matrix, got {matrix!r}")
    if not np.allclose(r @ r.T, np.eye(3), atol=1e-6) or abs(np.linalg.det(r) - 1.0) > 1e-6:
        raise ValueError(f"{name} must be a proper rotation (RᵀR = I, det R = +1)")
    return r


class ForceRenderer:
    """Task-frame guidance force to the calculated device-frame force (no limiting).

    Args:
        rotation_device_from_task: (3, 3) proper rotation taking task-frame vectors to the
            device frame (``Rᵀ`` of ``haptics.mapping``'s ``rotation_task_from_device``).
        force_scale: device newtons per task newton (> 0, finite).

    ``render`` is compiled (``guidance._kernels.frame_force``) and allocation-free.
    """

    def __init__(self, rotation_device_from_task: ArrayLike, force_scale: float) -> None:
        force_scale = float(force_scale)
        if not (force_scale > 0.0 and math.isfinite(force_scale)):
            raise ValueError(f"force_scale must be positive and finite, got {force_scale}")
        self.rotation_device_from_task = as_rotation(rotation_device_from_task, "rotation_device_from_task")
        self.force_scale = force_scale
        self._sr = force_scale * self.rotation_device_from_task
        # Load the compiled kernel now, not in the first servo tick.
        frame_force(self._sr, np.zeros(3), np.zeros(3))

    def render(self, force_task_n: NDArray[np.float64], out_dev_n: NDArray[np.float64]) -> None:
        """Write ``force_scale * R_dev<-task @ force_task_n`` into ``out_dev_n``.

        Args:
            force_task_n: (3,) guidance force on the hand [N], task frame.
            out_dev_n: (3,) float64, written with the calculated force [N], device frame.
                May be ``force_task_n`` itself.
        """
        frame_force(self._sr, force_task_n, out_dev_n)
