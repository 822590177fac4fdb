"""A learning participant's practice comes from its study's plan (trials.study)."""

from __future__ import annotations

import json
from pathlib import Path

from trials.protocol import TrialSpec
from trials.study import STUDY_FILE, participant_practice


def spec(pid: str, condition: str, order: int) -> TrialSpec:
    return TrialSpec(trial_id=f"{pid}_{condition}_{order}", scenario="paper-2019", condition=condition,
                     participant_id=pid, participant_kind="novice-learner", participant_index=0, repetition=0,
                     seed=order, order_index=order, participant_params={"kind": "novice-learner", "learning": True})


def test_practice_counts_the_participants_earlier_trials_per_condition(tmp_path: Path) -> None:
    plan = [spec("S01", c, i) for i, c in enumerate(["ng", "dg", "apf", "dg", "ng", "dg"])]
    plan += [spec("S02", c, i) for i, c in enumerate(["dg", "dg", "dg"])]
    (tmp_path / STUDY_FILE).write_text(json.dumps({"trials": [s.__dict__ for s in plan]}))
    # Before S01's sixth trial: ng 2, dg 2, apf 1 -> 3 guided, 2 unguided; S02 does not count.
    assert participant_practice(plan[5], tmp_path) == {
        "by_condition": {"apf": 1, "dg": 2, "ng": 2}, "guided": 3, "unguided": 2}
    assert participant_practice(plan[0], tmp_path) == {"by_condition": {}, "guided": 0, "unguided": 0}
    # The count depends on the plan only: whichever worker asks, in whatever order.
    assert participant_practice(plan[8], tmp_path)["guided"] == 2
