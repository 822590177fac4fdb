"""Guidance laws against closed forms, finite differences and an ODE solver."""

from __future__ import annotations

import inspect
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from capture_trainer.errors import CaptureTrainerError
from guidance.laws import (
    LAWS,
    CapturePath,
    DynamicGuidance,
    GuidanceLaw,
    GuidanceState,
    JointLimitProximity,
    NoGuidance,
    ObstacleField,
    PotentialField,
    ReachLimit,
    SphereObstacle,
    Sum,
    WorkspaceWalls,
    make_law,
)
from guidance.rendering import ForceRenderer


def state_with(**values: object) -> GuidanceState:
    state = GuidanceState()
    for key, value in values.items():
        current = getattr(state, key)
        if isinstance(current, np.ndarray):
            current[:] = value
        else:
            setattr(state, key, value)
    return state


@pytest.mark.parametrize("k_p,k_d", [(7.7, 5.0), (4.0, 4.0), (2.0, 6.0), (9.0, 0.0)])
def test_capture_path_solves_the_capture_law(k_p: float, k_d: float) -> None:
    path = CapturePath(k_p, k_d)
    e0 = np.array([0.2, -0.1, 0.05])
    de0 = np.array([-0.3, 0.0, 0.1])
    path.start(1.0, e0, de0)

    def rhs(_t, y):
        return np.concatenate([y[3:], -k_p * y[:3] - k_d * y[3:]])

    taus = np.linspace(0.0, 3.0, 31)
    sol = solve_ivp(rhs, (0.0, 3.0), np.concatenate([e0, de0]), t_eval=taus, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(path.errors(1.0 + taus), sol.y[:3].T, atol=1e-8)
    for tau, y in zip(taus, sol.y.T):
        _, _, dphi1, dphi2 = path.basis(tau)
        np.testing.assert_allclose(dphi1 * e0 + dphi2 * de0, y[3:], atol=1e-8)


def test_dg_force_is_the_feedforward_on_the_path_and_eq11_off_it() -> None:
    law = DynamicGuidance(m_kg=2.0, c_n_s_m=0.5, k_p=7.7, k_d=5.0, max_path_deviation_m=0.0)
    target_v = np.array([-0.1, 0.05, 0.0])
    target_a = np.array([0.0, -0.02, 0.0])
    law.force(state_with(target_position_m=(0.3, 0.1, 0.0), target_velocity_m_s=target_v, target_acceleration_m_s2=target_a))
    t = 0.7
    eps = law.path.errors(np.array([t]))[0]
    _, _, dphi1, dphi2 = law.path.basis(t)
    deps = dphi1 * law.path.e0_m + dphi2 * law.path.de0_m_s
    xt = np.array([0.3, 0.1, 0.0]) + target_v * t + 0.5 * target_a * t * t
    vt = target_v + target_a * t
    on_path = state_with(
        t_s=t, ee_position_m=xt + eps, ee_velocity_m_s=vt + deps, target_position_m=xt,
        target_velocity_m_s=vt, target_acceleration_m_s2=target_a,
    )
    path_acc = target_a - 7.7 * eps - 5.0 * deps
    np.testing.assert_allclose(law.force(on_path), 2.0 * path_acc + 0.5 * (vt + deps), atol=1e-12)
    off = np.array([0.01, -0.02, 0.0])
    dv = np.array([0.0, 0.03, 0.0])
    on_path.ee_position_m[:] += off
    on_path.ee_velocity_m_s[:] += dv
    expected = 2.0 * path_acc + 0.5 * (vt + deps) - 2.0 * 7.7 * off - (2.0 * 5.0 + 0.5) * dv
    np.testing.assert_allclose(law.force(on_path), expected, atol=1e-12)
    assert law.replan_count == 0


def test_apf_is_a_spring_to_the_target_and_a_cone_beyond_saturation() -> None:
    state = state_with(ee_position_m=(0.1, 0.2, 0.0), target_position_m=(0.4, -0.2, 0.0))
    np.testing.assert_allclose(PotentialField(20.0).force(state), 20.0 * np.array([0.3, -0.4, 0.0]))
    cone = PotentialField(20.0, saturation_distance_m=0.1).force(state)
    np.testing.assert_allclose(cone, 20.0 * 0.1 * np.array([0.6, -0.8, 0.0]))
    state.ee_velocity_m_s[:] = (5.0, 5.0, 5.0)  # distance only: velocity has no effect
    np.testing.assert_allclose(PotentialField(20.0).force(state), 20.0 * np.array([0.3, -0.4, 0.0]))


def test_obstacle_repulsion_is_minus_the_gradient_of_its_potential() -> None:
    obstacle = SphereObstacle((0.0, 0.0, 0.0), radius_m=0.05, influence_m=0.1, gain_n_m2=1e-3)

    def potential(p: np.ndarray) -> float:
        rho = np.linalg.norm(p) - 0.05
        return 0.0 if rho >= 0.1 else 0.5 * 1e-3 * (1 / rho - 1 / 0.1) ** 2

    p = np.array([0.06, 0.03, -0.02])
    field = ObstacleField([obstacle])
    f = field.force(state_with(ee_position_m=p)).copy()
    h = 1e-7
    grad = np.array([(potential(p + h * e) - potential(p - h * e)) / (2 * h) for e in np.eye(3)])
    np.testing.assert_allclose(f, -grad, rtol=1e-5)
    assert not field.force(state_with(ee_position_m=(0.2, 0.0, 0.0))).any()


def test_workspace_walls_render_the_device_frame_wall_force() -> None:
    r_dev_task = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])
    walls = WorkspaceWalls((-0.1, -0.05, -0.05), (0.1, 0.05, 0.05), r_dev_task, force_scale=0.5,
                           stiffness_n_m=400.0, damping_n_s_m=2.0, margin_m=0.01)
    inside = state_with(device_position_m=(0.05, 0.0, 0.0))
    assert not walls.force(inside).any()
    beyond = state_with(device_position_m=(0.1, -0.045, 0.0), device_velocity_m_s=(0.2, 0.1, 0.0))
    # x: 0.01 m past the wall at 0.09, moving out at 0.2 m/s; y: 0.005 m past -0.04, moving in.
    expected_dev = np.array([-(400 * 0.01 + 2.0 * 0.2), 400 * 0.005, 0.0])
    rendered = np.zeros(3)
    ForceRenderer(r_dev_task, 0.5).render(walls.force(beyond), rendered)
    np.testing.assert_allclose(rendered, expected_dev, atol=1e-12)


