"""The training-and-transfer protocol expands into the blocks, conditions, groups,
schedules and scenarios counted by hand (trials/phases.py, trials/protocol.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from capture_trainer.errors import ScenarioError
from trials.protocol import (
    all_scenarios,
    load_protocol,
    plan_trials,
    planned_trial_count,
    validate_protocol,
)

PARTICIPANTS = [(f"S{i + 1:02d}", "novice", {}) for i in range(4)]


def test_the_builtin_protocol_expands_into_the_hand_counted_plan() -> None:
    protocol = load_protocol("training-transfer")
    # 12 participants x (pre-test 1x3 + training 4x5 + retention 1x3 + transfer 1x2x3 scenarios) = 12 x 32
    assert planned_trial_count(protocol) == 384
    assert protocol.conditions == ("dg", "ng")
    assert [p.name for p in protocol.phases] == ["pre-test", "training", "retention", "transfer"]
    specs = plan_trials(protocol, PARTICIPANTS)
    assert len(specs) == 4 * 32
    by_participant: dict[str, list] = {}
    for spec in specs:
        by_participant.setdefault(spec.participant_id, []).append(spec)
    # groups in rotation: S01 fixed-dg, S02 fading-dg, S03 ng, S04 fixed-dg again
    assert {pid: trials[0].group for pid, trials in by_participant.items()} == {
        "S01": "fixed-dg", "S02": "fading-dg", "S03": "ng", "S04": "fixed-dg"}
    for pid, trials in by_participant.items():
        assert [t.order_index for t in trials] == list(range(32))
        phases = Counter(t.phase for t in trials)
        assert phases == {"pre-test": 3, "training": 20, "retention": 3, "transfer": 6}
        assert [t.phase for t in trials] == ["pre-test"] * 3 + ["training"] * 20 + ["retention"] * 3 + ["transfer"] * 6
        assert Counter(t.block for t in trials if t.phase == "training") == {0: 5, 1: 5, 2: 5, 3: 5}
        tests = [t for t in trials if t.phase != "training"]
        assert {t.condition for t in tests} == {"ng"} and all(not t.schedule for t in tests)
        training = [t for t in trials if t.phase == "training"]
        group = trials[0].group
        assert {t.condition for t in training} == {"ng" if group == "ng" else "dg"}
        expected_schedule = {"fixed-dg": "fixed", "fading-dg": "fading", "ng": None}[group]
        assert {t.schedule.get("name") for t in training} == {expected_schedule}
        # pre-test, training and retention on the training scenario; transfer on three unseen ones, twice each
        assert {t.scenario for t in trials if t.phase != "transfer"} == {"paper-2019"}
        transfer = Counter(t.scenario for t in trials if t.phase == "transfer")
        assert transfer == {"side-approach": 2, "diagonal-fast": 2, "from-above-3d": 2}
    fading = next(t for t in specs if t.schedule.get("name") == "fading")
    assert fading.schedule["params"] == {"forgetting": 0.8, "gain": 0.2, "initial": 1.0, "g_max": 1.0}
    assert len({spec.trial_id for spec in specs}) == len(specs)
    assert len({spec.seed for spec in specs}) == len(specs)
    assert all_scenarios(protocol) == ("paper-2019", "side-approach", "diagonal-fast", "from-above-3d")
    validate_protocol(protocol)  # a loaded phased protocol checks again as built in code


def test_a_plain_protocol_keeps_its_record_and_plan() -> None:
    protocol = load_protocol("paper-2019")
    assert not protocol.phases and "phases" not in protocol.as_dict() and "groups" not in protocol.as_dict()
    specs = plan_trials(protocol, PARTICIPANTS[:1])
    assert all(spec.phase == "" and spec.schedule == {} for spec in specs)
    assert specs[0].trial_id == "S01_paper-2019_dg_r1"


BASE = """
name = "x"
seed = 1
scenarios = ["paper-2019"]
participants = { count = 2 }
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(BASE + text)
    return path


@pytest.mark.parametrize(("text", "message"), [
    ('[[phases]]\nname = "t"\ncondition = "group"\n', "groups: missing"),
    ('[groups]\na = { condition = "dg" }\n[[phases]]\nname = "t"\ncondition = "ng"\n', "no phase has condition"),
    ('[groups]\na = { condition = "dg", schedule = "fadin" }\n[[phases]]\nname = "t"\ncondition = "group"\n',
     "did you mean 'fading'"),
    ('[groups]\na = { condition = "dg", schedule = "fading" }\n[schedule.fading]\nforgetting = 1.5\n'
     '[[phases]]\nname = "t"\ncondition = "group"\n', "forgetting"),
    ('[[phases]]\nname = "t"\ncondition = "as"\n', "phases[0].condition"),
    ('[[phases]]\nname = "t"\ncondition = "ng"\nblocks = 0\n', "phases[0].blocks"),
    ('[[phases]]\nname = "t"\ncondition = "ng"\n[[phases]]\nname = "t"\ncondition = "ng"\n', "phases[1].name"),
    ('[[phases]]\nname = "t"\ncondition = "ng"\nscenarios = ["nowhere"]\n', "phases[0].scenarios[0]"),
    ('conditions = ["dg"]\n[[phases]]\nname = "t"\ncondition = "ng"\n', "no such field in a phased design"),
    ('conditions = ["dg"]\n[groups]\na = { condition = "dg" }\n', "only with [[phases]]"),
])
def test_a_wrong_phased_design_is_refused_with_the_field_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        load_protocol(_write(tmp_path, text))
