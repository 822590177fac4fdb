"""Target motions against finite differences and geometry; the random generator."""

from __future__ import annotations

import numpy as np
import pytest

from capture_trainer.errors import ScenarioError
from robot.models import MODELS
from scenarios.generator import SPEED_RANGE_M_S, random_scenario
from scenarios.motion import CurvedMotion, LinearMotion, TumblingMotion
from scenarios.toml_out import to_toml
from trials.vocabulary import loads_scenario

MOTIONS = {
    "linear": LinearMotion((0.3, -0.1, 0.0), (-0.1, 0.02, 0.0)),
    "curved-planar": CurvedMotion((0.3, 0.0, 0.0), (-0.15, 0.0, 0.0), 0.4),
    "curved-helix": CurvedMotion((0.3, 0.0, 0.1), (-0.1, 0.05, 0.08), -0.7, (0.2, 1.0, 0.3)),
    "curved-straight": CurvedMotion((0.3, 0.0, 0.1), (-0.1, 0.05, 0.0), 0.0),
    "tumbling": TumblingMotion((0.25, 0.05, 0.1), (-0.08, 0.0, 0.0), (0.0, 0.1, 0.28), (-0.1, 0.0, 0.0)),
}


@pytest.mark.parametrize("name", sorted(MOTIONS))
def test_velocity_and_acceleration_are_the_derivatives(name: str) -> None:
    motion = MOTIONS[name]
    times = np.linspace(0.0, 6.0, 13)
    h = 1e-5
    pos, vel, acc = motion.sample(times)
    pos_hi, vel_hi, _ = motion.sample(times + h)
    pos_lo, vel_lo, _ = motion.sample(times - h)
    np.testing.assert_allclose((pos_hi - pos_lo) / (2 * h), vel, atol=1e-8)
    np.testing.assert_allclose((vel_hi - vel_lo) / (2 * h), acc, atol=1e-6)
    p, v, a = np.zeros(3), np.zeros(3), np.zeros(3)
    motion.state(float(times[5]), p, v, a)
    np.testing.assert_allclose(p, pos[5])
    np.testing.assert_allclose(pos[0], motion.position0_m)


def test_curved_motion_keeps_its_speed_on_a_circle() -> None:
    motion = MOTIONS["curved-planar"]
    pos, vel, _ = motion.sample(np.linspace(0.0, 10.0, 50))
    np.testing.assert_allclose(np.linalg.norm(vel, axis=1), 0.15)
    # Heading -x and turning counter-clockwise about +z, the path curves toward -y:
    # a circle of radius v/ω = 0.375 m about (0.3, -0.375).
    centre = np.array([0.3, -0.15 / 0.4, 0.0])
    np.testing.assert_allclose(np.linalg.norm(pos - centre, axis=1), 0.15 / 0.4, atol=1e-12)


def test_tumbling_capture_point_stays_at_the_lever_arm_from_the_drifting_centre() -> None:
    motion = MOTIONS["tumbling"]
    times = np.linspace(0.0, 20.0, 40)
    pos, _, _ = motion.sample(times)
    centre = (np.array([0.25, 0.05, 0.1]) - np.array([-0.1, 0.0, 0.0]))[None, :] + np.outer(times, [-0.08, 0.0, 0.0])
    np.testing.assert_allclose(np.linalg.norm(pos - centre, axis=1), 0.1, atol=1e-12)
    # The lever arm's component along the spin axis is conserved.
    axis = np.array([0.0, 0.1, 0.28]) / np.linalg.norm([0.0, 0.1, 0.28])
    np.testing.assert_allclose((pos - centre) @ axis, np.array([-0.1, 0.0, 0.0]) @ axis, atol=1e-12)


@pytest.mark.parametrize("model", MODELS.names())
def test_random_scenarios_are_valid_reproducible_and_varied(model: str) -> None:
    scenarios = [random_scenario(seed, model, models=MODELS) for seed in range(60)]
    assert random_scenario(5, model, models=MODELS) == scenarios[5]
    assert len({s.target.start_offset_m for s in scenarios}) == 60
    kinds = {s.target.motion for s in scenarios}
    planar = MODELS.get(model).task_dim == 2
    assert kinds == ({"linear", "curved"} if planar else {"linear", "curved", "tumbling"})
    for scenario in scenarios:
        assert loads_scenario(to_toml(scenario), default_name="x") == scenario  # passes every check
        speed = np.linalg.norm(scenario.target.velocity_m_s)
        assert SPEED_RANGE_M_S[0] - 1e-3 <= speed <= SPEED_RANGE_M_S[1] + 1e-3
        assert scenario.seed == int(scenario.name.rsplit("-", 1)[1])


def test_random_scenario_rejects_bad_arguments() -> None:
    with pytest.raises(ScenarioError, match="seed"):
        random_scenario(-1, "planar-3r", models=MODELS)
    with pytest.raises(ScenarioError, match="model.*did you mean 'planar-3r'"):
        random_scenario(1, "planar-3", models=MODELS)
