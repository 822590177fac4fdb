from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from trials.protocol import TrialSpec, load_protocol
from trials.recorder import TrialRecorder, read_trial
from trials.study import STUDY_FILE, TRIALS_DIR, run_study, trial_path

RAN: list[str] = []


def fake_trial(spec: TrialSpec, out: Path) -> dict[str, Any]:
    """Writes a complete one-row trial file, and remembers that it ran."""
    RAN.append(spec.trial_id)
    recorder = TrialRecorder(trial_path(out, spec), ("t_s",), (), {"trial_id": spec.trial_id}, 1)
    recorder.append_row()
    recorder.close()
    return {"time_to_reach_s": 1.0, "impact_velocity_m_s": 0.01}


def _protocol(tmp_path: Path, scenario: str, participants: int, workers_note: str = "") -> Path:
    path = tmp_path / "p.toml"
    path.write_text(
        f'name = "mini"\nseed = 5\nscenarios = ["{scenario}"]\nconditions = ["dg", "ng"]\n'
        f'repetitions = 1\ncontroller_conditions = ["as"]\n'
        f'[participants]\nkind = "simulated"\ncount = {participants}\nmix = {{ novice = 1 }}\n'
    )
    return path


def test_a_resumed_study_runs_only_the_missing_trials(tmp_path: Path) -> None:
    protocol = load_protocol(_protocol(tmp_path, "paper-2019", participants=3))
    out = tmp_path / "study"
    RAN.clear()
    first = run_study(protocol, out, progress=io.StringIO(), run_trial=fake_trial)
    assert first.planned == 3 * 2 + 1 and first.ran == 7 and first.skipped == 0
    # lose two trials (one deleted, one left incomplete as after a crash), then resume
    done = sorted((out / TRIALS_DIR).glob("*.parquet"))
    done[0].unlink()
    broken = TrialRecorder(done[1], ("t_s",), (), {}, 1)
    broken.abort("killed")
    RAN.clear()
    progress = io.StringIO()
    second = run_study(protocol, out, progress=progress, run_trial=fake_trial)
    assert second.skipped == 5 and second.ran == 2
    assert sorted(RAN) == sorted(p.stem for p in done[:2])
    assert "resuming: 5 of 7" in progress.getvalue()
    design = json.loads((out / STUDY_FILE).read_text())
    assert len(design["trials"]) == 7 and design["protocol"]["name"] == "mini"


def test_a_small_real_study_in_two_worker_processes(tmp_path: Path, short_scenario: Path) -> None:
    protocol = load_protocol(_protocol(tmp_path, str(short_scenario), participants=2))
    out = tmp_path / "study"
    progress = io.StringIO()
    result = run_study(protocol, out, workers=2, progress=progress)
    assert result.failed == () and result.ran == 5
    files = sorted((out / TRIALS_DIR).glob("*.parquet"))
    assert len(files) == 5
    participants = set()
    for path in files:
        _, meta = read_trial(path)
        assert meta["complete"] is True
        participants.add(meta["participant"]["id"])
    assert participants == {"S01", "S02", "controller"}
    assert progress.getvalue().count("\n") == 5
