"""IK: eq. 1 holds, LSE reduces TᵀT against the pseudoinverse, limits and singularities."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from robot.dynamics import dynamics_terms
from robot.ik import IKSettings, make_solver
from robot.models import MODELS

# Far from limits and with rates small enough that no bound is active: the pure eq. 6.
FREE = IKSettings(null_gain_1_s=0.0, limit_gain_1_s2=0.0, sigma_gain=0.0, singularity_priority="task")


def _state(model, data):
    n = model.n_joints
    q = np.array([data.draw(st.floats(lo * 0.5, hi * 0.5)) for lo, hi in zip(model.q_min_rad, model.q_max_rad)])
    qd = np.array([data.draw(st.floats(-0.2, 0.2)) * v for v in model.qd_max_rad_s])
    xdd = np.array([data.draw(st.floats(-0.5, 0.5)) for _ in range(3)])
    return q, qd[:n], xdd


@pytest.mark.parametrize("name", list(MODELS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_lse_satisfies_eq1_and_beats_pinv(name, data):
    model = MODELS[name]
    q, qd, xdd = _state(model, data)
    terms = dynamics_terms(model, q, qd)
    rows = model.arrays.task_rows
    react = model.arrays.reaction_rows
    # away from kinematic singularities (there J⁺ is damped on purpose and eq. 1 traded off)
    assume(np.linalg.svd(terms.jacobian[rows], compute_uv=False)[-1] > 2 * FREE.jacobian_sigma_m)
    lse = make_solver("lse", FREE).solve(model, terms, xdd, q, qd, dt_s=1e-3)
    pinv = make_solver("pinv", FREE).solve(model, terms, xdd, q, qd, dt_s=1e-3)
    for result in (lse, pinv):
        if result.limited:
            return  # a bound is active: eq. 1 may be traded off (covered below)
    # floor: the secondary z (~1 rad/s^2) leaves ~1e-16 m/s^2 of round-off in J P z
    scale = np.linalg.norm(xdd[rows]) + np.linalg.norm(terms.jdot_qdot[rows]) + 1e-6
    # eq. 1: J q̈ + J̇ q̇ − ẍ = 0, checked independently of the solver's own residual
    eq1 = terms.jacobian[rows] @ lse.qdd + terms.jdot_qdot[rows] - xdd[rows]
    assert np.linalg.norm(eq1) <= 1e-9 * scale
    eq1_pinv = terms.jacobian[rows] @ pinv.qdd + terms.jdot_qdot[rows] - xdd[rows]
    assert np.linalg.norm(eq1_pinv) <= 1e-9 * scale
    torque_lse = terms.reaction_map[react] @ lse.qdd + terms.reaction_bias[react]
    torque_pinv = terms.reaction_map[react] @ pinv.qdd + terms.reaction_bias[react]
    assert torque_lse @ torque_lse <= torque_pinv @ torque_pinv * (1 + 1e-9) + 1e-24
    # the difference lies in the null space of J (the task is untouched by the correction)
    assert np.linalg.norm(terms.jacobian[rows] @ (lse.qdd - pinv.qdd)) <= 1e-9 * scale
    if not lse.singular:
        # away from reaction singularities the reaction is cancelled completely when the
        # null space is wide enough (planar: 3 - 2 = 1 >= 1; spatial: 7 - 3 = 4 >= 3)
        assert np.linalg.norm(torque_lse) <= 1e-9 * (np.linalg.norm(torque_pinv) + np.linalg.norm(terms.reaction_bias)) + 1e-12


def test_lse_is_the_constrained_least_squares_optimum():
    """Against an independent solver: the KKT system of min |M q̈ + n|² s.t. eq. 1."""
    model = MODELS["spatial-7dof"]
    rng = np.random.default_rng(3)
    q = np.array(model.q0_rad) + rng.uniform(-0.3, 0.3, 7)
    qd = rng.uniform(-0.2, 0.2, 7)
    xdd = np.array([0.3, -0.2, 0.1])
    terms = dynamics_terms(model, q, qd)
    lse = make_solver("lse", FREE).solve(model, terms, xdd, q, qd, dt_s=1e-3)
    assert not lse.singular
    jac, mmat = terms.jacobian, terms.reaction_map
    # minimise |M q̈ + n|² + eps |q̈|² (tiny regulariser: M q̈ has a 1-D null space left)
    eps = 1e-12
    kkt = np.block([[2 * (mmat.T @ mmat) + 2 * eps * np.eye(7), jac.T], [jac, np.zeros((3, 3))]])
    rhs = np.concatenate([-2 * mmat.T @ terms.reaction_bias, xdd - terms.jdot_qdot])
    solution = np.linalg.lstsq(kkt, rhs, rcond=None)[0][:7]
    t_kkt = mmat @ solution + terms.reaction_bias
    t_lse = mmat @ lse.qdd + terms.reaction_bias
    assert np.linalg.norm(t_lse) <= np.linalg.norm(t_kkt) + 1e-9


def test_reaction_singularity_is_damped_and_reported():
    """At a reaction singularity of the planar arm (det [J; M] = 0 with J of full rank,
    found by bisection on that determinant with numpy) the solver must report it, stay
    finite and bounded, and still meet the task (the damping acts only on the reaction)."""
    from scipy.optimize import brentq

    model = MODELS["planar-3r"]
    qd = np.zeros(3)

    def pose(angle):  # the wrist joint sweeps through the singular surface near 0
        return np.array([0.3, 1.0, angle])

    def det(angle):
        terms = dynamics_terms(model, pose(angle), qd)
        return np.linalg.det(np.vstack([terms.jacobian[:2], terms.reaction_map[2:]]))

    assert det(-1.0) * det(1.0) < 0
    angle = brentq(det, -1.0, 1.0, xtol=1e-15)
    q = pose(angle)
    terms = dynamics_terms(model, q, qd)
    assert np.linalg.svd(terms.jacobian[:2], compute_uv=False)[-1] > 0.05  # not a kinematic one
    xdd = np.array([0.2, -0.1, 0.0])
    result = make_solver("lse", IKSettings(singularity_priority="task")).solve(model, terms, xdd, q, qd, dt_s=1e-3)
    assert result.singular and result.sigma_ratio < 1e-6
    assert result.reason == "reaction singularity (damped)"
    assert np.all(np.isfinite(result.qdd)) and np.all(np.abs(result.qdd) <= np.array(model.qdd_max_rad_s2))
    assert np.linalg.norm(terms.jacobian[:2] @ result.qdd + terms.jdot_qdot[:2] - xdd[:2]) < 1e-9
    undamped = make_solver("lse", IKSettings(sigma_threshold=0.0)).solve(model, terms, xdd, q, qd, dt_s=1e-3)
    # without damping the same state is hopeless: non-finite or pinned on its bounds
    assert not np.all(np.isfinite(undamped.qdd)) or undamped.limited


@pytest.mark.parametrize("name", list(MODELS))
def test_limits_are_respected(name):
    model = MODELS[name]
    n = model.n_joints
    q = np.array(model.q_max_rad) - 1e-3  # at the upper limits
    qd = np.array(model.qd_max_rad_s) * 0.99  # moving toward them fast
    terms = dynamics_terms(model, q, qd)
    result = make_solver("lse").solve(model, terms, np.array([5.0, 5.0, 5.0]), q, qd, dt_s=1e-3)
    assert result.limited and result.reason != "ok"
    assert np.all(np.abs(result.qdd) <= np.array(model.qdd_max_rad_s2) + 1e-9)
    qd_next = qd + result.qdd * 1e-3
    assert np.all(qd_next <= np.array(model.qd_max_rad_s) + 1e-9)
    assert result.qdd.shape == (n,)


def test_unknown_solver_lists_names():
    with pytest.raises(ValueError, match="lse, pinv"):
        make_solver("lsq")


def _sigma_ratio(model, q: np.ndarray) -> float:
    """sigma_ratio of the arm at q (base at rest at the origin), from the solver's report."""
    terms = dynamics_terms(model, q, np.zeros(model.n_joints))
    return make_solver("lse", FREE).solve(model, terms, np.zeros(3), q, np.zeros(model.n_joints), dt_s=1e-3).sigma_ratio


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_the_sigma_ascent_moves_only_in_the_null_space_of_task_and_reaction(data):
    """The ascent's spare direction is orthogonal to every row of [J; M] (the 7-joint arm
    has one), and its size is the slope of sigma_ratio along it (the kernel's forward
    difference, h = 1e-4, against a central one here, h = 1e-3)."""
    from robot import _kernels as kern

    model = MODELS["spatial-7dof"]
    a = model.arrays
    # around the start pose, a quarter of each joint's range either way: hypothesis
    # shrinks toward the offsets' zero, and the arm's all-zero pose (where _state's
    # draws shrink to) is singular, so nearly every example there was filtered out
    lo, hi = np.asarray(model.q_min_rad), np.asarray(model.q_max_rad)
    offsets = np.array([data.draw(st.floats(-0.25, 0.25)) for _ in range(model.n_joints)])
    q = np.clip(np.asarray(model.q0_rad) + offsets * (hi - lo), lo, hi)
    terms = dynamics_terms(model, q, np.zeros(model.n_joints))
    rows = np.vstack([terms.jacobian[a.task_rows], terms.reaction_map[a.reaction_rows]])
    assume(np.linalg.svd(rows, compute_uv=False)[-1] > 1e-3 * np.linalg.norm(rows))
    gain, settings_ = 1.0, IKSettings()
    out = np.zeros(model.n_joints)
    kern.sigma_ascent(q, terms.jacobian, terms.reaction_map, a.joint_xyz, a.joint_rot, a.joint_axis, a.link_mass,
                      a.link_com, a.link_inertia, a.ee_offset, a.base_mass, a.base_inertia, a.task_rows,
                      a.reaction_rows, settings_.jacobian_sigma_m, settings_.jacobian_damping_m, gain, out)
    size = np.linalg.norm(out)
    assume(size > 1e-6)
    direction = out / size
    # the null space of the six rows, by SVD (independent of the kernel's Gram-Schmidt)
    null = np.linalg.svd(rows)[2][-1]
    assert abs(direction @ null) == pytest.approx(1.0, abs=1e-9)
    h = 1e-3  # truncation O(h²) ~ 1e-5 relative; round-off far below
    here, plus, minus = (_sigma_ratio(model, q + k * h * direction) for k in (0, 1, -1))
    slope = (plus - minus) / (2 * h)
    curvature = (plus - 2.0 * here + minus) / h ** 2
    # the kernel's forward difference over 1e-4 is off by (1e-4 / 2) |σ''| (here with a
    # margin of 2 for σ'' over the step), beside 1e-3 of the slope as before; slopes under
    # 1e-8 per rad (a step of 50 x 1e-8 rad/s²) are the two evaluations' round-off
    bound = 1e-4 * abs(curvature) + 1e-3 * abs(slope) + 1e-8
    assert abs(size / gain - slope) <= bound
    assert slope > 0.0  # the ascent climbs


