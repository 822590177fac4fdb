"""The fused servo tick (``trials.fused``) against the staged reference path, tick for
tick: the same trial built twice, run once stage by stage and once fused, must write
the same log (every float column to the bit, every flag) and end the same way, on the
planar and the spatial arm, under DG, APF, NG and the automatic capture; the stage
objects must hold the same state afterwards (the lowering is complete). The path is
chosen by type and recorded; parts without kernels fall back to the staged path."""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from capture_trainer import trial_log
from guidance.law import GuidanceLaw, StatelessLaw, Sum
from guidance.state import GuidanceState
from haptics.simulated import SimulatedDevice
from robot.debris import DebrisReading
from trials.capture_event import CaptureMonitor, CaptureRules
from trials.commanders import HapticCommander
from trials.fused import TickPath, _law_terms
from trials.runner import TrialRequest, build_trial


def _run(request: TrialRequest, out: Path, staged: bool) -> tuple[np.ndarray, np.ndarray, dict, object]:
    trial = build_trial(request, out, staged=staged)
    tick = trial.tick
    assert tick.path.fused is (not staged)
    rows, flags = [], []
    while tick():
        rows.append(tick.parts.recorder.row.copy())
        flags.append(tick.parts.recorder.flag_bits)
    if not staged:  # the fused plant stage stepped through PyBullet's C API (robot.pybullet_native)
        assert tick._fused.plant_path.startswith("native"), tick._fused.plant_path
        if isinstance(tick.parts.commander, HapticCommander):  # re-plans ran alone, the rest fused
            assert tick._fused.prepared_ticks > 0
    summary = trial.finish()
    return np.array(rows), np.array(flags), summary, trial


def _rate_bound(trial: object) -> dict[str, object]:
    """What the slave's base-rate bound did over the trial (its metadata)."""
    return trial.tick.parts.slave.rate_bound_metadata()  # type: ignore[attr-defined, no-any-return]


def _state(trial: object) -> dict[str, object]:
    """What the stage objects hold after the trial (lowered from the fused tick)."""
    tick = trial.tick  # type: ignore[attr-defined]
    parts = tick.parts
    state: dict[str, object] = {
        "k": tick.k, "t_next": tick._t_next_s, "slave_faults": parts.slave.fault_count,
        "sigma": parts.slave.status.sigma_ratio, "limited": parts.slave.status.limited,
        "command_t": parts.slave.last_command.t_s, "replans": parts.law.replan_count,
        "guidance_t": tick.guidance_state.t_s,
        "rate_bound": parts.slave.rate_bound_metadata(), "base_rate": parts.slave.status.base_rate_rad_s,
        "rate_bounded": parts.slave.status.rate_bounded, "rate_scale": parts.slave.status.rate_scale,
        "arm_t": parts.arm.state().t_s, "scene_t": getattr(tick.scene, "_t_s", None),  # their clocks
    }
    commander = parts.commander
    if isinstance(commander, HapticCommander):
        device = commander.device
        assert isinstance(device, SimulatedDevice)
        safety = device.safety
        state.update(device_t=device.t_s, state_t=device.state.t_s, gain=safety.engage_gain,
                     thermal=safety.thermal_load, watchdog=safety.watchdog, saturated=safety.saturated,
                     last_t=safety._last_t_s, heartbeat=safety._hb_t_s[0], percepts=device.operator._n_percepts,
                     submovements=device.operator.submovements, clutches=device.operator.clutches)
    return state


CASES = [  # scenario, condition, trial time [s], seed
    ("paper-2019", "dg", 2.5, 3),
    ("paper-2019", "apf", 2.5, 3),
    ("paper-2019", "ng", 2.0, 3),
    ("paper-2019", "as", 2.5, 3),
    ("tumbling-7dof", "dg", 1.5, 3),
    ("tumbling-7dof", "as", 1.5, 3),
    ("tumbling-7dof", "dg", 4.0, 8),  # the slave's base-rate bound engages (from 2.7 s)
    ("diagonal-fast", "dg", 4.0, 3),  # the participant clutches (indexing): press and release ticks
]
RATE_BOUND_CASE = ("tumbling-7dof", "dg", 4.0, 8)