def test_reach_limit_pushes_inward_beyond_reach_minus_margin() -> None:
    fixture = ReachLimit(reach_m=1.0, stiffness_n_m=100.0, damping_n_s_m=5.0, margin_m=0.1)
    base = (0.5, 0.0, 0.0)
    assert not fixture.force(state_with(arm_base_position_m=base, ee_position_m=(1.3, 0.0, 0.0))).any()
    state = state_with(arm_base_position_m=base, ee_position_m=(0.5, 0.95, 0.0), ee_velocity_m_s=(0.3, 0.1, 0.0))
    np.testing.assert_allclose(fixture.force(state), [0.0, -(100 * 0.05 + 5.0 * 0.1), 0.0])


def test_joint_limit_fixture_moves_the_joint_away_from_its_limit() -> None:
    rng = np.random.default_rng(1)
    jac = rng.normal(size=(3, 7))
    pinv = np.linalg.pinv(jac)
    lower, upper = -np.ones(7), np.ones(7)
    fixture = JointLimitProximity(lower, upper, stiffness_n_rad=20.0, margin_rad=0.2)
    state = GuidanceState.for_joints(7)
    state.jacobian_pinv[:] = pinv
    assert not fixture.force(state).any()
    state.joint_position_rad[2] = 0.9  # 0.1 rad inside the upper margin
    state.joint_position_rad[5] = -0.95  # 0.15 rad inside the lower margin
    f = fixture.force(state)
    dq = pinv @ f  # joint motion the IK would make for an end-effector step along f
    assert dq[2] < 0.0 and dq[5] > 0.0
    expected = -20.0 * 0.1 * pinv[2] / np.linalg.norm(pinv[2]) + 20.0 * 0.15 * pinv[5] / np.linalg.norm(pinv[5])
    np.testing.assert_allclose(f, expected, atol=1e-12)


def test_sum_adds_forces_and_reports_member_replans() -> None:
    apf = PotentialField(10.0)
    dg = DynamicGuidance(max_path_deviation_m=0.01, replan_interval_s=0.0)
    total = Sum(apf, dg)
    state = state_with(target_position_m=(0.2, 0.0, 0.0))
    expected = apf.force(state).copy() + DynamicGuidance(max_path_deviation_m=0.01).force(state)
    np.testing.assert_allclose(total.force(state), expected)
    assert not total.replanned
    state.t_s = 0.1
    state.ee_position_m[:] = (0.0, 0.1, 0.0)  # far off the path
    total.force(state)
    assert total.replanned and total.replan_count == 1
    total.reset()
    assert total.replan_count == 0 and dg.replan_count == 0


