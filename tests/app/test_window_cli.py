"""The `train` and `session` commands: options, and the clear errors before any window."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from app.cli import build_parser, main
from app.ui.window import require_display
from capture_trainer.errors import DeviceError


def test_commands_registered() -> None:
    parser = build_parser()
    args = parser.parse_args(["train", "--device", "mouse", "--trainee", "ada"])
    assert args.device == "mouse" and args.trainee == "ada" and args.view == "window"
    args = parser.parse_args(["session", "paper-2019", "--participant", "P01",
                              "--device", "simulated", "--participant-kind", "expert"])
    assert args.participant == "P01" and args.participant_kind == "expert"
    with pytest.raises(SystemExit):
        parser.parse_args(["session", "paper-2019", "--device", "simulated"])  # --participant is required


def test_session_needs_an_explicit_device(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["session", "paper-2019", "--participant", "P01"])
    assert exit_.value.code == 2
    assert "--device" in capsys.readouterr().err
    assert build_parser().parse_args(["train"]).device is None  # resolved when the window starts
    assert build_parser().parse_args(["train", "--device", "simulated"]).device == "simulated"  # still selectable


def test_participant_kind_only_for_a_simulated_participant(capsys) -> None:
    assert main(["session", "paper-2019", "--participant", "P01", "--device", "openhaptics",
                 "--participant-kind", "expert"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "a person" in err


def test_paths_are_absolute_when_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["train", "--out", "runs/x", "--db", "db.sqlite",
                                      "--data-dir", "data"])
    assert args.out == tmp_path / "runs" / "x"
    assert args.db == tmp_path / "db.sqlite"
    assert args.data_dir == tmp_path / "data"
    args = build_parser().parse_args(["session", "lab.toml", "--participant", "P1",
                                      "--device", "mouse", "--out", "study"])
    assert args.out == tmp_path / "study"


def _no_display(monkeypatch) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("argv", [
    ["train", "--trainee", "ada"],
    ["session", "paper-2019", "--participant", "P01", "--device", "simulated"],
])
def test_refuses_without_a_display_in_one_line(argv: list[str], monkeypatch, capsys, tmp_path: Path) -> None:
    _no_display(monkeypatch)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("CAPTURE_TRAINER_DATA", str(tmp_path / "data"))
    started = time.monotonic()
    assert main(argv) == 2
    assert time.monotonic() - started < 5.0  # refused at once, no servo process started
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs a display" in err[0] and "DISPLAY" in err[0]
    assert not (tmp_path / "data").exists()  # nothing written


def test_refuses_when_sdl_falls_back_to_drawing_nowhere(monkeypatch, capsys) -> None:
    _no_display(monkeypatch)
    monkeypatch.setenv("DISPLAY", ":4711")  # set, but no X server there: SDL goes off-screen
    assert main(["train", "--trainee", "ada"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "draws nowhere" in err[0]


def test_display_rules() -> None:
    with pytest.raises(DeviceError, match="needs a display"):
        require_display({}, "linux")
    require_display({"DISPLAY": ":0"}, "linux")
    require_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux")
    require_display({"SDL_VIDEODRIVER": "dummy"}, "linux")  # explicit: off-screen on purpose
    require_display({"SDL_VIDEODRIVER": "kmsdrm"}, "linux")  # a console display without X
    require_display({}, "darwin")  # no DISPLAY variable there
    require_display({}, "win32")


def test_pybullet_view_without_display_fails_clearly(monkeypatch, capsys) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert main(["train", "--view", "pybullet", "--trainee", "ada"]) == 2
    assert "needs a display" in capsys.readouterr().err


def test_unknown_auto_condition(capsys) -> None:
    assert main(["train", "--auto", "dg,xx"]) == 2
    assert "unknown condition" in capsys.readouterr().err


def test_the_trainee_drives_by_default(monkeypatch) -> None:
    """Without --device the trainer opens a device a person drives: a Touch when one answers,
    else the mouse; asking for a simulated participant's kind picks the simulated device."""
    import haptics.backends
    from app.commands import window as commands

    monkeypatch.setattr(haptics.backends, "probe", lambda name: (False, "no Touch here"))
    assert commands.default_device() == "mouse"
    monkeypatch.setattr(haptics.backends, "probe", lambda name: (name == "openhaptics", ""))
    assert commands.default_device() == "openhaptics"
    args = build_parser().parse_args(["train", "--participant-kind", "expert"])
    assert commands._device(args) == "simulated"
