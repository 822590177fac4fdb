from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from capture_trainer import trial_log
from capture_trainer.trial_log import read_trial_log
from haptics import timing
from tests.haptics.conftest import may_run_realtime
from trials.recorder import FlushCadence, TrialRecorder


def test_rows_and_metadata_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    recorder = TrialRecorder(path, ("t_s", "a_m"), ("fault",), {"seed": 3}, expected_rows=1500)
    for k in range(2500):  # more than expected: the recorder grows
        recorder.row[0] = k * 1e-3
        recorder.row[1] = np.sin(k)
        recorder.flag_bits = recorder.flag_bit("fault") if k % 7 == 0 else 0
        recorder.append_row()
    recorder.close(end_reason="time_limit")
    table, meta = read_trial_log(path)
    assert table.num_rows == 2500
    np.testing.assert_array_equal(table["t_s"].to_numpy(), np.arange(2500) * 1e-3)
    np.testing.assert_array_equal(table["a_m"].to_numpy(), np.sin(np.arange(2500)))
    assert table["fault"].to_numpy().sum() == len(range(0, 2500, 7))
    assert meta["complete"] is True and meta["seed"] == 3 and meta["end_reason"] == "time_limit"
    assert meta["rows"] == 2500


def test_each_write_holds_every_row_so_far_when_chunks_fill_between_writes(tmp_path: Path) -> None:
    """Writes at row counts inside, at the end of and past chunks (a full chunk is built
    into the file once and kept): every file written holds exactly the rows appended."""
    path = tmp_path / "w.parquet"
    recorder = TrialRecorder(path, ("t_s", "a_m"), ("fault",), {}, expected_rows=4000,
                             flush_cadence=FlushCadence(rows=10**9, wall_s=1e3, min_interval_s=1e3))
    written = 0
    for stop in (1500, 2000, 2000, 2999, 3001, 3500):
        for k in range(written, stop):
            recorder.row[:] = (k * 1e-3, np.cos(k))
            recorder.flag_bits = 1 if k % 3 == 0 else 0
            recorder.append_row()
        written = stop
        recorder._write(final=False)
        table, meta = read_trial_log(path)
        assert table.num_rows == meta["rows"] == stop
        np.testing.assert_array_equal(table["t_s"].to_numpy(), np.arange(stop) * 1e-3)
        np.testing.assert_array_equal(table["a_m"].to_numpy(), np.cos(np.arange(stop)))
        np.testing.assert_array_equal(table["fault"].to_numpy(), np.arange(stop) % 3 == 0)
    recorder.close()


@pytest.mark.parametrize(("fields", "expected"), [
    ({"rows": 0}, "rows must be a positive"),
    ({"rows": 1.5}, "rows must be a positive"),
    ({"min_interval_s": 0.0}, "0 < min_interval_s <= wall_s"),
    ({"wall_s": 0.1}, "min_interval_s=0.25, wall_s=0.1"),
    ({"wall_s": math.inf}, "0 < min_interval_s <= wall_s < inf"),
    ({"min_interval_s": math.nan}, "0 < min_interval_s <= wall_s"),
])
def test_a_flush_cadence_that_cannot_be_kept_is_refused(fields: dict, expected: str) -> None:
    with pytest.raises(ValueError, match=re.escape(expected)):
        FlushCadence(**fields)


def test_flag_bits_unpack_into_their_columns_across_chunks(tmp_path: Path) -> None:
    path = tmp_path / "flags.parquet"
    recorder = TrialRecorder(path, ("t_s",), ("a", "b", "c"), {}, expected_rows=100)
    k = np.arange(2345)
    expected = {"a": k % 3 == 0, "b": k % 5 == 0, "c": k % 2 == 1}
    for i in k:
        recorder.row[0] = i
        recorder.flag_bits = sum(recorder.flag_bit(name) for name, column in expected.items() if column[i])
        recorder.append_row()
    recorder.close()
    table, _ = read_trial_log(path)
    for name, column in expected.items():
        assert table.schema.field(name).type == "bool"
        np.testing.assert_array_equal(table[name].to_numpy(), column)


