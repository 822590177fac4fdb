"""The felt-force error (``felt_force_mse_n2``): the contact force the hand was given,
recovered from the calculated device force, against the slave's."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from analysis.metrics import trial_metrics
from capture_trainer import trial_log
from tests.analysis.conftest import DT_S, trial_columns

#: task <- device: a quarter turn about z, so the recovery must undo the rotation.
ROTATION = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
FORCE_SCALE = 2.0  # device newtons per task newton
CONTACT_SCALE = 0.02  # hand newtons per contact newton
GUIDE_N = np.array([0.5, -0.25, 0.0])


def _log(factory: Any, delay_s: float, clutched: tuple[float, float] | None = None, feedback: bool = True) -> Any:
    """2 s, contact force 3 N along x on the debris from 0.5 s to 0.6 s, first contact at
    0.5 s; the hand is given guidance plus ``-s F(t - delay)``, framed as the tick does
    (``F_dev = k_f Rᵀ F_task``; zero while clutched)."""
    n = 2001
    t = np.arange(n) * DT_S
    force = np.zeros((n, 3))
    force[(t >= 0.5 - 1e-9) & (t < 0.6 - 1e-9), 0] = 3.0
    arrived = np.zeros((n, 3))
    lag = int(round(delay_s / DT_S))
    arrived[lag:] = force[:n - lag]
    hand_task = GUIDE_N + (-CONTACT_SCALE * arrived if feedback else np.zeros((n, 3)))
    calculated = FORCE_SCALE * hand_task @ ROTATION  # rows: k_f Rᵀ f
    clutch = np.zeros(n, dtype=bool)
    if clutched is not None:
        clutch = (t >= clutched[0] - 1e-9) & (t < clutched[1] - 1e-9)
        calculated[clutch] = 0.0
    zeros = np.zeros((n, 3))
    extra: dict[str, Any] = {name: force[:, i] for i, name in enumerate(trial_log.CONTACT_FORCE)}
    extra.update({name: calculated[:, i] for i, name in enumerate(trial_log.DEVICE_FORCE_CALCULATED)})
    extra.update({name: np.full(n, GUIDE_N[i]) for i, name in enumerate(trial_log.GUIDANCE_FORCE)})
    extra[trial_log.FLAG_CLUTCH] = clutch
    columns = trial_columns(t, zeros, np.tile([1.0, 0.0, 0.0], (n, 1)), zeros, zeros, **extra)
    return factory.write(
        f"felt-{delay_s}-{clutched}-{feedback}", columns, outcome="contact_lost",
        first_contact={"t_s": 0.5, "normal_speed_m_s": 0.1, "tangential_speed_m_s": 0.0},
        compensator={"name": "none", "contact_feedback": feedback, "contact_force_scale": CONTACT_SCALE},
        gains={"mapping": {"scale": 1.0, "force_scale": FORCE_SCALE,
                           "rotation_task_from_device": ROTATION.tolist(), "offset_m": [0.0, 0.0, 0.0]}})


def test_without_delay_the_hand_is_given_the_slaves_force(factory: Any) -> None:
    assert trial_metrics(_log(factory, 0.0)).felt_force_mse_n2 < 1e-18


def test_a_delayed_pulse_counts_twice_where_it_is_not_and_once_clutched(factory: Any) -> None:
    """A 0.1 s pulse of 3 N delayed 0.2 s: over the 1 s window the error is the pulse where
    the slave has it and the hand does not, and again where the hand has it and the slave
    does not: (9 · 0.1 + 9 · 0.1) / 1 = 1.8 N² (to the one-sample ramps of the linear
    interpolation). Clutched while the delayed pulse arrives, the hand is given nothing:
    0.9 N². The slave's own MSE is 0.9 N² either way."""
    delayed = trial_metrics(_log(factory, 0.2))
    assert abs(delayed.felt_force_mse_n2 - 1.8) < 0.02
    assert abs(delayed.mse_slave_force_n2 - 0.9) < 0.01
    assert abs(trial_metrics(_log(factory, 0.2, clutched=(0.65, 0.85))).felt_force_mse_n2 - 0.9) < 0.01


def test_no_contact_feedback_no_felt_force_error(factory: Any) -> None:
    assert math.isnan(trial_metrics(_log(factory, 0.2, feedback=False)).felt_force_mse_n2)