@pytest.mark.parametrize(("scenario", "condition", "seconds", "seed"), CASES)
def test_fused_tick_writes_the_staged_log(tmp_path: Path, scenario: str, condition: str, seconds: float,
                                          seed: int) -> None:
    request = TrialRequest(scenario=scenario, condition=condition, seed=seed, time_limit_s=seconds,
                           end_on_capture=False)
    rows_ref, flags_ref, summary_ref, trial_ref = _run(request, tmp_path / "staged", staged=True)
    rows, flags, summary, trial = _run(request, tmp_path / "fused", staged=False)
    assert rows.shape == rows_ref.shape and rows.shape[0] == int(round(seconds / 1e-3)) - 1  # the last tick ends it
    # to the bit, NaN where NaN (the idle post-capture columns)
    assert np.array_equal(rows, rows_ref, equal_nan=True)
    assert np.array_equal(flags, flags_ref)
    for key in ("outcome", "end_reason", "time_to_reach_s", "ticks"):
        assert summary.get(key) == summary_ref.get(key), key
    assert _state(trial) == _state(trial_ref)
    fused = trial.tick.fused  # type: ignore[attr-defined]
    assert fused is not None and fused.fused_ticks > 0.9 * rows.shape[0]
    # ticks ran whole in one compiled call (FusedTick.quiet), the rest from where it stopped
    assert fused.quiet_ticks > 0.2 * rows.shape[0]
    # the run exercised what matters: guidance forces were felt, the files agree too
    if scenario == "diagonal-fast":
        assert _state(trial)["clutches"] > 0
    if (scenario, condition, seconds, seed) == RATE_BOUND_CASE:
        assert _rate_bound(trial)["ticks"] > 100
    if condition in ("dg", "apf"):
        columns = trial_log.float_columns(trial.tick.parts.arm.n_joints)  # type: ignore[attr-defined]
        guide = [columns.index(name) for name in trial_log.GUIDANCE_FORCE]
        assert np.abs(rows[:, guide]).max() > 0.1
    table, metadata = trial_log.read_trial_log(summary["path"])
    table_ref, metadata_ref = trial_log.read_trial_log(summary_ref["path"])
    assert metadata["tick_path"]["fused"] is True
    assert metadata_ref["tick_path"] == {"fused": False, "reason": "staged on request"}
    assert metadata["base_rate_bound"] == metadata_ref["base_rate_bound"]
    assert table.num_rows == table_ref.num_rows == rows.shape[0] + 1
    for name in table.column_names:  # the whole file, the last row too
        assert np.array_equal(table.column(name).to_numpy(), table_ref.column(name).to_numpy(), equal_nan=True), name


def test_the_proximity_scene_reads_the_arm_in_the_compiled_call_too(tmp_path: Path) -> None:
    """Without a debris body (``contact="proximity"``) the fused plant stage still reads
    the arm in its compiled call, and the scene in Python: the same log as staged."""
    request = TrialRequest(scenario="paper-2019", condition="dg", seed=3, time_limit_s=1.5, end_on_capture=False,
                           contact="proximity")
    rows_ref, flags_ref, summary_ref, _ = _run(request, tmp_path / "staged", staged=True)
    rows, flags, summary, trial = _run(request, tmp_path / "fused", staged=False)
    fused = trial.tick.fused  # type: ignore[attr-defined]
    assert fused._debris is None and fused._plant_read  # the path under test
    assert rows.shape == rows_ref.shape and np.array_equal(rows, rows_ref, equal_nan=True)
    assert np.array_equal(flags, flags_ref)
    columns = trial_log.float_columns(trial.tick.parts.arm.n_joints)  # type: ignore[attr-defined]
    ee = [columns.index(name) for name in trial_log.EE_POSITION]
    assert np.ptp(rows[:, ee], axis=0).max() > 0.01  # the arm moved [m]
    table, _ = trial_log.read_trial_log(summary["path"])
    table_ref, _ = trial_log.read_trial_log(summary_ref["path"])
    for name in table.column_names:
        assert np.array_equal(table.column(name).to_numpy(), table_ref.column(name).to_numpy(), equal_nan=True), name


