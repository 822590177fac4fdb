"""Seeded random scenarios for training variety and studies.

``random_scenario(seed, model, models=...)`` draws, with ``numpy.random.default_rng(seed)``:
the approach direction (in the plane for a planar model; on the upper hemisphere ahead
of the arm for a spatial one), the start distance (0.20 to 0.30 m), the speed (0.05 to 0.3 m/s,
the paper's range and beyond), how much the target's path misses the end effector's
start (a lateral offset up to 0.1 m), and the motion kind (straight or curved; tumbling
as well for a spatial model). The same seed always gives the same scenario, and the
scenario carries that seed for the trial's own random draws
(:func:`scenarios.seeding.trial_seed`).
"""

from __future__ import annotations

import math

import numpy as np

from capture_trainer.errors import ScenarioError
from capture_trainer.registry import Lookup, suggestion
from scenarios.schema import IDENTITY, CaptureConfig, MappingConfig, ModelFacts, RobotConfig, Scenario, TargetConfig
from scenarios.toml_in import MAX_SEED

#: The documented family of 3-D capture scenarios (``bench reaction --family``): approach
#: directions over the hemisphere in front of the arm, speeds, spin rates, start distances.
FAMILY_SPEED_RANGE_M_S = (0.02, 0.2)
FAMILY_SPIN_MAX_RAD_S = 0.3
FAMILY_DISTANCE_RANGE_M = (0.15, 0.35)
SPEED_RANGE_M_S = (0.05, 0.3)
DISTANCE_RANGE_M = (0.20, 0.30)
MAX_MISS_M = 0.1
#: Touch (x right, y up, z to the user) to a 3-D task frame (x ahead, y left, z up).
SPATIAL_ROTATION = ((0.0, 0.0, -1.0), (-1.0, 0.0, 0.0), (0.0, 1.0, 0.0))


def _unit(v: np.ndarray) -> np.ndarray:
    return np.asarray(v / np.linalg.norm(v), dtype=float)


def _round(values: np.ndarray, digits: int = 4) -> tuple[float, ...]:
    return tuple(float(round(v, digits)) + 0.0 for v in values)


