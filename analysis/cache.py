"""The per-trial analysis cache: each trial file's study-table row and thinned trace,
kept beside the file so that a study's trials are read and measured once.

Reading a trial file back and computing its metrics costs about 20 ms (the Parquet read
half of it); a 1,080-trial sweep spent 25 s on it in its results step, and every later
``analyze`` paid it again. A study's workers now write each trial's entry as the trial
ends (from the table they have just written, without reading it back:
:func:`analysis.study.prime_trial`), in parallel with the other trials; ``analyze`` and
a sweep's results read the entries and compute only what is missing or stale (and write
it, so the next run has it).

An entry is ``<folder>/.analysis/<file name>.npz`` (a hidden folder: the study's file
search skips it) holding the row, the trial's metadata and two keys as JSON and the
trace as an array; it is used only when both keys match:

* the SHA-256 of the trial file's bytes (about 1 ms a file): a re-run trial, a file
  copied without its times, a rewrite within the file system's clock tick are all told
  apart by content, not by size and time;
* :func:`analysis_version`: the SHA-256 of the source of every module that makes a row
  or a trace (the metrics, the outcomes, the table's columns, the trial contract, this
  format) and the numpy and pandas versions: a change to any of them makes every entry
  stale.

The cache is an optimisation only: an entry that cannot be read is recomputed, one that
cannot be written is skipped (logged at debug level; a read-only study folder analyses
as before), and deleting ``.analysis`` loses nothing. Entries are read with
``allow_pickle=False``: nothing in them is executed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from capture_trainer import trial_log

log = logging.getLogger(__name__)

#: The hidden folder beside the trial files that holds their entries.
CACHE_DIR = ".analysis"
#: Bumped when an entry's layout changes (it is also in :func:`analysis_version`).
ENTRY_FORMAT = 2


@dataclass(frozen=True)
class CachedTrial:
    """A trial's analysis as cached.

    Attributes:
        row: its study-table row without ``file`` (which depends on where the study is
            opened from).
        metadata: the trial file's metadata object (``trial_log.METADATA_KEYS``).
        time_s, relative_m, reach_m, radius_m: its thinned trace
            (``analysis.study.TrialTrace``'s fields, same units and frame).
    """

    row: dict[str, Any]
    metadata: dict[str, Any]
    time_s: NDArray[np.float64]
    relative_m: NDArray[np.float64]
    reach_m: NDArray[np.float64] | None
    radius_m: float


#: The modules beside this one whose source decides a row and a trace.
_SOURCES = ("metrics.py", "outcomes.py", "study.py", "trial.py")


def _source_files() -> list[Path]:
    """The files :func:`analysis_version` hashes: :data:`_SOURCES`, this module (the
    entry's format) and the trial log's contract (its columns)."""
    here = Path(__file__).resolve()
    return [here.with_name(name) for name in _SOURCES] + [here, Path(str(trial_log.__file__))]


@functools.cache
def analysis_version() -> str:
    """SHA-256 (hex) of what decides a row and a trace: the source of the modules that
    compute them (:func:`_source_files`) and the numpy and pandas versions."""
    import pandas as pd

    digest = hashlib.sha256(f"entry {ENTRY_FORMAT} numpy {np.__version__} pandas {pd.__version__}".encode())
    for path in _source_files():
        digest.update(path.read_bytes())
    return digest.hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of a file's bytes.

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def entry_path(path: str | os.PathLike[str]) -> Path:
    """Where the entry of the trial file ``path`` lives."""
    path = Path(path)
    return path.parent / CACHE_DIR / f"{path.name}.npz"


def load(path: str | os.PathLike[str], digest: str) -> CachedTrial | None:
    """The entry of the trial file ``path`` whose bytes hash to ``digest``, or None when
    there is none, it is stale (another file or another analysis) or it cannot be read."""
    where = entry_path(path)
    try:
        with np.load(where, allow_pickle=False) as entry:  # two members: each costs a zip read
            head = json.loads(str(entry["head"]))
            if head["version"] != analysis_version() or head["digest"] != digest:
                return None
            trace = entry["trace"]
        reach = head["reach_m"]
        return CachedTrial(row=dict(head["row"]), metadata=dict(head["metadata"]), time_s=trace[:, 0].copy(),
                           relative_m=trace[:, 1:].copy(), reach_m=None if reach is None else np.array(reach, float),
                           radius_m=float(head["radius_m"]))
    except FileNotFoundError:
        return None
    except (OSError, EOFError, ValueError, KeyError, TypeError, IndexError, zipfile.BadZipFile) as error:
        log.debug("%s: analysis cache entry not used (%s)", where, error)  # damaged: computed again
        return None


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as Python values for JSON; anything else is not a table
    or metadata value."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not a study-table value")


def store(path: str | os.PathLike[str], digest: str, row: Mapping[str, Any], metadata: Mapping[str, Any],
          time_s: NDArray[np.float64], relative_m: NDArray[np.float64], reach_m: NDArray[np.float64] | None,
          radius_m: float) -> bool:
    """Write the entry of the trial file ``path`` (its bytes hashing to ``digest``)
    atomically (a temporary file, then a rename): ``head``, JSON of the keys, the row,
    the metadata and the trace's reach and radius, and ``trace``, (m, 4) of time [s] and
    relative position [m]. Returns False, having written nothing, when it cannot (a
    read-only folder, a full disk, a value JSON cannot hold)."""
    where = entry_path(path)
    tmp = where.with_name(f".{where.name}.{os.getpid()}.tmp")
    try:
        head = json.dumps({"version": analysis_version(), "digest": digest,
                           "row": {key: value for key, value in row.items() if key != "file"},
                           "metadata": dict(metadata), "radius_m": float(radius_m),
                           "reach_m": None if reach_m is None else [float(v) for v in reach_m]}, default=_plain)
        trace = np.column_stack([np.asarray(time_s, dtype=float), np.asarray(relative_m, dtype=float).reshape(-1, 3)])
        where.parent.mkdir(exist_ok=True)
        with open(tmp, "wb") as stream:
            np.savez(stream, head=np.array(head), trace=trace)
        os.replace(tmp, where)
        return True
    except (OSError, TypeError, ValueError) as error:
        log.debug("%s: analysis cache entry not written (%s)", where, error)
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return False


__all__ = ["CACHE_DIR", "CachedTrial", "analysis_version", "entry_path", "file_digest", "load", "store"]
