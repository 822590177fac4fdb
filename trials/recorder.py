"""Per-tick trial recording into one Parquet file that survives a crash.

The servo tick writes one row into preallocated arrays (:meth:`TrialRecorder.append_row`
copies a row buffer; nothing is allocated). A flusher thread, never the tick, rewrites
the whole Parquet file atomically (temporary file, then ``os.replace``) whenever one
second of trial time has been recorded or half a second of wall time has passed, so a
process killed at any moment leaves a complete, readable file that lacks at most the
last second. The final write sets ``complete: true`` in the metadata.

The file layout is the contract of :mod:`capture_trainer.trial_log`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from capture_trainer import trial_log
from capture_trainer.errors import TrialError

log = logging.getLogger(__name__)

#: Rows per preallocated chunk (one second at 1 kHz).
CHUNK_ROWS = 1000
#: Rows per Parquet row group: the writer buffers one group at a time, so the memory a
#: flush needs stays bounded however long the trial.
ROW_GROUP_ROWS = 2 * CHUNK_ROWS


class TrialRecorder:
    """Buffers rows in preallocated chunks and flushes them off the servo tick.

    Args:
        path: the trial's Parquet file (its directory is created).
        float_columns: names of the float64 columns, in row-buffer order.
        flag_columns: names of the boolean columns, in flag-buffer order.
        metadata: JSON-serialisable trial metadata (see ``trial_log.METADATA_KEYS``).
        expected_rows: rows to preallocate (the trial's time limit over its period); a
            longer trial grows one chunk at a time, allocated by the flusher ahead of use.
        flush_rows: flush after this many new rows (1000 = one second at 1 kHz).
        flush_wall_s: flush at least this often in wall-clock seconds.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        float_columns: Sequence[str],
        flag_columns: Sequence[str],
        metadata: Mapping[str, Any],
        expected_rows: int,
        flush_rows: int = CHUNK_ROWS,
        flush_wall_s: float = 0.5,
    ) -> None:
        if len(set(float_columns) | set(flag_columns)) != len(float_columns) + len(flag_columns):
            raise TrialError("recorder columns must be unique")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.float_columns = tuple(float_columns)
        self.flag_columns = tuple(flag_columns)
        self.metadata: dict[str, Any] = dict(metadata)
        self.metadata.setdefault("format_version", trial_log.FORMAT_VERSION)
        self.metadata["complete"] = False
        n_chunks = max(1, -(-int(expected_rows) // CHUNK_ROWS)) + 1
        self._floats = [self._new_float_chunk() for _ in range(n_chunks)]
        self._flags = [self._new_flag_chunk() for _ in range(n_chunks)]
        #: Row buffers the tick fills before calling :meth:`append_row`.
        self.row = np.zeros(len(self.float_columns))
        self.flags = np.zeros(len(self.flag_columns), dtype=bool)
        self.rows = 0
        self._flushed_rows = -1
        self._flush_rows = int(flush_rows)
        self._flush_wall_s = float(flush_wall_s)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._write_lock = threading.Lock()
        self._flush_error: BaseException | None = None
        self._closed = False
        # pyarrow imports pandas the first time it converts a numpy array (tens of MB and
        # a long hold of the GIL): do it now rather than in the first flush mid-trial.
        pa.chunked_array([self._floats[0][0, :1]])
        self._write(final=False)
        self._thread = threading.Thread(target=self._flusher, name="trial-flusher", daemon=True)
        self._thread.start()

    def column_index(self, name: str) -> int:
        """Index of a float column in :attr:`row`."""
        return self.float_columns.index(name)

    def flag_index(self, name: str) -> int:
        """Index of a flag column in :attr:`flags`."""
        return self.flag_columns.index(name)

    # Chunks are column-major (one contiguous second of each signal) so that a flush
    # hands Arrow zero-copy column buffers instead of copying the whole trial.
    # np.full writes every page now (np.zeros would leave them to be faulted in by
    # the tick), so the memory is committed before the first tick.
    def _new_float_chunk(self) -> NDArray[np.float64]:
        return np.full((len(self.float_columns), CHUNK_ROWS), 0.0)

    def _new_flag_chunk(self) -> NDArray[np.bool_]:
        return np.full((len(self.flag_columns), CHUNK_ROWS), False)

    def append_row(self) -> None:
        """Copy :attr:`row` and :attr:`flags` into the next row. Allocation-free on the tick.

        The chunk after the current one is always allocated in advance (by the flusher
        when the trial outgrows its expected length), so the tick never allocates.
        """
        chunk, offset = divmod(self.rows, CHUNK_ROWS)
        if chunk >= len(self._floats):  # the flusher fell behind: allocate here, rarely
            self._grow()
        self._floats[chunk][:, offset] = self.row
        self._flags[chunk][:, offset] = self.flags
        self.rows += 1
        if offset == CHUNK_ROWS - 1 or self.rows - max(self._flushed_rows, 0) >= self._flush_rows:
            self._wake.set()

    def recorded_row(self, index: int) -> NDArray[np.float64]:
        """A copy of float row ``index`` as recorded (off the tick: summaries, tests)."""
        if not 0 <= index < self.rows:
            raise IndexError(f"row {index} not recorded (rows: {self.rows})")
        chunk, offset = divmod(index, CHUNK_ROWS)
        return self._floats[chunk][:, offset].copy()

    def _grow(self) -> None:
        self._floats.append(self._new_float_chunk())
        self._flags.append(self._new_flag_chunk())

    def _columns(self, chunks: list[NDArray[Any]], rows: int, column: int, kind: pa.DataType) -> pa.ChunkedArray:
        pieces = []
        for start in range(0, rows, CHUNK_ROWS):
            pieces.append(chunks[start // CHUNK_ROWS][column, : min(CHUNK_ROWS, rows - start)])
        return pa.chunked_array(pieces, type=kind)

    def _table(self, rows: int) -> pa.Table:
        arrays: dict[str, Any] = {
            name: self._columns(self._floats, rows, i, pa.float64())
            for i, name in enumerate(self.float_columns)
        }
        arrays.update(
            {
                name: self._columns(self._flags, rows, i, pa.bool_())
                for i, name in enumerate(self.flag_columns)
            }
        )
        table = pa.table(arrays)
        meta = dict(self.metadata)
        meta["rows"] = rows
        return table.replace_schema_metadata(
            {trial_log.METADATA_KEY: json.dumps(meta, default=_json_default).encode()}
        )

    def _write(self, final: bool) -> None:
        with self._write_lock:
            rows = self.rows
            if rows == self._flushed_rows and not final:
                return
            table = self._table(rows)
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            pq.write_table(table, tmp, use_dictionary=False, compression="zstd", row_group_size=ROW_GROUP_ROWS)
            os.replace(tmp, self.path)
            self._flushed_rows = rows
            # Arrow's allocator keeps the encoder's buffers for reuse; give them back so a
            # long trial does not grow the process by its file size.
            pa.default_memory_pool().release_unused()

    def _flusher(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._flush_wall_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                if self.rows // CHUNK_ROWS + 1 >= len(self._floats):
                    self._grow()
                self._write(final=False)
            except BaseException as error:  # noqa: BLE001 - surfaced by close()
                self._flush_error = error
                log.error("trial file %s could not be written: %s", self.path, error)
                return

    def update_metadata(self, **entries: Any) -> None:
        """Add or replace metadata entries; written with the next flush."""
        self.metadata.update(entries)

    def close(self, **final_metadata: Any) -> Path:
        """Stop the flusher and write the final file with ``complete: true``.

        Args:
            **final_metadata: entries added to the metadata (end_reason, servo_timing...).

        Returns:
            The path of the trial file.
        """
        if self._closed:
            return self.path
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self.metadata.update(final_metadata)
        self.metadata["complete"] = bool(final_metadata.get("complete", True))
        self._write(final=True)
        self._closed = True
        if self._flush_error is not None:
            raise TrialError(f"trial file {self.path} could not be written") from self._flush_error
        return self.path

    def abort(self, reason: str) -> Path:
        """Close after a failure: the data so far is kept, marked incomplete."""
        return self.close(complete=False, end_reason=reason)

    def __enter__(self) -> TrialRecorder:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc is None:
            self.close()
        else:
            self.abort(f"error: {exc!r}")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def read_trial(path: str | os.PathLike[str]) -> tuple[pa.Table, dict[str, Any]]:
    """Read a trial file back: its table and its metadata."""
    table = pq.read_table(path)
    raw = (table.schema.metadata or {}).get(trial_log.METADATA_KEY)
    if raw is None:
        raise TrialError(f"{path} is not a capture-trainer trial file (no metadata)")
    return table, json.loads(raw)