def test_file_is_readable_and_incomplete_before_close(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    recorder = TrialRecorder(path, ("t_s",), (), {}, expected_rows=10)
    _, meta = read_trial_log(path)
    assert meta["complete"] is False
    recorder.abort("test")
    _, meta = read_trial_log(path)
    assert meta["complete"] is False and meta["end_reason"] == "test"


CHILD = textwrap.dedent(
    """
    import sys, time
    from trials.recorder import TrialRecorder
    recorder = TrialRecorder(sys.argv[1], ("t_s",), ("engaged",), {}, expected_rows=20000)
    start = time.perf_counter()
    for k in range(20000):
        while time.perf_counter() - start < k * 1e-3:   # paced at 1 kHz, like a trial
            pass
        recorder.row[0] = k * 1e-3
        recorder.append_row()
        if k % 100 == 0:
            print(k, flush=True)
    """
)


def test_sigkill_loses_at_most_the_last_second(tmp_path: Path) -> None:
    path = tmp_path / "killed.parquet"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    for line in child.stdout:  # the child's own progress: no sleeping here
        if int(line) >= 3000:
            break
    child.send_signal(signal.SIGKILL)
    child.wait()
    table, metadata = read_trial_log(path)  # must be readable, by the contract's reader
    assert metadata["complete"] is False
    times = table["t_s"].to_numpy()
    assert times[-1] >= 3.0 - 1.0
    np.testing.assert_array_equal(times, np.arange(len(times)) * 1e-3)
    assert not (tmp_path / ".killed.parquet.tmp").exists() or table.num_rows > 0


def test_a_writer_at_the_row_slot_records_what_it_wrote(tmp_path: Path) -> None:
    """row_slot + commit_row (the fused tick's compiled writer): across chunks and past
    the expected length, the file holds the rows and flags written into the slots."""
    path = tmp_path / "slots.parquet"
    recorder = TrialRecorder(path, ("t_s", "a_m"), ("fault", "b"), {}, expected_rows=1500)
    for k in range(2500):
        floats, flags, i = recorder.row_slot()
        assert floats.shape[0] == 2 and flags.shape == (floats.shape[1],) and 0 <= i < flags.size
        floats[0, i] = k * 1e-3
        floats[1, i] = np.cos(k)
        flags[i] = (1 if k % 7 == 0 else 0) | (2 if k % 3 == 0 else 0)
        recorder.commit_row()
    assert recorder.rows == 2500
    recorder.close()
    table, meta = read_trial_log(path)
    assert table.num_rows == 2500 and meta["rows"] == 2500
    np.testing.assert_array_equal(table["t_s"].to_numpy(), np.arange(2500) * 1e-3)
    np.testing.assert_array_equal(table["a_m"].to_numpy(), np.cos(np.arange(2500)))
    np.testing.assert_array_equal(table["fault"].to_numpy(), np.arange(2500) % 7 == 0)
    np.testing.assert_array_equal(table["b"].to_numpy(), np.arange(2500) % 3 == 0)



def test_flushes_during_a_real_time_run_run_real_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush holds the GIL at times (table build, Parquet writer): during a real-time
    servo run the flusher works real-time (``haptics.timing.gil_sharer``), so that no
    other process preempts it while the servo loop waits for the GIL; before and after
    the run it is an ordinary thread."""
    seen: list[tuple[str, bool, bool]] = []  # (thread, run active, SCHED_FIFO) at each write
    flushed = threading.Event()
    write_file = trial_log.write_file

    def spy(table: Any, path: Any) -> None:
        name = threading.current_thread().name
        seen.append((name, timing.realtime_loop_active(), os.sched_getscheduler(0) == os.SCHED_FIFO))
        write_file(table, path)
        if name == "trial-flusher":
            flushed.set()

    monkeypatch.setattr(trial_log, "write_file", spy)
    with timing.realtime_loop():
        recorder = TrialRecorder(tmp_path / "rt.parquet", ("t_s",), ("a",), {}, expected_rows=100,
                                 flush_cadence=FlushCadence(rows=10))
        for k in range(10):
            recorder.row[0] = k
            recorder.append_row()  # the tenth row wakes the flusher
        assert flushed.wait(10.0)
    recorder.close()
    flusher = [entry for entry in seen if entry[0] == "trial-flusher"]
    assert flusher[0] == ("trial-flusher", True, may_run_realtime())
    assert seen[0][0] != "trial-flusher" and seen[-1][0] != "trial-flusher"  # constructor, close()
    assert not any(fifo for name, _, fifo in seen if name != "trial-flusher")
    assert read_trial_log(tmp_path / "rt.parquet")[0].num_rows == 10
