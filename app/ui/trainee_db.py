"""Trainee history: trainees, their sessions and attempts, in a local SQLite database.

The database only *points to* trial files (the Parquet logs hold the data) and keeps the
few scores the trainer shows. It is written so that closing the window, or killing the
process, at any moment loses nothing recorded before:

- WAL journal mode, autocommit: every statement is its own committed transaction;
- an attempt row is inserted when the attempt *starts* (status ``running``, with its
  trial file's path) and updated when it ends (``finished``, ``aborted`` or ``error``,
  with its scores), so an interrupted attempt is still listed with its (crash-safe,
  partial) trial file; :meth:`TraineeDB.recover` marks such rows ``interrupted`` the next
  time the trainer opens the database.

Each attempt also keeps its **outcome** (column ``outcome``): the one word the trial
ended with (:data:`analysis.outcomes.OUTCOMES`: ``captured``, ``contact_lost``,
``pushed_away``, ``missed``, ``timeout``, ``aborted``), with its one-line reason
(``outcome_reason``). A capture is ``outcome == "captured"``; ``reached`` (the surface
distance reached 0) is kept for what it means: the scores of the first reach are defined.
Attempts recorded before outcomes were (and attempts that never ran) have outcome None.

Schema versions (``PRAGMA user_version``): 0 is the first schema (no version was
written), 1 adds ``attempts.outcome`` and ``attempts.outcome_reason``, 2 adds
``attempts.guidance_authority`` and the tables ``trainee_schedules`` (each trainee's
guidance schedule, :mod:`guidance.schedule`) and ``authority_history`` (one row per
scheduled attempt: the schedule's index ``k``, assist level ``a(k)``, authority ``g(k)``
and, once measured, the attempt's error ``e(k)``). Opening a database
brings it to :data:`SCHEMA_VERSION` in one immediate transaction (:meth:`TraineeDB._migrate`:
each step adds what is missing, so a half-migrated or concurrently opened file is fine);
old rows keep NULL in the new columns. A database of a newer trainer (a higher version)
is opened as it is.

Scores: lower is better for all four (impact velocity [m/s], time to reach [s],
post-capture tracking error as the velocity MSE [m²/s²] and position MSE [m²], base
disturbance as the peak base torque [N m] and peak attitude drift [rad]); they are the
definitions of :mod:`analysis.metrics`.

Names are stored in Unicode normal form C (:func:`app.ui.data.normalise_name`), and
looked up the same way, so one person typing their name in two normal forms is one
trainee; rows written by an older trainer in another form are folded into the NFC one
when the database opens. Trial paths are stored absolute.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.ui.data import absolute_path, normalise_name
from capture_trainer.errors import TrialError

#: Scores kept as columns (names of ``analysis.metrics.TrialMetrics`` fields).
SCORE_COLUMNS: tuple[str, ...] = (
    "impact_velocity_m_s",
    "time_to_reach_s",
    "mse_velocity_m2_s2",
    "mse_position_m2",
    "peak_base_torque_n_m",
    "peak_base_attitude_rad",
)
STATUSES = ("running", "finished", "aborted", "error", "interrupted")
#: The schema this code writes (``PRAGMA user_version``; see the module docstring).
SCHEMA_VERSION = 2
#: Columns each version adds to ``attempts``: ``{version: ((name, SQL type), ...)}``.
ADDED_COLUMNS: dict[int, tuple[tuple[str, str], ...]] = {
    1: (("outcome", "TEXT"), ("outcome_reason", "TEXT")),
    2: (("guidance_authority", "REAL"),),
}

_SCHEMA = f"""
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
    {", ".join(f"{name} REAL" for name in SCORE_COLUMNS)},
    metrics_json TEXT,
    {", ".join(f"{name} {kind}" for columns in ADDED_COLUMNS.values() for name, kind in columns)}
);
CREATE INDEX IF NOT EXISTS attempts_by_session ON attempts(session_id);
CREATE TABLE IF NOT EXISTS trainee_schedules (
    trainee_id INTEGER PRIMARY KEY REFERENCES trainees(id),
    name TEXT NOT NULL,
    params_json TEXT NOT NULL,
    set_s REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS authority_history (
    id INTEGER PRIMARY KEY,
    trainee_id INTEGER NOT NULL REFERENCES trainees(id),
    attempt_id INTEGER REFERENCES attempts(id),
    schedule TEXT NOT NULL,
    step INTEGER NOT NULL,
    assist REAL NOT NULL,
    authority REAL NOT NULL,
    error REAL,
    recorded_s REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS authority_by_trainee ON authority_history(trainee_id);
"""


@dataclass(frozen=True)
class Attempt:
    """One attempt as stored (scores are NaN when unknown or not reached)."""

    id: int
    session_id: int
    trainee: str
    started_s: float
    ended_s: float | None
    scenario: str
    condition: str
    seed: int
    trial_id: str
    trial_path: str
    status: str
    end_reason: str | None
    reached: bool | None
    scores: dict[str, float]
    outcome: str | None = None
    outcome_reason: str | None = None

    @property
    def captured(self) -> bool:
        """The tool closed on the debris (``outcome == "captured"``)."""
        return self.outcome == "captured"


@dataclass(frozen=True)
class AuthorityStep:
    """One scheduled attempt in a trainee's guidance history.

    Attributes:
        attempt_id: the attempt (None when it was never recorded as one).
        schedule: the schedule's name (``guidance.schedule.SCHEDULES``).
        step: ``k``, the attempt's index in that schedule.
        assist: ``a(k)`` before the attempt.
        authority: ``g(k)``, the factor on the guidance force in the attempt.
        error: ``e(k)``, the attempt's normalised error (None until measured).
        recorded_s: when the row was written (Unix time) [s].
    """

    attempt_id: int | None
    schedule: str
    step: int
    assist: float
    authority: float
    error: float | None
    recorded_s: float


@dataclass(frozen=True)
class Session:
    """One sitting of a trainee (a run of the trainer window)."""

    id: int
    trainee: str
    started_s: float
    ended_s: float | None
    device: str
    kind: str


def _float(value: Any) -> float:
    if value is None:
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number


class TraineeDB:
    """The trainee database (one file; created with its schema when missing).

    Args:
        path: the SQLite file (its directory is created).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = absolute_path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise TrialError(f"{self.path}: cannot create the database's folder ({error})") from None
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=10.0)
        except sqlite3.Error as error:
            raise TrialError(f"{self.path}: cannot open the trainee database ({error})") from None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(_SCHEMA)
            self._migrate()
            self._fold_names()
        except sqlite3.DatabaseError as error:
            self._db.close()
            raise TrialError(f"{self.path}: not a usable trainee database ({error})") from None

    def _migrate(self) -> None:
        """Bring an older database to :data:`SCHEMA_VERSION` (module docstring)."""
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        if version >= SCHEMA_VERSION:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            (version,) = self._db.execute("PRAGMA user_version").fetchone()
            have = {row[1] for row in self._db.execute("PRAGMA table_info(attempts)")}
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for name, kind in ADDED_COLUMNS.get(step, ()):
                    if name not in have:
                        self._db.execute(f"ALTER TABLE attempts ADD COLUMN {name} {kind}")
            if version < SCHEMA_VERSION:
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    @property
    def schema_version(self) -> int:
        """The database's ``PRAGMA user_version``."""
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        return int(version)

    def _fold_names(self) -> None:
        """Give every trainee its NFC name; merge two spellings of one name into one."""
        for trainee_id, name in self._db.execute("SELECT id, name FROM trainees").fetchall():
            nfc = normalise_name(name)
            if nfc == name or not nfc:
                continue
            found = self._db.execute("SELECT id FROM trainees WHERE name = ?", (nfc,)).fetchone()
            if found is None:
                self._db.execute("UPDATE trainees SET name = ? WHERE id = ?", (nfc, trainee_id))
            else:
                self._db.execute("UPDATE sessions SET trainee_id = ? WHERE trainee_id = ?",
                                 (found[0], trainee_id))
                self._db.execute("DELETE FROM trainees WHERE id = ?", (trainee_id,))

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> TraineeDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------

    def trainee_id(self, name: str) -> int:
        """The id of trainee ``name`` (created on first use; compared in NFC)."""
        name = normalise_name(name)
        if not name:
            raise TrialError("a trainee needs a name")
        self._db.execute(
            "INSERT OR IGNORE INTO trainees(name, created_s) VALUES (?, ?)", (name, time.time())
        )
        (row,) = self._db.execute("SELECT id FROM trainees WHERE name = ?", (name,)).fetchall()
        return int(row[0])

    def start_session(self, trainee: str, device: str, kind: str = "train") -> int:
        """Open a session for ``trainee`` with ``device``; kind ``train`` or ``protocol``."""
        cursor = self._db.execute(
            "INSERT INTO sessions(trainee_id, started_s, device, kind) VALUES (?, ?, ?, ?)",
            (self.trainee_id(trainee), time.time(), device, kind),
        )
        return int(cursor.lastrowid or 0)

    def end_session(self, session_id: int) -> None:
        self._db.execute("UPDATE sessions SET ended_s = ? WHERE id = ?", (time.time(), session_id))

    def start_attempt(
        self, session_id: int, scenario: str, condition: str, seed: int, trial_id: str,
        trial_path: str | os.PathLike[str],
    ) -> int:
        """Record an attempt as it starts (status ``running``); returns its id."""
        cursor = self._db.execute(
            "INSERT INTO attempts(session_id, started_s, scenario, condition, seed, trial_id, "
            "trial_path, status) VALUES (?, ?, ?, ?, ?, ?, ?, 'running')",
            (session_id, time.time(), scenario, condition, int(seed), trial_id,
             str(absolute_path(trial_path))),
        )
        return int(cursor.lastrowid or 0)

    def finish_attempt(
        self, attempt_id: int, status: str, metrics: dict[str, Any] | None = None,
        end_reason: str | None = None, trial_path: str | None = None,
        outcome: str | None = None, outcome_reason: str | None = None,
    ) -> None:
        """Record how an attempt ended and its scores (``metrics``: TrialMetrics.as_dict()).

        Args:
            outcome: the trial's outcome word (one of ``analysis.outcomes.OUTCOMES``), or
                None when it recorded none.
            outcome_reason: its one-line reason.
        """
        from analysis.outcomes import OUTCOMES

        if status not in STATUSES or status == "running":
            raise TrialError(f"attempt status must be one of {STATUSES[1:]}, got {status!r}")
        if outcome is not None and outcome not in OUTCOMES:
            raise TrialError(f"attempt outcome must be one of {OUTCOMES} or None, got {outcome!r}")
        metrics = metrics or {}
        scores = [_float(metrics.get(name)) for name in SCORE_COLUMNS]
        scores_sql = [None if math.isnan(v) else v for v in scores]
        reached = metrics.get("reached")
        assignments = ", ".join(f"{name} = ?" for name in SCORE_COLUMNS)
        self._db.execute(
            f"UPDATE attempts SET ended_s = ?, status = ?, end_reason = ?, reached = ?, "
            f"{assignments}, metrics_json = ?, outcome = ?, outcome_reason = ?, "
            f"trial_path = COALESCE(?, trial_path) WHERE id = ?",
            (
                time.time(), status, end_reason, None if reached is None else int(bool(reached)),
                *scores_sql, json.dumps(metrics, default=str), outcome, outcome_reason,
                None if trial_path is None else str(absolute_path(trial_path)), attempt_id,
            ),
        )

    def recover(self) -> int:
        """Mark attempts left ``running`` by a closed or killed trainer ``interrupted``
        (outcome ``aborted``: their trial files are incomplete).

        Call when the trainer starts (one trainer per database at a time). Returns how
        many rows changed.
        """
        cursor = self._db.execute(
            "UPDATE attempts SET status = 'interrupted', end_reason = 'window closed or process "
            "killed', outcome = COALESCE(outcome, 'aborted'), outcome_reason = COALESCE(outcome_reason, "
            "'the trainer was closed or killed during the attempt') WHERE status = 'running'"
        )
        return cursor.rowcount

    def set_schedule(self, trainee: str, name: str, **params: Any) -> None:
        """Give ``trainee`` the guidance schedule ``name`` with ``params`` (checked by
        building it; ``guidance.schedule.make_schedule``). A new schedule starts from its
        own ``a(0)``: the history of another one does not carry over (setting the same
        schedule again changes nothing).

        Raises:
            TrialError: an unknown schedule or bad parameters.
        """
        from guidance.schedule import ScheduleConfigError, make_schedule

        try:
            make_schedule(name, **params)
        except ScheduleConfigError as error:
            raise TrialError(str(error)) from None
        if self.schedule(trainee) == (name, json.loads(json.dumps(params))):
            return  # unchanged: the history goes on
        self._db.execute(
            "INSERT INTO trainee_schedules(trainee_id, name, params_json, set_s) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(trainee_id) DO UPDATE SET name = excluded.name, params_json = excluded.params_json, "
            "set_s = excluded.set_s",
            (self.trainee_id(trainee), name, json.dumps(params), time.time()),
        )

    def record_authority(self, trainee: str, attempt_id: int | None, authority: float | None = None) -> AuthorityStep:
        """Record the authority of ``trainee``'s next scheduled attempt (the schedule's
        next step, :meth:`guidance_authority`) before it runs; returns the step.

        Args:
            attempt_id: the attempt it belongs to (``start_attempt``'s id).
            authority: the authority actually applied, when not the schedule's (e.g. an
                experimenter's override); None: the schedule's.
        """
        step = self._next_step(trainee)
        applied = step.authority if authority is None else float(authority)
        self._db.execute(
            "INSERT INTO authority_history(trainee_id, attempt_id, schedule, step, assist, authority, recorded_s) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (self.trainee_id(trainee), attempt_id, step.schedule, step.step, step.assist, applied, time.time()),
        )
        if attempt_id is not None:
            self._db.execute("UPDATE attempts SET guidance_authority = ? WHERE id = ?", (applied, attempt_id))
        return AuthorityStep(attempt_id, step.schedule, step.step, step.assist, applied, None, time.time())

    def record_error(self, attempt_id: int, error: float) -> None:
        """The measured error ``e(k)`` of a scheduled attempt (``guidance.schedule.normalised_error``)."""
        self._db.execute("UPDATE authority_history SET error = ? WHERE attempt_id = ?", (float(error), attempt_id))

    # -- reading -----------------------------------------------------------------

    def schedule(self, trainee: str) -> tuple[str, dict[str, Any]]:
        """``trainee``'s schedule name and parameters (``fixed`` at authority 1 when none was set)."""
        row = self._db.execute(
            "SELECT s.name, s.params_json FROM trainee_schedules s JOIN trainees t ON t.id = s.trainee_id "
            "WHERE t.name = ?", (normalise_name(trainee),)).fetchone()
        if row is None:
            return "fixed", {}
        params = json.loads(row[1])
        return str(row[0]), params if isinstance(params, dict) else {}

    def authority_history(self, trainee: str) -> list[AuthorityStep]:
        """``trainee``'s scheduled attempts, oldest first (empty for a database or trainee
        without any)."""
        rows = self._db.execute(
            "SELECT h.attempt_id, h.schedule, h.step, h.assist, h.authority, h.error, h.recorded_s "
            "FROM authority_history h JOIN trainees t ON t.id = h.trainee_id WHERE t.name = ? ORDER BY h.id",
            (normalise_name(trainee),))
        return [AuthorityStep(*row) for row in rows]

    def guidance_authority(self, trainee: str) -> float:
        """The guidance authority of ``trainee``'s next guided attempt: the schedule's next
        step after the measured errors recorded under it (:func:`guidance.schedule.replay`);
        1.0 for a trainee without a schedule."""
        return self._next_step(trainee).authority

    def _next_step(self, trainee: str) -> AuthorityStep:
        from guidance.schedule import make_schedule, replay

        name, params = self.schedule(trainee)
        schedule = make_schedule(name, **params)
        since = self._db.execute(
            "SELECT s.set_s FROM trainee_schedules s JOIN trainees t ON t.id = s.trainee_id WHERE t.name = ?",
            (normalise_name(trainee),)).fetchone()
        history = [step for step in self.authority_history(trainee)
                   if step.schedule == name and step.error is not None
                   and (since is None or step.recorded_s >= since[0])]
        last = replay(schedule, [float(step.error) for step in history if step.error is not None])[-1]
        return AuthorityStep(None, name, last.index, last.assist, last.authority, None, time.time())

    def trainees(self) -> list[str]:
        return [row[0] for row in self._db.execute("SELECT name FROM trainees ORDER BY name")]

    def sessions(self, trainee: str) -> list[Session]:
        """The trainee's sessions, oldest first."""
        rows = self._db.execute(
            "SELECT s.id, t.name, s.started_s, s.ended_s, s.device, s.kind FROM sessions s "
            "JOIN trainees t ON t.id = s.trainee_id WHERE t.name = ? ORDER BY s.started_s, s.id",
            (normalise_name(trainee),),
        )
        return [Session(*row) for row in rows]

    def attempts(
        self, trainee: str, condition: str | None = None, status: str | None = None,
        before_id: int | None = None,
    ) -> list[Attempt]:
        """The trainee's attempts, oldest first, optionally filtered.

        Args:
            trainee: the trainee's name.
            condition: only this condition (``dg``, ``ng``, ...).
            status: only this status (``finished`` for scored attempts).
            before_id: only attempts recorded before this attempt id.
        """
        query = (
            "SELECT a.id, a.session_id, t.name, a.started_s, a.ended_s, a.scenario, a.condition, "
            "a.seed, a.trial_id, a.trial_path, a.status, a.end_reason, a.reached, "
            f"{', '.join('a.' + name for name in SCORE_COLUMNS)}, a.outcome, a.outcome_reason FROM attempts a "
            "JOIN sessions s ON s.id = a.session_id JOIN trainees t ON t.id = s.trainee_id "
            "WHERE t.name = ?"
        )
        params: list[Any] = [normalise_name(trainee)]
        for clause, value in (("a.condition = ?", condition), ("a.status = ?", status),
                              ("a.id < ?", before_id)):
            if value is not None:
                query += f" AND {clause}"
                params.append(value)
        rows = self._db.execute(query + " ORDER BY a.id", params).fetchall()
        n = len(SCORE_COLUMNS)
        return [
            Attempt(  # type: ignore[misc]  # mypy cannot count the 12 columns row[:12] fills
                *row[:12],
                reached=None if row[12] is None else bool(row[12]),
                scores={name: _float(v) for name, v in zip(SCORE_COLUMNS, row[13 : 13 + n])},
                outcome=row[13 + n],
                outcome_reason=row[14 + n],
            )
            for row in rows
        ]
