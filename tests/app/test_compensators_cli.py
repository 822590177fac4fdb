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


@pytest.mark.parametrize("command", [["train"], ["run"],
                                     ["session", "paper-2019", "--participant", "P01", "--device", "mouse"]])
def test_a_campbell_body_turns_contact_feedback_on_with_that_mode(command: list[str]) -> None:
    from app.commands.arguments import compensator_request

    args = build_parser().parse_args([*command, "--contact-feedback", "viscous"])
    assert compensator_request(args) == {"compensator": None, "contact_feedback": True, "contact_mode": "viscous"}
    args = build_parser().parse_args([*command, "--contact-feedback", "on"])
    assert compensator_request(args)["contact_mode"] is None  # the scenario's [rendering] contact_mode
    if command[0] != "run":
        config = _config(build_parser().parse_args([*command, "--contact-feedback", "damper"]))
        assert (config.contact_feedback, config.contact_mode) == (True, "damper")
    with pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--contact-feedback", "contact"])  # "on" says that


def test_an_attempt_hands_the_contact_mode_to_the_trial_request(tmp_path: Path) -> None:
    spec = AttemptSpec(scenario="paper-2019", condition="dg", participant="ada", seed=3, out_dir=str(tmp_path),
                       device="mouse", contact_feedback=True, contact_mode="free-body")
    request = _request(spec, TrialRequest, ServoOptions())
    assert (request.contact_feedback, request.contact_mode) == (True, "free-body")


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
