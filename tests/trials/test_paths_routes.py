"""No file is ever written outside the output folder, whatever the names: a scenario's
name, a participant id on a real device, a protocol's scenario reference, and the
planned paths of an experimenter's session."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.ui.session import prepare_session
from capture_trainer.errors import ScenarioError, TrialError
from capture_trainer.paths import trial_file
from capture_trainer.trial_log import read_metadata
from haptics._hd_api import LIBHD_ENV
from haptics._hd_double import build_double
from tests.trials.conftest import scenario_with
from trials.protocol import load_protocol
from trials.runner import TrialRequest
from trials.study import STUDY_FILE, TRIALS_DIR, run_study, trial_path

ROOT = Path(__file__).resolve().parents[2]


def files_under(root: Path) -> set[Path]:
    return {path for path in root.rglob("*") if path.is_file() or path.is_symlink()}


def assert_new_files_inside(before: set[Path], root: Path, out: Path) -> set[Path]:
    """Every file created under ``root`` since ``before`` lies inside ``out``."""
    new = files_under(root) - before
    outside = {path for path in new if not path.resolve().is_relative_to(out.resolve())}
    assert not outside
    return new


def test_a_scenario_named_to_escape_writes_inside_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = scenario_with(tmp_path, 0.3, name="escape")
    scenario.write_text('name = "../../../tmp/x"\n' + scenario.read_text())
    out = tmp_path / "out"
    before = files_under(tmp_path)
    code = main(["run", "--scenario", str(scenario), "--condition", "dg", "--out", str(out), "--json"])
    captured = capsys.readouterr()
    new = assert_new_files_inside(before, tmp_path, out)
    if code == 2:  # a stricter scenario validation may refuse the name: one line, nothing written
        assert "name" in captured.err and not new
        return
    assert code == 0, captured.err
    path = Path(json.loads(captured.out.strip().splitlines()[-1])["path"])
    assert path.parent == out and read_metadata(path)["complete"] is True
    assert not (tmp_path / "tmp").exists()


def test_the_runner_slugs_every_name_of_a_trial_file(tmp_path: Path) -> None:
    request = TrialRequest(participant="../x y", device="openhaptics", condition="dg")
    stem = request.resolved_trial_id("../../../tmp/x")
    assert "/" not in stem and ".." not in stem and not stem.startswith(".")
    assert trial_file(tmp_path / "out", stem).parent == tmp_path / "out"
    readable = TrialRequest(participant="novice", seed=3)
    assert readable.resolved_trial_id("paper-2019") == "novice_paper-2019_dg_s3"  # ids unchanged


def test_a_person_named_to_escape_on_openhaptics_writes_inside_out(tmp_path: Path, short_scenario: Path) -> None:
    """`run --device openhaptics --participant "../x y"` on the libHD test double."""
    library = build_double(tmp_path / "libhd")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env[LIBHD_ENV] = str(library)
    env["PYTHONPATH"] = str(ROOT)
    out = tmp_path / "a" / "out"
    before = files_under(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "run", "--device", "openhaptics", "--participant", "../x y",
         "--condition", "dg", "--scenario", str(short_scenario), "--out", str(out), "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    # the path is made when the trial is built: it holds whether the trial completes or
    # ends on a device fault (exit 2, the file kept, incomplete)
    assert result.returncode in (0, 2) and "Traceback" not in result.stderr, result.stderr
    new = assert_new_files_inside(before, tmp_path, out)
    trials = [path for path in new if path.suffix == ".parquet"]
    if not trials:  # a stricter check of person ids may refuse the id: one line, nothing written
        assert result.returncode == 2 and "--participant" in result.stderr
        return
    assert len(trials) == 1 and trials[0].parent == out
    metadata = read_metadata(trials[0])
    assert metadata["participant"]["id"] == "../x y"
    assert metadata["complete"] is (result.returncode == 0)


def test_a_protocol_scenario_reference_that_would_escape_writes_inside_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reference without ``.toml`` (``../../../../../scen``) becomes part of the trial ids."""
    scenario_with(tmp_path, 0.3, name="scen").rename(tmp_path / "scen")
    deep = tmp_path / "a" / "b" / "c" / "d" / "e"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    protocol_file = deep / "p.toml"
    protocol_file.write_text(
        'name = "escape"\nseed = 1\nscenarios = ["../../../../../scen"]\nconditions = ["dg"]\n'
        'repetitions = 1\n[participants]\nkind = "simulated"\ncount = 1\nmix = { novice = 1 }\n'
    )
    out = deep / "out"
    before = files_under(tmp_path)
    try:
        protocol = load_protocol(protocol_file)
    except ScenarioError:  # a stricter protocol validation may refuse such a reference
        assert_new_files_inside(before, tmp_path, out)
        return
    result = run_study(protocol, out, progress=io.StringIO())
    assert result.failed == () and result.ran == 1
    new = assert_new_files_inside(before, tmp_path, out)
    trials = [path for path in new if path.suffix == ".parquet"]
    assert len(trials) == 1 and trials[0].parent == out / TRIALS_DIR
    assert read_metadata(trials[0])["complete"] is True


def test_the_planned_paths_of_a_session_stay_inside_out(tmp_path: Path) -> None:
    """`session PROTOCOL --participant "../x"`: study.json and every planned trial file."""
    protocol_file = tmp_path / "lab.toml"
    protocol_file.write_text(
        'name = "lab"\nseed = 1\nscenarios = ["paper-2019"]\nconditions = ["dg", "ng"]\nrepetitions = 2\n'
        '[participants]\nkind = "human"\nids = ["P01", "P02"]\n'
    )
    out = tmp_path / "lab"
    before = files_under(tmp_path)
    specs = prepare_session(load_protocol(protocol_file), "../x", out)
    assert_new_files_inside(before, tmp_path, out)
    assert (out / STUDY_FILE).is_file() and len(specs) == 4
    for spec in specs:
        path = trial_path(out, spec)
        assert path.parent == out / TRIALS_DIR and not path.name.startswith(".")
        # the servo process builds the same file from the spec's trial id
        runner_stem = TrialRequest(trial_id=spec.trial_id).resolved_trial_id("paper-2019")
        assert path == trial_file(out / TRIALS_DIR, runner_stem)


def test_a_trainee_named_to_escape_gets_a_safe_trial_id() -> None:
    from app.ui.window import safe_id

    assert safe_id("Ada") == "Ada" and safe_id("Zoë") == "Zoë"
    for name in ("../x", "..", "/etc/passwd", ""):
        component = safe_id(name)
        assert "/" not in component and ".." not in component and not component.startswith(".")


def test_a_plan_whose_trials_would_share_a_file_is_refused(tmp_path: Path) -> None:
    protocol_file = tmp_path / "lab.toml"
    protocol_file.write_text(
        'name = "lab"\nseed = 1\nscenarios = ["paper-2019"]\nconditions = ["dg"]\n'
        '[participants]\nkind = "human"\nids = ["P1", "p1"]\n'
    )
    out = tmp_path / "lab"
    with pytest.raises(TrialError, match="would share the file"):
        run_study(load_protocol(protocol_file), out, progress=io.StringIO())
    assert not out.exists()


def test_controller_trial_files_name_the_controller_not_a_participant() -> None:
    """An automatic capture is the controller's trial: its default file stem says so,
    whatever participant the request carries by default."""
    request = TrialRequest(scenario="paper-2019", condition="as", participant="novice", seed=2)
    assert request.resolved_trial_id("paper-2019", automatic=True) == "controller_paper-2019_as_s2"
    assert request.resolved_trial_id("paper-2019") == "novice_paper-2019_as_s2"
