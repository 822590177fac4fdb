"""Forbidden-region fixtures: repulsive virtual walls combinable with any law via ``Sum``.

Each fixture is a guidance law (same protocol, force on the hand [N], task frame). A
fixture is a one-sided spring-damper: zero while the monitored quantity is inside its
allowed region minus a ``margin``, then ``k · depth`` back toward the region plus a
damping term that only resists moving further out (so a wall never pulls or sticks).

* :class:`WorkspaceWalls`: the device's workspace box, in the **device frame**. The
  fixture reads ``state.device_position_m``/``device_velocity_m_s`` (device frame),
  computes the wall force in the device frame and returns it mapped back to the task
  frame with the inverse of the renderer's map (``F_task = Rᵀ F_dev / force_scale``),
  so that after rendering the stylus feels exactly the device-frame wall force.
* :class:`ReachLimit`: a sphere of radius ``reach_m`` about the arm's shoulder
  (``state.arm_base_position_m``), task frame.
* :class:`JointLimitProximity`: joint ranges; joint ``i`` inside ``margin_rad`` of a
  limit pushes the end effector along the task direction that moves it away from the
  limit, the normalised row ``i`` of ``state.jacobian_pinv`` (``∂q_i/∂x``).
* :class:`ReactionBoundary`: the edge of the reactionless workspace. Near a reaction
  singularity the slave keeps the base still and lets the task give way (the end
  effector lags the command); this fixture makes the hand feel that lag, a spring from
  the command back to where the arm really is, faded in as the reaction-singularity
  gauge falls from ``margin`` to ``threshold``: the hand is pushed away from exactly the
  directions the arm cannot follow without turning the base.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from capture_trainer.params import Param
from guidance._kernels import joint_limit_proximity, one_sided_wall, reach_limit, workspace_walls
from guidance.law import StatelessLaw
from guidance.rendering import as_rotation
from guidance.state import GuidanceState

__all__ = ["JointLimitProximity", "ReachLimit", "ReactionBoundary", "WorkspaceWalls",
           "one_sided_wall"]


def _check(name: str, value: float, minimum: float = 0.0) -> float:
    value = float(value)
    if not (value >= minimum and math.isfinite(value)):
        raise ValueError(f"{name} must be finite and >= {minimum}, got {value}")
    return value


class WorkspaceWalls(StatelessLaw):
    """Walls of the device's workspace box (device frame), rendered as repulsion.

    Args:
        lower_m, upper_m: workspace box corners [m], device frame (``DeviceSpec``'s
            ``workspace_min_m``/``workspace_max_m``).
        rotation_device_from_task: the renderer's rotation (task to device frame).
        force_scale: the renderer's force scale (device N per task N).
        stiffness_n_m: wall stiffness [N/m] at the stylus (a Touch renders ~1000 N/m).
        damping_n_s_m: damping against moving further out [N s/m] at the stylus.
        margin_m: the walls stand this far inside the box [m].
    """

    name = "workspace_walls"

    def __init__(
        self,
        lower_m: ArrayLike,
        upper_m: ArrayLike,
        rotation_device_from_task: ArrayLike = np.eye(3),
        force_scale: float = 1.0,
        stiffness_n_m: float = 400.0,
        damping_n_s_m: float = 2.0,
        margin_m: float = 0.01,
    ) -> None:
        super().__init__()
        lower = np.asarray(lower_m, dtype=float).reshape(3)
        upper = np.asarray(upper_m, dtype=float).reshape(3)
        self.margin_m = _check("margin_m", margin_m)
        if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
            raise ValueError("workspace corners must be finite")
        if np.any(upper - lower <= 2.0 * self.margin_m):
            raise ValueError(f"workspace box {lower} .. {upper} is not larger than twice the margin")
        self._lower = lower + self.margin_m
        self._upper = upper - self.margin_m
        self.lower_m = tuple(lower.tolist())
        self.upper_m = tuple(upper.tolist())
        self.force_scale = _check("force_scale", force_scale, 1e-12)
        rotation = as_rotation(rotation_device_from_task, "rotation_device_from_task")
        # Device-to-task force map: the inverse of the renderer's F_dev = s R F_task.
        self._back = np.ascontiguousarray(rotation.T / self.force_scale)
        self.stiffness_n_m = _check("stiffness_n_m", stiffness_n_m)
        self.damping_n_s_m = _check("damping_n_s_m", damping_n_s_m)
        scratch = np.zeros(3)  # load the compiled kernel now, not in the first tick
        workspace_walls(self._lower, self._upper, self._back, 0.0, 0.0, scratch, scratch, np.zeros(3))

    def force(self, state: GuidanceState) -> NDArray[np.float64]:
        """Wall repulsion [N], task frame (device-frame wall force mapped back; compiled:
        ``guidance._kernels.workspace_walls``, the ``one_sided_wall`` law per axis)."""
        workspace_walls(self._lower, self._upper, self._back, self.stiffness_n_m, self.damping_n_s_m,
                        state.device_position_m, state.device_velocity_m_s, self._out)
        return self._out

    def params(self) -> dict[str, object]:
        """Box, gains and margin as plain data."""
        return {
            "law": self.name,
            "lower_m": list(self.lower_m),
            "upper_m": list(self.upper_m),
            "stiffness_n_m": self.stiffness_n_m,
            "damping_n_s_m": self.damping_n_s_m,
            "margin_m": self.margin_m,
        }


class ReachLimit(StatelessLaw):
    """The arm's reach sphere about its shoulder (``state.arm_base_position_m``), task frame.

    Args:
        reach_m: largest shoulder-to-end-effector distance the arm reaches [m].
        stiffness_n_m: [N/m]; damping_n_s_m: against moving outward [N s/m].
        margin_m: the wall stands this far inside the reach [m].
    """

    name = "reach_limit"

    def __init__(
        self,
        reach_m: float,
        stiffness_n_m: float = 100.0,
        damping_n_s_m: float = 5.0,
        margin_m: float = 0.03,
    ) -> None:
        super().__init__()
        self.reach_m = _check("reach_m", reach_m, 1e-6)
        self.margin_m = _check("margin_m", margin_m)
        if self.margin_m >= self.reach_m:
            raise ValueError(f"margin_m {margin_m} must be below reach_m {reach_m}")
        self.stiffness_n_m = _check("stiffness_n_m", stiffness_n_m)
        self.damping_n_s_m = _check("damping_n_s_m", damping_n_s_m)
        self._wall_m = self.reach_m - self.margin_m
        scratch = np.zeros(3)  # load the compiled kernel now, not in the first tick
        reach_limit(self._wall_m, 0.0, 0.0, scratch, scratch, scratch, 2.0, np.zeros(3))

    def force(self, state: GuidanceState) -> NDArray[np.float64]:
        """Inward push when beyond ``reach_m - margin_m`` [N], task frame (compiled:
        ``guidance._kernels.reach_limit``)."""
        reach_limit(self._wall_m, self.stiffness_n_m, self.damping_n_s_m, state.ee_position_m,
                    state.arm_base_position_m, state.ee_velocity_m_s, 2.0, self._out)
        return self._out

    def params(self) -> dict[str, object]:
        """Reach, gains and margin as plain data."""
        return {
            "law": self.name,
            "reach_m": self.reach_m,
            "stiffness_n_m": self.stiffness_n_m,
            "damping_n_s_m": self.damping_n_s_m,
            "margin_m": self.margin_m,
        }


class JointLimitProximity(StatelessLaw):
    """Repulsion from joint limits, rendered at the end effector (module docstring).

    Args:
        lower_rad, upper_rad: (n,) joint limits [rad].
        stiffness_n_rad: push per radian inside the margin [N/rad].
        margin_rad: the walls stand this far inside the limits [rad].
    """

    name = "joint_limits"

    def __init__(
        self,
        lower_rad: Sequence[float],
        upper_rad: Sequence[float],
        stiffness_n_rad: float = 20.0,
        margin_rad: float = 0.15,
    ) -> None:
        super().__init__()
        lower = np.asarray(lower_rad, dtype=float).ravel()
        upper = np.asarray(upper_rad, dtype=float).ravel()
        if lower.shape != upper.shape or np.any(~(upper > lower)):
            raise ValueError("joint limits must be two equal-length sequences with upper > lower")
        self.margin_rad = _check("margin_rad", margin_rad)
        self.stiffness_n_rad = _check("stiffness_n_rad", stiffness_n_rad)
        self.lower_rad = tuple(lower.tolist())
        self.upper_rad = tuple(upper.tolist())
        self._upper_wall = np.array([u - self.margin_rad for u in self.upper_rad])
        self._lower_wall = np.array([lo + self.margin_rad for lo in self.lower_rad])
        # load the compiled kernel now, not in the first tick
        joint_limit_proximity(self._lower_wall, self._upper_wall, 0.0, self._lower_wall.copy(),
                              np.zeros((lower.size, 3)), 2.0, np.zeros(3))

    def force(self, state: GuidanceState) -> NDArray[np.float64]:
        """Sum of the joints' pushes away from their limits [N], task frame (compiled:
        ``guidance._kernels.joint_limit_proximity``)."""
        n = len(state.joint_position_rad)
        if n != len(self.lower_rad):
            raise ValueError(f"state has {n} joints, the fixture {len(self.lower_rad)}")
        joint_limit_proximity(self._lower_wall, self._upper_wall, self.stiffness_n_rad, state.joint_position_rad,
                              state.jacobian_pinv, 2.0, self._out)
        return self._out

    def params(self) -> dict[str, object]:
        """Limits, gain and margin as plain data."""
        return {
            "law": self.name,
            "lower_rad": list(self.lower_rad),
            "upper_rad": list(self.upper_rad),
            "stiffness_n_rad": self.stiffness_n_rad,
            "margin_rad": self.margin_rad,
        }


class ReactionBoundary(StatelessLaw):
    """The edge of the reactionless workspace, felt (module docstring).

    ``F = −k w (x_cmd − x_ee)`` [N], task frame, with ``w = clip((margin − σ) /
    (margin − threshold), 0, 1)`` and ``σ`` the IK's reaction-singularity gauge
    (``state.sigma_ratio``, σ_min(M (I − J⁺J)) / ‖M‖).

    Args:
        stiffness_n_m: the spring from the command to the end effector at full weight [N/m].
        margin: σ at which the spring starts to fade in.
        threshold: σ at which it is at full weight (the IK's ``sigma_threshold``).
    """

    name = "reaction_boundary"
    PARAMS: ClassVar[tuple[Param, ...]] = (
        Param("stiffness_n_m", "N/m", minimum=0.0, maximum=5000.0),
        Param("margin", "1", minimum=0.0, strict=True, maximum=1.0),
        Param("threshold", "1", minimum=0.0, maximum=1.0),
    )

    def __init__(self, stiffness_n_m: float = 80.0, margin: float = 0.03, threshold: float = 0.01) -> None:
        super().__init__()
        self.stiffness_n_m = _check("stiffness_n_m", stiffness_n_m)
        self.margin = _check("margin", margin)
        self.threshold = _check("threshold", threshold)
        if not self.threshold <= self.margin:
            raise ValueError(f"threshold must not exceed margin, got {self.threshold} and {self.margin}")

    def weight(self, sigma_ratio: float) -> float:
        """``w`` at the gauge ``sigma_ratio`` (0 away from the boundary, 1 at the threshold)."""
        if sigma_ratio >= self.margin:
            return 0.0
        if sigma_ratio <= self.threshold:
            return 1.0
        return (self.margin - sigma_ratio) / (self.margin - self.threshold)

    def force(self, state: GuidanceState) -> NDArray[np.float64]:
        """The spring back toward the end effector [N], task frame."""
        out = self._out
        w = self.weight(float(state.sigma_ratio[0]))
        if w == 0.0:
            out[:] = 0.0
            return out
        np.subtract(state.ee_position_m, state.command_position_m, out=out)
        out *= self.stiffness_n_m * w
        return out

    def params(self) -> dict[str, object]:
        """The fixture's parameters."""
        return {"law": self.name, "stiffness_n_m": self.stiffness_n_m, "margin": self.margin,
                "threshold": self.threshold}
