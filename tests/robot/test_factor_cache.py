"""The IK's factor cache is transparent: a solve that finds a free set's factorisation of
eq. 6 in the cache (``robot._kernels._lse_factor``) gets the same joint accelerations, to
the bit, as one that computes every factorisation anew, and the cache keeps them apart by
free set and by solver. The states are made to saturate, so that the IK re-solves over
several free sets (the case the cache is for)."""

from __future__ import annotations

import numpy as np
import pytest

from robot import _kernels as kern
from robot.dynamics import dynamics_terms
from robot.models import MODELS

SOLVERS = (kern.SOLVER_LSE, kern.SOLVER_LSE_REACTION_FIRST, kern.SOLVER_PINV)


def _saturating_state(model, rng):
    """Joints near their position and rate limits, and a task acceleration far beyond
    what the acceleration limits allow."""
    q_min, q_max = np.array(model.q_min_rad), np.array(model.q_max_rad)
    q = q_min + (q_max - q_min) * rng.choice([0.03, 0.5, 0.97], size=model.n_joints)
    qd = np.array(model.qd_max_rad_s) * rng.uniform(-0.9, 0.9, model.n_joints)
    xdd = rng.normal(0.0, 40.0, 3)
    t_des = rng.normal(0.0, 0.05, 3)
    return q, qd, xdd, t_des


def _solve(model, q, qd, xdd, t_des, solver, sigma_threshold, slots, warm_solver=None):
    """eq. 6 with limits through the kernel, with a factor cache of ``slots`` slots;
    ``warm_solver``: the cache first holds that solver's factorisations of the same J, M."""
    a, n = model.arrays, model.n_joints
    terms = dynamics_terms(model, q, qd)
    cache = np.empty(kern._factor_cache_size(n, slots))
    kern._factor_cache_clear(cache, n)
    arena = np.empty(kern.arena_size(n))
    z_extra = np.zeros(n)
    qdd, diag = np.zeros(n), np.zeros(8)
    for code in ((warm_solver,) if warm_solver is not None else ()) + (solver,):
        kern._solve_ik_in(arena, 0, cache, terms.jacobian, terms.jdot_qdot, terms.reaction_map, terms.reaction_bias,
                          xdd, t_des, q, qd, a.task_rows, a.reaction_rows, a.q_min, a.q_max, a.qd_max, a.qdd_max,
                          1e-3, code, sigma_threshold, 0.1, 0.02, 0.05, 2.0, 1.0, z_extra, qdd, diag)
    return qdd, diag


@pytest.mark.parametrize("name", ["spatial-7dof", "planar-3r"])
@pytest.mark.parametrize("sigma_threshold", [0.01, 1.0])  # 1.0: every free set at a "reaction singularity"
def test_cached_factorisations_give_the_uncached_solution(name, sigma_threshold):
    model = MODELS[name]
    rng = np.random.default_rng(11)
    resolved = 0
    for _ in range(12):
        q, qd, xdd, t_des = _saturating_state(model, rng)
        for solver in SOLVERS:
            cached, diag = _solve(model, q, qd, xdd, t_des, solver, sigma_threshold, kern.FACTOR_SLOTS)
            # one slot: every change of free set evicts, so nothing is found but the last
            fresh, diag_fresh = _solve(model, q, qd, xdd, t_des, solver, sigma_threshold, 1)
            # (NaN where NaN: with the reaction first, some of these far-out states leave the
            # free joints no solution; the controller then holds its last good command)
            assert np.array_equal(cached, fresh, equal_nan=True)
            assert np.array_equal(diag, diag_fresh, equal_nan=True)
            # the other solvers' factorisations of the same J and M in the cache are not used
            for other in SOLVERS:
                warm, diag_warm = _solve(model, q, qd, xdd, t_des, solver, sigma_threshold, kern.FACTOR_SLOTS, other)
                assert np.array_equal(warm, fresh, equal_nan=True)
                assert np.array_equal(diag_warm, diag_fresh, equal_nan=True)
            resolved += diag[6] > 2 and bool(np.all(np.isfinite(cached)))  # re-solved over further free sets
    assert resolved >= 6, "the states must make the IK re-solve over several free sets"


def test_the_cache_keeps_the_least_recently_used_slot_out():
    """Nine free sets through eight slots: the first, used again just before the ninth
    arrives, stays; the second, least recently used, is the one replaced."""
    model = MODELS["spatial-7dof"]
    n = model.n_joints
    terms = dynamics_terms(model, np.array(model.q0_rad), np.zeros(n))
    a = model.arrays
    cache = np.empty(kern._factor_cache_size(n, kern.FACTOR_SLOTS))
    kern._factor_cache_clear(cache, n)
    arena = np.empty(kern.arena_size(n))

    def factor(free_set: int) -> int:
        free = np.array([float((free_set >> j) & 1) for j in range(n)])
        return int(kern._lse_factor(arena, 0, cache, terms.jacobian, terms.reaction_map, a.task_rows,
                                    a.reaction_rows, free, kern.SOLVER_LSE, 0.01, 0.1, 0.02, 0.05))

    sets = [127 - (1 << j) for j in range(7)] + [127, 63 + 64 - 3]
    slots = [factor(s) for s in sets[:8]]
    assert len(set(slots)) == 8
    assert factor(sets[0]) == slots[0]  # found, and now the most recent
    assert factor(sets[8]) == slots[1]  # the least recently used slot gives way
    assert factor(sets[0]) == slots[0] and factor(sets[2]) == slots[2]  # the others stay
