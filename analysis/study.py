"""A study: every trial log under a directory, as one tidy table.

One row per trial: its identity (trial_id, condition, participant, scenario, repetition,
seed, ...), its outcome (see :mod:`analysis.outcomes`) and every metric of
:mod:`analysis.metrics`. Trials that never reached the
target stay in the table (``reached`` False, reach metrics NaN); incomplete (crashed)
trials stay too, marked ``complete`` False.

The statistics live in :mod:`analysis.stats`; this module only loads and exports.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from analysis import cache
from analysis.metrics import METRIC_NAMES, TrialMetrics, compute_metrics, first_reach, relative_position_m
from analysis.outcomes import trial_outcome
from analysis.trial import STUDY_TABLE_KEY, Trial, is_study_table, make_trial, read_metadata, read_trial
from capture_trainer import trial_log
from capture_trainer.errors import AnalysisError, TrialLogError

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

#: The optional file describing a study's design (protocol, participants, conditions, ...).
DESIGN_FILE = "study.json"
#: Points kept per trajectory for the study's overlay figures.
TRACE_POINTS = 400

#: Identity columns of the study table, before the metric columns.
ID_COLUMNS: tuple[str, ...] = (
    "trial_id",
    "condition",
    "participant_id",
    "participant_kind",
    "scenario",
    "repetition",
    "seed",
    "model",
    "end_reason",
    "outcome",
    "outcome_provisional",
    "file",
)

ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class TrialTrace:
    """A thinned trajectory of one trial for overlay plots.

    Attributes:
        trial_id: the trial.
        condition: its condition.
        time_s: (m,) times from the trial's first sample [s].
        relative_m: (m, 3) end effector minus debris centre [m], task frame.
        reach_m: (3,) relative position at first reach [m], or None if never reached.
        radius_m: debris radius [m].
    """

    trial_id: str
    condition: str
    time_s: NDArray[np.float64]
    relative_m: NDArray[np.float64]
    reach_m: NDArray[np.float64] | None
    radius_m: float


@dataclass(frozen=True)
class Study:
    """A loaded study.

    Attributes:
        root: the study directory (or the single trial file it was opened from).
        table: the tidy per-trial table (see :data:`ID_COLUMNS` and ``METRIC_NAMES``).
        design: the parsed ``study.json``, or None when the directory has none.
        traces: thinned trajectories by trial_id.
        paths: trial files by trial_id.
        metadata: each trial file's metadata object by trial_id
            (``capture_trainer.trial_log.METADATA_KEYS``), read once with the study.
    """

    root: Path
    table: pd.DataFrame
    design: Mapping[str, Any] | None
    traces: Mapping[str, TrialTrace] = field(default_factory=dict)
    paths: Mapping[str, Path] = field(default_factory=dict)
    metadata: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def _candidate_files(root: str | os.PathLike[str]) -> list[Path]:
    """``*.parquet`` under ``root`` (recursive, hidden files skipped), sorted, or
    ``root`` itself when it is a file; exported study tables are told apart when read
    (:func:`_analysed`).

    Raises:
        AnalysisError: ``root`` does not exist.
    """
    root = Path(root)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise AnalysisError(f"{root}: no such study directory or trial file")
    return [path for path in sorted(root.rglob("*.parquet"))
            if not any(part.startswith(".") for part in path.relative_to(root).parts)]


def read_design(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The study's ``study.json`` as a dict, or None when absent.

    Raises:
        AnalysisError: the file exists but is not a JSON object.
    """
    path = Path(root) / DESIGN_FILE
    if not path.is_file():
        return None
    try:
        design = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AnalysisError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(design, dict):
        raise AnalysisError(f"{path}: the study design must be a JSON object")
    return design


