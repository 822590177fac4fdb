"""Learning simulated participants (haptics.learning): the law against hand-computed values.

Every expected number below is worked out by hand from eqs. L1-L4 of the module's
docstring, not taken from the code's output.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from haptics.learning import (
    ASSUMPTION,
    EXPERT_PRACTICE_TRIALS,
    SKILL_PARAMETERS,
    effective_practice,
    participant_model,
    practised,
    progress,
    skill,
)
from haptics.participants import PARTICIPANT_PRESETS

NOVICE = PARTICIPANT_PRESETS["novice"]
EXPERT = PARTICIPANT_PRESETS["expert"]
LEARNER = PARTICIPANT_PRESETS["novice-learner"]


def test_power_law_of_practice_hand_computed() -> None:
    # (L1) s(n) = 1 - ((n0 + n)/n0)^-a with a = 0.5, n0 = 5:
    assert skill(0.0, 0.5, 5.0) == 0.0
    assert skill(15.0, 0.5, 5.0) == pytest.approx(0.5)  # (20/5)^-0.5 = 1/2
    assert skill(40.0, 0.5, 5.0) == pytest.approx(1.0 - 1.0 / 3.0)  # (45/5)^-0.5 = 1/3
    assert skill(5.0, 1.0, 5.0) == pytest.approx(0.5)  # (10/5)^-1
    with pytest.raises(ValueError):
        skill(-1.0, 0.5, 5.0)


def test_guided_trials_count_less_for_the_operators_own_control() -> None:
    params = replace(LEARNER, guided_practice_credit=0.25)
    # (L3) n = n_unguided + w_g n_guided = 3 + 0.25 * 8 = 5
    assert effective_practice(params, 3, 8) == pytest.approx(5.0)
    # Same number of trials: unguided practice gets further than guided practice.
    assert progress(params, 8, 0) > progress(params, 0, 8) > 0.0


def test_learning_curve_of_a_novice_learner_hand_computed() -> None:
    params = replace(LEARNER, practice_exponent=0.5, practice_scale_trials=5.0, guided_practice_credit=0.5)
    # s(30) with a = 0.5, n0 = 5: 1 - 7^-0.5; 15 unguided trials: s(15) = 1/2.
    s_expert = 1.0 - 7.0 ** -0.5
    assert EXPERT_PRACTICE_TRIALS == 30.0
    assert progress(params, 15, 0) == pytest.approx(0.5 / s_expert)
    # 10 unguided + 10 guided at half credit = 15 effective trials: the same.
    assert progress(params, 10, 10) == pytest.approx(0.5 / s_expert)
    after = practised(params, 15, 0)
    phi = 0.5 / s_expert
    # Positive parameters move geometrically from the novice's toward the expert's value.
    assert after.velocity_match_sd == pytest.approx(
        NOVICE.velocity_match_sd * (EXPERT.velocity_match_sd / NOVICE.velocity_match_sd) ** phi)
    assert after.reaction_time_s == pytest.approx(
        NOVICE.reaction_time_s * (EXPERT.reaction_time_s / NOVICE.reaction_time_s) ** phi)
    # The interceptive habit (expert 0) moves linearly.
    assert after.aim_through == pytest.approx(NOVICE.aim_through + phi * (EXPERT.aim_through - NOVICE.aim_through))
    # Unguided practice leaves the reliance on guidance (L4) where it was.
    assert after.compliance == pytest.approx(NOVICE.compliance)
    # The arm's impedance is the person's, not a skill.
    assert after.hand_stiffness_n_m == NOVICE.hand_stiffness_n_m


def test_after_the_experts_practice_a_novice_learner_is_the_expert() -> None:
    after = practised(LEARNER, int(EXPERT_PRACTICE_TRIALS), 0)
    for name in SKILL_PARAMETERS:
        assert getattr(after, name) == pytest.approx(getattr(EXPERT, name), abs=1e-12), name


def test_expert_learner_starts_as_the_expert_and_still_improves_slowly() -> None:
    learner = PARTICIPANT_PRESETS["expert-learner"]
    start = practised(learner, 0, 0)
    for name in SKILL_PARAMETERS:
        assert getattr(start, name) == pytest.approx(getattr(EXPERT, name)), name
    # (L2) with E = 30, n = 10 (a = 0.5, n0 = 5): (s(40) - s(30)) / s(30)
    s30, s40 = 1.0 - 7.0 ** -0.5, 1.0 - 9.0 ** -0.5
    assert progress(learner, 10, 0) == pytest.approx((s40 - s30) / s30)
    assert progress(learner, 10, 0) < 0.25 * progress(LEARNER, 10, 0)


def test_guided_practice_raises_the_reliance_on_guidance() -> None:
    params = replace(LEARNER, guidance_reliance=0.5, practice_exponent=0.5, practice_scale_trials=5.0)
    # (L4) c + (1 - c) * rho * s(n_guided): s(15) = 1/2.
    after = practised(params, 0, 15)
    assert after.compliance == pytest.approx(params.compliance + (1.0 - params.compliance) * 0.5 * 0.5)


def test_a_participant_that_does_not_learn_is_unchanged() -> None:
    assert practised(NOVICE, 20, 20) is NOVICE
    model = participant_model(NOVICE)
    assert model["learning"] is None and model["simulated"] is True


def test_the_metadata_says_it_is_the_models_assumption() -> None:
    model = participant_model(LEARNER, 4, 2)
    assert model["assumption"] == ASSUMPTION and "not a finding about people" in ASSUMPTION
    learning = model["learning"]
    assert (learning["unguided_trials"], learning["guided_trials"]) == (4, 2)
    assert learning["effective_practice_trials"] == pytest.approx(4 + LEARNER.guided_practice_credit * 2)
    assert math.isfinite(learning["progress"]) and 0.0 < learning["progress"] < 1.0


def test_learning_kinds_are_registered_participant_kinds() -> None:
    assert {"novice-learner", "expert-learner"} <= set(PARTICIPANT_PRESETS.names())
    assert LEARNER.learning and PARTICIPANT_PRESETS["expert-learner"].learning
    assert not NOVICE.learning and not EXPERT.learning