def test_registry_builds_every_law_and_explains_mistakes() -> None:
    assert LAWS.names() == ("dg", "apf", "ng", "reaction_boundary")
    assert isinstance(make_law("dg", m_kg=3.0), DynamicGuidance)
    assert isinstance(make_law("apf", k_n_m=10.0), PotentialField)
    assert isinstance(make_law("ng"), NoGuidance)
    with pytest.raises(CaptureTrainerError, match=r"unknown guidance law 'apff'; did you mean 'apf'\? known: dg, apf, ng, reaction_boundary"):
        make_law("apff")
    with pytest.raises(CaptureTrainerError, match=r"m_kg: expected a number > 0 \[kg\], got -1.0"):
        make_law("dg", m_kg=-1.0)
    with pytest.raises(CaptureTrainerError, match="unexpected keyword"):
        make_law("apf", m_kg=1.0)


@pytest.mark.parametrize("name", LAWS.names())
def test_every_law_declares_its_numeric_keyword_arguments(name: str) -> None:
    """``PARAMS`` are the law's own keyword arguments (with their defaults in range), so a
    scenario file that sets them builds the law, and every float keyword is declared."""
    law = LAWS.get(name)
    signature = inspect.signature(law)
    numeric = {
        key for key, parameter in signature.parameters.items()
        if parameter.default is None or isinstance(parameter.default, float)
    }
    declared = {param.name for param in law.PARAMS}
    assert declared == numeric, (declared, numeric)
    for param in law.PARAMS:
        assert param.unit
        default = signature.parameters[param.name].default
        assert param.accepts(default), (param, default)
        assert make_law(name, **{param.name: default}).params()[param.name] == default
        if param.minimum is not None:
            below = param.minimum if param.strict else param.minimum - 1.0
            with pytest.raises(CaptureTrainerError, match=param.name):
                make_law(name, **{param.name: below})


def all_laws() -> list[GuidanceLaw]:
    return [
        make_law("dg"), make_law("apf", saturation_distance_m=0.1), make_law("ng"),
        WorkspaceWalls((-0.08, -0.06, -0.05), (0.08, 0.06, 0.05)), ReachLimit(0.8),
        JointLimitProximity([-1.0] * 3, [1.0] * 3), ObstacleField([SphereObstacle((0.1, 0.0, 0.0), 0.02)]),
        Sum(make_law("dg"), ReachLimit(0.8)),
    ]


vec = st.tuples(*[st.floats(-2.0, 2.0)] * 3)


@pytest.mark.parametrize("law", all_laws(), ids=lambda law: type(law).__name__)
@settings(max_examples=40, deadline=None)
@given(ee=vec, vee=vec, target=vec, vt=vec, hand=vec, q=vec, t=st.floats(0.0, 20.0))
def test_every_law_conforms(law: GuidanceLaw, ee, vee, target, vt, hand, q, t) -> None:
    assert isinstance(law, GuidanceLaw)
    law.reset()
    state = GuidanceState.for_joints(3)
    state.jacobian_pinv[:] = np.eye(3)
    for key, value in dict(ee_position_m=ee, ee_velocity_m_s=vee, target_position_m=target, target_velocity_m_s=vt,
                           hand_force_n=hand, joint_position_rad=q, device_position_m=np.array(ee) / 10).items():
        getattr(state, key)[:] = value
    for tick in range(3):
        state.t_s = t + tick * 1e-3
        f = law.force(state)
        assert f.shape == (3,) and np.all(np.isfinite(f))
        assert isinstance(law.replanned, bool) and law.replan_count >= 0
    json.dumps(law.params())


def test_dg_rejects_unphysical_parameters() -> None:
    for bad in ({"m_kg": 0.0}, {"c_n_s_m": -0.1}, {"k_p": math.nan}, {"takeover_force_n": 0.0}):
        with pytest.raises(ValueError):
            DynamicGuidance(**bad)


def test_the_reaction_boundary_pulls_the_hand_back_to_the_arm_only_near_the_boundary() -> None:
    """F = -k w (x_cmd - x_ee), w rising linearly from 0 at the margin to 1 at the
    threshold of the reaction-singularity gauge (hand-computed)."""
    from guidance.fixtures import ReactionBoundary
    from guidance.state import GuidanceState

    fixture = make_law("reaction_boundary", stiffness_n_m=100.0, margin=0.03, threshold=0.01)
    assert isinstance(fixture, ReactionBoundary)
    state = GuidanceState.for_joints(3)
    state.ee_position_m[:] = (1.0, 0.5, 0.0)
    state.command_position_m[:] = (1.04, 0.47, 0.0)  # the arm lags the command by 5 cm
    for sigma, weight in ((0.5, 0.0), (0.03, 0.0), (0.02, 0.5), (0.01, 1.0), (1e-6, 1.0)):
        state.sigma_ratio[0] = sigma
        expected = -100.0 * weight * np.array([0.04, -0.03, 0.0])
        np.testing.assert_allclose(fixture.force(state), expected, atol=1e-12)
    with pytest.raises(CaptureTrainerError, match="threshold must not exceed margin"):
        make_law("reaction_boundary", margin=0.01, threshold=0.02)
