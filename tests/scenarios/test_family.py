"""The documented scenario family (``scenarios.generator.family_scenario``): its members
stay inside the documented ranges, are valid scenarios, and are fixed by their seed."""

from __future__ import annotations

import math

import numpy as np

from robot.models import MODELS
from scenarios.generator import (FAMILY_DISTANCE_RANGE_M, FAMILY_SPEED_RANGE_M_S, FAMILY_SPIN_MAX_RAD_S,
                                 family_scenario)
from scenarios.toml_out import to_toml
from trials.vocabulary import loads_scenario


def test_members_stay_in_the_documented_ranges() -> None:
    tumbling = 0
    for seed in range(60):
        scenario = family_scenario(seed, "spatial-7dof", models=MODELS)
        target = scenario.target
        offset, velocity = np.array(target.start_offset_m), np.array(target.velocity_m_s)
        distance, speed = float(np.linalg.norm(offset)), float(np.linalg.norm(velocity))
        assert FAMILY_DISTANCE_RANGE_M[0] - 1e-4 <= distance <= FAMILY_DISTANCE_RANGE_M[1] + 1e-4
        assert FAMILY_SPEED_RANGE_M_S[0] - 1e-4 <= speed <= FAMILY_SPEED_RANGE_M_S[1] + 1e-4
        assert offset[0] >= 0.0  # the hemisphere in front of the arm
        # it heads back toward the end effector's start, missing it by at most 2 cm:
        # at most atan(0.02 / 0.15) = 7.6 degrees off the line to it
        assert float(-offset @ velocity) / (distance * speed) >= math.cos(math.atan2(0.02, 0.15)) - 1e-6
        if target.motion == "tumbling":
            tumbling += 1
            assert float(np.linalg.norm(target.angular_velocity_rad_s)) <= FAMILY_SPIN_MAX_RAD_S + 1e-4
        # long enough to arrive
        assert scenario.capture.time_limit_s >= distance / speed
    assert 15 <= tumbling <= 45


def test_members_are_valid_and_fixed_by_their_seed() -> None:
    for model in ("planar-3r", "spatial-7dof"):
        first = family_scenario(3, model, models=MODELS)
        assert family_scenario(3, model, models=MODELS) == first
        assert family_scenario(4, model, models=MODELS) != first
        assert loads_scenario(to_toml(first)) == first
        if MODELS.get(model).task_dim == 2:
            assert first.target.start_offset_m[2] == 0.0 and first.target.motion == "linear"
