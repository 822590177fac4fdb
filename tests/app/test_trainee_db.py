"""The trainee database: attempts recorded, history queried, nothing lost in a crash."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.ui.cards import compare
from app.ui.trainee_db import TraineeDB
from capture_trainer.errors import TrialError


def _metrics(impact: float, reach: float, reached: bool = True) -> dict[str, object]:
    return {"reached": reached, "impact_velocity_m_s": impact, "time_to_reach_s": reach,
            "mse_velocity_m2_s2": impact**2, "mse_position_m2": 1e-6,
            "peak_base_torque_n_m": 0.01, "peak_base_attitude_rad": 0.002, "n_ticks": 3000}


def test_attempts_and_sessions_round_trip(tmp_path: Path) -> None:
    with TraineeDB(tmp_path / "t.sqlite") as db:
        first = db.start_session("ada", "mouse")
        a1 = db.start_attempt(first, "paper-2019", "dg", 7, "ada_dg_1", tmp_path / "a1.parquet")
        db.finish_attempt(a1, "finished", _metrics(0.05, 2.0), end_reason="capture_window_done")
        a2 = db.start_attempt(first, "paper-2019", "ng", 8, "ada_ng_2", tmp_path / "a2.parquet")
        db.finish_attempt(a2, "aborted", {}, end_reason="aborted")
        db.end_session(first)
        second = db.start_session("ada", "mouse")
        a3 = db.start_attempt(second, "paper-2019", "dg", 9, "ada_dg_3", tmp_path / "a3.parquet")
        db.finish_attempt(a3, "finished", _metrics(0.02, 2.5))
        db.start_session("bob", "simulated")

    with TraineeDB(tmp_path / "t.sqlite") as db:  # reopened: everything was committed
        assert db.trainees() == ["ada", "bob"]
        assert [s.id for s in db.sessions("ada")] == [first, second]
        attempts = db.attempts("ada")
        assert [a.id for a in attempts] == [a1, a2, a3]
        assert [a.status for a in attempts] == ["finished", "aborted", "finished"]
        assert attempts[0].scores["impact_velocity_m_s"] == pytest.approx(0.05)
        assert attempts[0].reached is True and attempts[0].end_reason == "capture_window_done"
        assert all(math.isnan(v) for v in attempts[1].scores.values())
        assert [a.id for a in db.attempts("ada", condition="dg")] == [a1, a3]
        assert [a.id for a in db.attempts("ada", status="finished", before_id=a3)] == [a1]
        assert db.attempts("bob") == []


def test_rejects_bad_input(tmp_path: Path) -> None:
    with TraineeDB(tmp_path / "t.sqlite") as db:
        with pytest.raises(TrialError):
            db.trainee_id("   ")
        session = db.start_session("ada", "mouse")
        attempt = db.start_attempt(session, "s", "dg", 1, "x", "x.parquet")
        with pytest.raises(TrialError):
            db.finish_attempt(attempt, "running")
    (tmp_path / "junk.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.raises(TrialError, match="not a usable trainee database"):
        TraineeDB(tmp_path / "junk.sqlite")


def test_comparison_with_earlier_attempts(tmp_path: Path) -> None:
    with TraineeDB(tmp_path / "t.sqlite") as db:
        session = db.start_session("ada", "mouse")
        for impact in (0.08, 0.04, 0.06):
            attempt = db.start_attempt(session, "s", "dg", 1, "x", "x.parquet")
            db.finish_attempt(attempt, "finished", _metrics(impact, 2.0))
        missed = db.start_attempt(session, "s", "dg", 1, "x", "x.parquet")
        db.finish_attempt(missed, "finished", _metrics(math.nan, math.nan, reached=False))
        earlier = db.attempts("ada", status="finished")
    result = compare({"impact_velocity_m_s": 0.03}, earlier)["impact_velocity_m_s"]
    assert result.n_before == 3  # the attempt that missed has no impact velocity
    assert result.best_before == pytest.approx(0.04)
    assert result.mean_before == pytest.approx(0.06)
    assert result.verdict == "best"
    assert compare({"impact_velocity_m_s": 0.05}, earlier)["impact_velocity_m_s"].verdict == "better"
    assert compare({"impact_velocity_m_s": 0.07}, earlier)["impact_velocity_m_s"].verdict == "worse"
    assert compare({"impact_velocity_m_s": 0.061}, earlier)["impact_velocity_m_s"].verdict == "same"
    assert compare({"impact_velocity_m_s": 0.07}, [])["impact_velocity_m_s"].verdict == "first"


CRASHING_TRAINER = textwrap.dedent(
    """
    import sys
    from app.ui.trainee_db import TraineeDB
    db = TraineeDB(sys.argv[1])
    session = db.start_session("ada", "mouse")
    for i in range(2):
        attempt = db.start_attempt(session, "paper-2019", "dg", i, f"t{i}", f"t{i}.parquet")
        db.finish_attempt(attempt, "finished", {"reached": True, "impact_velocity_m_s": 0.01 * (i + 1)})
    db.start_attempt(session, "paper-2019", "ng", 2, "t2", "t2.parquet")
    print("mid-attempt", flush=True)
    sys.stdin.read()  # blocks until killed
    """
)


def test_killed_mid_attempt_keeps_earlier_attempts(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    child = subprocess.Popen(
        [sys.executable, "-c", CRASHING_TRAINER, str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2], env={**os.environ, "PYTHONPATH": "."},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "mid-attempt"
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    with TraineeDB(path) as db:
        attempts = db.attempts("ada")
        assert [a.status for a in attempts] == ["finished", "finished", "running"]
        assert [a.scores["impact_velocity_m_s"] for a in attempts[:2]] == pytest.approx([0.01, 0.02])
        assert db.recover() == 1
        assert [a.status for a in db.attempts("ada")] == ["finished", "finished", "interrupted"]
        # Stored absolute, against the directory the trainer ran in (the repository here).
        assert db.attempts("ada")[2].trial_path == str(Path(__file__).resolve().parents[2] / "t2.parquet")


NFC, NFD = "Zo\u00eb", "Zoe\u0308"  # one name, precomposed and with a combining diaeresis


def test_a_name_in_two_normal_forms_is_one_trainee(tmp_path: Path) -> None:
    assert NFC != NFD
    with TraineeDB(tmp_path / "t.sqlite") as db:
        first = db.start_session(NFD, "mouse")
        attempt = db.start_attempt(first, "s", "dg", 1, "x", tmp_path / "x.parquet")
        db.finish_attempt(attempt, "finished", _metrics(0.05, 2.0))
        db.start_session(f" {NFC} ", "mouse")
        assert db.trainees() == [NFC]
        assert len(db.sessions(NFC)) == 2 and len(db.sessions(NFD)) == 2
        assert [a.id for a in db.attempts(NFC)] == [attempt] == [a.id for a in db.attempts(NFD)]


def test_names_stored_by_an_older_trainer_are_folded_on_open(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "t.sqlite"
    with TraineeDB(path) as db:
        db.start_session(NFC, "mouse")
    raw = sqlite3.connect(path, isolation_level=None)
    # An older trainer stored names as typed: the same person in the other form, twice.
    raw.execute("INSERT INTO trainees(name, created_s) VALUES (?, 0)", (NFD,))
    (old_id,) = raw.execute("SELECT id FROM trainees WHERE name = ?", (NFD,)).fetchone()
    raw.execute("INSERT INTO sessions(trainee_id, started_s, device, kind) VALUES (?, 1, 'mouse', 'train')",
                (old_id,))
    raw.execute("INSERT INTO trainees(name, created_s) VALUES (?, 0)", ("Jos\u0065\u0301",))
    raw.close()
    with TraineeDB(path) as db:
        assert db.trainees() == ["Jos\u00e9", NFC]
        assert len(db.sessions(NFC)) == 2


def test_trial_paths_are_stored_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with TraineeDB("relative/t.sqlite") as db:
        assert db.path == tmp_path / "relative" / "t.sqlite"
        session = db.start_session("ada", "mouse")
        attempt = db.start_attempt(session, "s", "dg", 1, "x", "trials/x.parquet")
        assert db.attempts("ada")[0].trial_path == str(tmp_path / "trials" / "x.parquet")
        db.finish_attempt(attempt, "aborted", {}, trial_path="trials/y.parquet")
        assert db.attempts("ada")[0].trial_path == str(tmp_path / "trials" / "y.parquet")
    monkeypatch.chdir(tmp_path / "relative")  # another directory: the same history
    with TraineeDB(tmp_path / "relative" / "t.sqlite") as db:
        assert Path(db.attempts("ada")[0].trial_path).is_absolute()


# The schema of the first trainer (no PRAGMA user_version, no outcome columns), verbatim.
OLD_SCHEMA = """
CREATE TABLE IF NOT EXISTS trainees (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_s REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    trainee_id INTEGER NOT NULL REFERENCES trainees(id),
    started_s REAL NOT NULL,
    ended_s REAL,
    device TEXT NOT NULL,
    kind TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    started_s REAL NOT NULL,
    ended_s REAL,
    scenario TEXT NOT NULL,
    condition TEXT NOT NULL,
    seed INTEGER NOT NULL,
    trial_id TEXT NOT NULL,
    trial_path TEXT NOT NULL,
    status TEXT NOT NULL,
    end_reason TEXT,
    reached INTEGER,
    impact_velocity_m_s REAL, time_to_reach_s REAL, mse_velocity_m2_s2 REAL, mse_position_m2 REAL,
    peak_base_torque_n_m REAL, peak_base_attitude_rad REAL,
    metrics_json TEXT
);
CREATE INDEX IF NOT EXISTS attempts_by_session ON attempts(session_id);
"""


def _old_database(path: Path) -> None:
    import sqlite3

    raw = sqlite3.connect(path, isolation_level=None)
    raw.executescript(OLD_SCHEMA)
    raw.execute("INSERT INTO trainees(id, name, created_s) VALUES (1, 'ada', 0)")
    raw.execute("INSERT INTO sessions(id, trainee_id, started_s, device, kind) VALUES (1, 1, 1, 'mouse', 'train')")
    raw.execute(
        "INSERT INTO attempts(session_id, started_s, ended_s, scenario, condition, seed, trial_id, trial_path, "
        "status, end_reason, reached, impact_velocity_m_s, time_to_reach_s) "
        "VALUES (1, 2, 3, 'paper-2019', 'dg', 7, 'old', '/x/old.parquet', 'finished', 'capture_window_done', 1, "
        "0.04, 2.5)"
    )
    raw.close()


def _columns(path: Path) -> dict[str, str]:
    import sqlite3

    raw = sqlite3.connect(path)
    try:
        return {row[1]: row[2] for row in raw.execute("PRAGMA table_info(attempts)")}
    finally:
        raw.close()


def test_an_old_database_is_migrated_and_its_rows_kept(tmp_path: Path) -> None:
    from app.ui.trainee_db import SCHEMA_VERSION

    path = tmp_path / "old.sqlite"
    _old_database(path)
    assert "outcome" not in _columns(path)
    with TraineeDB(path) as db:
        assert db.schema_version == SCHEMA_VERSION
        (old,) = db.attempts("ada")
        assert old.outcome is None and old.outcome_reason is None and not old.captured
        assert old.reached is True and old.scores["impact_velocity_m_s"] == pytest.approx(0.04)
        assert old.end_reason == "capture_window_done"
        # New attempts in the migrated database carry their outcome.
        session = db.start_session("ada", "mouse")
        new = db.start_attempt(session, "paper-2019", "ng", 8, "new", tmp_path / "new.parquet")
        db.finish_attempt(new, "finished", _metrics(0.01, 2.0), outcome="captured",
                          outcome_reason="tool closed at 2.300 s")
    columns = _columns(path)
    assert columns["outcome"] == "TEXT" and columns["outcome_reason"] == "TEXT"
    with TraineeDB(path) as db:  # opening again changes nothing
        assert db.schema_version == SCHEMA_VERSION
        old, new_attempt = db.attempts("ada")
        assert old.outcome is None
        assert new_attempt.outcome == "captured" and new_attempt.captured
        assert new_attempt.outcome_reason == "tool closed at 2.300 s"


def test_a_half_migrated_database_opens(tmp_path: Path) -> None:
    """The column is there but the version was never written (a migration cut short)."""
    import sqlite3

    path = tmp_path / "half.sqlite"
    _old_database(path)
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("ALTER TABLE attempts ADD COLUMN outcome TEXT")
    raw.close()
    with TraineeDB(path) as db:
        assert db.attempts("ada")[0].outcome is None
    assert {"outcome", "outcome_reason"} <= set(_columns(path))


def test_outcomes_stored_and_captures_counted_by_outcome(tmp_path: Path) -> None:
    from app.ui.cards import outcome_tally

    with TraineeDB(tmp_path / "t.sqlite") as db:
        session = db.start_session("ada", "mouse")
        # reached in all three, captured in one: a capture is the outcome, not the reach
        for outcome in ("captured", "pushed_away", "contact_lost"):
            attempt = db.start_attempt(session, "s", "dg", 1, outcome, "x.parquet")
            db.finish_attempt(attempt, "finished", _metrics(0.02, 2.0), outcome=outcome)
        missed = db.start_attempt(session, "s", "dg", 1, "m", "x.parquet")
        db.finish_attempt(missed, "finished", _metrics(math.nan, math.nan, reached=False), outcome="missed")
        with pytest.raises(TrialError, match="outcome"):
            db.finish_attempt(missed, "finished", {}, outcome="reached")
        db.start_attempt(session, "s", "ng", 1, "left-running", "y.parquet")
        assert db.recover() == 1
        attempts = db.attempts("ada")
    assert [a.outcome for a in attempts] == ["captured", "pushed_away", "contact_lost", "missed", "aborted"]
    assert sum(a.captured for a in attempts) == 1
    assert sum(bool(a.reached) for a in attempts) == 3
    assert outcome_tally(attempts) == "Captured 1, Contact lost 1, Pushed away 1, Missed 1, Aborted 1"


def test_menu_counts_captures_by_outcome(tmp_path: Path) -> None:
    from app.ui.window import TraineeFlow

    with TraineeDB(tmp_path / "t.sqlite") as db:
        session = db.start_session("ada", "mouse")
        for outcome, reached in (("captured", True), ("pushed_away", True), ("timeout", False)):
            attempt = db.start_attempt(session, "s", "dg", 1, outcome, "x.parquet")
            db.finish_attempt(attempt, "finished", _metrics(0.03 if reached else math.nan, 2.0, reached),
                              outcome=outcome)
        lines = TraineeFlow._bests(db.attempts("ada", status="finished"))
    assert lines == ["  DG: captured 1 of 3, best impact 30.0 mm/s (reached 2)"]
