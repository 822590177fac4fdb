"""The experimenter's session plan: counterbalanced order, shared study file, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.ui.session import participant_plan, pending_trials, prepare_session
from capture_trainer import trial_log
from capture_trainer.errors import TrialError
from trials.counterbalance import condition_order
from trials.protocol import load_protocol
from trials.recorder import TrialRecorder
from trials.study import trial_path

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


UNLISTED_PROTOCOL = """
name = "unlisted"
seed = 5
scenarios = ["paper-2019"]
conditions = ["dg", "ng", "apf"]
repetitions = 1

[participants]
kind = "simulated"
count = 4
"""


@pytest.fixture
def unlisted(tmp_path: Path):
    path = tmp_path / "unlisted.toml"
    path.write_text(UNLISTED_PROTOCOL)
    return load_protocol(path)


def test_people_are_counterbalanced_without_listed_ids(unlisted, tmp_path: Path) -> None:
    """A protocol that lists no ids (here one written for simulated participants), run
    with people one session at a time."""
    out = tmp_path / "study"
    conditions = ("dg", "ng", "apf")
    people = [f"person-{i}" for i in range(7)]
    orders = [_blocks(prepare_session(unlisted, pid, out)) for pid in people]
    # Each newcomer takes the next row of the 6-row square (3 conditions: Williams design
    # and its mirror); the seventh starts the cycle again.
    assert orders == [condition_order(conditions, i) for i in range(7)]
    assert len({tuple(o) for o in orders[:6]}) == 6
    assert sorted(o[0] for o in orders[:6]) == ["apf", "apf", "dg", "dg", "ng", "ng"]
    # Resuming keeps a participant's order, however many came after.
    assert _blocks(prepare_session(unlisted, "person-1", out)) == orders[1]
    document = json.loads((out / "study.json").read_text())
    assert {pid: e["participant_index"] for e in document["trials"] for pid in [e["participant_id"]]} == {
        pid: i for i, pid in enumerate(people)}


def test_paper_protocol_counterbalances_people(tmp_path: Path) -> None:
    """paper-2019 lists simulated participants only; people still get different orders."""
    protocol = load_protocol("paper-2019")
    out = tmp_path / "study"
    first = _blocks(prepare_session(protocol, "P01", out))
    second = _blocks(prepare_session(protocol, "P02", out))
    assert first != second
    assert second == condition_order(protocol.conditions, 1)


def test_simulated_sessions_do_not_shift_the_peoples_rows(unlisted, tmp_path: Path) -> None:
    out = tmp_path / "study"
    prepare_session(unlisted, "A", out)
    simulated = prepare_session(unlisted, "S1", out, kind="expert")
    assert simulated[0].participant_index == 0  # the first simulated participant here
    person = prepare_session(unlisted, "B", out)
    assert person[0].participant_index == 1  # the second person


def test_people_and_simulations_are_kept_apart(unlisted, tmp_path: Path) -> None:
    out = tmp_path / "study"
    prepare_session(unlisted, "P01", out, kind="expert")
    with pytest.raises(TrialError, match="recorded in this study directory as a simulated expert"):
        prepare_session(unlisted, "P01", out)  # the same id, now a person
    prepare_session(unlisted, "P02", out)
    with pytest.raises(TrialError, match="as a person"):
        prepare_session(unlisted, "P02", out, kind="novice")
    prepare_session(unlisted, "P01", out, kind="novice")  # another simulated kind is fine


def test_participant_ids_are_nfc_normalised(protocol, tmp_path: Path) -> None:
    out = tmp_path / "study"
    nfd, nfc = "Zoe\u0308", "Zo\u00eb"
    specs = prepare_session(protocol, nfd, out)
    assert {s.participant_id for s in specs} == {nfc}
    prepare_session(protocol, f" {nfc} ", out)  # the same person: resumed, not added
    document = json.loads((out / "study.json").read_text())
    assert list(document["participants"]) == [nfc]
    assert participant_plan(protocol, nfd) == participant_plan(protocol, nfc)
