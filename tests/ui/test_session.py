"""The experimenter's session plan: counterbalanced order, shared study file, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capture_trainer import trial_log
from capture_trainer.errors import TrialError
from trials.counterbalance import condition_order
from trials.protocol import load_protocol
from trials.recorder import TrialRecorder
from trials.study import trial_path
from trials.ui.session import participant_plan, pending_trials, prepare_session

HUMAN_PROTOCOL = """
name = "lab"
seed = 5
scenarios = ["paper-2019"]
conditions = ["dg", "ng", "apf"]
repetitions = 2
controller_conditions = ["as"]

[participants]
kind = "human"
ids = ["P01", "P02", "P03"]
"""


@pytest.fixture
def protocol(tmp_path: Path):
    path = tmp_path / "lab.toml"
    path.write_text(HUMAN_PROTOCOL)
    return load_protocol(path)


def _blocks(specs) -> list[str]:
    order: list[str] = []
    for spec in specs:
        if not order or order[-1] != spec.condition:
            order.append(spec.condition)
    return order


def test_plan_follows_the_participants_latin_square_row(protocol) -> None:
    for index, pid in enumerate(("P01", "P02", "P03")):
        specs = participant_plan(protocol, pid)
        assert len(specs) == 3 * 2  # conditions x repetitions, no controller trials
        assert {s.participant_id for s in specs} == {pid}
        assert _blocks(specs) == condition_order(("dg", "ng", "apf"), index)
        assert [s.order_index for s in specs] == list(range(6))
        assert all(s.participant_index == index for s in specs)
    # An id the protocol does not list takes the first row.
    guest = participant_plan(protocol, "guest")
    assert _blocks(guest) == condition_order(("dg", "ng", "apf"), 0)
    assert len({s.seed for s in guest}) == 6
    with pytest.raises(TrialError):
        participant_plan(protocol, "controller")


def test_sessions_share_one_study_file(protocol, tmp_path: Path) -> None:
    out = tmp_path / "study"
    prepare_session(protocol, "P01", out)
    prepare_session(protocol, "P02", out)
    prepare_session(protocol, "P01", out)  # resuming does not duplicate
    document = json.loads((out / "study.json").read_text())
    assert sorted(document["participants"]) == ["P01", "P02"]
    assert len(document["trials"]) == 12
    assert document["protocol"]["name"] == "lab"
    other = tmp_path / "other.toml"
    other.write_text(HUMAN_PROTOCOL.replace('name = "lab"', 'name = "other"'))
    with pytest.raises(TrialError, match="holds a study of protocol 'lab'"):
        prepare_session(load_protocol(other), "P01", out)


def test_resume_skips_complete_trials_only(protocol, tmp_path: Path) -> None:
    out = tmp_path / "study"
    specs = prepare_session(protocol, "P02", out)

    def write(spec, complete: bool) -> None:
        recorder = TrialRecorder(trial_path(out, spec), trial_log.float_columns(3),
                                 trial_log.FLAGS, {"trial_id": spec.trial_id}, expected_rows=10)
        recorder.close() if complete else recorder.abort("aborted")

    write(specs[0], complete=True)
    write(specs[1], complete=False)  # an aborted trial runs again
    assert pending_trials(out, specs) == specs[1:]


def test_watched_simulated_participant_is_recorded_as_such(protocol, tmp_path: Path) -> None:
    out = tmp_path / "study"
    prepare_session(protocol, "P02", out, kind="expert")
    document = json.loads((out / "study.json").read_text())
    assert document["participants"]["P02"]["kind"] == "expert"
    assert _blocks(participant_plan(protocol, "P02", "expert")) == condition_order(("dg", "ng", "apf"), 1)
