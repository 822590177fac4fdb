from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from capture_trainer.errors import ScenarioError
from scenarios.toml_in import ProblemsError
from trials.conditions import CONDITIONS
from trials.protocol import (
    CONTROLLER_ID,
    builtin_protocol_names,
    builtin_protocols,
    load_protocol,
    plan_trials,
    validate_protocol,
)


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


HEAD = b'name="x"\nscenarios=["paper-2019"]\n'
BROKEN = {
    "not toml": (b"name = = 3", "not valid TOML"),
    "missing conditions": (HEAD + b"[participants]\ncount=1", "conditions: missing"),
    "bad condition": (HEAD + b'conditions=["dg","zz"]\n[participants]\ncount=1', "conditions[1]: expected one of"),
    "zero repetitions": (HEAD + b'conditions=["dg"]\nrepetitions=0\n[participants]\ncount=1', "repetitions: expected an integer >= 1"),
    "unknown key": (HEAD + b'conditions=["dg"]\ncolour=1\n[participants]\ncount=1', "colour: unknown key"),
    "bad mix": (HEAD + b'conditions=["dg"]\n[participants]\ncount=1\nmix={wizard=1}', "participants.mix.wizard"),
    "mistyped condition": (HEAD + b'conditions=["dg","apff"]\n[participants]\ncount=1', "did you mean 'apf'?"),
    "mistyped kind": (HEAD + b'conditions=["dg"]\n[participants]\ncount=1\nmix={expret=1}', "did you mean 'expert'?"),
    "human without ids": (HEAD + b'conditions=["dg"]\n[participants]\nkind="human"', "participants.ids: missing"),
    "nan share": (HEAD + b'conditions=["dg"]\n[participants]\ncount=1\nmix={novice=nan}', "participants.mix.novice: expected a number >= 0"),
    "huge repetitions": (HEAD + b'conditions=["dg"]\nrepetitions=1000000000\n[participants]\ncount=1', "repetitions: expected an integer >= 1 and <= 100"),
    "missing scenario": (b'name="x"\nscenarios=["nowhere.toml"]\nconditions=["dg"]\n[participants]\ncount=1', "scenarios[0]: nowhere.toml: cannot read"),
    "unknown builtin scenario": (b'name="x"\nscenarios=["paper-2091"]\nconditions=["dg"]\n[participants]\ncount=1', "scenarios[0]: unknown built-in scenario 'paper-2091'"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_protocols_name_the_file_and_field(case: str, tmp_path: Path) -> None:
    content, fragment = BROKEN[case]
    path = tmp_path / "broken.toml"
    path.write_bytes(content)
    with pytest.raises(ScenarioError) as info:
        load_protocol(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message, message
    assert fragment in message, message


def test_unknown_builtin_lists_the_known_ones() -> None:
    with pytest.raises(ScenarioError, match="unknown built-in protocol 'paper-2091'; did you mean 'paper-2019'\\?"):
        load_protocol("paper-2091")


def test_builtin_protocols_are_the_shipped_files_and_all_load(tmp_path: Path) -> None:
    from trials.sweep import is_sweep_reference, prepare_sweep

    names = builtin_protocols().names()
    assert "paper-2019" in names and names == builtin_protocol_names() == tuple(sorted(names))
    for name in names:
        if is_sweep_reference(name):  # a built-in sweep (`delay`): its protocol part loads once expanded
            with pytest.raises(ScenarioError, match=r"a sweep .*capture-trainer sweep"):
                load_protocol(name)
            protocol, _ = prepare_sweep(name, tmp_path / name)
        else:
            protocol = load_protocol(name)
        assert protocol.name and set(protocol.conditions + protocol.controller_conditions) <= set(CONDITIONS.names())


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_every_problem_of_a_protocol_and_its_scenarios_is_listed_at_once(tmp_path: Path) -> None:
    bad_scenario = _write(tmp_path, "bad.toml", "seed = -1\n[robot]\nmodel = 'scara'\n")
    protocol = _write(tmp_path, "p.toml", f"""name = ""
seed = -5
scenarios = ["{bad_scenario}", "missing.toml"]
conditions = ["dg", "zz"]
repetitions = 0
[participants]
count = 1
mix = {{ novice = nan }}
""")
    with pytest.raises(ProblemsError) as info:
        load_protocol(protocol)
    error = info.value
    lines = str(error).splitlines()
    assert lines[0] == f"{len(error.problems)} problems in {protocol}:"
    assert lines[1:] == list(error.problems)
    text = str(error)
    for field in ("name:", "seed:", "conditions[1]:", "repetitions:", "participants.mix.novice:",
                  f"scenarios[0]: {bad_scenario}: seed:", f"scenarios[0]: {bad_scenario}: robot.model:",
                  f"scenarios[0]: {bad_scenario}: target: missing", "scenarios[1]: missing.toml: cannot read"):
        assert sum(line.startswith(f"{protocol}: {field}") for line in lines) == 1, (field, text)
    assert all(line.startswith(f"{protocol}: ") for line in error.problems)


def test_bounds_on_the_size_of_a_study(tmp_path: Path) -> None:
    many = _write(tmp_path, "many.toml", """name = "many"
scenarios = ["paper-2019", "side-approach"]
conditions = ["dg", "ng", "apf"]
repetitions = 100
[participants]
count = 1000
""")
    with pytest.raises(ScenarioError, match=r"many\.toml: expected at most 50000 planned trials .* got 600000"):
        load_protocol(many)
    ids = _write(tmp_path, "ids.toml", """name = "ids"
scenarios = ["paper-2019"]
conditions = ["dg"]
[participants]
kind = "human"
ids = ["P01", "P01", "controller", "%s"]
""" % ("x" * 65))
    with pytest.raises(ProblemsError) as info:
        load_protocol(ids)
    assert [line.split(": ")[1] for line in info.value.problems] == [
        "participants.ids[1]", "participants.ids[2]", "participants.ids[3]"]


def test_two_references_to_one_scenario_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "twice.toml", """name = "twice"
scenarios = ["paper-2019", "paper-2019"]
conditions = ["dg"]
[participants]
count = 1
""")
    with pytest.raises(ScenarioError, match=r"scenarios\[1\]: expected a scenario not already listed"):
        load_protocol(path)


def test_validate_protocol_checks_a_protocol_built_in_code() -> None:
    protocol = load_protocol("paper-2019")
    validate_protocol(protocol)
    with pytest.raises(ProblemsError) as info:
        validate_protocol(replace(protocol, scenarios=("nowhere.toml",), repetitions=0))
    assert len(info.value.problems) == 2
    assert "scenarios[0]: nowhere.toml: cannot read" in str(info.value)


def test_oversized_and_deeply_nested_protocol_files_are_refused(tmp_path: Path) -> None:
    big = _write(tmp_path, "big.toml", "# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(ScenarioError, match=r"big\.toml: file too large"):
        load_protocol(big)
    deep = _write(tmp_path, "deep.toml", "name = " + "[" * 2000 + "]" * 2000 + "\n")
    with pytest.raises(ScenarioError, match=r"deep\.toml: name \(line 1\): expected at most 8 levels"):
        load_protocol(deep)