@pytest.mark.parametrize("seed", range(4))
def test_the_controllers_own_sigma_is_the_one_the_ascent_differences(seed):
    """The controller hands the ascent sigma_ratio at q from its own factorisation of eq. 6
    (task frame, any base attitude): it must be the function the ascent evaluates at
    q + h v (base frame), or the forward difference divides their mismatch by h."""
    from robot import _kernels as kern
    from scipy.spatial.transform import Rotation

    model = MODELS["spatial-7dof"]
    a, settings_ = model.arrays, IKSettings()
    rng = np.random.default_rng(seed)
    for _ in range(5):
        q = np.asarray(model.q0_rad) + rng.uniform(-0.6, 0.6, model.n_joints)
        attitude = Rotation.random(random_state=rng.integers(1 << 30)).as_quat()
        terms = dynamics_terms(model, q, np.zeros(model.n_joints), np.array([0.3, -0.2, 0.1]), attitude)
        factored = make_solver("lse", FREE).solve(model, terms, np.zeros(3), q, np.zeros(model.n_joints),
                                                   dt_s=1e-3).sigma_ratio
        evaluated = kern._sigma_ratio_base(np.empty(kern.arena_size(model.n_joints)), 0, q, a.joint_xyz,
                                           a.joint_rot, a.joint_axis, a.link_mass, a.link_com, a.link_inertia,
                                           a.ee_offset, a.base_mass, a.base_inertia, a.task_rows, a.reaction_rows,
                                           settings_.jacobian_sigma_m, settings_.jacobian_damping_m, np.zeros(8))
        assert 1e-4 < factored < 1.0  # not vacuous: away from a reaction singularity
        # round-off of a ratio to ||M|| (about 1e-15): 1e-9 at most in the slope over h = 1e-4
        assert abs(factored - evaluated) <= 1e-13