def test_the_capture_and_the_closing_step_agree(tmp_path: Path) -> None:
    """The automatic capture closes the tool within the trial: the capture tick (Python
    monitor inside the fused tick) and the closing step (staged) give the same log."""
    request = TrialRequest(scenario="paper-2019", condition="as", seed=1, time_limit_s=6.0, end_on_capture=True)
    rows_ref, flags_ref, summary_ref, _ = _run(request, tmp_path / "staged", staged=True)
    rows, flags, summary, _ = _run(request, tmp_path / "fused", staged=False)
    assert summary_ref["outcome"] == "captured"
    assert summary["outcome"] == "captured"
    assert np.array_equal(rows, rows_ref, equal_nan=True) and np.array_equal(flags, flags_ref)


def test_quiet_ticks_before_the_contact_and_after_the_closing_write_the_staged_log(tmp_path: Path) -> None:
    """The tumbling debris caught at 2.03 s (DG, seed 1): the approach and the carrying
    run as quiet ticks (one compiled call each, FusedTick.quiet), the ticks near and in
    contact and the closing one in Python from where the call stopped; the log is the
    staged one to the bit, the reach and the capture at the same ticks."""
    request = TrialRequest(scenario="tumbling-7dof", condition="dg", seed=1, time_limit_s=3.0, end_on_capture=False)
    rows_ref, flags_ref, summary_ref, trial_ref = _run(request, tmp_path / "staged", staged=True)
    rows, flags, summary, trial = _run(request, tmp_path / "fused", staged=False)
    assert summary_ref["outcome"] == summary["outcome"] == "captured"
    assert np.array_equal(rows, rows_ref, equal_nan=True) and np.array_equal(flags, flags_ref)
    assert summary["time_to_reach_s"] == summary_ref["time_to_reach_s"] is not None
    assert trial.tick.monitor.captured_at_s == trial_ref.tick.monitor.captured_at_s  # type: ignore[attr-defined]
    fused = trial.tick.fused  # type: ignore[attr-defined]
    assert fused.quiet_apart_ticks > 1000 and fused.quiet_closed_ticks > 900  # first contact 1.93 s, closed 2.03 s
    assert _state(trial) == _state(trial_ref)


@pytest.mark.parametrize("batch", [1, 1000])
def test_a_reach_inside_a_quiet_tick_is_the_staged_one(tmp_path: Path, batch: int) -> None:
    """With the target's radius 5 cm larger than the contact's, the tool reaches it while
    the capture stage is still quiet (beyond the contact query's 1 cm), so the reach test
    runs on the quiet tick's distance: the same tick as the staged test's, whether the
    quiet ticks run one a call or in batches (a batch stops at the reaching tick)."""
    request = TrialRequest(scenario="paper-2019", condition="dg", seed=3, time_limit_s=2.5, end_on_capture=False)
    reached = []
    for staged in (True, False):
        trial = build_trial(request, tmp_path / str(staged), staged=staged)
        tick = trial.tick
        tick.limits = dataclasses.replace(tick.limits, target_radius_m=tick.limits.target_radius_m + 0.05)
        quiet_before, ran = 0, 1
        while tick.reached_at_s != tick.reached_at_s:
            quiet_before = 0 if staged else tick.fused.quiet_apart_ticks
            alive, ran = tick.run_ticks(batch)
            assert alive
        quiet_reach = not staged and tick.fused.quiet_apart_ticks == quiet_before + ran  # the reaching tick was quiet
        reached.append((tick.reached_at_s, tick.k, quiet_reach, ran))
        trial.abort("test")
    (t_ref, k_ref, _, _), (t_fused, k_fused, quiet, ran) = reached
    assert t_ref == t_ref and (t_fused, k_fused) == (t_ref, k_ref)
    assert quiet
    assert ran > 1 if batch > 1 else ran == 1  # in a batch, it was not its first tick


