"""One data folder for the trainer: the history is the same from any directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.ui.data import DATA_ENV, data_dir, normalise_name
from app.ui.trainee_db import TraineeDB
from app.ui.window import SessionConfig, WindowConfig


def test_data_dir_order(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    assert data_dir(environ={}) == home / ".local" / "share" / "capture-trainer"
    assert data_dir(environ={"XDG_DATA_HOME": "/xdg"}) == Path("/xdg/capture-trainer")
    assert data_dir(environ={"XDG_DATA_HOME": "relative"}) == home / ".local" / "share" / "capture-trainer"
    env = {"XDG_DATA_HOME": "/xdg", DATA_ENV: "/data"}
    assert data_dir(environ=env) == Path("/data")
    assert data_dir("/explicit", environ=env) == Path("/explicit")
    monkeypatch.chdir(tmp_path)
    assert data_dir("rel", environ=env) == tmp_path / "rel"
    assert data_dir(environ={DATA_ENV: "~/d"}) == home / "d"


def test_configs_are_absolute_and_names_nfc(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "data"))
    config = WindowConfig(trainee="Zoe\u0308")
    assert config.out_dir == tmp_path / "data" / "trainer"
    assert config.database == tmp_path / "data" / "trainer" / "trainees.sqlite"
    assert config.trainee == "Zo\u00eb"
    config = WindowConfig(out_dir=Path("runs"), db_path=Path("t.sqlite"))
    assert config.out_dir == tmp_path / "runs" and config.database == tmp_path / "t.sqlite"
    session = SessionConfig(protocol="paper-2019", participant=" P\u0030\u0037 ", out_dir=Path("s"))
    assert session.participant == "P07" and session.out_dir == tmp_path / "s"
    assert normalise_name("  Jose\u0301 ") == "Jos\u00e9"


def test_history_is_found_from_another_directory(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "data"))
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    monkeypatch.chdir(tmp_path / "one")
    assert main(["train", "--trainee", "Zoe\u0308", "--auto", "ng", "--quit-when-done",
                 "--stop-after", "0.3"]) == 0
    database = tmp_path / "data" / "trainer" / "trainees.sqlite"
    assert f"trainee database: {database}" in capsys.readouterr().out
    assert not any((tmp_path / "one").iterdir())  # nothing relative to where it started
    monkeypatch.chdir(tmp_path / "two")
    with TraineeDB(database) as db:
        (attempt,) = db.attempts("Zo\u00eb")
    path = Path(attempt.trial_path)
    assert path.is_absolute() and path.is_file()
    assert path.parent == tmp_path / "data" / "trainer" / "trials"


@pytest.mark.parametrize("option", ["--out", "--data-dir"])
def test_session_directory_is_anchored(option: str, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "env-data"))
    monkeypatch.chdir(tmp_path)
    assert main(["session", "paper-2019", "--participant", "P01", "--device", "simulated",
                 option, "here", "--auto-trials", "1", "--stop-after", "0.2"]) == 0
    expected = tmp_path / "here" if option == "--out" else tmp_path / "here" / "sessions" / "paper-2019"
    assert f"study directory: {expected}" in capsys.readouterr().out
    assert (expected / "study.json").is_file()
