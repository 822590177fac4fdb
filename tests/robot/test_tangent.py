"""The momentum maps' forward-mode tangent, the bias terms built on it and the exact
slope of sigma_ratio, against finite differences of the maps themselves (independent:
the differences only evaluate the maps, they never use a derivative formula)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import expm

from robot import _kernels as kern
from robot.ik import IKSettings
from robot.models import MODELS


def _skew(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def _maps(model, q):
    """jg, om, re, ainv, cg and the per-link record at q (base frame), from the kernel."""
    a, n = model.arrays, model.n_joints
    out = dict(jg=np.empty((3, n)), om=np.empty((3, n)), re=np.empty(3), ainv=np.empty((3, 3)), cg=np.empty(3),
               origins=np.empty((n, 3)), axes=np.empty((n, 3)), links=np.empty((n, kern.LINK_RECORD)))
    kern._floating_base_maps_in(np.empty(kern.arena_size(n)), 0, np.asarray(q, dtype=float), a.joint_xyz,
                                a.joint_rot, a.joint_axis, a.link_mass, a.link_com, a.link_inertia, a.ee_offset,
                                a.base_mass, a.base_inertia, out["jg"], out["om"], out["re"], out["ainv"], out["cg"],
                                out["origins"], out["axes"], out["links"])
    return out


def _derivative(f, h=1e-3):
    """Fourth-order central difference of f at 0 (truncation ~h⁴, round-off ~1e-16/h)."""
    return (-f(2 * h) + 8 * f(h) - 8 * f(-h) + f(-2 * h)) / (12 * h)


def _state(model, rng):
    n = model.n_joints
    lo, hi = np.asarray(model.q_min_rad), np.asarray(model.q_max_rad)
    return rng.uniform(0.8 * lo, 0.8 * hi), rng.uniform(-1.0, 1.0, n)


@pytest.mark.parametrize("seed", range(4))
def test_the_tangent_is_the_derivative_of_every_map(model, seed):
    """Jg', Om' (every column), A⁻¹', re', cg' and the contractions with d, along a
    random d, equal the differences of the maps over q + t d."""
    rng = np.random.default_rng(seed)
    q, d = _state(model, rng)
    n = model.n_joints
    here = _maps(model, q)
    tan, dainv = np.empty((kern.N_TANGENT, 3)), np.empty((3, 3))
    djg, dom = np.empty((3, n)), np.empty((3, n))
    kern._maps_tangent_in(np.empty(kern.arena_size(n)), 0, d, model.arrays.link_mass, model.arrays.base_mass,
                          here["links"], here["origins"], here["axes"], here["om"], here["re"], here["ainv"], tan,
                          dainv, djg, dom)

    def along(key):
        return _derivative(lambda t: _maps(model, q + t * d)[key])

    for name, analytic, key in (("Jg'", djg, "jg"), ("Om'", dom, "om"), ("(A⁻¹)'", dainv, "ainv"),
                                ("re'", tan[kern.T_DRE], "re"), ("cg'", tan[kern.T_DCG], "cg")):
        reference = along(key)
        assert np.linalg.norm(analytic - reference) <= 1e-8 * np.linalg.norm(reference) + 1e-12, name
    # the contractions with d, against the differences of Om(q) d and Jg(q) d themselves
    for name, row, key in (("(Om d)'", kern.T_DOM_D, "om"), ("(Jg d)'", kern.T_DJG_D, "jg")):
        reference = _derivative(lambda t, key=key: _maps(model, q + t * d)[key] @ d)
        assert np.linalg.norm(tan[row] - reference) <= 1e-8 * np.linalg.norm(reference) + 1e-12, name
    # without columns asked for, the contractions are the same
    tan2 = np.empty((kern.N_TANGENT, 3))
    kern._maps_tangent_in(np.empty(kern.arena_size(n)), 0, d, model.arrays.link_mass, model.arrays.base_mass,
                          here["links"], here["origins"], here["axes"], here["om"], here["re"], here["ainv"], tan2,
                          np.empty((3, 3)), np.empty((3, 0)), np.empty((3, 0)))
    np.testing.assert_array_equal(tan2, tan)


def _terms(model, q, qd, rot0, l_b):
    """The kernel's J̇q̇, n, the EE velocity relative to the system's centre of mass and
    the base rate (both base frame), for a given momentum ``l_b`` (base frame)."""
    a, n = model.arrays, model.n_joints
    jac, jdqd, mmat, nvec = np.empty((3, n)), np.empty(3), np.empty((3, n)), np.empty(3)
    vee_b, w_b, re_b = np.empty(3), np.empty(3), np.empty(3)
    zero3 = np.zeros(3)
    kern._dynamics_terms_in(np.empty(kern.arena_size(n)), 0, q, qd, rot0, a.joint_xyz, a.joint_rot, a.joint_axis,
                            a.link_mass, a.link_com, a.link_inertia, a.ee_offset, a.base_mass, a.base_inertia,
                            np.array(l_b, dtype=float), 0.0, zero3, zero3, zero3, jac, jdqd, mmat, nvec, re_b, vee_b,
                            w_b, np.empty((n, 3)), np.empty((n, 3)), np.empty((n, kern.LINK_RECORD)),
                            np.empty((3, n)), np.empty((3, 3)))
    return jdqd, nvec, vee_b, w_b


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("momentum", [0.0, 2.0])
def test_bias_terms_are_the_time_derivatives_of_velocity_and_momentum(model, seed, momentum):
    """At q̈ = 0 the task-frame EE velocity relative to the system's centre of mass,
    ``R0 vee``, changes at J̇q̇, and the base's own angular momentum, ``R0 I0 w``, at n
    (eq. 1 and 2): differenced over the motion itself, the joints at q + t q̇, the base
    turned by ``exp(t [R0 w]x)``, the system's momentum L fixed in the task frame (its
    base-frame components turning with the base)."""
    rng = np.random.default_rng(20 + seed)
    q, qd = _state(model, rng)
    rot0 = expm(_skew(rng.normal(size=3)))
    l_task = momentum * rng.normal(size=3)
    jdqd, nvec, _, w_b = _terms(model, q, qd, rot0, rot0.T @ l_task)
    w_task = rot0 @ w_b
    inertia = model.arrays.base_inertia

    def frame(t):
        return expm(t * _skew(w_task)) @ rot0

    def velocity(t):
        rot = frame(t)
        return rot @ _terms(model, q + t * qd, qd, rot, rot.T @ l_task)[2]

    def base_momentum(t):
        rot = frame(t)
        return rot @ inertia @ _terms(model, q + t * qd, qd, rot, rot.T @ l_task)[3]

    accel = _derivative(velocity, 1e-4)
    torque = _derivative(base_momentum, 1e-4)
    assert np.linalg.norm(jdqd - accel) <= 1e-7 * np.linalg.norm(accel) + 1e-12
    assert np.linalg.norm(nvec - torque) <= 1e-7 * np.linalg.norm(torque) + 1e-12


def _sigma_slot(model, q, rot0):
    """The factorisation of eq. 6 over all joints of ``R0 Jg`` and ``R0 I0 Om`` at q (as
    the controller has it), and the base-frame maps."""
    a, n, settings = model.arrays, model.n_joints, IKSettings()
    here = _maps(model, q)
    cache = np.empty(kern._factor_cache_size(n, 1))
    kern._factor_cache_clear(cache, n)
    at = kern._lse_factor(np.empty(kern.arena_size(n)), 0, cache, rot0 @ here["jg"], rot0 @ a.base_inertia @ here["om"],
                          a.task_rows, a.reaction_rows, np.ones(n), kern.SOLVER_LSE, settings.sigma_threshold,
                          settings.damping_max, settings.jacobian_sigma_m, settings.jacobian_damping_m)
    return cache, at, here


def _slope(model, v, rot0, cache, at, here):
    a = model.arrays
    return kern._sigma_slope(np.empty(kern.arena_size(model.n_joints)), 0, v, a.link_mass, a.base_mass,
                             a.base_inertia, a.task_rows, a.reaction_rows, rot0, cache, at, here["links"],
                             here["origins"], here["axes"], here["om"], here["re"], here["ainv"])


def _sigma(model, q):
    a, settings = model.arrays, IKSettings()
    return kern._sigma_ratio_base(np.empty(kern.arena_size(model.n_joints)), 0, q, a.joint_xyz, a.joint_rot,
                                  a.joint_axis, a.link_mass, a.link_com, a.link_inertia, a.ee_offset, a.base_mass,
                                  a.base_inertia, a.task_rows, a.reaction_rows, settings.jacobian_sigma_m,
                                  settings.jacobian_damping_m, np.zeros(8))


@pytest.mark.parametrize("seed", range(4))
def test_the_exact_sigma_slope_is_sigmas_derivative_at_any_base_attitude(seed):
    """_sigma_slope along random directions equals the difference of sigma_ratio over q + t v
    (each evaluated afresh), and it does not depend on the frame J and M are given in."""
    model = MODELS["spatial-7dof"]
    rng = np.random.default_rng(40 + seed)
    checked = 0
    for _ in range(6):
        q = np.asarray(model.q0_rad) + rng.uniform(-0.8, 0.8, model.n_joints)
        v = rng.normal(size=model.n_joints)
        v /= np.linalg.norm(v)
        rot0 = expm(_skew(rng.normal(size=3)))
        cache, at, here = _sigma_slot(model, q, rot0)
        slope = _slope(model, v, rot0, cache, at, here)
        if np.isnan(slope):  # J damped or an extreme eigenvalue repeated: not this test's case
            continue
        base_cache, base_at, _ = _sigma_slot(model, q, np.eye(3))
        assert slope == pytest.approx(_slope(model, v, np.eye(3), base_cache, base_at, here), rel=1e-9, abs=1e-12)
        reference = _derivative(lambda t: _sigma(model, q + t * v), 1e-4)
        assert abs(slope - reference) <= 1e-6 * abs(reference) + 1e-9
        checked += 1
    assert checked >= 4


def test_a_damped_jacobian_leaves_the_slope_to_the_difference():
    """Where J is damped (a kinematic singularity: P is no projector) _sigma_slope gives
    NaN, and sigma_ascent still returns the forward difference's step."""
    model = MODELS["spatial-7dof"]
    a, n, settings = model.arrays, model.n_joints, IKSettings()
    q = np.zeros(n)  # stretched out: the task Jacobian loses rank
    cache, at, here = _sigma_slot(model, q, np.eye(3))
    assert cache[at + kern._F_DAMP_J] > 0.0
    v = np.ones(n) / np.sqrt(n)
    assert np.isnan(_slope(model, v, np.eye(3), cache, at, here))
    rows = np.vstack([here["jg"][a.task_rows], (a.base_inertia @ here["om"])[a.reaction_rows]])
    out = np.zeros(n)
    kern.sigma_ascent(q, here["jg"], a.base_inertia @ here["om"], a.joint_xyz, a.joint_rot, a.joint_axis,
                      a.link_mass, a.link_com, a.link_inertia, a.ee_offset, a.base_mass, a.base_inertia, a.task_rows,
                      a.reaction_rows, settings.jacobian_sigma_m, settings.jacobian_damping_m, 1.0, out)
    assert np.all(np.isfinite(out))
    size = np.linalg.norm(out)
    assert size > 0.0
    # the step lies in the null space of [J; M] and is the forward difference's slope
    # along the spare direction v = ±out/|out| (out = slope v)
    direction = out / size
    assert np.linalg.norm(rows @ direction) <= 1e-6 * np.linalg.norm(rows)
    h, here_sigma = 1e-4, _sigma(model, q)
    along = (_sigma(model, q + h * direction) - here_sigma) / h
    against = (_sigma(model, q - h * direction) - here_sigma) / h
    assert size == pytest.approx(along, rel=1e-9) or -size == pytest.approx(against, rel=1e-9)


