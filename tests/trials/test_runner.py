from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from capture_trainer import trial_log
from capture_trainer.errors import TrialError
from trials.clocks import HeadlessClock, PacedClock
from capture_trainer.trial_log import read_trial_log as read_trial
from robot.ik import BASE_RATE_MAX_RAD_S
from trials.recorder import HEADLESS_FLUSH, LIVE_FLUSH
from trials.runner import TrialRequest, build_trial, run_trial


def _builtin(name: str) -> object:
    from importlib import resources

    return resources.files("scenarios.builtin").joinpath(name)


def _table(path: str) -> dict[str, np.ndarray]:
    table, _ = read_trial(path)
    return {name: table[name].to_numpy() for name in table.column_names}


def test_paced_and_headless_clocks_give_the_same_trajectory(short_scenario: Path, tmp_path: Path) -> None:
    request = TrialRequest(scenario=str(short_scenario), condition="dg", participant="novice", seed=7)
    headless = run_trial(request, tmp_path / "headless")
    trial = build_trial(request, tmp_path / "paced")
    trial.clock = PacedClock(1e-3)
    paced = trial.run()
    a, b = _table(headless["path"]), _table(paced["path"])
    assert a.keys() == b.keys()
    assert len(a[trial_log.TIME]) == 600
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    # the paced run really was paced: 600 ticks take at least 0.6 s of wall time
    assert paced["wall_s"] >= 0.6


def test_trial_file_has_the_contract_columns_and_metadata(short_scenario: Path, tmp_path: Path) -> None:
    summary = run_trial(TrialRequest(scenario=str(short_scenario), condition="apf", seed=3), tmp_path)
    table, meta = read_trial(summary["path"])
    expected = set(trial_log.float_columns(3)) | set(trial_log.FLAGS)
    assert set(table.column_names) == expected
    for key in ("scenario", "condition", "participant", "seed", "gains", "package_version", "device"):
        assert key in meta, key
    assert meta["complete"] is True and meta["condition"] == "apf" and meta["run_seed"] == 3
    assert meta["device"]["max_force_n"] > 0
    assert meta["servo_timing"]["ticks"] == 600
    # the base-rate bound's record: the slave's bound, never engaged in this trial
    assert meta["base_rate_bound"] == {"bound_rad_s": BASE_RATE_MAX_RAD_S, "ticks": 0, "first_s": None,
                                       "last_s": None}
    t = table[trial_log.TIME].to_numpy()
    np.testing.assert_allclose(np.diff(t), 1e-3, rtol=1e-9)
    actuated = np.stack([table[c].to_numpy() for c in trial_log.DEVICE_FORCE_ACTUATED], axis=1)
    assert np.all(np.linalg.norm(actuated, axis=1) <= meta["device"]["max_force_n"] + 1e-9)


def test_same_seed_same_log_other_seed_other_log(short_scenario: Path, tmp_path: Path) -> None:
    def run(seed: int, where: str) -> dict[str, np.ndarray]:
        request = TrialRequest(scenario=str(short_scenario), condition="ng", participant="novice", seed=seed)
        return _table(run_trial(request, tmp_path / where)["path"])

    first, again, other = run(1, "a"), run(1, "b"), run(2, "c")
    for name in first:
        np.testing.assert_array_equal(first[name], again[name], err_msg=name)
    assert not np.array_equal(first["dev_x_m"], other["dev_x_m"])


def test_automatic_capture_reaches_softly_and_ends_after_the_window(tmp_path: Path) -> None:
    summary = run_trial(TrialRequest(condition="as"), tmp_path)
    assert summary["end_reason"] == "capture_window_done"
    reach = summary["time_to_reach_s"]
    assert reach is not None and 0.5 < reach < 5.0
    assert summary["impact_velocity_m_s"] < 0.03
    # the tool closed after the 0.1 s hold that began at the first touch (the reach of the
    # contact radius), then the trial ran the 1 s window and the 0.25 s after it, and stopped
    assert summary["outcome"] == "captured"
    assert summary["outcome_at_s"] == pytest.approx(reach + 0.1, abs=3e-3)
    assert summary["sim_s"] == pytest.approx(summary["outcome_at_s"] + 1.25, abs=2e-3)


