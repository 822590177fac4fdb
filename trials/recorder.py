"""Per-tick trial recording into one Parquet file that survives a crash.

The servo tick writes one row into preallocated arrays (:meth:`TrialRecorder.append_row`
copies a row buffer and an integer of flag bits; nothing is allocated). A flusher
thread, never the tick, rewrites the whole Parquet file atomically (each full chunk's
Arrow batch built once and kept, so a write builds only the chunk being filled; temporary file,
then ``os.replace``) on the :class:`FlushCadence` its owner chose. :data:`LIVE_FLUSH`, for
a run in real time: whenever one second of trial time has been recorded or half a
second of wall time has passed, but not more often than every quarter second of wall
time; a process killed at any moment then leaves a complete, readable file that lacks at
most the last second of trial time. :data:`HEADLESS_FLUSH`, for a run as fast as the
machine goes: at most one write a second of wall time, at least one every two. The
final write sets ``complete: true`` in the metadata.

A failed write (full disk, read-only or removed folder) stops the flusher and sets
:attr:`TrialRecorder.write_error`, a one-line reason the servo tick polls to end the
trial; the file keeps the rows of the last successful write. :meth:`TrialRecorder.close`
then tries one last write (marked incomplete) and raises
:class:`~capture_trainer.errors.TrialWriteError` with that reason.

The schema, the metadata encoding and its bounds, and the file writing are the contract
of :mod:`capture_trainer.trial_log`; this module only buffers rows and schedules writes.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import math
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from capture_trainer import trial_log
from capture_trainer.errors import TrialError, TrialWriteError
from haptics.timing import gil_sharer


log = logging.getLogger(__name__)

#: Rows per preallocated chunk (one second at 1 kHz).
CHUNK_ROWS = 1000


@dataclass(frozen=True)
class FlushCadence:
    """When the flusher rewrites the trial's file while the trial runs.

    Each write re-encodes the whole trial so far (Parquet has no append), on a thread
    beside the tick's: the cadence trades what a killed process loses against the
    machine time the writes take from the tick.

    Args:
        rows: write once this many new rows are recorded (1000: one second at 1 kHz).
        wall_s: write at least this often [s, wall clock].
        min_interval_s: never write more often than this [s, wall clock].
    """

    rows: int = CHUNK_ROWS
    wall_s: float = 0.5
    min_interval_s: float = 0.25

    def __post_init__(self) -> None:
        if not (isinstance(self.rows, int) and self.rows >= 1):
            raise ValueError(f"rows must be a positive number of rows, got {self.rows!r}")
        if not 0.0 < self.min_interval_s <= self.wall_s < math.inf:
            raise ValueError(f"the flush intervals must satisfy 0 < min_interval_s <= wall_s < inf [s], got "
                             f"min_interval_s={self.min_interval_s}, wall_s={self.wall_s}")


#: A run in real time (a person at the device, or watching): a killed process's file
#: lacks at most the last second of trial time.
LIVE_FLUSH = FlushCadence()
#: A run as fast as the machine goes (headless trials, studies, sweeps): at most one
#: write a second of wall time. Such a trial runs 10-30 times faster than real time, so
#: the live cadence would rewrite a 10 s trial's file two or three times in the 0.5 s it
#: runs, the last write often still encoding when the trial closes; measured on the
#: 2-core machine, that cost the spatial throughput trial 5 % of its wall time (paired;
#: nothing measurable planar, docs/benchmarks.md). What a killed headless trial loses, a
#: re-run reproduces bit for bit: a study or sweep re-runs a trial whose file is not
#: complete.
HEADLESS_FLUSH = FlushCadence(wall_s=2.0, min_interval_s=1.0)


class TrialRecorder:
    """Buffers rows in preallocated chunks and flushes them off the servo tick.

    Args:
        path: the trial's Parquet file (its directory is created).
        float_columns: names of the float64 columns, in row-buffer order.
        flag_columns: names of the boolean columns; column ``i`` is bit ``i`` of
            :attr:`flag_bits` (at most 64).
        metadata: JSON-serialisable trial metadata (see ``trial_log.METADATA_KEYS``); every
            text at most ``trial_log.MAX_TEXT_BYTES``, the whole at most
            ``trial_log.MAX_METADATA_BYTES`` as JSON. ``format_version`` is set here.
        expected_rows: rows to preallocate (the trial's time limit over its period); a
            longer trial grows one chunk at a time, allocated by the flusher ahead of use.
        flush_cadence: when to rewrite the file while the trial runs (:data:`LIVE_FLUSH` unless
            the run is headless: :data:`HEADLESS_FLUSH`).

    Raises:
        TrialLogError: repeated column names, more than 64 flags, or metadata out of
            bounds (the message names the field).
        TrialWriteError: the folder cannot be created or the first (empty) file cannot be
            written; raised before any row is recorded.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        float_columns: Sequence[str],
        flag_columns: Sequence[str],
        metadata: Mapping[str, Any],
        expected_rows: int,
        flush_cadence: FlushCadence = LIVE_FLUSH,
    ) -> None:
        self.schema = trial_log.LogSchema(tuple(float_columns), tuple(flag_columns))
        self.float_columns = self.schema.float_columns
        self.flag_columns = self.schema.flag_columns
        version = metadata.get("format_version", trial_log.FORMAT_VERSION)
        if version != trial_log.FORMAT_VERSION:
            raise TrialError(f"the recorder writes format_version {trial_log.FORMAT_VERSION}, not {version!r}")
        self.metadata: dict[str, Any] = {**metadata, "format_version": trial_log.FORMAT_VERSION}
        self.metadata["complete"] = False
        trial_log.encode_metadata(self.metadata)
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise TrialWriteError(
                trial_log.describe_write_failure(self.path, error), path=self.path
            ) from None
        n_chunks = max(1, -(-int(expected_rows) // CHUNK_ROWS)) + 1
        self._floats = [self._new_float_chunk() for _ in range(n_chunks)]
        self._flags = [self._new_flag_chunk() for _ in range(n_chunks)]
        self._batch_schema = self.schema.arrow_schema(b"{}").remove_metadata()
        self._sealed: list[pa.RecordBatch] = []  # the full chunks' batches (_table)
        #: The row the tick fills before calling :meth:`append_row`: floats in
        #: ``float_columns`` order, and the flags as one integer (bit ``i`` set = flag
        #: column ``i`` true), unpacked into boolean columns off the tick.
        self.row = np.zeros(len(self.float_columns))
        self.flag_bits = 0
        self.rows = 0
        self._flushed_rows = -1
        self.flush_cadence = flush_cadence
        self._wake_at_row = flush_cadence.rows  # append_row wakes the flusher here (once)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._write_lock = threading.Lock()
        #: None while every write succeeded; after the first failed write, the one-line
        #: reason (``writing runs/x.parquet failed: [Errno 28] No space left on device``).
        #: Set once by the flusher thread; the tick polls it (a plain attribute read).
        self.write_error: str | None = None
        #: The table of the final file once :meth:`close` or :meth:`abort` wrote it (None
        #: before, and when a write failed): what the file holds, for analysing it
        #: without reading it back (``analysis.study.prime_trial``).
        self.final_table: pa.Table | None = None
        self._flush_error: BaseException | None = None
        self._closed = False
        try:
            self._write(final=False)
        except Exception as error:  # noqa: BLE001 - reported as one line, before any row
            raise TrialWriteError(
                trial_log.describe_write_failure(self.path, error), path=self.path
            ) from None
        self._thread = threading.Thread(target=self._flusher, name="trial-flusher", daemon=True)
        self._thread.start()

    def column_index(self, name: str) -> int:
        """Index of a float column in :attr:`row`."""
        return self.float_columns.index(name)

    def flag_bit(self, name: str) -> int:
        """The bit of flag column ``name`` in :attr:`flag_bits`."""
        return self.schema.flag_bit(name)

    # Chunks are column-major (one contiguous second of each signal) so that a flush
    # hands Arrow zero-copy column buffers instead of copying the whole trial.
    # np.full writes every page now (np.zeros would leave them to be faulted in by
    # the tick), so the memory is committed before the first tick.
    def _new_float_chunk(self) -> NDArray[np.float64]:
        return np.full((len(self.float_columns), CHUNK_ROWS), 0.0)

    def _new_flag_chunk(self) -> NDArray[np.uint64]:
        return np.full(CHUNK_ROWS, 0, dtype=np.uint64)

    def append_row(self) -> None:
        """Copy :attr:`row` and :attr:`flag_bits` into the next row. Allocation-free on the tick.

        Chunks for the expected length are allocated up front; beyond it, the flusher
        allocates the next chunk at each write (twice per chunk at real-time pace), so
        the tick allocates only when a headless trial outruns its expected length.
        """
        chunk, offset = divmod(self.rows, CHUNK_ROWS)
        if chunk >= len(self._floats):  # the flusher fell behind: allocate here, rarely
            self._grow()
        self._floats[chunk][:, offset] = self.row
        self._flags[chunk][offset] = self.flag_bits
        self.rows += 1
        if self.rows >= self._wake_at_row:
            self._wake_at_row = _NEVER
            self._wake.set()

    def row_slot(self) -> tuple[NDArray[np.float64], NDArray[np.uint64], int]:
        """Where :meth:`append_row` would put the next row: its float chunk (columns x
        :data:`CHUNK_ROWS`, column-major rows), its flag chunk and the row's index in
        them (allocating the chunk, rarely, as :meth:`append_row` does). For a compiled
        writer (the fused tick) that copies the row and the flags there itself and then
        calls :meth:`commit_row`; the chunk changes every :data:`CHUNK_ROWS` rows."""
        chunk, offset = divmod(self.rows, CHUNK_ROWS)
        if chunk >= len(self._floats):  # the flusher fell behind: allocate here, rarely
            self._grow()
        return self._floats[chunk], self._flags[chunk], offset

    def commit_row(self) -> None:
        """Count the row a compiled writer put at :meth:`row_slot` (:meth:`append_row`
        without its copy)."""
        self.commit_rows(1)

    def commit_rows(self, count: int) -> None:
        """Count ``count`` rows a compiled writer put at :meth:`row_slot`'s and the slots
        after it, all in the current chunk (:meth:`commit_row` ``count`` times)."""
        self.rows += count
        if self.rows >= self._wake_at_row:
            self._wake_at_row = _NEVER
            self._wake.set()

    def recorded_row(self, index: int) -> NDArray[np.float64]:
        """A copy of float row ``index`` as recorded (off the tick: summaries, tests)."""
        if not 0 <= index < self.rows:
            raise IndexError(f"row {index} not recorded (rows: {self.rows})")
        chunk, offset = divmod(index, CHUNK_ROWS)
        return self._floats[chunk][:, offset].copy()

    def _grow(self) -> None:
        # the flags' chunk first: the tick tests len(self._floats), so a float chunk it
        # can see (the flusher grows them too) has its flag chunk already
        self._flags.append(self._new_flag_chunk())
        self._floats.append(self._new_float_chunk())

    # Arrow arrays are built from the chunks' buffers directly (zero-copy for floats):
    # pa.array() on numpy input would import pandas (~30 MB, 0.2 s) in every process.
    # A full chunk never changes again, so its record batch is built once, at the first
    # write that finds it full, and kept: a write builds only the chunk being filled, and
    # holds the GIL for that (a 30 s trial's file took 2,600 Arrow calls a write).
    def _batch(self, chunk: int, rows: int) -> pa.RecordBatch:
        """The first ``rows`` rows of chunk ``chunk`` as a record batch of the file's columns."""
        floats, flags = self._floats[chunk], self._flags[chunk]
        arrays = [pa.Array.from_buffers(pa.float64(), rows, [None, pa.py_buffer(floats[column, :rows])])
                  for column in range(floats.shape[0])]
        for bit in range(len(self.flag_columns)):
            values = (flags[:rows] >> np.uint64(bit)) & np.uint64(1)
            packed = np.packbits(values.astype(bool), bitorder="little")
            arrays.append(pa.Array.from_buffers(pa.bool_(), rows, [None, pa.py_buffer(packed)]))
        return pa.RecordBatch.from_arrays(arrays, schema=self._batch_schema)

    def _table(self, rows: int) -> pa.Table:
        full, tail = divmod(rows, CHUNK_ROWS)
        sealed = self._sealed
        while len(sealed) < full:
            sealed.append(self._batch(len(sealed), CHUNK_ROWS))
        batches = sealed[:full] + ([self._batch(full, tail)] if tail else [])
        return self.schema.table_of_batches(batches, trial_log.encode_metadata({**self.metadata, "rows": rows}))

    def _write(self, final: bool) -> None:
        with self._write_lock:
            rows = self.rows
            if rows == self._flushed_rows and not final:
                return
            table = self._table(rows)
            trial_log.write_file(table, self.path)
            self._flushed_rows = rows
            if final and self.write_error is None:
                self.final_table = table
            self._wake_at_row = rows + self.flush_cadence.rows
            # A write's working memory grows with the file (3.3 MB for 30 s of trial) and
            # both Arrow's allocator and glibc's keep what was freed for reuse: give it
            # back, so that the process does not grow with the trial.
            pa.default_memory_pool().release_unused()
            _trim_heap()

    def _flusher(self) -> None:
        cadence = self.flush_cadence
        while not self._stop.is_set():  # a write every cadence.wall_s at the latest
            self._wake.wait(cadence.wall_s - cadence.min_interval_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                # Real-time while a device's servo loop is (haptics.timing.gil_sharer):
                # preempted while it holds the GIL, this thread would hold the loop off.
                with gil_sharer():
                    if self.rows // CHUNK_ROWS + 1 >= len(self._floats):
                        self._grow()
                    self._write(final=False)
            except BaseException as error:  # noqa: BLE001 - surfaced by write_error and close()
                self._flush_error = error
                self.write_error = trial_log.describe_write_failure(self.path, error)
                log.error("%s; the trial must stop", self.write_error)
                return
            # Each write re-encodes the whole trial: a headless trial (a second of trial
            # time every few ms) would otherwise rewrite its file a thousand times a run.
            self._stop.wait(cadence.min_interval_s)

    def update_metadata(self, **entries: Any) -> None:
        """Add or replace metadata entries; written with the next flush (not on the tick).

        Raises:
            TrialLogError: an entry out of the contract's bounds (the message names the
                field); the metadata is left unchanged.
        """
        trial_log.encode_metadata({**self.metadata, **entries})
        self.metadata.update(entries)

    def close(self, **final_metadata: Any) -> Path:
        """Stop the flusher and write the final file with ``complete: true``.

        After a failed write (:attr:`write_error` set) the final write is still tried,
        marked ``complete: false`` with ``write_error`` and ``end_reason`` (``write_failed``
        unless given), and this raises.

        Args:
            **final_metadata: entries added to the metadata (end_reason, servo_timing...).

        Returns:
            The path of the trial file.

        Raises:
            TrialWriteError: a write failed during the trial or the final one did: one line
                with the reason and the rows the file keeps (raised again by a later call).
            TrialLogError: ``final_metadata`` out of the contract's bounds; nothing is
                closed (:meth:`abort` still keeps the data).
        """
        if not self._closed:
            trial_log.encode_metadata({**self.metadata, **final_metadata})
            self._finish(final_metadata)
        if self.write_error is not None:
            raise self._write_failure() from self._flush_error
        return self.path

    def abort(self, reason: str) -> Path:
        """Close after a failure: the data so far is kept, marked incomplete.

        Never raises for a failed write, since it runs while another error is handled:
        the failure is logged and stays in :attr:`write_error`.

        Args:
            reason: the ``end_reason`` (clipped to ``trial_log.MAX_TEXT_BYTES``).
        """
        if not self._closed:
            self._finish({"complete": False, "end_reason": trial_log.clip_text(reason)})
        return self.path

    def _finish(self, final_metadata: Mapping[str, Any]) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self._closed = True
        self.metadata.update(final_metadata)
        self.metadata["complete"] = bool(final_metadata.get("complete", True))
        if self.write_error is not None:
            self.metadata.update(complete=False, write_error=self.write_error)
            self.metadata.setdefault("end_reason", "write_failed")
        try:
            self._write(final=True)
        except Exception as error:  # noqa: BLE001 - reported by write_error and close()
            if self.write_error is None:
                self._flush_error = error
                self.write_error = trial_log.describe_write_failure(self.path, error)
        if self.write_error is not None:
            log.error("%s", self._write_failure())

    def _write_failure(self) -> TrialWriteError:
        kept = max(self._flushed_rows, 0)
        if kept == self.rows:
            where = f"{self.path} keeps all {kept} rows, marked incomplete"
        else:
            where = f"{self.path} keeps the first {kept} of {self.rows} rows, marked incomplete"
        return TrialWriteError(f"{self.write_error}; {where}", path=self.path, rows_kept=kept, rows=self.rows)

    def __enter__(self) -> TrialRecorder:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc is None:
            self.close()
        else:
            self.abort(f"error: {exc!r}")


_NEVER = 1 << 62


def _trim_heap() -> None:
    """Return the C heap's free memory to the system (glibc ``malloc_trim``; else nothing)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


