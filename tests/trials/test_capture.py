"""Automatic capture (AS) on the plant: it captures, the reaction is cancelled, and the
torque eq. 2 predicts is the torque the plant's base feels."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from trials.capture import run_automatic_capture
from robot.models import MODELS


@functools.cache
def _capture(name: str, solver: str):
    return run_automatic_capture(name, solver)


@pytest.mark.parametrize("name", list(MODELS))
def test_automatic_capture_reaches_and_tracks(name):
    result = _capture(name, "lse")
    assert result.captured
    assert 0.5 < result.first_reach_time_s < 4.0
    # reached at about the target's velocity (eq. 10 closes position and velocity together)
    assert result.impact_velocity_m_s < 0.05
    assert result.final_distance_m <= 0.001  # still on the target after 6 s
    assert result.fault_count == 0
    assert result.peak_joint_rate_fraction <= 1.0 + 1e-6
    assert np.all(np.isfinite(result.q_rad))


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("solver", ["lse", "pinv"])
def test_predicted_torque_matches_the_plant(name, solver):
    """Eq. 2 with the solver's q̈ vs the plant's base angular momentum rate, 1e-4 relative
    (relative to the pseudoinverse capture's peak torque, the scale of the reaction)."""
    result = _capture(name, solver)
    scale = np.max(np.linalg.norm(_capture(name, "pinv").base_torque_n_m, axis=1))
    error = np.max(np.linalg.norm(result.base_torque_n_m - result.base_torque_predicted_n_m, axis=1))
    assert error <= 1e-4 * scale


def test_planar_lse_cancels_the_reaction():
    lse, pinv = _capture("planar-3r", "lse"), _capture("planar-3r", "pinv")
    assert lse.rms_base_torque_n_m <= 1e-3 * pinv.rms_base_torque_n_m
    assert lse.base_attitude_drift_rad <= 1e-4
    assert pinv.base_attitude_drift_rad > 100 * lse.base_attitude_drift_rad


def test_spatial_lse_reduces_the_reaction_during_capture():
    lse, pinv = _capture("spatial-7dof", "lse"), _capture("spatial-7dof", "pinv")
    window = lse.t_s <= lse.first_reach_time_s + 1.0
    rms = lambda r: np.sqrt(np.mean(np.sum(r.base_torque_n_m[window] ** 2, axis=1)))  # noqa: E731
    assert rms(lse) <= 1e-2 * rms(pinv)
    assert lse.base_attitude_drift_rad < pinv.base_attitude_drift_rad


def test_the_tick_follows_an_arm_that_hands_out_new_measurements(monkeypatch):
    """The seam lets measure() return a new instance per call (a remote arm may): the
    tick must record and guide from the newest one, giving the same capture."""
    import copy

    import trials.capture
    from robot.backends import ARM_BACKENDS

    class FreshMeasurements:
        def __init__(self, arm):
            self._arm = arm

        def __getattr__(self, name):
            return getattr(self._arm, name)

        def measure(self):
            return copy.deepcopy(self._arm.measure())

    plain = run_automatic_capture("planar-3r", duration_s=2.5)
    pybullet = ARM_BACKENDS.get("pybullet")
    monkeypatch.setattr(trials.capture, "ARM_BACKENDS",
                        {"pybullet": lambda *a, **k: FreshMeasurements(pybullet(*a, **k))})
    fresh = run_automatic_capture("planar-3r", duration_s=2.5)
    assert np.array_equal(fresh.ee_position_m, plain.ee_position_m)
    assert np.array_equal(fresh.q_rad, plain.q_rad)
    assert fresh.first_reach_time_s == plain.first_reach_time_s
