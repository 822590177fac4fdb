"""A passive hand in paper-2019 under DG and APF, and re-planning.

The device follows eq. 8 with ``f_e`` the hand's force: ``m_dev ẍ + c_dev ẋ = f_act + f_e``
(device frame), with ``m_dev = m k s`` and ``c_dev = c k s`` for a task-frame law mass
``m``, position scale ``k`` and force scale ``s`` (the law's own eq. 8 model seen through
the mapping). The slave is ideal: ``x_ee = x_ee0 + k R (x_dev − x_dev0)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import pytest

from guidance.dynamic import DynamicGuidance
from guidance.law import GuidanceLaw
from guidance.potential import PotentialField
from guidance.rendering import ForceRenderer
from guidance.state import GuidanceState
from haptics.device import DeviceSpec
from haptics.safety import SafetyConfig, SafetyLayer
from scenarios.loader import builtin_names
from trials.vocabulary import load_scenario
from scenarios.schema import Scenario

HandForce = Callable[[float, GuidanceState], np.ndarray]

#: A device whose own limits never bind (10 N peak and continuous, 1e6 N/s).
STRONG_DEVICE = DeviceSpec(name="strong", model="test", vendor="test", workspace_min_m=(-1.0, -1.0, -1.0),
                           workspace_max_m=(1.0, 1.0, 1.0), max_force_n=10.0, continuous_force_n=10.0,
                           max_force_rate_n_s=1e6)


@dataclass
class Run:
    t_s: np.ndarray
    distance_m: np.ndarray  # |x_ee - x_target| - radius
    position_error_m: np.ndarray  # |x_ee - x_target|
    velocity_error_m_s: np.ndarray  # |v_ee - v_target|
    calculated_dev_n: np.ndarray
    actuated_dev_n: np.ndarray
    replanned: np.ndarray


def run_passive(
    scenario: Scenario,
    law: GuidanceLaw,
    m_kg: float = 5.0,
    c_n_s_m: float = 0.7,
    duration_s: float = 7.0,
    dt_s: float = 1e-3,
    hand: HandForce | None = None,
) -> Run:
    mapping = scenario.mapping
    k = mapping.position_scale
    s = mapping.force_scale
    r_task_dev = np.array(mapping.rotation_task_from_device)
    rendering = scenario.rendering
    # The one force path: the renderer frames, the safety layer alone limits (the
    # scenario's saturation, ramp and rate), here for a device stronger than the paper's
    # 3 N so that only the scenario's limits act.
    renderer = ForceRenderer(r_task_dev.T, s)
    safety = SafetyLayer(STRONG_DEVICE, SafetyConfig.for_rendering(
        max_force_n=rendering.max_force_n, saturation=rendering.saturation, ramp_time_s=rendering.ramp_time_s,
        max_rate_n_s=rendering.max_rate_n_s, engaged_at_start=True))
    calculated = np.zeros(3)
    m_dev, c_dev = m_kg * k * s, c_n_s_m * k * s
    ee0 = np.array([0.4, 0.1, 0.0])
    motion = scenario.target_motion(ee0)
    state = GuidanceState()
    x_dev = np.zeros(3)
    v_dev = np.zeros(3)
    n = int(round(duration_s / dt_s))
    out = {key: np.zeros(n) for key in ("t", "d", "pe", "ve", "rp")}
    calc = np.zeros((n, 3))
    act = np.zeros((n, 3))
    for i in range(n):
        t = i * dt_s
        state.t_s = t
        state.ee_position_m[:] = ee0 + k * r_task_dev @ x_dev
        state.ee_velocity_m_s[:] = k * r_task_dev @ v_dev
        motion.state(t, state.target_position_m, state.target_velocity_m_s, state.target_acceleration_m_s2)
        hand_task = np.zeros(3) if hand is None else hand(t, state)
        state.hand_force_n[:] = hand_task
        renderer.render(law.force(state), calculated)
        safety.heartbeat(t)
        actuated = safety.filter(t, calculated)
        hand_dev = s * r_task_dev.T @ hand_task
        v_dev += dt_s * (actuated + hand_dev - c_dev * v_dev) / m_dev
        x_dev += dt_s * v_dev
        pe = np.linalg.norm(state.ee_position_m - state.target_position_m)
        out["t"][i] = t
        out["pe"][i] = pe
        out["d"][i] = pe - scenario.target.radius_m
        out["ve"][i] = np.linalg.norm(state.ee_velocity_m_s - state.target_velocity_m_s)
        out["rp"][i] = law.replanned
        calc[i] = calculated
        act[i] = actuated
    return Run(out["t"], out["d"], out["pe"], out["ve"], calc, act, out["rp"].astype(bool))


def arrival_index(run: Run) -> int:
    """First reach (distance <= 0) or, if earlier, the first closest approach (local minimum)."""
    d = run.distance_m
    reached = np.flatnonzero(d <= 0.0)
    minima = np.flatnonzero((d[1:-1] < d[:-2]) & (d[1:-1] <= d[2:])) + 1
    candidates = [idx[0] for idx in (reached, minima) if idx.size]
    assert candidates, "the end effector never approached the target"
    return int(min(candidates))


@pytest.fixture(scope="module")
def paper() -> Scenario:
    return load_scenario("paper-2019")


@pytest.fixture(scope="module")
def dg_run(paper: Scenario) -> tuple[Run, DynamicGuidance]:
    law = DynamicGuidance(**paper.guidance.params("dg"))
    return run_passive(paper, law), law


@pytest.fixture(scope="module")
def apf_run(paper: Scenario) -> Run:
    return run_passive(paper, PotentialField(**paper.guidance.params("apf")))


def test_dg_calculated_force_at_start_matches_paper_fig9(dg_run: tuple[Run, DynamicGuidance]) -> None:
    run, _ = dg_run
    # Fig. 9: "starts from almost 8 N" (x) and "-3.8 N" (y).
    assert 7.5 <= run.calculated_dev_n[0, 0] <= 8.3
    assert -4.0 <= run.calculated_dev_n[0, 1] <= -3.6
    # Fig. 10: actuated forces constrained at 3 N per axis.
    assert np.max(np.abs(run.actuated_dev_n)) <= 3.0 + 1e-12
    assert np.max(np.abs(run.actuated_dev_n[:, 0])) == pytest.approx(3.0)


def test_apf_calculated_force_at_start_matches_paper_fig14(apf_run: Run) -> None:
    assert 9.8 <= apf_run.calculated_dev_n[0, 0] <= 10.8
    assert -4.0 <= apf_run.calculated_dev_n[0, 1] <= -3.6


def test_dg_passive_hand_converges_after_first_reach(dg_run: tuple[Run, DynamicGuidance]) -> None:
    run, _ = dg_run
    reached = np.flatnonzero(run.distance_m <= 0.0)
    assert reached.size, "DG never reached the target"
    first = reached[0]
    after = run.t_s >= run.t_s[first] + 3.0
    assert after.any()
    assert np.all(run.position_error_m[after] < 0.01 * run.position_error_m[0])
    assert np.all(run.velocity_error_m_s[after] < 0.01 * run.velocity_error_m_s[0])
    # Reaching takes a couple of seconds, like the paper's 3 s (Fig. 6).
    assert 1.0 < run.t_s[first] < 4.0


def test_dg_impact_velocity_is_soft(dg_run: tuple[Run, DynamicGuidance]) -> None:
    run, _ = dg_run
    first = np.flatnonzero(run.distance_m <= 0.0)[0]
    assert run.velocity_error_m_s[first] < 0.03


def test_apf_arrives_at_least_twice_as_fast_as_dg(dg_run: tuple[Run, DynamicGuidance], apf_run: Run) -> None:
    dg, _ = dg_run
    dg_impact = dg.velocity_error_m_s[arrival_index(dg)]
    apf_impact = apf_run.velocity_error_m_s[arrival_index(apf_run)]
    assert apf_impact >= 2.0 * dg_impact
    assert apf_run.t_s[arrival_index(apf_run)] < dg.t_s[arrival_index(dg)]  # APF reaches first


def test_passive_hand_never_replans(dg_run: tuple[Run, DynamicGuidance]) -> None:
    run, law = dg_run
    assert law.replan_count == 0
    assert not run.replanned.any()


def _push_window(direction: str, start_s: float = 0.8, stop_s: float = 1.2, magnitude_n: float = 2.0) -> HandForce:
    """A hand that pushes against, along or across the current guidance force."""

    def hand(t: float, state: GuidanceState) -> np.ndarray:
        if not start_s <= t < stop_s:
            return np.zeros(3)
        to_target = state.target_position_m - state.ee_position_m
        unit = to_target / np.linalg.norm(to_target)
        if direction == "oppose":
            return -magnitude_n * unit
        if direction == "across":
            return magnitude_n * np.array([-unit[1], unit[0], 0.0])
        return magnitude_n * unit

    return hand


@pytest.mark.parametrize("direction", ["oppose", "across"])
def test_replans_when_the_hand_takes_charge(paper: Scenario, direction: str) -> None:
    law = DynamicGuidance(**paper.guidance.params("dg"))
    run = run_passive(paper, law, duration_s=4.0, hand=_push_window(direction))
    replan_times = run.t_s[run.replanned]
    assert law.replan_count >= 2  # re-planned repeatedly while the person keeps pushing
    assert law.replan_count == run.replanned.sum()
    assert replan_times.min() >= 0.8 + law.takeover_hold_s - 1e-9
    assert replan_times.max() < 1.2 + 1e-9
    # After the person lets go, the guidance still captures softly from the new path.
    first = np.flatnonzero((run.distance_m <= 0.0) & (run.t_s > 1.2))
    assert first.size and run.velocity_error_m_s[first[0]] < 0.03


def test_no_replan_when_the_hand_helps(paper: Scenario) -> None:
    law = DynamicGuidance(**paper.guidance.params("dg"))
    # A push toward the target during the early approach, while the guidance also pulls there.
    run_passive(paper, law, duration_s=2.0, hand=_push_window("help", 0.05, 0.3, 1.0))
    assert law.replan_count == 0


def test_replan_restarts_the_path_at_the_current_state(paper: Scenario) -> None:
    law = DynamicGuidance(**paper.guidance.params("dg"), max_path_deviation_m=0.0)
    state = GuidanceState()
    state.target_position_m[:] = (0.3, 0.0, 0.0)
    state.target_velocity_m_s[:] = (-0.1, 0.0, 0.0)
    law.force(state)
    state.t_s = 0.5
    state.ee_position_m[:] = (0.0, 0.05, 0.0)
    state.ee_velocity_m_s[:] = (0.02, 0.01, 0.0)
    state.hand_force_n[:] = (-5.0, 0.0, 0.0)
    law.force(state)  # the push starts: hold timer
    state.t_s = 0.5 + law.takeover_hold_s
    force = law.force(state).copy()
    assert law.replanned and law.replan_count == 1
    np.testing.assert_allclose(law.path.e0_m, state.ee_position_m - state.target_position_m)
    np.testing.assert_allclose(law.path.de0_m_s, state.ee_velocity_m_s - state.target_velocity_m_s)
    # On the new path the force is the path's feed-forward: m (a_t - k_p e - k_d ė) + c v_ee.
    e = state.ee_position_m - state.target_position_m
    de = state.ee_velocity_m_s - state.target_velocity_m_s
    expected = law.m_kg * (-law.k_p * e - law.k_d * de) + law.c_n_s_m * state.ee_velocity_m_s
    np.testing.assert_allclose(force, expected, atol=1e-12)


@pytest.mark.parametrize("name", builtin_names())
def test_dg_captures_softly_in_every_builtin(name: str) -> None:
    scenario = load_scenario(name)
    law = DynamicGuidance(**scenario.guidance.params("dg"))
    run = run_passive(scenario, law, duration_s=min(scenario.capture.time_limit_s, 6.0))
    reached = np.flatnonzero(run.distance_m <= 0.0)
    assert reached.size, f"{name}: DG never reached the target"
    # Reaching the surface of a larger target happens earlier in the exponential approach.
    assert run.velocity_error_m_s[reached[0]] < 0.02 + 2.5 * scenario.target.radius_m
    assert run.position_error_m[-1] < 1e-3 and law.replan_count == 0


def test_planned_path_starts_at_the_end_effector_and_ends_on_the_target(paper: Scenario) -> None:
    law = DynamicGuidance()
    motion = paper.target_motion(np.zeros(3))
    state = GuidanceState()
    motion.state(0.0, state.target_position_m, state.target_velocity_m_s, state.target_acceleration_m_s2)
    law.force(state)
    times = np.array([0.0, 6.0])
    targets, _, _ = motion.sample(times)
    planned = law.planned_positions(times, targets)
    np.testing.assert_allclose(planned[0], 0.0, atol=1e-15)
    np.testing.assert_allclose(planned[1], targets[1], atol=1e-5)
