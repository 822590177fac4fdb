"""A failed write stops the trial safely; the metadata a trial rewrites stays small."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from capture_trainer import trial_log
from capture_trainer.errors import TrialError, TrialLogError, TrialWriteError
from trials.recorder import FlushCadence, TrialRecorder

ENOSPC = "[Errno 28] No space left on device"


def fast_recorder(path: Path, **metadata: Any) -> TrialRecorder:
    """A recorder that flushes every 100 rows (or 20 ms), as often as every 5 ms."""
    return TrialRecorder(
        path, ("t_s", "a_m"), ("fault",), metadata, expected_rows=1000,
        flush_cadence=FlushCadence(rows=100, wall_s=0.02, min_interval_s=0.005),
    )


def append(recorder: TrialRecorder, start: int, count: int) -> None:
    for k in range(start, start + count):
        recorder.row[0] = k * 1e-3
        recorder.row[1] = float(k)
        recorder.flag_bits = 1 if k % 2 else 0
        recorder.append_row()


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


def failing_writes(monkeypatch: pytest.MonkeyPatch, succeed: int, fail: int | None = None) -> list[int]:
    """Make the contract's writer succeed ``succeed`` times, then fail with ENOSPC
    (``fail`` times, or for good); returns the rows each successful call wrote."""
    real = trial_log.write_file
    written: list[int] = []
    failed = [0]

    def write_file(table: Any, path: Any) -> None:
        if len(written) >= succeed and (fail is None or failed[0] < fail):
            failed[0] += 1
            raise OSError(28, "Error writing bytes to file. Detail: [errno 28] No space left on device")
        real(table, path)
        written.append(table.num_rows)

    monkeypatch.setattr(trial_log, "write_file", write_file)
    return written


def test_a_failing_disk_sets_write_error_keeps_the_written_rows_and_close_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.parquet"
    written = failing_writes(monkeypatch, succeed=2)  # the empty file, then one batch
    recorder = fast_recorder(path, trial_id="t")
    assert recorder.write_error is None
    append(recorder, 0, 300)
    wait_for(lambda: len(written) == 2, "the first batch")
    kept = written[1]  # the flusher may have caught the appends part way
    assert 0 < kept <= 300
    append(recorder, 300, 100)
    wait_for(lambda: recorder.write_error is not None, "the write error")
    assert recorder.write_error == f"writing {path} failed: {ENOSPC}"
    append(recorder, 400, 100)  # the tick may append until it sees the error

    table, metadata = trial_log.read_trial_log(path)  # the contract's reader
    assert table.num_rows == metadata["rows"] == kept and metadata["complete"] is False
    np.testing.assert_array_equal(table["a_m"].to_numpy(), np.arange(float(kept)))
    np.testing.assert_array_equal(table["fault"].to_numpy(), np.arange(kept) % 2 == 1)

    with pytest.raises(TrialWriteError) as caught:
        recorder.close(end_reason="write_failed", servo_timing={"ticks": 500})
    error = caught.value
    assert isinstance(error, TrialError) and not isinstance(error, OSError)
    assert str(error) == f"writing {path} failed: {ENOSPC}; {path} keeps the first {kept} of 500 rows, marked incomplete"
    assert (error.path, error.rows_kept, error.rows) == (path, kept, 500)
    assert trial_log.read_trial_log(path).table.num_rows == kept
    with pytest.raises(TrialWriteError):  # and again: the file is not what was asked
        recorder.close()
    assert recorder.abort("later") == path
    assert not list(tmp_path.glob(".*.tmp"))
    assert recorder.final_table is None  # the file is not the table: nothing is analysed from it


def test_abort_after_a_write_error_returns_and_does_not_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.parquet"
    failing_writes(monkeypatch, succeed=1)  # only the empty file
    recorder = fast_recorder(path)
    append(recorder, 0, 150)
    wait_for(lambda: recorder.write_error is not None, "the write error")
    assert recorder.abort("error: RuntimeError('x')") == path
    table, metadata = trial_log.read_trial_log(path)
    assert table.num_rows == 0 and metadata["complete"] is False


def test_when_the_disk_recovers_close_writes_every_row_marked_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.parquet"
    failing_writes(monkeypatch, succeed=1, fail=1)
    recorder = fast_recorder(path)
    append(recorder, 0, 200)
    wait_for(lambda: recorder.write_error is not None, "the write error")
    with pytest.raises(TrialWriteError, match=f"; {path} keeps all 200 rows, marked incomplete$"):
        recorder.close(servo_timing={"ticks": 200})
    table, metadata = trial_log.read_trial_log(path)
    assert table.num_rows == 200
    assert metadata["complete"] is False and metadata["end_reason"] == "write_failed"
    assert metadata["write_error"] == f"writing {path} failed: {ENOSPC}"
    assert metadata["servo_timing"] == {"ticks": 200}


def test_a_real_full_disk_on_the_final_write(tmp_path: Path) -> None:
    """No monkeypatch: the temporary file points at /dev/full, which refuses every byte."""
    path = tmp_path / "t.parquet"
    recorder = TrialRecorder(path, ("t_s",), (), {}, expected_rows=100,
                             flush_cadence=FlushCadence(wall_s=60.0, min_interval_s=1.0))
    for k in range(50):
        recorder.row[0] = k
        recorder.append_row()
    (tmp_path / ".t.parquet.tmp").symlink_to("/dev/full")
    with pytest.raises(TrialWriteError) as caught:
        recorder.close(end_reason="time_limit")
    assert str(caught.value) == f"writing {path} failed: {ENOSPC}; {path} keeps the first 0 of 50 rows, marked incomplete"
    assert recorder.write_error == f"writing {path} failed: {ENOSPC}"
    assert trial_log.read_metadata(path)["complete"] is False
    assert recorder.final_table is None


def test_an_unwritable_folder_is_refused_before_the_first_row(tmp_path: Path) -> None:
    blocker = tmp_path / "runs"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(TrialWriteError, match=r"^writing .*runs/x/t\.parquet failed: \[Errno \d+\] "):
        TrialRecorder(blocker / "x" / "t.parquet", ("t_s",), (), {}, expected_rows=10)


class TestMetadataBounds:
    def test_a_long_description_is_refused_before_anything_is_written(self, tmp_path: Path) -> None:
        path = tmp_path / "out" / "t.parquet"
        with pytest.raises(TrialLogError, match=r"'scenario_config\.description' is 52428800 bytes long; at most 4096"):
            TrialRecorder(path, ("t_s",), (), {"scenario_config": {"description": "x" * (50 << 20)}}, 10)
        assert not path.parent.exists()

    def test_update_metadata_refuses_a_long_participant_id_and_changes_nothing(self, tmp_path: Path) -> None:
        recorder = TrialRecorder(tmp_path / "t.parquet", ("t_s",), (), {"participant": {"id": "p1"}}, 10)
        with pytest.raises(TrialLogError, match=r"'participant\.id' is 5000 bytes long"):
            recorder.update_metadata(participant={"id": "p" * 5000}, seed=4)
        assert recorder.metadata["participant"] == {"id": "p1"} and "seed" not in recorder.metadata
        recorder.update_metadata(notes="fine")
        recorder.close()
        assert trial_log.read_metadata(recorder.path)["notes"] == "fine"

    def test_close_refuses_oversized_final_metadata_and_abort_still_keeps_the_rows(self, tmp_path: Path) -> None:
        recorder = TrialRecorder(tmp_path / "t.parquet", ("t_s",), (), {}, 10)
        recorder.append_row()
        with pytest.raises(TrialLogError, match="'end_reason'"):
            recorder.close(end_reason="x" * 5000)
        recorder.abort("error: " + "x" * 10000)  # an error's repr may be long: clipped
        _, metadata = trial_log.read_trial_log(recorder.path)
        assert metadata["rows"] == 1 and len(metadata["end_reason"].encode()) <= trial_log.MAX_TEXT_BYTES

    def test_a_version_other_than_the_one_written_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(TrialError, match=f"writes format_version {trial_log.FORMAT_VERSION}, not 7"):
            TrialRecorder(tmp_path / "t.parquet", ("t_s",), (), {"format_version": 7}, 10)
