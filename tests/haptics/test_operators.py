"""Operator models: minimum jerk, delay, determinism, passive following, reaching, population."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from haptics.operators import (
    PARTICIPANT_PRESETS,
    HumanOperator,
    Operator,
    ParticipantParams,
    make_operator,
    quintic_coefficients,
    sample_population,
)
from haptics.safety import SafetyConfig
from haptics.simulated import TOUCH_DAMPING_N_S_M, TOUCH_TIP_MASS_KG, SimulatedDevice

NO_RAMP = SafetyConfig(ramp_in_s=1e-9)


def poly(c: np.ndarray, t: float) -> tuple[float, float, float]:
    p = np.polynomial.Polynomial(c)
    return p(t), p.deriv(1)(t), p.deriv(2)(t)


def test_quintic_meets_its_boundary_states() -> None:
    c = np.zeros(6)
    quintic_coefficients(0.1, -0.2, 0.5, 0.3, 0.05, -1.0, 0.8, c)
    assert np.allclose(poly(c, 0.0), (0.1, -0.2, 0.5))
    assert np.allclose(poly(c, 0.8), (0.3, 0.05, -1.0))


def test_rest_to_rest_quintic_is_flash_hogan_minimum_jerk() -> None:
    d, big_t = 0.2, 1.1
    c = np.zeros(6)
    quintic_coefficients(0.0, 0.0, 0.0, d, 0.0, 0.0, big_t, c)
    for s in np.linspace(0.0, 1.0, 11):
        assert poly(c, s * big_t)[0] == pytest.approx(d * (10 * s**3 - 15 * s**4 + 6 * s**5))
    assert poly(c, big_t / 2)[1] == pytest.approx(1.875 * d / big_t)  # peak speed


def test_every_preset_makes_an_operator() -> None:
    assert PARTICIPANT_PRESETS.names() == ("novice", "expert", "passive", "novice-learner", "expert-learner")
    for kind in PARTICIPANT_PRESETS.names():
        op = make_operator(kind, seed=3)
        assert isinstance(op, Operator) and op.params.kind == kind
    with pytest.raises(ValueError, match="novice"):
        make_operator("nobody")


def drive_sequence(op: HumanOperator, trial_seed: int, ticks: int = 800) -> np.ndarray:
    op.reset(0.0, np.zeros(3), trial_seed)
    x, v, f, out = np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3)
    target = np.array([0.05, 0.01, 0.0])
    seq = []
    for k in range(ticks):
        t = k * 1e-3
        op.perceive(t, target, np.zeros(3), x, v)
        op.drive(t, x, v, f, out)
        seq.append(out.copy())
    return np.array(seq)


def test_operator_is_deterministic_per_seed() -> None:
    a = drive_sequence(make_operator("novice", seed=11), 5)
    b = drive_sequence(make_operator("novice", seed=11), 5)
    c = drive_sequence(make_operator("novice", seed=12), 5)
    d = drive_sequence(make_operator("novice", seed=11), 6)
    assert np.array_equal(a, b)
    assert not np.allclose(a, c) and not np.allclose(a, d)


def reach(kind: str, seed: int, force_n: np.ndarray | None = None, params: ParticipantParams | None = None,
          target0: tuple[float, float, float] = (0.07, 0.03, 0.0), v_target: tuple[float, float, float] = (-0.03, 0.0, 0.0),
          seconds: float = 6.0, radius_m: float = 0.004) -> tuple[float, np.ndarray]:
    """Device-frame harness where the end effector is the stylus; returns (reach time, path)."""
    op = make_operator(kind, seed=seed) if params is None else HumanOperator(params, seed=seed)
    dev = SimulatedDevice(operator=op, seed=seed, initial_position_m=(-0.04, -0.02, 0.0), safety_config=NO_RAMP)
    p0, vt = np.array(target0), np.array(v_target)
    f = np.zeros(3) if force_n is None else force_n
    reached = np.nan
    path = []
    state = dev.state
    for k in range(int(seconds / dev.dt_s)):
        t = dev.t_s
        dev.perceive(t, p0 + vt * t, vt, state.position_m, state.velocity_m_s)
        state = dev.read()
        dev.command_force(f)
        path.append(state.position_m.copy())
        if np.isnan(reached) and np.linalg.norm(state.position_m - (p0 + vt * dev.t_s)) <= radius_m:
            reached = dev.t_s
    return reached, np.array(path)


@pytest.mark.parametrize("kind", ["novice", "expert"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unguided_operator_reaches_a_moving_target(kind: str, seed: int) -> None:
    reached, path = reach(kind, seed)
    assert not np.isnan(reached), f"{kind} seed {seed} never reached the target"
    # It did not just wait for the target: the hand travelled toward it.
    assert path[int(reached / 1e-3) - 1, 0] - path[0, 0] > 0.03


def test_nothing_moves_before_the_reaction_time() -> None:
    params = PARTICIPANT_PRESETS["expert"]
    _, path = reach("expert", 4, v_target=(0.0, 0.0, 0.0), target0=(0.06, -0.02, 0.0), seconds=0.8)
    rt = int(params.reaction_time_s / 1e-3)
    assert np.linalg.norm(path[rt - 5] - path[0]) < 1e-3
    assert np.linalg.norm(path[rt + 300] - path[0]) > 0.01


def test_passive_follower_goes_along_with_a_constant_guidance_force() -> None:
    params = PARTICIPANT_PRESETS["passive"]
    op = make_operator("passive", seed=1)
    dev = SimulatedDevice(operator=op, seed=0, safety_config=NO_RAMP)
    f = np.array([0.3, -0.2, 0.0])
    for k in range(1000):
        dev.perceive(dev.t_s, np.array([0.05, 0.0, 0.0]), np.zeros(3), dev.state.position_m, dev.state.velocity_m_s)
        state = dev.read()
        dev.command_force(f)
    # Hand + stylus act as one mass-damper driven by the guidance force (no intent).
    mass = TOUCH_TIP_MASS_KG + params.hand_mass_kg
    damping = TOUCH_DAMPING_N_S_M + params.hand_damping_n_s_m
    t = 1.0
    decay = 1.0 - np.exp(-damping * t / mass)
    # Up to the hand's small motor noise (0.02 N, coloured).
    assert np.allclose(state.velocity_m_s[:2], f[:2] / damping * decay, rtol=0.02, atol=0.01)
    assert np.allclose(state.position_m[:2], f[:2] / damping * (t - mass / damping * decay), rtol=0.02, atol=0.003)


def test_compliant_operator_yields_more_than_one_that_takes_charge() -> None:
    base = PARTICIPANT_PRESETS["expert"]
    follower = replace(base, compliance=1.0, resist_probability=0.0)
    resister = replace(base, resist_probability=1.0)
    push = np.array([0.0, 0.0, 1.5])  # across the reach, away from the target's plane
    still = dict(target0=(0.05, 0.0, 0.0), v_target=(0.0, 0.0, 0.0), seconds=1.5, radius_m=0.0)
    _, path_f = reach("expert", 3, push, follower, **still)
    _, path_r = reach("expert", 3, push, resister, **still)
    dev_f = np.max(path_f[:, 2])
    dev_r = np.max(path_r[:, 2])
    assert dev_r > 0.0 and dev_f > 2.0 * dev_r
    op = HumanOperator(resister, seed=0)
    assert op.resisting and op.impedance()[2] == pytest.approx(base.hand_stiffness_n_m * base.resist_stiffness_gain)


def test_population_is_reproducible_and_follows_the_mix() -> None:
    a = sample_population(10, seed=2019, mix={"novice": 0.6, "expert": 0.4})
    b = sample_population(10, seed=2019, mix={"novice": 0.6, "expert": 0.4})
    c = sample_population(10, seed=2020, mix={"novice": 0.6, "expert": 0.4})
    assert a == b and a != c
    assert [p.kind for p in a].count("novice") == 6 and [p.kind for p in a].count("expert") == 4
    assert len({p.participant_id for p in a}) == 10
    assert len({p.reaction_time_s for p in a}) == 10  # individuals differ
    for p in a:
        assert ParticipantParams(**p.as_dict()) == p  # what trials record rebuilds it
        assert 0.0 <= p.compliance <= 1.0 and p.reaction_time_s > 0.0
    novices = [p.hand_stiffness_n_m for p in sample_population(400, seed=1, mix={"novice": 1.0})]
    assert np.median(novices) == pytest.approx(PARTICIPANT_PRESETS["novice"].hand_stiffness_n_m, rel=0.1)
    assert [p.kind for p in sample_population(3, seed=0, mix={"passive": 1.0})] == ["passive"] * 3
    with pytest.raises(ValueError):
        sample_population(2, seed=0, mix={"robot": 1.0})
