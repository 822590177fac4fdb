"""The project's one exception hierarchy.

Exceptions are for bugs and broken input; expected outcomes (an IK step that hits a
limit, a trial that never reaches the target) are results, not exceptions.
"""

from __future__ import annotations

from pathlib import Path


class CaptureTrainerError(Exception):
    """Base class of every error this project raises on purpose."""


class UnknownNameError(CaptureTrainerError, ValueError):
    """A name that its registry does not hold (a model, a participant kind, ...).

    The message says what was asked, the closest registered name and all of them.
    Registries whose package has its own error (``DeviceError``, ``ScenarioError``)
    raise that instead.
    """


class ScenarioError(CaptureTrainerError):
    """A scenario or protocol file is malformed or out of range.

    The message names the file, the field and what was expected.
    """


class DeviceError(CaptureTrainerError):
    """A haptic device backend is missing, failed to open, or faulted."""


class PhysicsError(CaptureTrainerError):
    """The simulated plant or the dynamics model was asked for something impossible."""


class ArmError(CaptureTrainerError):
    """An arm backend (simulated or real) faulted or went stale."""


class TrialError(CaptureTrainerError):
    """A trial or study could not be run or recorded."""


class TrialWriteError(TrialError):
    """Writing a trial file failed (disk full, read-only or removed folder).

    The trial must stop; the rows written before the failure stay readable.

    Attributes:
        path: the trial file.
        rows_kept: rows readable in the file (those of the last successful write).
        rows: rows recorded in memory when the recorder was closed.
    """

    def __init__(self, message: str, path: Path | None = None, rows_kept: int = 0, rows: int = 0) -> None:
        super().__init__(message)
        self.path = path
        self.rows_kept = rows_kept
        self.rows = rows


class TrialLogError(CaptureTrainerError):
    """A file does not follow the trial log contract (``capture_trainer.trial_log``).

    Not a readable Parquet file, not a trial log, a format version this package cannot
    read, or metadata that is too large or not JSON. The message names the file or field.
    """


class AnalysisError(CaptureTrainerError):
    """A trial log could not be analysed (missing columns, wrong format)."""
