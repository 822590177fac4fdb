"""Compiled per-tick kernels of the simulated participant: the noise stream and the plan.

Expectations are independent of the kernels: the generator's own Gaussian stream, and
the minimum-jerk quintic evaluated with numpy's polynomial tools.
"""

from __future__ import annotations

import numpy as np

from haptics import _kernels as k
from haptics.operators import HumanOperator, make_operator, quintic_coefficients


def test_noise_draws_follow_the_generator_stream_across_refills() -> None:
    op = make_operator("novice", seed=3)
    op.reset(0.0, np.zeros(3), trial_seed=11)
    reference = np.random.Generator(np.random.PCG64(np.random.SeedSequence([3, 11])))
    reference.random()  # the trial's resist draw comes first
    expected = reference.standard_normal(30_000)
    # Mix the two consumers: the plan's single draws and the drive kernel's triples.
    drawn = []
    x = np.zeros(3)
    out = np.zeros(3)
    while len(drawn) < 29_000:
        drawn.append(op._gauss())
        before = op._noise.copy()
        i = int(op._s[k.S_NOISE_I])
        if i > len(op._noise_buf) - 3:
            op._refill()
            i = 0
        triple = op._noise_buf[i : i + 3].copy()
        op.drive(len(drawn) * 1e-3, x, x, x, out)
        assert int(op._s[k.S_NOISE_I]) == i + 3
        assert np.all(op._noise != before) or not triple.any()
        drawn.extend(triple.tolist())
    assert np.array_equal(np.array(drawn), expected[: len(drawn)])


def test_plan_state_is_the_quintic_and_then_constant_velocity() -> None:
    op = HumanOperator(make_operator("expert").params)
    c = np.zeros(6)
    quintic_coefficients(0.1, -0.2, 0.5, 0.3, 0.05, -1.0, 0.8, c)
    op._coef[1] = c
    op._s[k.S_PLAN_T0] = 2.0
    op._s[k.S_PLAN_T] = 0.8
    op._goal_x[1] = 0.3
    op._goal_v[1] = 0.05
    poly = np.polynomial.Polynomial(c)
    for tau in np.linspace(0.0, 0.79, 9):
        x, v, a = op._plan_state(2.0 + tau, 1)
        assert np.allclose((x, v, a), (poly(tau), poly.deriv(1)(tau), poly.deriv(2)(tau)), rtol=1e-12, atol=1e-12)
    x, v, a = op._plan_state(3.3, 1)  # past the end: moves on at the final velocity
    assert (v, a) == (0.05, 0.0) and np.isclose(x, 0.3 + 0.05 * 0.5, rtol=0, atol=1e-15)
