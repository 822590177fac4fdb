"""One trial log as analysis sees it (the contract of :mod:`capture_trainer.trial_log`).

A trial log is one Parquet file, one row per servo tick, with the trial's metadata as a
JSON object under the key ``capture_trainer`` of the file's key-value metadata. The file
is read by the contract's one reader (``trial_log.read_trial_log``); this module turns
its table (or an in-memory frame plus its metadata) into a validated :class:`Trial`;
every failure is an :class:`~capture_trainer.errors.AnalysisError` that names the file
and what is wrong.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from capture_trainer import trial_log
from capture_trainer.errors import AnalysisError, TrialLogError

#: Metadata key of the study tables this package exports as Parquet, so that a study
#: directory holding such an export is not mistaken for a broken trial log.
STUDY_TABLE_KEY = b"capture_trainer_study"

#: Used when a trial's metadata omits them (the contract's documented defaults).
DEFAULT_POST_CAPTURE_WINDOW_S = 1.0
DEFAULT_CAPTURE_TOLERANCE_M = 0.0


@dataclass(frozen=True)
class Trial:
    """One trial: its per-tick frame and its metadata.

    Attributes:
        frame: one row per servo tick; columns as in :mod:`capture_trainer.trial_log`
            (task frame unless the name starts with ``dev_``), sorted by ``t_s``.
        metadata: the trial's metadata object (``trial_log.METADATA_KEYS``).
        path: the file it was read from, or None for an in-memory trial.
    """

    frame: pd.DataFrame
    metadata: Mapping[str, Any]
    path: Path | None = None

    @property
    def trial_id(self) -> str:
        """The metadata's ``trial_id``, else the file stem, else ``"trial"``."""
        if self.metadata.get("trial_id"):
            return str(self.metadata["trial_id"])
        return self.path.stem if self.path is not None else "trial"

    @property
    def label(self) -> str:
        """Where the trial came from, for messages."""
        return str(self.path) if self.path is not None else f"trial {self.trial_id!r}"

    @property
    def complete(self) -> bool:
        """False when the writer never finished the file (a crashed or running trial)."""
        return bool(self.metadata.get("complete", False))

    @property
    def target_radius_m(self) -> float:
        """Debris radius subtracted from the centre distance [m]."""
        return float(self.metadata["target_radius_m"])

    @property
    def post_capture_window_s(self) -> float:
        """Length of the post-capture window after first reach [s] (default 1 s)."""
        return float(self.metadata.get("post_capture_window_s", DEFAULT_POST_CAPTURE_WINDOW_S))

    @property
    def capture_tolerance_m(self) -> float:
        """Surface distance still counted as contact [m] (default 0)."""
        return float(self.metadata.get("capture_tolerance_m", DEFAULT_CAPTURE_TOLERANCE_M))

    @property
    def n_joints(self) -> int:
        """Number of joints of the manipulator model."""
        return int(self.metadata["n_joints"])

    def time_s(self) -> NDArray[np.float64]:
        """(n,) tick times [s]."""
        return self.frame[trial_log.TIME].to_numpy(dtype=float)

    def vectors(self, columns: tuple[str, ...]) -> NDArray[np.float64]:
        """(n, k) array of the given float columns (column by column: selecting a
        sub-frame costs pandas about a millisecond, a study's analysis thousands of them)."""
        frame = self.frame
        out = np.empty((len(frame), len(columns)))
        for i, column in enumerate(columns):
            out[:, i] = frame[column].to_numpy(dtype=float)
        return out

    def flag(self, name: str) -> NDArray[np.bool_]:
        """(n,) boolean flag column (missing values, and a flag an older format lacks, read as False)."""
        if name not in self.frame.columns:
            return np.zeros(len(self.frame), dtype=bool)
        return self.frame[name].fillna(False).to_numpy(dtype=bool)

    def joint_angles_rad(self) -> NDArray[np.float64]:
        """(n, n_joints) joint angles [rad]."""
        return self.vectors(tuple(trial_log.joint_position_column(i) for i in range(self.n_joints)))


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The trial metadata of a Parquet file, without reading its rows.

    Raises:
        AnalysisError: the file is not Parquet, carries no trial metadata, or has a format
            version this package cannot read.
    """
    try:
        return trial_log.read_metadata(path)
    except TrialLogError as error:
        raise AnalysisError(str(error)) from error


def is_study_table(path: str | os.PathLike[str]) -> bool:
    """True for a study table this package exported (see :data:`STUDY_TABLE_KEY`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        metadata = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException):
        return False
    return STUDY_TABLE_KEY in metadata and trial_log.METADATA_KEY not in metadata


def read_trial(path: str | os.PathLike[str]) -> Trial:
    """Read and validate one trial log.

    Args:
        path: a trial's Parquet file.

    Returns:
        The validated trial (rows sorted by time).

    Raises:
        AnalysisError: unreadable file, missing metadata or columns, unsupported format
            version, or times that are not increasing.
    """
    path = Path(path)
    try:
        table, metadata = trial_log.read_trial_log(path)
    except TrialLogError as error:
        raise AnalysisError(str(error)) from error
    return make_trial(table.to_pandas(), metadata, path)


def make_trial(
    frame: pd.DataFrame, metadata: Mapping[str, Any], path: Path | None = None
) -> Trial:
    """Validate a frame and its metadata against the trial log contract.

    Raises:
        AnalysisError: as :func:`read_trial`.
    """
    where = str(path) if path is not None else "trial frame"
    try:  # an in-memory frame's metadata may omit the version: it is this package's
        trial_log.check_format_version(metadata.get("format_version", trial_log.FORMAT_VERSION), where)
    except TrialLogError as error:
        raise AnalysisError(str(error)) from error
    for key in ("target_radius_m", "n_joints"):
        if key not in metadata:
            raise AnalysisError(f"{where}: trial metadata lacks {key!r}")
    try:
        n_joints = int(metadata["n_joints"])
        radius = float(metadata["target_radius_m"])
    except (TypeError, ValueError) as error:
        raise AnalysisError(f"{where}: malformed n_joints or target_radius_m ({error})") from error
    if n_joints < 1 or not np.isfinite(radius) or radius < 0.0:
        raise AnalysisError(
            f"{where}: n_joints must be >= 1 and target_radius_m >= 0, "
            f"got {n_joints} and {radius}"
        )
    version = int(metadata.get("format_version", trial_log.FORMAT_VERSION))
    missing = [name for name in trial_log.required_columns(n_joints, version) if name not in frame.columns]
    if missing:
        shown = ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")
        raise AnalysisError(f"{where}: not a trial log, missing columns: {shown}")
    time_s = frame[trial_log.TIME].to_numpy(dtype=float)
    if time_s.size and (not np.all(np.isfinite(time_s)) or np.any(np.diff(time_s) <= 0.0)):
        raise AnalysisError(f"{where}: {trial_log.TIME} must be finite and strictly increasing")
    return Trial(frame=frame.reset_index(drop=True), metadata=dict(metadata), path=path)