def trial_row(trial: Trial, metrics: TrialMetrics, file: str) -> dict[str, Any]:
    """One row of the study table."""
    meta = trial.metadata
    participant = meta.get("participant") or {}
    if not isinstance(participant, Mapping):
        participant = {"id": str(participant)}
    outcome, provisional = trial_outcome(meta, metrics.reached, trial.complete)
    row: dict[str, Any] = {
        "trial_id": trial.trial_id,
        "condition": str(meta.get("condition", "unknown")),
        "participant_id": str(participant.get("id", "unknown")),
        "participant_kind": str(participant.get("kind", "unknown")),
        "scenario": str(meta.get("scenario", "unknown")),
        "repetition": _int_or_none(meta.get("repetition")),
        "seed": _int_or_none(meta.get("seed")),
        "model": str(meta.get("model", "unknown")),
        "end_reason": str(meta.get("end_reason", "")),
        "outcome": outcome,
        "outcome_provisional": provisional,
        "file": file,
    }
    row.update(metrics.as_dict())
    return row


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def trial_trace(trial: Trial, points: int = TRACE_POINTS) -> TrialTrace:
    """A thinned trajectory (every k-th sample, the last always kept)."""
    time_s = trial.time_s()
    relative = relative_position_m(trial)
    reach = first_reach(time_s, relative, trial.target_radius_m) if time_s.size else None
    step = max(1, math.ceil(time_s.size / points))
    keep: NDArray[np.intp] | list[int] = (
        np.unique(np.r_[np.arange(0, time_s.size, step), time_s.size - 1]) if time_s.size else []
    )
    reach_m = None
    if reach is not None:
        reach_m = np.array([np.interp(reach.time_s, time_s, relative[:, j]) for j in range(3)])
    return TrialTrace(
        trial_id=trial.trial_id,
        condition=str(trial.metadata.get("condition", "unknown")),
        time_s=time_s[keep] - (time_s[0] if time_s.size else 0.0),
        relative_m=relative[keep],
        reach_m=reach_m,
        radius_m=trial.target_radius_m,
    )


def open_study(root: str | os.PathLike[str], progress: ProgressCallback | None = None,
               use_cache: bool = True) -> Study:
    """Load every trial under ``root`` with its metrics, thinned trajectories and design.

    Args:
        root: a study directory (or one trial file).
        progress: called as ``progress(done, total)`` after each file.
        use_cache: take each trial's row and trace from the analysis cache
            (:mod:`analysis.cache`) when its entry is current, and write the entries
            computed here; False: read and measure every trial, write nothing.

    Raises:
        AnalysisError: no trial files, a file that is not a trial log, or two files with
            one trial_id.
    """
    root = Path(root)
    candidates = _candidate_files(root)
    base = root if root.is_dir() else root.parent
    rows: list[dict[str, Any]] = []
    traces: dict[str, TrialTrace] = {}
    paths: dict[str, Path] = {}
    metadata: dict[str, Mapping[str, Any]] = {}
    for done, path in enumerate(candidates, start=1):
        analysed = _analysed(path, use_cache)
        if analysed is not None:
            row, trace, trial_meta = analysed
            if trace.trial_id in paths:
                raise AnalysisError(
                    f"trial_id {trace.trial_id!r} appears twice: {paths[trace.trial_id]} and {path}"
                )
            row["file"] = path.relative_to(base).as_posix()
            rows.append(row)
            traces[trace.trial_id] = trace
            paths[trace.trial_id] = path
            metadata[trace.trial_id] = trial_meta
            if not row["complete"]:
                log.warning("%s: incomplete trial (complete=false), analysed as far as it goes", path)
        if progress is not None:
            progress(done, len(candidates))
    if not rows:
        raise AnalysisError(f"{root}: no trial files (*.parquet) found")
    table = pd.DataFrame(rows, columns=list(ID_COLUMNS) + list(METRIC_NAMES))
    table["repetition"] = table["repetition"].astype("Int64")
    table["seed"] = table["seed"].astype("Int64")
    design = read_design(root) if root.is_dir() else None
    return Study(root=root, table=table, design=design, traces=traces, paths=paths, metadata=metadata)


