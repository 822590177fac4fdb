"""A protocol file's relative scenario paths resolve against the protocol file's folder,
not the current one; they are checked when the protocol loads, and the loaded protocol
holds the resolved path, so the study runs the same file wherever it is started from."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from capture_trainer.errors import ScenarioError
from scenarios.toml_in import ProblemsError
from trials.protocol import TrialSpec, load_protocol, plan_trials, run_seed, validate_protocol
from trials.study import participants_for, run_study, scenario_digest, trial_identity
from trials.vocabulary import load_scenario

BUILTIN_TEXT = resources.files("scenarios.builtin").joinpath("paper-2019.toml").read_text(encoding="utf-8")


def write_protocol(path: Path, *scenarios: str, seed: int = 3) -> Path:
    listed = ", ".join(f'"{scenario}"' for scenario in scenarios)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'name = "paths"\nseed = {seed}\nscenarios = [{listed}]\nconditions = ["dg", "ng"]\n'
        '[participants]\nkind = "simulated"\ncount = 2\nmix = { novice = 1 }\n',
        encoding="utf-8",
    )
    return path


def lab_folder(root: Path) -> Path:
    """``root/lab/p.toml`` naming ``sub/my.toml`` (a copy of the built-in paper-2019)."""
    (root / "lab" / "sub").mkdir(parents=True)
    (root / "lab" / "sub" / "my.toml").write_text(BUILTIN_TEXT, encoding="utf-8")
    return write_protocol(root / "lab" / "p.toml", "sub/my.toml")


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current folder with no ``sub/my.toml`` in it."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    monkeypatch.chdir(folder)
    assert not Path("sub/my.toml").exists()
    return folder


def test_a_relative_path_resolves_against_the_protocol_files_folder(tmp_path: Path, elsewhere: Path) -> None:
    protocol_file = lab_folder(tmp_path)
    expected = os.path.join(str(tmp_path), "lab", "sub", "my.toml")
    protocol = load_protocol(protocol_file)
    assert protocol.scenarios == (expected,)
    validate_protocol(protocol)  # what run_study checks again, from the current folder
    specs = plan_trials(protocol, participants_for(protocol))
    assert specs and {spec.scenario for spec in specs} == {expected}
    assert {spec.trial_id.split("_")[1] for spec in specs} == {"my"}
    assert load_scenario(specs[0].scenario).name == "my"
    # study.py's fingerprints read the resolved file
    assert scenario_digest(specs[0].scenario) == hashlib.sha256(BUILTIN_TEXT.encode("utf-8")).hexdigest()


def test_a_protocol_named_by_a_relative_path_resolves_against_its_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    protocol = load_protocol("lab/p.toml")
    expected = os.path.join(os.getcwd(), "lab", "sub", "my.toml")
    assert protocol.scenarios == (expected,)
    monkeypatch.chdir(tmp_path / "lab" / "sub")  # the path holds wherever the study runs
    validate_protocol(protocol)
    assert load_scenario(protocol.scenarios[0]).name == "my"


def test_a_missing_relative_file_names_the_path_as_written_and_as_resolved(tmp_path: Path, elsewhere: Path) -> None:
    protocol_file = write_protocol(tmp_path / "lab" / "p.toml", "sub/missing.toml")
    (elsewhere / "sub").mkdir()
    (elsewhere / "sub" / "missing.toml").write_text(BUILTIN_TEXT)  # the current folder's does not count
    resolved = os.path.join(str(tmp_path), "lab", "sub", "missing.toml")
    with pytest.raises(ScenarioError) as info:
        load_protocol(protocol_file)
    assert str(info.value) == (
        f"{protocol_file}: scenarios[0]: sub/missing.toml: cannot read: No such file or directory "
        f"(resolved: {resolved})"
    )


def test_an_invalid_relative_file_lists_its_problems_with_both_paths(tmp_path: Path, elsewhere: Path) -> None:
    protocol_file = write_protocol(tmp_path / "lab" / "p.toml", "paper-2019", "sub/bad.toml")
    bad = tmp_path / "lab" / "sub" / "bad.toml"
    bad.parent.mkdir()
    bad.write_text("seed = -1\n[robot]\nmodel = 'scara'\n")
    with pytest.raises(ProblemsError) as info:
        load_protocol(protocol_file)
    lines = info.value.problems
    assert len(lines) >= 3, lines
    for line in lines:
        assert line.startswith(f"{protocol_file}: scenarios[1]: sub/bad.toml: "), line
        assert line.endswith(f" (resolved: {bad})"), line
    assert any(line.startswith(f"{protocol_file}: scenarios[1]: sub/bad.toml: seed: ") for line in lines)
    assert any(line.startswith(f"{protocol_file}: scenarios[1]: sub/bad.toml: robot.model: ") for line in lines)


def test_an_absolute_path_and_a_builtin_name_are_kept_as_written(tmp_path: Path, elsewhere: Path) -> None:
    absolute = tmp_path / "scenarios" / "abs.toml"
    absolute.parent.mkdir()
    absolute.write_text(BUILTIN_TEXT)
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "paper-2019.toml").write_text("not a scenario = = 1")  # a name is not a path
    protocol_file = write_protocol(tmp_path / "lab" / "p.toml", str(absolute), "paper-2019", seed=9)
    protocol = load_protocol(protocol_file)
    assert protocol.scenarios == (str(absolute), "paper-2019")
    specs = plan_trials(protocol, participants_for(protocol))
    builtin = [spec for spec in specs if spec.scenario == "paper-2019"]
    assert builtin and all(
        spec.seed == run_seed(9, spec.participant_id, "paper-2019", spec.condition, spec.repetition)
        for spec in builtin
    )


def test_a_bare_file_name_beside_the_protocol_is_a_path(tmp_path: Path, elsewhere: Path) -> None:
    """As ``file_reference`` decides, looking in the protocol's folder: an existing file."""
    protocol_file = write_protocol(tmp_path / "lab" / "p.toml", "scen")
    (tmp_path / "lab" / "scen").write_text(BUILTIN_TEXT)
    protocol = load_protocol(protocol_file)
    assert protocol.scenarios == (os.path.join(str(tmp_path), "lab", "scen"),)
    assert {spec.trial_id.split("_")[1] for spec in plan_trials(protocol, participants_for(protocol))} == {"scen"}


