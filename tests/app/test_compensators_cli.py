"""`train` and `session` take `--compensator` and `--contact-feedback` as `run` does, and
their attempts hand them to the trial request."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import build_parser
from app.commands.window import _config
from app.ui.servo import AttemptSpec, ServoOptions, _request
from trials.runner import TrialRequest


def test_train_and_session_take_the_compensator_and_contact_feedback(tmp_path: Path) -> None:
    config = _config(build_parser().parse_args(["train", "--delay-ms", "250", "--compensator", "predictive",
                                                "--contact-feedback", "on"]))
    assert (config.delay_s, config.compensator, config.contact_feedback) == (0.25, "predictive", True)
    config = _config(build_parser().parse_args(["session", "paper-2019", "--participant", "P01", "--device",
                                                "mouse", "--compensator", "passivity", "--contact-feedback", "off"]))
    assert (config.compensator, config.contact_feedback) == ("passivity", False)
    config = _config(build_parser().parse_args(["train"]))
    assert (config.compensator, config.contact_feedback) == (None, None)  # the scenario's


def test_an_attempt_hands_them_to_the_trial_request(tmp_path: Path) -> None:
    spec = AttemptSpec(scenario="paper-2019", condition="dg", participant="ada", seed=3, out_dir=str(tmp_path),
                       device="mouse", delay_s=0.25, compensator="predictive", contact_feedback=True)
    request = _request(spec, TrialRequest, ServoOptions())
    assert (request.delay_s, request.compensator, request.contact_feedback) == (0.25, "predictive", True)


def test_an_unknown_compensator_is_refused() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--compensator", "smith"])


def test_train_takes_the_task_after_the_capture(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import app.ui.window
    from app.cli import main

    seen = []
    monkeypatch.setattr(app.ui.window, "run_trainer", lambda config: seen.append(config) or [])
    assert main(["train", "--task", "jam", "--device", "mouse", "--data-dir", str(tmp_path)]) == 0
    assert main(["train", "--device", "mouse", "--data-dir", str(tmp_path)]) == 0
    assert [config.task for config in seen] == ["jam", None]  # None: the scenario's own task, if any