def random_scenario(seed: int, model: str, *, models: Lookup[ModelFacts]) -> Scenario:
    """A random but valid capture scenario, fully determined by ``seed`` and ``model``.

    Args:
        seed: integer in [0, 2**32); also stored as the scenario's seed.
        model: a name in ``models``.
        models: the manipulator models (``robot.models.MODELS``); a planar model
            (``task_dim`` 2) gets an in-plane approach.
    """
    if model not in models:
        close = suggestion(model, models.names())
        hint = f" (did you mean {close!r}?)" if close else ""
        raise ScenarioError(
            f"random scenario: model: expected one of {', '.join(models.names())}, got {model!r}{hint}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ScenarioError(f"random scenario: seed: expected an integer >= 0 and <= {MAX_SEED}, got {seed!r}")
    rng = np.random.default_rng(seed)
    planar = models.get(model).task_dim == 2
    if planar:
        bearing = rng.uniform(-0.6 * math.pi, 0.6 * math.pi)  # ahead of the arm, +x
        direction = np.array([math.cos(bearing), math.sin(bearing), 0.0])
        lateral = np.array([-direction[1], direction[0], 0.0])
    else:
        direction = _unit(np.array([rng.uniform(0.3, 1.0), rng.uniform(-0.8, 0.8), rng.uniform(-0.3, 0.9)]))
        lateral = _unit(np.cross(direction, rng.normal(size=3)))
    distance = rng.uniform(*DISTANCE_RANGE_M)
    speed = rng.uniform(*SPEED_RANGE_M_S)
    miss = rng.uniform(-MAX_MISS_M, MAX_MISS_M)
    offset = distance * direction
    # The target heads back toward the start, missing it by `miss` (never head-on only).
    velocity = speed * _unit(-offset + miss * lateral)
    kinds = ("linear", "curved") if planar else ("linear", "curved", "tumbling")
    motion = str(rng.choice(kinds))
    extra: dict[str, object] = {}
    if motion == "curved":
        extra["turn_rate_rad_s"] = float(round(rng.uniform(-0.4, 0.4), 4))
        extra["turn_axis"] = (0.0, 0.0, 1.0) if planar else _round(_unit(rng.normal(size=3)))
    elif motion == "tumbling":
        extra["angular_velocity_rad_s"] = _round(_unit(rng.normal(size=3)) * rng.uniform(0.1, 0.5))
        extra["lever_arm_m"] = _round(_unit(rng.normal(size=3)) * rng.uniform(0.05, 0.15))
    target = TargetConfig(
        radius_m=0.0044 if planar else 0.01,
        start_offset_m=_round(offset),  # type: ignore[arg-type]
        velocity_m_s=_round(velocity),  # type: ignore[arg-type]
        motion=motion,
        **extra,  # type: ignore[arg-type]
    )
    return Scenario(
        name=f"random-{model}-{seed}",
        seed=seed,
        robot=RobotConfig(model),
        target=target,
        description=f"Random {motion} approach at {speed:.2f} m/s from {distance:.2f} m (seed {seed})",
        capture=CaptureConfig(time_limit_s=15.0),
        mapping=MappingConfig(rotation_task_from_device=IDENTITY if planar else SPATIAL_ROTATION),
        source=f"random:{model}:{seed}",
    )


def family_scenario(seed: int, model: str, *, models: Lookup[ModelFacts]) -> Scenario:
    """One member of the documented family of capture scenarios, fixed by ``seed``.

    The target starts at ``ee0 + d u`` with the approach direction ``u`` uniform over the
    hemisphere in front of the arm (``u_x >= 0``; in the plane for a planar model) and the
    distance ``d`` in :data:`FAMILY_DISTANCE_RANGE_M`; it heads back toward the end
    effector's start at a speed in :data:`FAMILY_SPEED_RANGE_M_S`, missing it by up to
    2 cm, and (spatial models, half of the members) tumbles at up to
    :data:`FAMILY_SPIN_MAX_RAD_S` about a random axis with the capture point 5 cm from its
    centre. Time limit: long enough to arrive, plus 2 s.
    """
    if model not in models:
        raise ScenarioError(f"family scenario: model: expected one of {', '.join(models.names())}, got {model!r}")
    rng = np.random.default_rng(seed)
    planar = models.get(model).task_dim == 2
    if planar:
        bearing = rng.uniform(-0.5 * math.pi, 0.5 * math.pi)
        direction = np.array([math.cos(bearing), math.sin(bearing), 0.0])
        lateral = np.array([-direction[1], direction[0], 0.0])
    else:
        direction = _unit(rng.normal(size=3))
        direction[0] = abs(direction[0])
        lateral = _unit(np.cross(direction, rng.normal(size=3)))
    distance = rng.uniform(*FAMILY_DISTANCE_RANGE_M)
    speed = rng.uniform(*FAMILY_SPEED_RANGE_M_S)
    offset = distance * direction
    velocity = speed * _unit(-offset + rng.uniform(-0.02, 0.02) * lateral)
    tumbling = not planar and bool(rng.uniform() < 0.5)
    extra: dict[str, object] = {}
    if tumbling:
        extra["angular_velocity_rad_s"] = _round(_unit(rng.normal(size=3)) * rng.uniform(0.0, FAMILY_SPIN_MAX_RAD_S))
        extra["lever_arm_m"] = _round(_unit(rng.normal(size=3)) * 0.05)
    target = TargetConfig(
        radius_m=0.0044 if planar else 0.01,
        start_offset_m=_round(offset),  # type: ignore[arg-type]
        velocity_m_s=_round(velocity),  # type: ignore[arg-type]
        motion="tumbling" if tumbling else "linear",
        **extra,  # type: ignore[arg-type]
    )
    return Scenario(
        name=f"family-{model}-{seed}",
        seed=seed,
        robot=RobotConfig(model),
        target=target,
        description=f"Family member: {'tumbling' if tumbling else 'linear'} approach at {speed:.3f} m/s "
                    f"from {distance:.2f} m (seed {seed})",
        capture=CaptureConfig(time_limit_s=float(round(distance / speed + 2.0, 3))),
        mapping=MappingConfig(rotation_task_from_device=IDENTITY if planar else SPATIAL_ROTATION),
        source=f"family:{model}:{seed}",
    )
