"""After the tool opens: the capture rules must fire again before it closes again; the
``open`` behaviour refuses a scene that cannot let the payload go; "next" follows the
task's succeeded transitions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot.arm import ArmMeasurement
from robot.debris import DebrisReading
from robot.slave import SlaveStatus
from trials.behaviours import BehaviourError, make_behaviour
from trials.behaviours.machine import load_task, parse_task
from trials.behaviours.phase import PostCapturePhase
from trials.capture_event import CaptureMonitor, CaptureRules

DT = 1e-3
RULES = CaptureRules(envelope_radius_m=0.012, capture_speed_m_s=0.05, hold_s=0.1, hold_gap_m=0.001, window_s=1.0)


def _reading(in_contact: bool, closing_m_s: float = 0.0) -> DebrisReading:
    """The fixture 6 mm from the end effector (at rest there), touching or not; a contact
    normal along +x and, at the contact's start, the tool closing at ``closing_m_s``."""
    r = DebrisReading()
    r.point_m[:] = (0.006, 0.0, 0.0)
    r.contact_point_m[:] = (0.003, 0.0, 0.0)
    r.contact_normal[:] = (1.0, 0.0, 0.0)
    r.in_contact = in_contact
    r.gap_m = 0.0 if in_contact else 0.004
    return r


def _hold(monitor: CaptureMonitor, t0: float, ticks: int, reading: DebrisReading, ee_v: np.ndarray) -> float | None:
    """Feed ``ticks`` ticks from ``t0``; the time the tool closes (None: it did not)."""
    for k in range(ticks):
        t = t0 + k * DT
        if monitor.update(t, reading, np.zeros(3), ee_v):
            return t
    return None


def test_the_tool_closes_again_only_after_a_new_soft_contact_and_its_hold() -> None:
    monitor = CaptureMonitor(RULES)
    still = np.zeros(3)
    first = _hold(monitor, 0.0, 200, _reading(True), still)
    assert first == pytest.approx(0.1)
    monitor.released(0.5)
    # the contact the tool had as it opened goes on: not a new episode, no capture
    assert _hold(monitor, 0.5, 300, _reading(True), still) is None
    # apart, then a hard new contact (0.2 m/s closing): never a capture
    assert _hold(monitor, 0.8, 10, _reading(False), still) is None
    assert _hold(monitor, 0.81, 1, _reading(True), np.array([0.2, 0.0, 0.0])) is None
    assert _hold(monitor, 0.811, 300, _reading(True), still) is None
    # apart, then a soft one held 0.1 s: the rules fired again
    assert _hold(monitor, 1.2, 10, _reading(False), still) is None
    again = _hold(monitor, 1.21, 300, _reading(True), still)
    assert again == pytest.approx(1.31)
    assert monitor.n_captures == 2 and monitor.captured_at_s == pytest.approx(0.1)  # the trial's is the first
    assert monitor.released_at_s == 0.5


def test_open_is_refused_where_the_scene_cannot_let_go_and_validated() -> None:
    task = parse_task({"states": {"let_go": {"behaviour": "open", "on": {"succeeded": "done"}}}}, "o", "t")
    phase = PostCapturePhase(task, DT)
    m, status = ArmMeasurement(3), SlaveStatus(3)
    phase.captured(0.0, m, status, None, 5.0, DebrisReading(), can_release=False)  # e.g. a proximity scene
    pos, vel, acc = np.zeros(3), np.zeros(3), np.zeros(3)
    phase.command(DT, m, status, pos, vel, acc)
    assert not phase.release_requested and phase.machine.outcome == "failed"
    result = phase.machine.results[0]
    assert result.result == "aborted" and "cannot let the payload go" in result.reason
    with pytest.raises(BehaviourError, match="clearance_m .* must not exceed retreat_m"):
        make_behaviour("open", {"retreat_m": 0.005, "clearance_m": 0.01}, "t")
    with pytest.raises(BehaviourError, match="unknown open parameter 'retreat'; did you mean 'retreat_m'"):
        make_behaviour("open", {"retreat": 0.01}, "t")


def test_open_asks_once_then_backs_the_tool_away_from_the_fixture() -> None:
    """With a scene that can let go: the request is raised on the start tick; once the
    tick reports the tool open, the attractor moves ``retreat_m`` along the fixture -> end
    effector line over ``duration_s``; success once the gap reaches the clearance."""
    from robot.debris import PayloadRelease

    task = parse_task({"states": {"let_go": {"behaviour": "open", "params": {"retreat_m": 0.02, "duration_s": 0.1,
                                                                             "clearance_m": 0.01},
                                             "on": {"succeeded": "done"}}}}, "o", "t")
    phase = PostCapturePhase(task, DT)
    m, status = ArmMeasurement(3), SlaveStatus(3)
    reading = DebrisReading()
    reading.gap_m = 0.0
    phase.captured(0.0, m, status, None, 5.0, reading, can_release=True)
    pos, vel, acc = np.zeros(3), np.zeros(3), np.zeros(3)
    phase.command(DT, m, status, pos, vel, acc)
    assert phase.release_requested and phase.open_tool() is None  # asked (again: still one request)
    fixture = np.array([0.0, -0.006, 0.0])  # below the end effector: back away along +y
    phase.released(DT, PayloadRelease(DT, fixture, np.zeros(3), np.zeros(3), fixture), m)
    assert phase.tool_open and not phase.release_requested and phase.open_tool() == "the tool is open already"
    for k in range(2, 52):
        phase.command(k * DT, m, status, pos, vel, acc)
    # the retreat runs from the first tick that sees the tool open (0.002 s): 49 % at 0.051 s
    np.testing.assert_allclose(phase.controller.attractor_m, [0.0, 0.02 * 0.049 / 0.1, 0.0], atol=1e-12)
    reading.gap_m = 0.012
    for k in range(52, 103):
        phase.command(k * DT, m, status, pos, vel, acc)
    assert phase.machine.outcome == "succeeded"
    assert phase.machine.results[0].ended_s == pytest.approx(0.102)  # the retreat done at 0.1 s after opening
    assert phase.metadata()["release"]["t_s"] == DT and math.isfinite(phase.released_at_s)


def test_next_follows_the_succeeded_transitions_of_the_berthing_task() -> None:
    task = load_task("berthing")
    chain = ["stabilise"]
    while (following := task.next_state(chain[-1])) is not None:
        chain.append(following)
    assert chain == ["stabilise", "approach", "seat", "release", "open"]
    assert task.next_state("relax_seat") == "seat" and task.next_state("nowhere") is None