def test_a_parted_monitor_beyond_the_hold_gap_only_ends_the_hold() -> None:
    """What a quiet tick after a contact relies on (``QUIET_PARTED``): once a soft contact
    has ended, ``CaptureMonitor.update`` on a tick without contact and with the tool
    beyond the hold gap leaves the monitor as ``apart`` does (any hold ends) and never
    closes the tool, whatever else would hold (the fixture inside the envelope, slow);
    within the hold gap the same reading holds, and closes the tool after ``hold_s``."""
    rules = CaptureRules(envelope_radius_m=0.2, capture_speed_m_s=1.0, hold_s=0.005, hold_gap_m=0.02, window_s=1.0)
    rng = np.random.default_rng(7)
    ee, ee_v = np.zeros(3), np.zeros(3)
    for _ in range(40):
        monitor = CaptureMonitor(rules)
        reading = DebrisReading()
        reading.point_m[:] = rng.uniform(-0.05, 0.05, 3)
        reading.point_velocity_m_s[:] = rng.uniform(-0.1, 0.1, 3)
        reading.contact_normal[:] = (1.0, 0.0, 0.0)
        reading.in_contact, reading.gap_m = True, 0.0
        assert not monitor.update(0.0, reading, ee, ee_v)  # a soft contact: the hold begins
        reading.in_contact, reading.gap_m = False, rules.hold_gap_m * rng.uniform(0.0, 1.0)
        assert not monitor.update(1e-3, reading, ee, ee_v)  # the contact ends within the gap: still held
        assert monitor.parted and not monitor.untouched and monitor._hold_since_s == 0.0
        beyond, twin = copy.deepcopy(monitor), copy.deepcopy(monitor)
        reading.gap_m = rules.hold_gap_m + rng.uniform(1e-9, 0.05)
        assert not beyond.update(2e-3, reading, ee, ee_v)
        twin.apart(bool(rng.integers(2)))  # its answer is unused once touched
        assert repr(vars(beyond)) == repr(vars(twin)) and math.isnan(twin._hold_since_s)
        reading.gap_m = rules.hold_gap_m * rng.uniform(0.0, 1.0)
        closed_at = next(t for t in (k * 1e-3 for k in range(2, 20)) if monitor.update(t, reading, ee, ee_v))
        assert closed_at == pytest.approx(rules.hold_s, abs=1.5e-3)


def test_a_hold_after_the_contact_ended_is_not_quiet(tmp_path: Path) -> None:
    """With capture rules that hold after a contact has ended (an envelope of 0.2 m, a
    hold gap of 0.1 m, any speed, a 0.6 s hold), the tool closes while apart from the
    fixture: the ticks within the hold gap run in Python (the compiled call stops at the
    gap), one tick a call or in batches, and the tool closes on the staged tick."""
    request = TrialRequest(scenario="paper-2019", condition="ng", seed=2, time_limit_s=2.5, end_on_capture=False)
    results = []
    for staged, batch in ((True, 1), (False, 1), (False, 1000)):
        trial = build_trial(request, tmp_path / f"{staged}-{batch}", staged=staged)
        tick = trial.tick
        tick.monitor.rules = dataclasses.replace(tick.monitor.rules, envelope_radius_m=0.2, hold_gap_m=0.1,
                                                 capture_speed_m_s=1.0, hold_s=0.6)
        while tick.run_ticks(batch)[0]:
            pass
        summary = trial.finish()
        table, _ = trial_log.read_trial_log(summary["path"])
        results.append((tick.monitor.captured_at_s, tick.monitor.first_contact_s, table))
    (captured_ref, first_ref, table_ref) = results[0]
    assert captured_ref == pytest.approx(first_ref + 0.6)  # held 0.6 s from the contact's start
    for captured, _, table in results[1:]:
        assert captured == captured_ref
        for name in table.column_names:
            assert np.array_equal(table.column(name).to_numpy(), table_ref.column(name).to_numpy(), equal_nan=True), name


BATCH_CASES = [  # scenario, condition, trial time [s], seed, end on the capture
    ("tumbling-7dof", "dg", 3.0, 1, False),  # apart, the contact, then closed to the time limit
    ("tumbling-7dof", "dg", 4.0, 1, True),  # closed until the capture window's end
    ("paper-2019", "apf", 2.5, 3, False),
    ("diagonal-fast", "dg", 4.0, 3, False),  # the participant clutches: events inside the batches
    ("diagonal-fast", "dg", 4.0, 3, True),  # pushed away: quiet after the contact, to its window's end
]