@pytest.mark.parametrize("seed", range(6))
def test_reaction_first_stays_finite_and_exact_where_m_loses_rank(seed):
    """The reaction-first solve at a reaction singularity (7 joints, M of rank 2: its third
    row a combination of the other two, as at a real one, where M Mᵀ is singular to
    round-off): nothing is non-finite, the reaction rows are met (the bias is one the
    joints can cancel), and the task gets the damped least-squares step within the null
    space of M, computed here with numpy's SVD pseudoinverse and the reported damping."""
    from robot import _kernels as kern

    rng = np.random.default_rng(seed)
    n = 7
    jac = rng.normal(size=(3, n))
    mmat = np.empty((3, n))
    mmat[:2] = rng.normal(size=(2, n))
    mmat[2] = 0.3 * mmat[0] - 0.7 * mmat[1]
    nvec = mmat @ rng.normal(scale=0.1, size=n)
    jdqd = rng.normal(scale=0.1, size=3)
    xdd = rng.normal(scale=0.5, size=3)
    rows = np.arange(3, dtype=np.int64)
    big = np.full(n, 1e6)
    qdd, diag = np.zeros(n), np.zeros(8)
    kern.solve_ik(jac, jdqd, mmat, nvec, xdd, np.zeros(3), np.zeros(n), np.zeros(n), rows, rows, -big, big, big, big,
                  1e-3, kern.SOLVER_LSE_REACTION_FIRST, 0.05, 0.1, 1e-3, 0.05, 0.0, 0.0, np.zeros(n), qdd, diag)
    assert np.all(np.isfinite(qdd)) and np.all(np.isfinite(diag))
    assert diag[0] < 1e-6  # the gauge sees the singularity
    scale = np.linalg.norm(xdd) + np.linalg.norm(jdqd) + np.linalg.norm(nvec)
    assert np.linalg.norm(mmat @ qdd + nvec) <= 1e-9 * scale
    m_pinv = np.linalg.pinv(mmat, rcond=1e-10)
    q_null = np.eye(n) - m_pinv @ mmat
    q_react = -m_pinv @ nvec
    jq = jac @ q_null
    step = jq.T @ np.linalg.solve(jq @ jq.T + diag[3] ** 2 * np.eye(3), xdd - jdqd - jac @ q_react)
    # (the kernel's M+ is regularised at 1e-5 ||M||, which leaves ~1e-7 in the task's step)
    np.testing.assert_allclose(qdd, q_react + step, atol=1e-6 * np.linalg.norm(qdd))
