"""Resume by identity: a study re-uses a trial file only when it is complete and carries
the planned trial's fingerprint; a folder holding trials of another plan is refused with
one line, and replaced with --force."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from capture_trainer.errors import TrialError
from capture_trainer.trial_log import read_metadata
from trials.protocol import TrialSpec, load_protocol, plan_trials
from trials.recorder import TrialRecorder
from trials.study import (
    STUDY_FILE, TRIALS_DIR, participants_for, run_study, study_identity, trial_identity, trial_path,
)

RAN: list[str] = []


def fake_trial(spec: TrialSpec, out: Path, metadata: dict[str, Any]) -> dict[str, Any]:
    """A complete one-row trial file with the plan's entries."""
    RAN.append(spec.trial_id)
    recorder = TrialRecorder(trial_path(out, spec), ("t_s",), (), {"trial_id": spec.trial_id, **metadata}, 1)
    recorder.append_row()
    recorder.close()
    return {"time_to_reach_s": 1.0, "impact_velocity_m_s": 0.01}


def write_protocol(path: Path, scenario: str, seed: int = 5, count: int = 1, controller: bool = False) -> Path:
    path.write_text(
        f'name = "mini"\nseed = {seed}\nscenarios = ["{scenario}"]\nconditions = ["dg", "ng"]\n'
        f'repetitions = 1\ncontroller_conditions = {["as"] if controller else []}\n'
        f'[participants]\nkind = "simulated"\ncount = {count}\nmix = {{ novice = 1 }}\n'
    )
    return path


def run_fake(protocol_file: Path, out: Path, force: bool = False) -> Any:
    RAN.clear()
    return run_study(load_protocol(protocol_file), out, progress=io.StringIO(), run_trial=fake_trial, force=force)


def fingerprints(out: Path) -> dict[str, str]:
    return {p.name: read_metadata(p)["plan_fingerprint"] for p in sorted((out / TRIALS_DIR).glob("*.parquet"))}


def test_every_trial_file_and_the_study_file_carry_their_plan_fingerprint(tmp_path: Path) -> None:
    protocol_file = write_protocol(tmp_path / "p.toml", "paper-2019", count=2, controller=True)
    out = tmp_path / "study"
    run_fake(protocol_file, out)
    protocol = load_protocol(protocol_file)
    specs = plan_trials(protocol, participants_for(protocol))
    for spec in specs:
        metadata = read_metadata(trial_path(out, spec))
        identity = trial_identity(protocol, spec)
        assert metadata["plan_fingerprint"] == identity.fingerprint and len(identity.fingerprint) == 64
        assert metadata["plan"]["run_seed"] == spec.seed and metadata["plan"]["seed"] == 5
    assert len({trial_identity(protocol, spec).fingerprint for spec in specs}) == len(specs)
    design = json.loads((out / STUDY_FILE).read_text())
    assert design["plan_fingerprint"] == study_identity(protocol).fingerprint


def test_the_fingerprint_changes_with_each_part_of_the_plan(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text((Path(__file__).parents[2] / "scenarios/builtin/paper-2019.toml").read_text())
    protocol = load_protocol(write_protocol(tmp_path / "p.toml", str(scenario)))
    spec = plan_trials(protocol, participants_for(protocol))[0]
    base = trial_identity(protocol, spec)
    assert trial_identity(protocol, spec).fingerprint == base.fingerprint  # stable
    variants = {
        "condition": TrialSpec(**{**spec.__dict__, "condition": "apf"}),
        "repetition": TrialSpec(**{**spec.__dict__, "repetition": 1}),
        "run_seed": TrialSpec(**{**spec.__dict__, "seed": spec.seed + 1}),
        "participant": TrialSpec(**{**spec.__dict__, "participant_params": {"gain": 2.0}}),
    }
    for field, changed_spec in variants.items():
        other = trial_identity(protocol, changed_spec)
        assert other.fingerprint != base.fingerprint and other.changed(base.fields) == [field]
    scenario.write_text(scenario.read_text() + "\n# edited\n")
    edited = trial_identity(protocol, spec)
    assert edited.changed(base.fields) == ["scenario_content"]


def test_a_changed_seed_is_refused_then_replaced_with_force_then_resumed(
    tmp_path: Path, short_scenario: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tiny real study: two 0.6 s trials, run through the CLI."""
    protocol_file = write_protocol(tmp_path / "p.toml", str(short_scenario))
    out = tmp_path / "runs"
    assert main(["study", str(protocol_file), "--out", str(out)]) == 0
    first = fingerprints(out)
    assert len(first) == 2
    capsys.readouterr()

    write_protocol(protocol_file, str(short_scenario), seed=6)
    assert main(["study", str(protocol_file), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (f"capture-trainer: error: {out} holds trials of a different plan (changed: seed); "
                     "use --force to replace them")
    assert fingerprints(out) == first  # nothing touched

    assert main(["study", str(protocol_file), "--out", str(out), "--force"]) == 0
    assert "0 already done, 2 run, 0 failed, 2 replaced" in capsys.readouterr().out
    second = fingerprints(out)
    assert second.keys() == first.keys() and not set(second.values()) & set(first.values())

    assert main(["study", str(protocol_file), "--out", str(out)]) == 0
    assert "2 already done, 0 run" in capsys.readouterr().out
    assert fingerprints(out) == second


def test_a_changed_scenario_file_is_caught_per_trial_without_study_json(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text((Path(__file__).parents[2] / "scenarios/builtin/paper-2019.toml").read_text())
    protocol_file = write_protocol(tmp_path / "p.toml", str(scenario))
    out = tmp_path / "study"
    run_fake(protocol_file, out)
    (out / STUDY_FILE).unlink()
    scenario.write_text(scenario.read_text().replace("time_limit_s = 10.0", "time_limit_s = 9.0"))
    with pytest.raises(TrialError, match=r"holds trials of a different plan \(changed: scenario_content\)"):
        run_fake(protocol_file, out)
    assert RAN == []
    result = run_fake(protocol_file, out, force=True)
    assert result.ran == 2 and result.replaced == 2 and sorted(RAN) == sorted(p.stem for p in (out / TRIALS_DIR).iterdir())


def test_trial_files_not_in_the_plan_count_as_another_plan(tmp_path: Path) -> None:
    protocol_file = write_protocol(tmp_path / "p.toml", "paper-2019", count=3)
    out = tmp_path / "study"
    run_fake(protocol_file, out)
    write_protocol(protocol_file, "paper-2019", count=2)
    with pytest.raises(TrialError, match=r"different plan \(changed: participants\); use --force"):
        run_fake(protocol_file, out)
    result = run_fake(protocol_file, out, force=True)
    # the two S03 trials are gone; S01 and S02's are re-used (their plans did not change)
    assert result.replaced == 2 and result.ran == 0 and result.skipped == 4
    assert sorted(fingerprints(out)) == sorted(f"S0{i}_paper-2019_{c}_r1.parquet" for i in (1, 2) for c in ("dg", "ng"))


def test_a_complete_file_without_a_fingerprint_is_not_re_used(tmp_path: Path) -> None:
    protocol_file = write_protocol(tmp_path / "p.toml", "paper-2019")
    out = tmp_path / "study"
    protocol = load_protocol(protocol_file)
    spec = plan_trials(protocol, participants_for(protocol))[0]
    old = TrialRecorder(trial_path(out, spec), ("t_s",), (), {"trial_id": spec.trial_id}, 1)
    old.close()
    with pytest.raises(TrialError, match=r"changed: plan fingerprint \(none recorded\)"):
        run_fake(protocol_file, out)
    assert run_fake(protocol_file, out, force=True).ran == 2
