"""Yang & Konno's slave-force metric in the per-trial analysis (``mse_slave_force_n2``)."""

from __future__ import annotations

import math

import numpy as np

from analysis.metrics import trial_metrics
from capture_trainer import trial_log
from tests.analysis.conftest import DT_S, trial_columns


def _log(factory, force: np.ndarray, first_contact: dict | None):  # type: ignore[no-untyped-def]
    n = force.shape[0]
    t = np.arange(n) * DT_S
    zeros = np.zeros((n, 3))
    far = np.tile([1.0, 0.0, 0.0], (n, 1))
    extra = {name: force[:, axis] for axis, name in enumerate(trial_log.CONTACT_FORCE)}
    columns = trial_columns(t, zeros, far, zeros, zeros, **extra)
    return factory.write("force", columns, outcome="timeout", first_contact=first_contact)


def test_the_mean_square_of_the_contact_force_over_the_window_after_the_first_contact(factory) -> None:
    """A 2 s log: 3 N along x from 0.5 s to 1.0 s, (0, 4, 0) N from 1.0 s on, first
    contact at 0.5 s, window 1 s: over [0.5, 1.5] the mean of |F|² is (9 · 0.5 + 16 · 0.5) / 1
    = 12.5 N² (to the one-sample ramp at 1.0 s of the linear interpolation)."""
    n = 2001
    t = np.arange(n) * DT_S
    force = np.zeros((n, 3))
    force[(t >= 0.5) & (t < 1.0), 0] = 3.0
    force[t >= 1.0, 1] = 4.0
    path = _log(factory, force, {"t_s": 0.5, "normal_speed_m_s": 0.1, "tangential_speed_m_s": 0.0})
    value = trial_metrics(path).mse_slave_force_n2
    assert abs(value - 12.5) < 0.01


def test_no_contact_no_slave_force_metric(factory) -> None:
    path = _log(factory, np.zeros((500, 3)), None)
    assert math.isnan(trial_metrics(path).mse_slave_force_n2)