@pytest.mark.parametrize(("scenario", "condition", "seconds", "seed", "end_on_capture"), BATCH_CASES)
def test_quiet_ticks_in_batches_write_the_staged_log(tmp_path: Path, scenario: str, condition: str, seconds: float,
                                                     seed: int, end_on_capture: bool) -> None:
    """A headless trial as it runs (``Trial.run``: the clock asks for up to 1000 ticks a
    call, ``ServoTick.run_ticks``), its quiet ticks back to back in one compiled call,
    the stages' bookkeeping once a call: the staged log to the bit, the same end at the
    same tick and the same state in the stage objects, every tick timed."""
    request = TrialRequest(scenario=scenario, condition=condition, seed=seed, time_limit_s=seconds,
                           end_on_capture=end_on_capture)
    results = []
    for staged in (True, False):
        trial = build_trial(request, tmp_path / str(staged), staged=staged)
        assert trial.clock.batch_ticks == 1000  # type: ignore[attr-defined]
        summary = trial.run()
        table, metadata = trial_log.read_trial_log(summary["path"])
        results.append((summary, table, metadata, _state(trial), trial.tick))
    (summary_ref, table_ref, _, state_ref, _), (summary, table, metadata, state, tick) = results
    for key in ("outcome", "end_reason", "time_to_reach_s", "ticks"):
        assert summary.get(key) == summary_ref.get(key), key
    if end_on_capture:  # the window after the capture or the first contact
        assert summary["end_reason"] == "capture_window_done" and summary["ticks"] < round(seconds / 1e-3)
    assert table.num_rows == table_ref.num_rows == summary["ticks"]
    for name in table.column_names:
        assert np.array_equal(table.column(name).to_numpy(), table_ref.column(name).to_numpy(), equal_nan=True), name
    assert state == state_ref
    fused = tick.fused
    quiet = fused.quiet_ticks
    assert quiet > 0.3 * summary["ticks"] and fused.quiet_calls < quiet / 4  # batches of several ticks
    if summary["outcome"] == "pushed_away":  # quiet again once the contact ended
        assert fused.quiet_parted_ticks > 1000
    assert metadata["servo_timing"]["ticks"] == summary["ticks"]  # every tick timed, a batch's as equal periods


def test_parts_without_kernels_run_staged_and_say_why(tmp_path: Path) -> None:
    request = TrialRequest(scenario="paper-2019", condition="dg", seed=1, time_limit_s=0.05, delay_s=0.02)
    trial = build_trial(request, tmp_path)
    try:
        assert not trial.tick.path.fused
        assert trial.tick.path.reason == "a delayed link"
        assert trial.tick.fused is None
    finally:
        trial.finish()
    trial = build_trial(TrialRequest(scenario="jam-planar", condition="dg", seed=1, time_limit_s=0.05), tmp_path / "task")
    try:
        assert trial.tick.path == TickPath(False, "the post-capture behaviours")
    finally:
        trial.finish()


class _Custom(StatelessLaw):
    name = "custom"

    def force(self, state: GuidanceState) -> np.ndarray:
        return self._out

    def params(self) -> dict[str, object]:
        return {"law": self.name}


def test_a_law_without_a_kernel_is_named() -> None:
    law: GuidanceLaw = Sum(_Custom())
    assert _law_terms(law) == "the law _Custom has no kernel"


def test_a_trial_stopped_between_ticks_closes_from_the_true_state(tmp_path: Path) -> None:
    """A user stop between two fused ticks: the device ramps down from the state the
    kernels advanced (lowered before the outcome and the close), as on the staged path."""
    states = []
    for staged in (True, False):
        request = TrialRequest(scenario="paper-2019", condition="dg", seed=2, time_limit_s=1.0)
        trial = build_trial(request, tmp_path / str(staged), staged=staged)
        for _ in range(400):
            trial.tick()
        trial.abort("stopped by the experimenter")
        device = trial.tick.parts.commander.device
        assert isinstance(device, SimulatedDevice)
        states.append((device.t_s, device.safety._last_t_s, device.safety.watchdog, device.safety.force_n.tolist(),
                       device.safety.thermal_load))
    assert states[0] == states[1]
    assert states[0][0] == pytest.approx(0.4) and states[0][2]  # the close tripped the ramp at 0.4 s