def test_trial_ids_seeds_and_fingerprints_do_not_depend_on_where_the_files_lie(
    tmp_path: Path, elsewhere: Path
) -> None:
    first = load_protocol(lab_folder(tmp_path / "one"))
    shutil.copytree(tmp_path / "one" / "lab", tmp_path / "two" / "lab")
    second = load_protocol(tmp_path / "two" / "lab" / "p.toml")
    assert first.scenarios != second.scenarios
    specs_one = plan_trials(first, participants_for(first))
    specs_two = plan_trials(second, participants_for(second))
    assert [(s.trial_id, s.seed) for s in specs_one] == [(s.trial_id, s.seed) for s in specs_two]
    assert len({s.seed for s in specs_one}) == len(specs_one)
    assert [trial_identity(first, s).fingerprint for s in specs_one] == \
        [trial_identity(second, s).fingerprint for s in specs_two]


RAN: list[tuple[str, str]] = []


def loading_trial(spec: TrialSpec, out: Path, metadata: dict[str, Any]) -> dict[str, Any]:
    """Stands in for a trial: loads its scenario as the runner does."""
    RAN.append((spec.trial_id, load_scenario(spec.scenario).name))
    return {}


def test_the_study_runs_the_resolved_file_from_another_folder(tmp_path: Path, elsewhere: Path) -> None:
    protocol = load_protocol(lab_folder(tmp_path))
    RAN.clear()
    result = run_study(protocol, elsewhere / "out", progress=io.StringIO(), run_trial=loading_trial)
    assert result.failed == () and result.ran == result.planned == 4
    assert sorted(name for _, name in RAN) == ["my"] * 4