def _spare(model, cache, at):
    """The spare direction the factors give (None where they give none)."""
    a, n = model.arrays, model.n_joints
    v = np.zeros(n)
    found = kern._spare_direction_of_factors(np.empty(kern.arena_size(n)), 0, cache, at, n, a.task_rows.size,
                                             a.reaction_rows.size, v)
    return v if found else None


@pytest.mark.parametrize("seed", range(4))
def test_the_spare_direction_read_off_the_factors_is_the_null_vector_of_task_and_reaction(seed):
    """Where the factors are eq. 6's undamped ones, the spare direction read off them
    (``N e`` with ``N = I − J⁺J − Aᵀ (A Aᵀ)⁻¹ A``) is the null vector of ``[J; M]`` by
    numpy's SVD, signed so that its largest entry is positive (the axis that keeps most
    of itself), at any base attitude; the Gram-Schmidt of the rows gives the same."""
    model = MODELS["spatial-7dof"]
    a, n = model.arrays, model.n_joints
    rng = np.random.default_rng(70 + seed)
    checked = 0
    for _ in range(10):
        q = np.asarray(model.q0_rad) + rng.uniform(-0.5, 0.5, n)
        rot0 = expm(_skew(rng.normal(size=3)))
        cache, at, here = _sigma_slot(model, q, rot0)
        jac, mmat = rot0 @ here["jg"], rot0 @ a.base_inertia @ here["om"]
        v = _spare(model, cache, at)
        if v is None:  # damped (near a singularity): the rows' Gram-Schmidt's case
            assert cache[at + kern._F_DAMP_J] > 0.0 or cache[at + kern._F_DAMP_M] > 0.0
            continue
        rows = np.vstack([jac[a.task_rows], mmat[a.reaction_rows]])
        null = np.linalg.svd(rows)[2][-1]
        null *= np.sign(null[np.argmax(np.abs(null))])
        assert np.linalg.norm(v - null) <= 1e-9
        by_rows = np.zeros(n)
        assert kern._spare_direction_of_rows(np.empty(kern.arena_size(n)), 0, jac, mmat, a.task_rows,
                                             a.reaction_rows, by_rows)
        assert np.linalg.norm(by_rows - null) <= 1e-9
        checked += 1
    assert checked >= 6


def test_damped_or_reaction_first_factors_give_no_spare_direction():
    """N is a projector only for undamped eq. 6 factors: with J damped (stretched out), or
    with the reaction first (its regularised M⁺), the factors give none and the ascent
    orthogonalises the rows instead."""
    model = MODELS["spatial-7dof"]
    a, n, settings = model.arrays, model.n_joints, IKSettings()
    cache, at, _ = _sigma_slot(model, np.zeros(n), np.eye(3))
    assert cache[at + kern._F_DAMP_J] > 0.0
    assert _spare(model, cache, at) is None
    q = np.asarray(model.q0_rad, dtype=float)
    here = _maps(model, q)
    kern._factor_cache_clear(cache, n)
    at = kern._lse_factor(np.empty(kern.arena_size(n)), 0, cache, here["jg"], a.base_inertia @ here["om"],
                          a.task_rows, a.reaction_rows, np.ones(n), kern.SOLVER_LSE_REACTION_FIRST, 2.0,
                          settings.damping_max, settings.jacobian_sigma_m, settings.jacobian_damping_m)
    assert cache[at + kern._F_BRANCH] == kern._B_REACTION_FIRST  # sigma_ratio < 2 always
    assert _spare(model, cache, at) is None
