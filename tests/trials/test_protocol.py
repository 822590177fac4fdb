from __future__ import annotations

from pathlib import Path

import pytest

from capture_trainer.errors import ScenarioError
from trials.protocol import CONTROLLER_ID, load_protocol, plan_trials


def test_builtin_paper_protocol_matches_the_paper_design() -> None:
    protocol = load_protocol("paper-2019")
    assert protocol.conditions == ("dg", "ng", "apf")
    assert protocol.repetitions == 3
    assert protocol.controller_conditions == ("as",)
    assert protocol.participants.count == 10


def test_plan_has_every_trial_once_with_stable_seeds() -> None:
    protocol = load_protocol("paper-2019")
    people = [(f"S{i}", "novice", {}) for i in range(10)]
    specs = plan_trials(protocol, people)
    assert len(specs) == 10 * 3 * 3 + 3
    assert len({s.trial_id for s in specs}) == len(specs)
    assert sum(s.participant_id == CONTROLLER_ID for s in specs) == 3
    again = plan_trials(protocol, people)
    assert [s.seed for s in specs] == [s.seed for s in again]
    assert len({s.seed for s in specs}) == len(specs)
    first = [s for s in specs if s.participant_id == "S0"]
    assert [s.order_index for s in first] == list(range(9))


BROKEN = {
    "not toml": (b"name = = 3", "not a valid TOML"),
    "missing conditions": (b'name="x"\nscenarios=["paper-2019"]\n[participants]\ncount=1', "'conditions'"),
    "bad condition": (
        b'name="x"\nscenarios=["a"]\nconditions=["dg","zz"]\n[participants]\ncount=1',
        "'conditions'",
    ),
    "zero repetitions": (
        b'name="x"\nscenarios=["a"]\nconditions=["dg"]\nrepetitions=0\n[participants]\ncount=1',
        "'repetitions'",
    ),
    "unknown key": (
        b'name="x"\nscenarios=["a"]\nconditions=["dg"]\ncolour=1\n[participants]\ncount=1',
        "'colour'",
    ),
    "bad mix": (
        b'name="x"\nscenarios=["a"]\nconditions=["dg"]\n[participants]\ncount=1\nmix={wizard=1}',
        "participants.mix",
    ),
    "human without ids": (
        b'name="x"\nscenarios=["a"]\nconditions=["dg"]\n[participants]\nkind="human"',
        "participants.ids",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_protocols_name_the_file_and_field(case: str, tmp_path: Path) -> None:
    content, fragment = BROKEN[case]
    path = tmp_path / "broken.toml"
    path.write_bytes(content)
    with pytest.raises(ScenarioError) as info:
        load_protocol(path)
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


def test_unknown_builtin_lists_the_known_ones() -> None:
    with pytest.raises(ScenarioError, match="paper-2019"):
        load_protocol("paper-2091")
