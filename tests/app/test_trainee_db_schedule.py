"""The trainee database keeps each trainee's guidance schedule and authority history
(schema version 2); a version-1 database file is migrated and stays readable."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.ui.session import attempt_authority, finish_scheduled_attempt, start_scheduled_attempt
from app.ui.trainee_db import TraineeDB
from capture_trainer.errors import TrialError

# The version-1 schema (outcome columns, no guidance authority), verbatim.
V1_SCHEMA = """
CREATE TABLE trainees (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_s REAL NOT NULL);
CREATE TABLE sessions (id INTEGER PRIMARY KEY, trainee_id INTEGER NOT NULL REFERENCES trainees(id),
    started_s REAL NOT NULL, ended_s REAL, device TEXT NOT NULL, kind TEXT NOT NULL);
CREATE TABLE attempts (id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL REFERENCES sessions(id),
    started_s REAL NOT NULL, ended_s REAL, scenario TEXT NOT NULL, condition TEXT NOT NULL,
    seed INTEGER NOT NULL, trial_id TEXT NOT NULL, trial_path TEXT NOT NULL, status TEXT NOT NULL,
    end_reason TEXT, reached INTEGER, impact_velocity_m_s REAL, time_to_reach_s REAL,
    mse_velocity_m2_s2 REAL, mse_position_m2 REAL, peak_base_torque_n_m REAL, peak_base_attitude_rad REAL,
    metrics_json TEXT, outcome TEXT, outcome_reason TEXT);
CREATE INDEX attempts_by_session ON attempts(session_id);
PRAGMA user_version = 1;
"""


def _v1_database(path: Path) -> None:
    raw = sqlite3.connect(path, isolation_level=None)
    raw.executescript(V1_SCHEMA)
    raw.execute("INSERT INTO trainees(id, name, created_s) VALUES (1, 'ada', 0)")
    raw.execute("INSERT INTO sessions(id, trainee_id, started_s, device, kind) VALUES (1, 1, 1, 'mouse', 'train')")
    raw.execute(
        "INSERT INTO attempts(session_id, started_s, ended_s, scenario, condition, seed, trial_id, trial_path, "
        "status, reached, impact_velocity_m_s, outcome) VALUES (1, 2, 3, 'paper-2019', 'dg', 7, 'old', "
        "'/x/old.parquet', 'finished', 1, 0.04, 'captured')")
    raw.close()


def test_a_version_1_database_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    _v1_database(path)
    with TraineeDB(path) as db:
        assert db.schema_version == 2
        (old,) = db.attempts("ada")
        assert old.captured and old.scores["impact_velocity_m_s"] == pytest.approx(0.04)
        assert db.authority_history("ada") == []
        assert db.guidance_authority("ada") == 1.0  # no schedule: the law as designed
        assert db.schedule("ada") == ("fixed", {})
    raw = sqlite3.connect(path)
    try:
        columns = {row[1] for row in raw.execute("PRAGMA table_info(attempts)")}
        tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        raw.close()
    assert "guidance_authority" in columns
    assert {"trainee_schedules", "authority_history"} <= tables
    with TraineeDB(path) as db:  # opening again changes nothing
        assert db.schema_version == 2 and len(db.attempts("ada")) == 1


def test_the_authority_and_its_history_follow_the_schedule(tmp_path: Path) -> None:
    with TraineeDB(tmp_path / "t.sqlite") as db:
        db.set_schedule("bo", "fading", forgetting=0.9, gain=0.5, initial=0.5)
        session = db.start_session("bo", "simulated")
        for error in (0.2, 0.1):
            attempt = db.start_attempt(session, "paper-2019", "dg", 1, "t", tmp_path / "t.parquet")
            db.record_authority("bo", attempt)
            db.record_error(attempt, error)
        # a: 0.5, 0.45 + 0.1 = 0.55, 0.495 + 0.05 = 0.545
        history = db.authority_history("bo")
        assert [step.authority for step in history] == pytest.approx([0.5, 0.55])
        assert [step.step for step in history] == [0, 1]
        assert [step.error for step in history] == [0.2, 0.1]
        assert db.guidance_authority("bo") == pytest.approx(0.545)
        db.set_schedule("bo", "fading", forgetting=0.9, gain=0.5, initial=0.5)  # the same: history goes on
        assert db.guidance_authority("bo") == pytest.approx(0.545)
        db.set_schedule("bo", "fixed", authority=0.25)
        assert db.guidance_authority("bo") == 0.25
        with pytest.raises(TrialError, match="did you mean"):
            db.set_schedule("bo", "fadng")


def test_the_session_applies_the_schedule_per_guided_attempt(tmp_path: Path) -> None:
    with TraineeDB(tmp_path / "t.sqlite") as db:
        db.set_schedule("cy", "experimenter", sequence=[1.0, 0.4])
        session = db.start_session("cy", "simulated")
        assert attempt_authority(db, "cy", "ng") is None  # no guidance, no step
        assert attempt_authority(db, "cy", "dg") == 1.0
        attempt = db.start_attempt(session, "paper-2019", "dg", 1, "t", tmp_path / "t.parquet")
        assert start_scheduled_attempt(db, "cy", attempt, "dg") == 1.0
        assert finish_scheduled_attempt(db, attempt, str(tmp_path / "missing.parquet")) is None
        db.record_error(attempt, 0.0)
        assert attempt_authority(db, "cy", "dg") == 0.4
        assert start_scheduled_attempt(db, "cy", attempt, "ng") is None
        assert len(db.authority_history("cy")) == 1
