"""The admittance controller (robot/admittance.py) against closed forms of (A1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot.admittance import AdmittanceController, AdmittanceGains

DT = 1e-3


def run(controller: AdmittanceController, force: np.ndarray, ticks: int) -> None:
    for _ in range(ticks):
        controller.step(force)


def test_free_response_follows_the_critically_damped_closed_form() -> None:
    # M x'' + D x' + K (x - x_a) = 0 with D = 2 sqrt(K M): x(t) = x_a (1 - (1 + w t) e^(-w t)), w = sqrt(K/M)
    k, m = 300.0, 2.0
    gains = AdmittanceGains.critically_damped(k, m)
    assert gains.damping_n_s_m == pytest.approx((2 * math.sqrt(k * m),) * 3)
    controller = AdmittanceController(gains, DT)
    controller.reset(np.zeros(3), np.zeros(3))
    controller.attractor_m[:] = (0.01, -0.02, 0.0)
    w = math.sqrt(k / m)
    elapsed = 0
    for t in (0.05, 0.2, 0.5):
        run(controller, np.zeros(3), int(round(t / DT)) - elapsed)
        elapsed = int(round(t / DT))
        expected = 1.0 - (1.0 + w * t) * math.exp(-w * t)
        # first-order integration: the error is O(w dt) of the step (w dt = 0.012)
        assert controller.position_m[0] == pytest.approx(0.01 * expected, abs=0.01 * 0.02)
        assert controller.position_m[1] == pytest.approx(-0.02 * expected, abs=0.02 * 0.02)
        assert controller.position_m[2] == 0.0


def test_a_constant_contact_force_settles_at_force_over_stiffness() -> None:
    gains = AdmittanceGains(mass_kg=(2.0, 2.0, 2.0), damping_n_s_m=(80.0, 80.0, 80.0),
                            stiffness_n_m=(400.0, 100.0, 250.0))
    controller = AdmittanceController(gains, DT)
    controller.reset(np.array([1.0, 0.5, 0.0]), np.zeros(3))
    force = np.array([2.0, -1.0, 0.5])
    run(controller, force, 20000)  # the slowest pole (y) is 1.3 rad/s
    np.testing.assert_allclose(controller.position_m - controller.attractor_m, force / [400.0, 100.0, 250.0],
                               atol=1e-9)
    np.testing.assert_allclose(controller.velocity_m_s, 0.0, atol=1e-9)
    # at rest the virtual wrench balances the contact force
    np.testing.assert_allclose(controller.virtual_force_n, -force, atol=1e-6)


def test_a_free_axis_drifts_at_force_over_damping() -> None:
    controller = AdmittanceController(AdmittanceGains((1.0, 1.0, 1.0), (50.0, 50.0, 50.0), (0.0, 0.0, 0.0)), DT)
    controller.reset(np.zeros(3), np.zeros(3))
    run(controller, np.array([5.0, 0.0, 0.0]), 2000)
    assert controller.velocity_m_s[0] == pytest.approx(5.0 / 50.0, rel=1e-6)
    assert controller.acceleration_m_s2[0] == pytest.approx(0.0, abs=1e-6)


def test_a_non_finite_force_never_reaches_the_command() -> None:
    controller = AdmittanceController(AdmittanceGains(), DT)
    controller.reset(np.array([0.3, 0.2, 0.0]), np.zeros(3))
    run(controller, np.array([math.nan, 0.0, 0.0]), 10)
    run(controller, np.array([0.0, math.inf, 0.0]), 10)
    np.testing.assert_array_equal(controller.position_m, [0.3, 0.2, 0.0])
    assert np.all(np.isfinite(controller.acceleration_m_s2))


@pytest.mark.parametrize("bad", [{"mass_kg": 0.0}, {"damping_n_s_m": (1.0, -1.0, 1.0)},
                                 {"stiffness_n_m": (1.0, 2.0)}, {"stiffness_n_m": math.nan}])
def test_gains_are_checked(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        AdmittanceGains(**bad)  # type: ignore[arg-type]
