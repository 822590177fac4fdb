"""Artificial potential field (APF): attraction by distance only, optional repulsive obstacles.

The paper's comparison condition (Li & Yan 2019, "With Artificial Potential Field"): a
force that depends on the distance to the target only, with no velocity term, so a hand
that goes along arrives with a large relative velocity.

Attraction (task frame): ``f = k (x_target − x_ee)`` for ``d = |x_target − x_ee| ≤ d_sat``
(potential ``½ k d²``), and ``f = k d_sat (x_target − x_ee)/d`` beyond (a cone: constant
magnitude ``k d_sat``). With ``k = 38.5 N/m`` (= ``m k_p`` of the dynamic guidance) the
paper's start gives Fig. 14's calculated 10 N (x) and −3.8 N (y).

Obstacles: Khatib's FIRAS repulsion from spheres, ``f = η (1/ρ − 1/ρ0) / ρ² ∇ρ`` for a
surface distance ``ρ < ρ0`` (zero beyond), with ``ρ`` floored at 1 mm.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from capture_trainer.params import Param
from guidance.law import StatelessLaw
from guidance.state import GuidanceState

_MIN_DISTANCE_M = 1e-3


def _finite_positive(name: str, value: float) -> float:
    value = float(value)
    if not (value > 0.0 and math.isfinite(value)):
        raise ValueError(f"{name} must be finite and > 0, got {value}")
    return value


@dataclass(frozen=True)
class SphereObstacle:
    """A static spherical obstacle, repulsive (FIRAS), usable alone as a law or inside APF.

    Attributes:
        centre_m: (x, y, z) centre [m], task frame.
        radius_m: sphere radius [m].
        influence_m: ``ρ0``, surface distance beyond which the force is zero [m].
        gain_n_m2: ``η`` [N m²].
    """

    centre_m: tuple[float, float, float]
    radius_m: float
    influence_m: float = 0.05
    gain_n_m2: float = 1e-3

    def __post_init__(self) -> None:
        if len(self.centre_m) != 3 or not all(math.isfinite(v) for v in self.centre_m):
            raise ValueError(f"centre_m must be 3 finite numbers, got {self.centre_m!r}")
        _finite_positive("radius_m", self.radius_m)
        _finite_positive("influence_m", self.influence_m)
        _finite_positive("gain_n_m2", self.gain_n_m2)

    def add_force(self, position_m: list[float], out: NDArray[np.float64]) -> None:
        """Add this obstacle's repulsion at ``position_m`` [m] (task frame) to ``out`` [N]."""
        dx = position_m[0] - self.centre_m[0]
        dy = position_m[1] - self.centre_m[1]
        dz = position_m[2] - self.centre_m[2]
        r = math.sqrt(dx * dx + dy * dy + dz * dz)
        rho = r - self.radius_m
        if rho >= self.influence_m or r < 1e-12:
            return
        rho = max(rho, _MIN_DISTANCE_M)
        magnitude = self.gain_n_m2 * (1.0 / rho - 1.0 / self.influence_m) / (rho * rho)
        out[0] += magnitude * dx / r
        out[1] += magnitude * dy / r
        out[2] += magnitude * dz / r


class ObstacleField(StatelessLaw):
    """Repulsion from static spheres as a stand-alone law (a forbidden-region fixture)."""

    name = "obstacles"

    def __init__(self, obstacles: Sequence[SphereObstacle]) -> None:
        super().__init__()
        self.obstacles = tuple(obstacles)

    def force(self, state: GuidanceState) -> NDArray[np.float64]:
        """Sum of the obstacles' repulsion at the end effector [N], task frame."""
        out = self._out
        out[:] = 0.0
        position = state.ee_position_m.tolist()
        for obstacle in self.obstacles:
            obstacle.add_force(position, out)
        return out

    def params(self) -> dict[str, object]:
        """The obstacles as plain data."""
        return {"law": self.name, "obstacles": [asdict(o) for o in self.obstacles]}


class PotentialField(StatelessLaw):
    """APF guidance: distance-only attraction to the capture point (module docstring).

    Args:
        k_n_m: attraction stiffness [N/m] (default 38.5 = ``m k_p`` of DG's defaults).
        saturation_distance_m: beyond this distance the attraction has constant magnitude
            ``k d_sat`` [m]; ``None`` for a pure spring (the paper's shape).
        obstacles: optional repulsive spheres (task frame).
    """

    name = "apf"
    #: The numeric parameters (what a scenario's ``[guidance.apf]`` may set), checked
    #: here and by the scenario loader with the same declarations.
    PARAMS: ClassVar[tuple[Param, ...]] = (
        Param("k_n_m", "N/m", minimum=0.0, strict=True),
        Param("saturation_distance_m", "m", minimum=0.0, strict=True, optional=True),
    )

    def __init__(
        self,
        k_n_m: float = 38.5,
        saturation_distance_m: float | None = None,
        obstacles: Sequence[SphereObstacle] = (),
    ) -> None:
        super().__init__()
        stiffness, saturation = self.PARAMS
        self.k_n_m = stiffness.check(k_n_m)
        self.saturation_distance_m = saturation.check_optional(saturation_distance_m)
        self.obstacles = tuple(obstacles)

    def force(self, state: GuidanceState) -> NDArray[np.float64]:
        """Attraction (plus repulsion) on the hand [N], task frame."""
        xe = state.ee_position_m.tolist()
        xt = state.target_position_m.tolist()
        dx, dy, dz = xt[0] - xe[0], xt[1] - xe[1], xt[2] - xe[2]
        gain = self.k_n_m
        if self.saturation_distance_m is not None:
            d = math.sqrt(dx * dx + dy * dy + dz * dz)
            if d > self.saturation_distance_m:
                gain *= self.saturation_distance_m / d
        out = self._out
        out[0] = gain * dx
        out[1] = gain * dy
        out[2] = gain * dz
        for obstacle in self.obstacles:
            obstacle.add_force(xe, out)
        return out

    def params(self) -> dict[str, object]:
        """Gain and shape as plain data."""
        return {
            "law": self.name,
            "k_n_m": self.k_n_m,
            "saturation_distance_m": self.saturation_distance_m,
            "obstacles": [asdict(o) for o in self.obstacles],
        }
