"""The servo process and an experimenter's session, end to end with the real runner."""

from __future__ import annotations

import json
from pathlib import Path

from app.ui.servo import PRIORITY_CODES, AttemptSpec, ServoProcess
from app.ui.session import participant_plan, pending_trials
from app.ui.window import SessionConfig, WindowConfig, run_session
from trials.protocol import load_protocol
from capture_trainer.trial_log import read_trial_log as read_trial
from trials.study import trial_path


def test_servo_reports_a_bad_scenario(tmp_path: Path) -> None:
    with ServoProcess() as servo:
        servo.start_attempt(AttemptSpec(scenario="no-such-scenario", condition="dg",
                                        participant="novice", seed=1, out_dir=str(tmp_path)))
        message = servo.poll(timeout_s=60.0)
        assert message is not None
        kind, payload = message
        assert kind == "error"
        assert "no-such-scenario" in payload["message"]
        assert servo.priority in PRIORITY_CODES  # what it got, known to the window
        assert servo.stats().priority == servo.priority
        assert servo.process.is_alive()  # the servo survives and waits for the next attempt
    assert not servo.process.is_alive()


def test_session_runs_the_first_trial_and_resumes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    out = tmp_path / "study"
    config = SessionConfig(
        protocol="paper-2019", participant="P07", out_dir=out, auto_trials=1,
        window=WindowConfig(device="simulated", participant_kind="expert"),
    )
    results = run_session(config)
    assert len(results) == 1 and results[0].status == "finished", results[0].message

    first = participant_plan(load_protocol("paper-2019"), "P07")[0]
    table, metadata = read_trial(trial_path(out, first))
    assert metadata["complete"] is True
    assert metadata["trial_id"] == first.trial_id
    assert metadata["condition"] == first.condition and metadata["run_seed"] == first.seed
    assert metadata["participant"] == {"id": "P07", "kind": "expert", "params": {}}
    assert metadata["study"]["order_index"] == 0
    assert metadata["session"] == {"device": "simulated", "operator": "simulated"}
    assert metadata["servo"]["priority"] == results[0].priority
    assert results[0].priority in PRIORITY_CODES
    assert table.num_rows > 1000
    document = json.loads((out / "study.json").read_text())
    assert document["participants"]["P07"]["kind"] == "expert"
    assert list(document["participants"]) == ["P07"]
    assert len(pending_trials(out, participant_plan(load_protocol("paper-2019"), "P07"))) == 8
