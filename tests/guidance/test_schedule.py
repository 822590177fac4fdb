"""Guidance schedules (guidance/schedule.py) against hand-computed sequences, and the
Scaled law that applies the authority."""

from __future__ import annotations

import numpy as np
import pytest

from guidance.law import Scaled, Sum
from guidance.potential import PotentialField
from guidance.schedule import (
    MAX_ERROR,
    SCHEDULES,
    ExperimenterSchedule,
    FadingSchedule,
    FixedSchedule,
    ScheduleConfigError,
    adapts,
    make_schedule,
    next_authority,
    normalised_error,
    replay,
)
from guidance.state import GuidanceState


def _authorities(schedule, errors):
    return [step.authority for step in replay(schedule, errors)]


def test_fading_follows_the_forgetting_factor_law_by_hand() -> None:
    # a(k+1) = 0.9 a(k) + 0.5 e(k), a(0) = 0.5:
    # a1 = 0.45 + 0.10 = 0.55; a2 = 0.495 + 0.05 = 0.545; a3 = 0.4905 + 0 = 0.4905; a4 = 0.44145
    schedule = FadingSchedule(forgetting=0.9, gain=0.5, initial=0.5, g_max=1.0)
    steps = replay(schedule, [0.2, 0.1, 0.0, 0.0])
    assert [s.authority for s in steps] == pytest.approx([0.5, 0.55, 0.545, 0.4905, 0.44145], abs=1e-12)
    assert [s.index for s in steps] == [0, 1, 2, 3, 4]
    assert [s.error for s in steps] == [0.2, 0.1, 0.0, 0.0, None]
    assert next_authority(schedule, [0.2, 0.1, 0.0, 0.0]) == pytest.approx(0.44145, abs=1e-12)


def test_fading_saturates_at_g_max_and_at_zero() -> None:
    schedule = FadingSchedule(forgetting=0.9, gain=0.5, initial=1.0, g_max=1.0)
    # 0.9 + 1.0 = 1.9 -> 1.0; stays at the ceiling while errors are large
    assert _authorities(schedule, [2.0, 2.0]) == pytest.approx([1.0, 1.0, 1.0])
    low = FadingSchedule(forgetting=0.5, gain=0.0, initial=0.0, g_max=1.0)
    assert _authorities(low, [1.0, 0.0]) == [0.0, 0.0, 0.0]
    # and from below the ceiling: 0.5 * 0.8 + 0.25 * 2 = 0.9, then 0.45 + 0.5 = 0.95, 0.475 + 0.5 = 0.975
    assert _authorities(FadingSchedule(forgetting=0.5, gain=0.25, initial=0.8), [2.0, 2.0, 2.0]) == \
        pytest.approx([0.8, 0.9, 0.95, 0.975])


def test_error_augmentation_switches_on_below_the_skill_threshold() -> None:
    schedule = FadingSchedule(forgetting=0.5, gain=0.1, initial=1.0, augment_below=0.3, augment_authority=0.25)
    # a: 1, 0.5, 0.25 (< 0.3: augmentation), 0.125, 0.0625 + 0.1 * 2 = 0.2625 (still below),
    # 0.13125 + 0.2 = 0.33125 (back to guidance)
    steps = replay(schedule, [0.0, 0.0, 0.0, 2.0, 2.0])
    assert [s.assist for s in steps] == pytest.approx([1.0, 0.5, 0.25, 0.125, 0.2625, 0.33125])
    assert [s.authority for s in steps] == pytest.approx([1.0, 0.5, -0.25, -0.25, -0.25, 0.33125])
    at_threshold = FadingSchedule(initial=0.3, augment_below=0.3)
    assert at_threshold.authority(0.3, 0) == 0.3  # strictly below switches, not at
    assert FadingSchedule().authority(0.0, 0) == 0.0  # off by default: never negative


def test_experimenter_and_fixed_schedules_ignore_errors() -> None:
    sequence = ExperimenterSchedule(sequence=(1.0, 0.5, 0.0))
    assert _authorities(sequence, [2.0, 0.0, 1.0, 1.0]) == [1.0, 0.5, 0.0, 0.0, 0.0]
    assert _authorities(FixedSchedule(0.7), [2.0, 0.0]) == [0.7, 0.7, 0.7]
    assert not adapts(sequence) and not adapts(FixedSchedule()) and adapts(FadingSchedule())


def test_the_error_is_the_closing_speed_over_the_soft_band_capped() -> None:
    assert normalised_error(0.025, 0.05) == pytest.approx(0.5)
    assert normalised_error(0.05, 0.05) == pytest.approx(1.0)
    assert normalised_error(0.5, 0.05) == MAX_ERROR == 2.0
    assert normalised_error(None, 0.05) == MAX_ERROR  # never touched
    assert normalised_error(float("nan"), 0.05) == MAX_ERROR
    with pytest.raises(ScheduleConfigError):
        normalised_error(0.1, 0.0)


def test_schedules_are_registered_and_checked_by_name() -> None:
    assert SCHEDULES.names() == ("fixed", "fading", "experimenter")
    assert make_schedule("fixed", authority=0.5).authority(0.0, 3) == 0.5
    assert make_schedule("experimenter", sequence=[1, 0.5]).authority(0.0, 1) == 0.5
    assert make_schedule("fading", forgetting=0.8).params()["forgetting"] == 0.8
    with pytest.raises(ScheduleConfigError, match="did you mean 'fading'"):
        make_schedule("fadin")
    for bad in ({"forgetting": 1.0}, {"gain": -1.0}, {"initial": 1.5}, {"g_max": 0.0}, {"bogus": 1}):
        with pytest.raises(ScheduleConfigError, match="fading"):
            make_schedule("fading", **bad)
    with pytest.raises(ScheduleConfigError):
        make_schedule("experimenter", sequence=[])
    with pytest.raises(ScheduleConfigError):
        replay(FadingSchedule(), [-0.1])


def _state(ee, target) -> GuidanceState:
    state = GuidanceState.for_joints(3)
    state.ee_position_m[:] = ee
    state.target_position_m[:] = target
    return state


def test_scaled_multiplies_the_law_force_including_negative_authority() -> None:
    law = PotentialField(k_n_m=40.0)
    state = _state((0.0, 0.0, 0.0), (0.1, -0.05, 0.0))
    # APF: k (x_t - x_ee) = (4, -2, 0) N; times 0.5 and -0.3
    np.testing.assert_allclose(Scaled(law, 0.5).force(state), [2.0, -1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(Scaled(law, -0.3).force(state), [-1.2, 0.6, 0.0], atol=1e-12)
    summed = Sum(Scaled(law, 0.5), PotentialField(k_n_m=10.0))  # a fixture beside it keeps its force
    np.testing.assert_allclose(summed.force(state), [2.0 + 1.0, -1.0 - 0.5, 0.0], atol=1e-12)
    assert Scaled(law, 0.5).params()["authority"] == 0.5
    with pytest.raises(ValueError, match="finite"):
        Scaled(law, float("nan"))
