"""Stopping a study stops its workers: SIGINT and SIGTERM to `capture-trainer study
--workers 2` stop both worker processes and keep the completed trial files; when the
study process is killed (SIGKILL), the workers notice and exit. Real subprocesses; every
wait polls for its condition with a deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from capture_trainer.trial_log import read_metadata, read_trial_log
from tests.trials.conftest import scenario_with

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="reads worker processes from /proc"),
]

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 60.0
#: SIGTERM to the study, then workers gone: the grace a worker has to abort its trial
#: (trials.study.STOP_GRACE_S) plus a margin.
STOP_DEADLINE_S = 10.0


def _wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Poll ``condition`` until true; returns the seconds it took, fails after ``timeout_s``."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.005)
    return time.monotonic() - start


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of a live process, None once it is gone (or a zombie)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = text[text.rindex(")") + 2:].split()[:2]
    return None if state in "ZX" else (int(ppid), state)


def _workers(parent: int) -> list[int]:
    """The study process' worker processes (spawned with multiprocessing's spawn_main)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is None or stat[0] != parent:
            continue
        try:
            if b"spawn_main" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _complete(path: Path) -> bool:
    try:
        return bool(read_metadata(path).get("complete"))
    except Exception:  # noqa: BLE001 - still being written
        return False


def _start_study(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """Two short trials, then two long ones (a passive participant without guidance never
    reaches, and the debris, ten times slower than the paper's, stays within the reach:
    a long trial runs to its 120 s limit, several seconds of wall time)."""
    short = scenario_with(tmp_path, 0.5, name="short")
    long = scenario_with(tmp_path, 120.0, name="long")
    text = long.read_text()
    assert "velocity_m_s = [-0.1, 0.0, 0.0]" in text
    long.write_text(text.replace("velocity_m_s = [-0.1, 0.0, 0.0]", "velocity_m_s = [-0.01, 0.0, 0.0]"))
    protocol = tmp_path / "stop.toml"
    protocol.write_text(
        f'name = "stop"\nseed = 1\nscenarios = ["{short}", "{long}"]\nconditions = ["ng"]\n'
        'repetitions = 1\n[participants]\nkind = "simulated"\ncount = 2\nmix = { passive = 1 }\n'
    )
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "study", str(protocol), "--out", str(out), "--workers", "2"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    return process, out / "trials"


def _both_workers_in_long_trials(process: subprocess.Popen[str], trials: Path) -> Callable[[], bool]:
    def ready() -> bool:
        if process.poll() is not None:
            pytest.fail(f"the study ended early: {process.communicate()}")
        shorts = [p for p in trials.glob("*_short_*.parquet") if _complete(p)]
        running = [p for p in trials.glob("*_long_*.parquet") if not _complete(p)]
        return len(shorts) == 2 and len(running) == 2 and len(_workers(process.pid)) == 2
    return ready


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_workers_and_keeps_completed_trials(tmp_path: Path, signum: int) -> None:
    process, trials = _start_study(tmp_path)
    try:
        _wait_for(_both_workers_in_long_trials(process, trials), DEADLINE_S, "both workers in a long trial")
        workers = _workers(process.pid)
        completed = {p: read_metadata(p)["plan_fingerprint"] for p in trials.glob("*_short_*.parquet")}
        process.send_signal(signum)
        _wait_for(lambda: all(_stat(pid) is None for pid in workers), STOP_DEADLINE_S, "the workers to exit")
        _, stderr = process.communicate(timeout=STOP_DEADLINE_S)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 128 + signum, stderr
    assert f"stopped by {signal.Signals(signum).name}" in stderr and "Traceback" not in stderr
    # completed trials untouched; the two aborted ones readable, marked incomplete
    for path, fingerprint in completed.items():
        metadata = read_metadata(path)
        assert metadata["complete"] is True and metadata["plan_fingerprint"] == fingerprint
    for path in trials.glob("*_long_*.parquet"):
        _, metadata = read_trial_log(path)
        assert metadata["complete"] is False


def test_workers_exit_when_the_study_process_is_killed(tmp_path: Path) -> None:
    process, trials = _start_study(tmp_path)
    try:
        _wait_for(_both_workers_in_long_trials(process, trials), DEADLINE_S, "both workers in a long trial")
        workers = _workers(process.pid)
        process.kill()
        process.wait()
        # each worker's watchdog sees its parent gone, aborts its trial and exits
        _wait_for(lambda: all(_stat(pid) is None for pid in workers), STOP_DEADLINE_S, "orphaned workers to exit")
    finally:
        process.kill()
        process.wait()
    for path in trials.glob("*_long_*.parquet"):
        _, metadata = read_trial_log(path)
        assert metadata["complete"] is False
