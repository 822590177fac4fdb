"""Event-triggered corrections (intermittent control, Gawthrop et al. 2011).

A hand pushed off its plan by more than ``replan_deviation_m`` starts a new submovement
``correction_latency_s`` later, never sooner than ``replan_interval_s`` after the current
one started; a smaller push waits for the periodic re-plan. The expected tick is worked
out by hand from those three numbers and the time the push starts.
"""

from __future__ import annotations

import numpy as np
import pytest

from haptics.operators import HumanOperator
from haptics.participants import parameter_problem
from tests.haptics.conftest import quiet_novice

DT = 1e-3


def still_operator(**changes: float) -> HumanOperator:
    """A quiet novice at rest (the tests show it a target resting at its hand)."""
    return quiet_novice(DT, **changes)


def run(op: HumanOperator, push_m: float, push_from_s: float, until_s: float, from_s: float = 0.0) -> list[float]:
    """Drive the operator tick by tick from ``from_s`` to ``until_s`` with its hand held
    ``push_m`` along x off the origin from ``push_from_s`` on; returns the times at which
    submovements started."""
    out = np.zeros(3)
    starts: list[float] = []
    seen = op.submovements
    for i in range(int(round(from_s / DT)) + 1, int(round(until_s / DT)) + 1):
        t = i * DT
        x = np.array([push_m if t >= push_from_s else 0.0, 0.0, 0.0])
        op.perceive(t, np.zeros(3), np.zeros(3), x, np.zeros(3))
        op.drive(t, x, np.zeros(3), np.zeros(3), out)
        if op.submovements != seen:
            seen = op.submovements
            starts.append(t)
    return starts


@pytest.mark.parametrize("push_from_s", [0.40, 0.45])  # bound by the refractory interval, by the latency
def test_a_push_beyond_the_threshold_starts_a_correction_after_the_latency(push_from_s: float) -> None:
    op = still_operator(replan_deviation_m=0.005, correction_latency_s=0.12, replan_interval_s=0.3)
    starts = run(op, push_m=0.0, push_from_s=0.0, until_s=push_from_s - DT)
    # The first submovement starts one reaction time after the first percept (t = 1 ms).
    assert starts == [pytest.approx(DT + op.params.reaction_time_s, abs=0.5 * DT)]
    periodic = op._next_plan_t
    # The push is felt on its first tick; the correction starts the latency later, but not
    # before the refractory interval after the first submovement's start.
    expected = max(push_from_s + 0.12, starts[0] + 0.3)
    assert expected < periodic - 0.01  # (so the start below is the event's, not the periodic re-plan)
    starts += run(op, push_m=0.008, push_from_s=push_from_s, until_s=expected + 0.01, from_s=push_from_s - DT)
    assert starts[1:] == [pytest.approx(expected, abs=0.5 * DT)]


def test_a_push_below_the_threshold_waits_for_the_periodic_re_plan() -> None:
    op = still_operator(replan_deviation_m=0.005, correction_latency_s=0.12, replan_interval_s=0.3)
    starts = run(op, push_m=0.0, push_from_s=0.0, until_s=0.30)
    periodic = op._next_plan_t
    assert periodic > 0.30 + 0.12 + 0.01  # a push at 0.30 s beyond the threshold would start one before
    starts += run(op, push_m=0.004, push_from_s=0.30, until_s=periodic + 0.01, from_s=0.30)
    assert starts == [pytest.approx(DT + op.params.reaction_time_s, abs=0.5 * DT),
                      pytest.approx(periodic, abs=1.5 * DT)]


def test_a_threshold_of_zero_or_a_negative_latency_is_refused() -> None:
    assert "> 0" in parameter_problem("replan_deviation_m", 0.0)
    assert ">= 0" in parameter_problem("correction_latency_s", -0.1)
    assert parameter_problem("replan_deviation_m", 0.005) is None
    assert parameter_problem("correction_latency_s", 0.0) is None