def trial_metadata(study: Study, trial_id: str) -> Mapping[str, Any]:
    """A trial's metadata object: as read with the study (:attr:`Study.metadata`), else
    from its file.

    Raises:
        AnalysisError: the file's metadata cannot be read.
    """
    found = study.metadata.get(trial_id)
    return found if found is not None else read_metadata(study.paths[trial_id])


def analyse_trial(trial: Trial) -> tuple[dict[str, Any], TrialTrace]:
    """A trial's study-table row (``file`` empty) and thinned trace."""
    return trial_row(trial, compute_metrics(trial), ""), trial_trace(trial)


def _analysed(path: Path, use_cache: bool) -> tuple[dict[str, Any], TrialTrace, Mapping[str, Any]] | None:
    """The row, trace and metadata of the trial file ``path``, from its cache entry when
    current; None for an exported study table.

    Raises:
        AnalysisError: not a trial log.
    """
    digest = None
    if use_cache:
        try:
            digest = cache.file_digest(path)
        except OSError as error:
            raise AnalysisError(f"{path}: cannot read ({error})") from error
        entry = cache.load(path, digest)
        if entry is not None:
            row = entry.row
            trace = TrialTrace(trial_id=str(row["trial_id"]), condition=str(row["condition"]),
                               time_s=entry.time_s, relative_m=entry.relative_m, reach_m=entry.reach_m,
                               radius_m=entry.radius_m)
            return row, trace, entry.metadata
    if is_study_table(path):
        return None
    trial = read_trial(path)
    row, trace = analyse_trial(trial)
    if digest is not None:
        _store(path, digest, trial, row, trace)
    return row, trace, trial.metadata


def _store(path: Path, digest: str, trial: Trial, row: dict[str, Any], trace: TrialTrace) -> bool:
    """The cache entry of ``trial``'s file (its bytes hashing to ``digest``): its row,
    metadata and trace (:func:`analysis.cache.store`)."""
    return cache.store(path, digest, row, trial.metadata, trace.time_s, trace.relative_m, trace.reach_m,
                       trace.radius_m)


def prime_trial(path: str | os.PathLike[str], table: pa.Table) -> bool:
    """Write the analysis cache's entry of a trial file just written from ``table`` (the
    table written, whose metadata it carries), without reading the file back: what a
    study's worker does as each trial ends. Returns False when nothing was written (the
    file cannot be read, or the entry cannot be written).

    Raises:
        AnalysisError: the table is not a trial log.
    """
    path = Path(path)
    try:
        digest = cache.file_digest(path)
        metadata = trial_log.decode_metadata((table.schema.metadata or {}).get(trial_log.METADATA_KEY), str(path))
    except OSError:
        return False
    except TrialLogError as error:
        raise AnalysisError(str(error)) from error
    trial = make_trial(table.to_pandas(), metadata, path)
    return _store(path, digest, trial, *analyse_trial(trial))


def load_study(root: str | os.PathLike[str], progress: ProgressCallback | None = None) -> pd.DataFrame:
    """The tidy per-trial table of a study (see :func:`open_study`)."""
    return open_study(root, progress).table


def export_table(table: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a table as CSV or Parquet, chosen by the suffix (``.csv`` / ``.parquet``).

    Parquet exports carry the key :data:`~analysis.trial.STUDY_TABLE_KEY`, so that an
    export saved inside a study directory is not read back as a trial log.

    Raises:
        AnalysisError: unknown suffix or the file cannot be written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise AnalysisError(f"{path}: export to .csv or .parquet, not {suffix or 'no suffix'!r}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".csv":
            table.to_csv(path, index=False)
        else:
            arrow = pa.Table.from_pandas(table, preserve_index=False)
            metadata = dict(arrow.schema.metadata or {})
            metadata[STUDY_TABLE_KEY] = json.dumps({"rows": len(table)}).encode()
            pq.write_table(arrow.replace_schema_metadata(metadata), path)
    except OSError as error:
        raise AnalysisError(f"{path}: cannot write ({error})") from error
    return path
