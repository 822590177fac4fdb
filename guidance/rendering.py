"""Force rendering: from a task-frame guidance force to the force a device may apply.

Every guidance law (DG, APF, none, fixtures) goes through the same stages, once per
servo tick (Li & Yan 2019, Figs. 9/10 and 14/15 record the force before and after them):

1. **Non-finite guard**: a NaN or infinite component (or a map that overflows) gives a
   zero force and ``fault = True`` for that tick; a NaN never reaches a device.
2. **Frame map**: ``F_dev = force_scale * R_dev<-task @ F_task`` (the *calculated*
   force, device frame, newtons).
3. **Ramp**: the force is multiplied by a gain rising linearly from 0 to 1 over
   ``ramp_time_s`` after ``reset()`` (guidance switched on), so it never starts with a
   step.
4. **Saturation** to ``max_force_n``: ``"norm"`` (default) scales the vector down and
   keeps its direction; ``"axis"`` clamps each component, as the paper did (3 N per
   axis), which may turn the direction.
5. **Rate limit**: the *actuated* force moves toward the saturated one by at most
   ``max_rate_n_s * dt`` (Euclidean norm of the change).

Sign convention: every force here is the force applied **to the hand** (to the stylus),
the same convention as ``haptics.device`` and OpenHaptics' ``HD_CURRENT_FORCE``.

The primitives (``clamp_norm_into`` ...) are pure and allocation-free (they work on
plain floats and write into a caller-owned ``out`` array); ``haptics`` may reuse them.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from guidance._kernels import render_force

SATURATION_MODES: tuple[str, ...] = ("norm", "axis")
#: Smallest positive normal double: below it a ratio has lost precision.
_SMALLEST_NORMAL = sys.float_info.min


def _write3(out: NDArray[np.float64], x: float, y: float, z: float) -> None:
    """Write three floats into ``out`` (cheaper than building a numpy array)."""
    out[0] = x
    out[1] = y
    out[2] = z


def is_finite3(vec: NDArray[np.float64]) -> bool:
    """True when the three components of ``vec`` are finite."""
    x, y, z = vec.tolist()
    return math.isfinite(x) and math.isfinite(y) and math.isfinite(z)


def guard_finite_into(vec: NDArray[np.float64], out: NDArray[np.float64]) -> bool:
    """Copy ``vec`` (3,) into ``out``, or zeros if any component is NaN/inf.

    Returns:
        True when a fault was caught (``out`` then holds zeros).
    """
    x, y, z = vec.tolist()
    if math.isfinite(x) and math.isfinite(y) and math.isfinite(z):
        _write3(out, x, y, z)
        return False
    _write3(out, 0.0, 0.0, 0.0)
    return True


def _check_limit(limit: float) -> float:
    limit = float(limit)
    if not (limit >= 0.0 and math.isfinite(limit)):
        raise ValueError(f"force limit must be finite and >= 0, got {limit}")
    return limit


def clamp_norm3(x: float, y: float, z: float, limit: float) -> tuple[float, float, float, bool]:
    """``(x, y, z)`` scaled down to a Euclidean norm of at most ``limit``, and whether it was.

    Plain floats (the servo path's form of :func:`clamp_norm_into`). A non-finite input
    gives zeros (never NaN).
    """
    # hypot neither overflows for huge components nor loses precision for tiny ones.
    norm = math.hypot(x, y, z)
    if norm <= limit:
        return x, y, z, False
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        return 0.0, 0.0, 0.0, True
    gain = limit / norm
    if gain < _SMALLEST_NORMAL:
        # limit / norm is subnormal (huge vector, tiny limit) and has lost its precision:
        # scale the unit direction instead (no other case changes).
        return x / norm * limit, y / norm * limit, z / norm * limit, True
    return x * gain, y * gain, z * gain, True


def clamp_norm_into(vec: NDArray[np.float64], limit: float, out: NDArray[np.float64]) -> bool:
    """Scale ``vec`` (3,) down so that its Euclidean norm is at most ``limit``; keep its direction.

    A non-finite input gives zeros (never NaN). ``out`` may be ``vec``.

    Returns:
        True when the vector was changed (clamped or zeroed).
    """
    x, y, z = vec.tolist()
    x, y, z, changed = clamp_norm3(x, y, z, limit)
    _write3(out, x, y, z)
    return changed


def clamp_per_axis_into(vec: NDArray[np.float64], limit: float, out: NDArray[np.float64]) -> bool:
    """Clamp each component of ``vec`` (3,) to ``[-limit, limit]`` (the paper's 3 N per axis).

    A NaN component gives zeros (never NaN). ``out`` may be ``vec``.

    Returns:
        True when any component was changed.
    """
    x, y, z = vec.tolist()
    if math.isnan(x) or math.isnan(y) or math.isnan(z):
        _write3(out, 0.0, 0.0, 0.0)
        return True
    cx = min(max(x, -limit), limit)
    cy = min(max(y, -limit), limit)
    cz = min(max(z, -limit), limit)
    _write3(out, cx, cy, cz)
    return cx != x or cy != y or cz != z


def clamp_norm(vec: ArrayLike, limit: float) -> NDArray[np.float64]:
    """Allocating convenience form of :func:`clamp_norm_into` (not for the tick)."""
    out = np.zeros(3)
    clamp_norm_into(np.asarray(vec, dtype=float).reshape(3), _check_limit(limit), out)
    return out


def clamp_per_axis(vec: ArrayLike, limit: float) -> NDArray[np.float64]:
    """Allocating convenience form of :func:`clamp_per_axis_into` (not for the tick)."""
    out = np.zeros(3)
    clamp_per_axis_into(np.asarray(vec, dtype=float).reshape(3), _check_limit(limit), out)
    return out


def limit_step_into(
    target: NDArray[np.float64],
    previous: NDArray[np.float64],
    max_step: float,
    out: NDArray[np.float64],
) -> bool:
    """Move from ``previous`` toward ``target`` by at most ``max_step`` (Euclidean norm).

    Both inputs must be finite. ``out`` may be ``previous`` or ``target``. Because the
    result lies on the segment between them, it stays inside any convex limit (ball or
    box) that both satisfy.

    Returns:
        True when the step was limited.
    """
    tx, ty, tz = target.tolist()
    px, py, pz = previous.tolist()
    dx, dy, dz = tx - px, ty - py, tz - pz
    step = math.sqrt(dx * dx + dy * dy + dz * dz)
    if step <= max_step:
        _write3(out, tx, ty, tz)
        return False
    gain = max_step / step
    _write3(out, px + dx * gain, py + dy * gain, pz + dz * gain)
    return True


class RateLimiter:
    """Limits how fast a (3,) force may change: at most ``max_rate_n_s`` newtons per second.

    Holds the last output; :meth:`step` writes into an owned buffer (no allocation).
    """

    def __init__(self, max_rate_n_s: float) -> None:
        if not (max_rate_n_s > 0.0):
            raise ValueError(f"max_rate_n_s must be > 0, got {max_rate_n_s}")
        self.max_rate_n_s = float(max_rate_n_s)
        self.output_n = np.zeros(3)

    def reset(self, value_n: ArrayLike = (0.0, 0.0, 0.0)) -> None:
        """Restart from ``value_n`` (zero by default)."""
        self.output_n[:] = value_n

    def step(self, target_n: NDArray[np.float64], dt_s: float) -> bool:
        """Advance by ``dt_s`` toward ``target_n`` (finite, (3,)); True when limited."""
        return limit_step_into(target_n, self.output_n, self.max_rate_n_s * dt_s, self.output_n)


@dataclass
class RenderedForce:
    """One tick's rendering result; the renderer reuses one instance (copy to keep it).

    Attributes:
        calculated_dev_n: (3,) mapped force before ramp, saturation and rate limit [N],
            device frame (zeros on a fault).
        actuated_dev_n: (3,) force to send to the device [N], device frame; always finite
            and within ``max_force_n`` (norm or per axis, as configured).
        saturated: the saturation or the rate limit changed the force on this tick.
        fault: a non-finite input was caught on this tick (the actuated force is zero).
        ramp_gain: the ramp-in gain applied on this tick, in [0, 1].
    """

    calculated_dev_n: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    actuated_dev_n: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    saturated: bool = False
    fault: bool = False
    ramp_gain: float = 0.0


def as_rotation(matrix: ArrayLike, name: str = "rotation") -> NDArray[np.float64]:
    """Validate a proper 3x3 rotation matrix (RᵀR = I, det R = +1) and return a copy."""
    r = np.array(matrix, dtype=float)
    if r.shape != (3, 3) or not np.all(np.isfinite(r)):
        raise ValueError(f"{name} must be a finite 3x3 matrix, got {matrix!r}")
    if not np.allclose(r @ r.T, np.eye(3), atol=1e-6) or abs(np.linalg.det(r) - 1.0) > 1e-6:
        raise ValueError(f"{name} must be a proper rotation (RᵀR = I, det R = +1)")
    return r


class ForceRenderer:
    """Task-frame guidance force to a safe device-frame force (module docstring stages).

    Args:
        rotation_device_from_task: (3, 3) proper rotation taking task-frame vectors to the
            device frame (``Rᵀ`` of ``haptics.mapping``'s ``rotation_task_from_device``).
        force_scale: device newtons per task newton (> 0).
        max_force_n: saturation limit [N] (norm, or per axis with ``saturation="axis"``).
        saturation: ``"norm"`` (keeps the direction, default) or ``"axis"`` (the paper).
        ramp_time_s: time for the ramp-in gain to go from 0 to 1 [s]; 0 disables the ramp.
        max_rate_n_s: largest change of the actuated force per second [N/s]; ``None``
            disables the rate limit.

    ``render`` allocates nothing but Python floats; its result object is owned by the
    renderer and refilled on every call.
    """

    def __init__(
        self,
        rotation_device_from_task: ArrayLike = np.eye(3),
        force_scale: float = 1.0,
        max_force_n: float = 3.0,
        saturation: str = "norm",
        ramp_time_s: float = 0.5,
        max_rate_n_s: float | None = 1000.0,
    ) -> None:
        if saturation not in SATURATION_MODES:
            raise ValueError(f"saturation must be one of {SATURATION_MODES}, got {saturation!r}")
        if not (force_scale > 0.0 and math.isfinite(force_scale)):
            raise ValueError(f"force_scale must be positive and finite, got {force_scale}")
        if not (ramp_time_s >= 0.0 and math.isfinite(ramp_time_s)):
            raise ValueError(f"ramp_time_s must be finite and >= 0, got {ramp_time_s}")
        if max_rate_n_s is not None and not (max_rate_n_s > 0.0):
            raise ValueError(f"max_rate_n_s must be > 0 or None, got {max_rate_n_s}")
        self.rotation_device_from_task = as_rotation(rotation_device_from_task, "rotation_device_from_task")
        self.force_scale = float(force_scale)
        self.max_force_n = _check_limit(max_force_n)
        self.saturation = saturation
        self.ramp_time_s = float(ramp_time_s)
        self.max_rate_n_s = None if max_rate_n_s is None else float(max_rate_n_s)
        self._sr = tuple(tuple(self.force_scale * float(v) for v in row) for row in self.rotation_device_from_task)
        self.result = RenderedForce()
        self.fault_count = 0
        # For the compiled render (guidance._kernels.render_force): the same stages.
        self._sr_array = np.array(self._sr)
        self._norm_mode = saturation == "norm"
        self._rate = -1.0 if self.max_rate_n_s is None else self.max_rate_n_s
        self._ramp_state = np.array([0.0, self.ramp_time_s])  # [on_time_s, ramp_time_s]
        # Load the compiled kernel now (scratch buffers), not in the first servo tick.
        scratch = np.zeros(3)
        render_force(self._sr_array, scratch, self._ramp_state.copy(), np.zeros(3), np.zeros(3),
                     self.max_force_n, self._norm_mode, self._rate, 1e-3)

    def reset(self) -> None:
        """Guidance switched (back) on: zero the output and restart the ramp."""
        self._ramp_state[0] = 0.0
        self.result.actuated_dev_n[:] = 0.0
        self.result.calculated_dev_n[:] = 0.0
        self.result.saturated = False
        self.result.fault = False
        self.result.ramp_gain = 0.0

    def render(self, force_task_n: NDArray[np.float64], dt_s: float) -> RenderedForce:
        """Render one tick (compiled: ``guidance._kernels.render_force``, the stages above).

        Args:
            force_task_n: (3,) guidance force on the hand [N], task frame.
            dt_s: time since the previous call [s] (servo period).

        Returns:
            The renderer's :class:`RenderedForce` (refilled on each call).
        """
        res = self.result
        code, gain = render_force(
            self._sr_array, force_task_n, self._ramp_state, res.calculated_dev_n, res.actuated_dev_n,
            self.max_force_n, self._norm_mode, self._rate, float(dt_s),
        )
        if code == 2:
            res.saturated = False
            res.fault = True
            self.fault_count += 1
            return res
        res.saturated = code == 1
        res.fault = False
        res.ramp_gain = gain
        return res