def test_a_headless_trial_writes_its_file_less_often_than_a_paced_one(tmp_path: Path) -> None:
    """The recorder's cadence follows the clock: a trial run as fast as the machine goes
    rewrites its file at most once a second of wall time, one in real time every second
    of trial time (docs/trials.md, "The recorder")."""
    headless = build_trial(TrialRequest(condition="dg", seed=1), tmp_path / "headless")
    paced = build_trial(TrialRequest(condition="dg", seed=1, paced=True), tmp_path / "paced")
    try:
        assert isinstance(headless.clock, HeadlessClock) and isinstance(paced.clock, PacedClock)
        assert headless.recorder.flush_cadence == HEADLESS_FLUSH and paced.recorder.flush_cadence == LIVE_FLUSH
    finally:
        headless.abort("test")
        paced.abort("test")


def test_simulated_device_needs_a_simulated_participant(tmp_path: Path) -> None:
    with pytest.raises(TrialError, match="novice"):
        build_trial(TrialRequest(participant="alice"), tmp_path)


CHILD = textwrap.dedent(
    """
    import sys
    from trials.clocks import PacedClock
    from trials.runner import TrialRequest, build_trial
    trial = build_trial(TrialRequest(scenario=sys.argv[2], condition="dg", seed=1, paced=True), sys.argv[1])
    assert isinstance(trial.clock, PacedClock)
    def tick():
        going = trial.tick()
        if trial.tick.k % 100 == 0:
            print(trial.tick.k, flush=True)
        return going
    trial.clock.run(tick, trial.max_ticks)
    """
)


def test_a_killed_trial_leaves_a_readable_file_missing_at_most_one_second(tmp_path: Path) -> None:
    scenario = tmp_path / "long.toml"
    scenario.write_text(Path(str(_builtin("paper-2019.toml"))).read_text().replace(
        "time_limit_s = 10.0", "time_limit_s = 8.0"))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "out"), str(scenario)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    for line in child.stdout:
        if int(line) >= 1500:
            break
    child.send_signal(signal.SIGKILL)
    child.wait()
    (path,) = (tmp_path / "out").glob("*.parquet")
    table = pq.read_table(path)
    times = table[trial_log.TIME].to_numpy()
    assert times[-1] >= 1.5 - 1.0
    np.testing.assert_allclose(np.diff(times), 1e-3, rtol=1e-9)
    _, meta = read_trial(path)
    assert meta["complete"] is False


def test_a_stylus_not_engaged_at_the_start_holds_the_arm_where_it_is(short_scenario: Path, tmp_path: Path) -> None:
    """Engage button released from the first tick: clutched, the arm holds its start."""
    trial = build_trial(TrialRequest(scenario=str(short_scenario), condition="dg", seed=2), tmp_path)
    read = trial.device.read

    def read_released():
        state = read()
        state.buttons = 0
        return state

    trial.device.read = read_released
    summary = trial.run()
    table, _ = read_trial(summary["path"])
    cmd = np.stack([table[c].to_numpy() for c in trial_log.COMMAND_POSITION], axis=1)
    ee = np.stack([table[c].to_numpy() for c in trial_log.EE_POSITION], axis=1)
    dev = np.stack([table[c].to_numpy() for c in trial_log.DEVICE_POSITION], axis=1)
    assert table["clutch"].to_numpy().all()
    assert np.ptp(dev[:, 0]) > 1e-3  # the hand moved the stylus...
    np.testing.assert_allclose(cmd, np.tile(ee[0], (len(cmd), 1)), atol=1e-6)  # ...not the arm
    assert np.max(np.linalg.norm(ee - ee[0], axis=1)) < 1e-3
    # and no guidance force is rendered on a stylus that does not drive the arm
    actuated = np.stack([table[c].to_numpy() for c in trial_log.DEVICE_FORCE_ACTUATED], axis=1)
    assert np.all(actuated == 0.0)
    guidance = np.stack([table[c].to_numpy() for c in trial_log.GUIDANCE_FORCE], axis=1)
    assert np.abs(guidance).max() > 1.0  # the law still computed (and logged) its force
