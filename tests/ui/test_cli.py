"""The `train` and `session` commands: options, and the clear errors before any window."""

from __future__ import annotations

import pytest

from trials.cli import build_parser, main


def test_commands_registered() -> None:
    parser = build_parser()
    args = parser.parse_args(["train", "--device", "mouse", "--trainee", "ada"])
    assert args.device == "mouse" and args.trainee == "ada" and args.view == "window"
    args = parser.parse_args(["session", "paper-2019", "--participant", "P01",
                              "--device", "simulated", "--participant-kind", "expert"])
    assert args.participant == "P01" and args.participant_kind == "expert"
    with pytest.raises(SystemExit):
        parser.parse_args(["session", "paper-2019"])  # --participant is required


def test_pybullet_view_without_display_fails_clearly(monkeypatch, capsys) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert main(["train", "--view", "pybullet", "--trainee", "ada"]) == 2
    assert "needs a display" in capsys.readouterr().err


def test_unknown_auto_condition(capsys) -> None:
    assert main(["train", "--auto", "dg,xx"]) == 2
    assert "unknown condition" in capsys.readouterr().err
