"""Behaviours as data and task state machines (trials/behaviours), without a plant.

A fake :class:`trials.behaviours.execute.PhaseView` stands in for the post-capture
phase: the tests set the contact force, the port and the time by hand, so each exit can
be timed to the tick.
"""

from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest

from robot.admittance import AdmittanceController, AdmittanceGains
from trials.behaviours import BEHAVIOURS, RESULTS, BehaviourError, Jiggle, Mixed, Open, Ptwl, Rwe, make_behaviour
from trials.behaviours.machine import TASKS, TaskMachine, load_task, parse_task, task_for_scenario

DT = 1e-3


class FakeView:
    """A PhaseView whose measurements the test writes."""

    def __init__(self) -> None:
        self.t_s = 0.0
        self.port_m = np.zeros(3)
        self.port_velocity_m_s = np.zeros(3)
        self.force_n = np.zeros(3)
        self.torque_n_m = np.zeros(3)
        self.post_force_n = np.zeros(2)
        self.base_attitude_rad = np.zeros(3)
        self.tracking_error_m = 0.0
        self.slave_fault = self.singular = self.limited = False
        self.sigma_ratio = 0.5
        self.controller = AdmittanceController(AdmittanceGains(), DT)
        self.seat = np.array([0.1, 0.0, 0.0])

    def seat_goal(self, out: np.ndarray) -> str | None:
        out[:] = self.seat
        return None


def machine_of(text: str) -> TaskMachine:
    return TaskMachine(parse_task(tomllib.loads(text), "test", "test task"))


PUSH_THEN_RELAX = """
start = "push"
[states.push]
behaviour = "ptwl"
params = { displacement_m = [0.05, 0.0, 0.0], duration_s = 1.0, wrench_limit_n = 5.0 }
on = { wrench_limit = "relax", succeeded = "done" }
retries = 1
exhausted = "fail: pushed twice"
[states.relax]
behaviour = "rwe"
params = { duration_s = 0.5, tolerance_n = 0.5, hold_s = 0.01 }
on = { succeeded = "push" }
retries = 3
"""


def test_ptwl_stops_on_the_tick_the_force_crosses_its_limit() -> None:
    view = FakeView()
    machine = machine_of(PUSH_THEN_RELAX)
    machine.start(view)
    for k in range(1, 400):
        view.t_s = k * DT
        view.force_n[0] = -0.02 * k  # a wall: 20 N/s, crosses 5 N at k = 251
        machine.step(view)
        if machine.state != "push":
            break
    assert k == 251 and machine.state == "relax"
    first = machine.results[0]
    assert (first.result, first.ended_s) == ("wrench_limit", pytest.approx(0.251))
    assert first.peak_force_n == pytest.approx(5.02) and first.limit_n == 5.0
    # the attractor froze where it was on that tick: a quarter of the 0.05 m move
    attractor = view.controller.attractor_m[0]
    assert attractor == pytest.approx(0.05 * 0.250, abs=1e-12) or attractor == pytest.approx(0.05 * 0.251)


def test_ptwl_succeeds_at_its_goal_within_tolerance_and_speed() -> None:
    view = FakeView()
    machine = machine_of(PUSH_THEN_RELAX)
    machine.start(view)
    view.port_m[0] = 0.05 - 0.002  # inside the default 3 mm, at rest
    for k in range(1, 1100):
        view.t_s = k * DT
        machine.step(view)
    # not before the attractor has arrived (t = duration)
    assert machine.outcome == "succeeded"
    assert machine.results[0].ended_s == pytest.approx(1.0)
    assert machine.results[0].pose_error_m == pytest.approx(0.002)


def test_rwe_releases_the_spring_and_succeeds_once_the_force_is_near_zero() -> None:
    view = FakeView()
    machine = machine_of(PUSH_THEN_RELAX)
    machine.start(view)
    view.force_n[0] = -6.0
    view.t_s = DT
    machine.step(view)
    assert machine.state == "relax"
    view.controller.position_m[:] = (0.02, 0.01, 0.0)
    for k in range(2, 40):
        view.t_s = k * DT
        view.force_n[0] = -0.1 if k >= 10 else -3.0
        machine.step(view)
        if machine.state == "push":
            break
    # the spring's attractor sat on the commanded port (zero virtual spring force)
    np.testing.assert_array_equal(view.controller.attractor_m, [0.02, 0.01, 0.0])
    relax = machine.results[1]
    assert relax.result == "succeeded" and relax.ended_s == pytest.approx(0.020)  # 10 ms calm from k = 10


def test_retries_run_out_into_the_exhausted_target() -> None:
    view = FakeView()
    machine = machine_of(PUSH_THEN_RELAX)
    machine.start(view)
    k = 0
    while machine.running and k < 5000:
        k += 1
        view.t_s = k * DT
        view.force_n[0] = -10.0 if machine.state == "push" else 0.0
        machine.step(view)
    assert [r.state for r in machine.results] == ["push", "relax", "push", "relax"]
    assert machine.outcome == "failed"
    assert "'push' would run 3 times (retries: 1)" in machine.reason and machine.reason.endswith("pushed twice")


def test_watchdog_when_the_arm_cannot_follow() -> None:
    view = FakeView()
    machine = machine_of(PUSH_THEN_RELAX)
    machine.start(view)
    view.tracking_error_m = 0.05
    view.singular = True
    for k in range(1, 600):
        view.t_s = k * DT
        machine.step(view)
    assert machine.results[0].result == "watchdog"
    assert machine.results[0].ended_s == pytest.approx(0.501)  # bad from 1 ms, for 0.5 s
    assert "reaction singularity" in machine.reason and machine.results[0].singular_ticks == 501


def test_the_task_time_limit_aborts() -> None:
    view = FakeView()
    machine = machine_of('time_limit_s = 0.1\n' + PUSH_THEN_RELAX)
    machine.start(view)
    for k in range(1, 200):
        view.t_s = k * DT
        machine.step(view)
    assert machine.outcome == "aborted" and machine.results[-1].result == "aborted"


def test_jiggle_circles_about_its_axis_and_starts_where_the_attractor_is() -> None:
    view = FakeView()
    machine = machine_of("""
[states.j]
behaviour = "jiggle"
params = { axis = [1.0, 0.0, 0.0], amplitude_m = 0.01, frequency_hz = 1.0, push_m = 0.02, duration_s = 2.0 }
on = { succeeded = "done" }
""")
    machine.start(view)
    view.t_s = 0.25  # a quarter turn, a quarter of the way to the full push (reached at 1 s)
    machine.step(view)
    # u = axis x z = (0, -1, 0), w = axis x u = (0, 0, -1): 0.01 (sin, cos - 1) = (-0.01 y, +0.01 z)
    np.testing.assert_allclose(view.controller.attractor_m, [0.005, -0.01, 0.01], atol=1e-12)
    view.port_m[0] = 0.0165  # 16.5 mm along: 20 - 4 mm counts
    view.t_s = 0.3
    machine.step(view)
    assert machine.outcome == "succeeded" and machine.results[0].result == "succeeded"


def test_every_result_word_and_kind_is_registered() -> None:
    assert RESULTS == ("succeeded", "wrench_limit", "timeout", "watchdog", "aborted")
    assert BEHAVIOURS.names() == ("ptwl", "rwe", "jiggle", "mixed", "open")
    assert {BEHAVIOURS.get(n) for n in BEHAVIOURS.names()} == {Ptwl, Rwe, Jiggle, Mixed, Open}


@pytest.mark.parametrize(("kind", "params", "message"), [
    ("ptwl", {"wrench_limt_n": 3.0}, "unknown ptwl parameter 'wrench_limt_n'; did you mean 'wrench_limit_n'"),
    ("ptwl", {"duration_s": 0.0}, "duration_s must be > 0"),
    ("ptwl", {"displacement_m": [0.0, 1.0]}, "displacement_m must be 3 numbers"),
    ("ptwl", {"to": "post"}, "to must be one of attractor, seat"),
    ("ptwl", {"seat_force_n": 20.0, "wrench_limit_n": 15.0}, "seat_force_n (20) must be below wrench_limit_n"),
    ("rwe", {"axes": ["x", "q"]}, "axes must be a non-empty list"),
    ("jiggle", {"mode": "torsional"}, "torsional jiggle needs an orientation-controlled port"),
    ("jiggle", {"axis": [0.0, 0.0, 0.0]}, "axis must not be zero"),
    ("jigle", {}, "unknown behaviour 'jigle'; did you mean 'jiggle'"),
])
def test_behaviours_are_validated_naming_the_field(kind: str, params: dict[str, object], message: str) -> None:
    with pytest.raises(BehaviourError) as error:
        make_behaviour(kind, params, "task t: states.s")
    assert message in str(error.value) and "task t: states.s" in str(error.value)


@pytest.mark.parametrize(("text", "message"), [
    ("[states.a]\nbehaviour = 'rwe'\non = { succeded = 'done' }", "unknown result 'succeded'; did you mean 'succeeded'"),
    ("[states.a]\nbehaviour = 'rwe'\non = { succeeded = 'b' }", "on.succeeded: unknown target 'b'"),
    ("start = 'x'\n[states.a]\nbehaviour = 'rwe'", "start 'x' is not a state"),
    ("[states.a]\nbehaviour = 'ptwl'\nparams = { to = 'seat' }", "to = 'seat' needs [fixtures] with two posts"),
    ("[states.a]\nbehaviour = 'rwe'\nretries = -1", "retries must be an integer"),
    ("[stats.a]\nbehaviour = 'rwe'", "unknown key 'stats'; did you mean 'states'"),
    ("[states.done]\nbehaviour = 'rwe'", "'done' is a reserved target"),
])
def test_task_files_are_validated(text: str, message: str) -> None:
    with pytest.raises(BehaviourError, match=None) as error:
        parse_task(tomllib.loads(text), "t", "t.toml")
    assert message in str(error.value)


@pytest.mark.parametrize("name", TASKS.names())
def test_every_built_in_task_loads_and_names_a_built_in_scenario(name: str) -> None:
    from trials.vocabulary import load_scenario

    task = load_task(name)
    assert task.start in task.states and task.scenarios
    for scenario in task.scenarios:
        load_scenario(scenario)
        assert task_for_scenario(scenario) == name
    assert task_for_scenario("paper-2019") is None


def test_a_task_file_is_parsed_once_per_version_and_each_caller_gets_its_own_copy(tmp_path, monkeypatch) -> None:
    import os

    from trials.behaviours import machine

    parsed: list[str] = []
    loads = tomllib.loads
    monkeypatch.setattr(machine.tomllib, "loads", lambda text: parsed.append(text) or loads(text))
    path = tmp_path / "wall.toml"
    path.write_text(PUSH_THEN_RELAX)
    first = load_task(str(path))
    first.states["push"].on["succeeded"] = "relax"  # a caller mutating its task...
    first.states.pop("relax")
    second = load_task(str(path))
    assert len(parsed) == 1  # ...read from the cache the second time,
    assert second.states["push"].on["succeeded"] == "done" and "relax" in second.states  # unchanged
    assert second == parse_task(loads(PUSH_THEN_RELAX), "wall", str(path))
    # a new version of the file (same size, another modification time) is read again
    path.write_text(PUSH_THEN_RELAX.replace("retries = 3", "retries = 4"))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert load_task(str(path)).states["relax"].retries == 4
    assert len(parsed) == 2
    # the built-in tasks: parsed once, whatever asks
    for _ in range(3):
        assert task_for_scenario("paper-2019") is None
        load_task("berthing")
    assert len(parsed) <= 2 + len(TASKS.names())


def test_an_unknown_task_name_suggests_the_closest() -> None:
    with pytest.raises(BehaviourError, match="did you mean 'berthing'"):
        load_task("berthin")
    assert math.isfinite(load_task("berthing").time_limit_s)


def test_the_operator_can_take_over_and_start_any_state() -> None:
    from trials.behaviours.phase import PostCapturePhase

    task = parse_task(tomllib.loads(PUSH_THEN_RELAX), "wall", "t")
    phase = PostCapturePhase(task, DT)
    with pytest.raises(BehaviourError, match="no state 'jigle'"):
        phase.request("jigle")
    view = FakeView()
    machine = phase.machine
    machine.start(view)
    for k in range(1, 101):
        view.t_s = k * DT
        machine.step(view)
    machine.interrupt(view, "relax", "the operator chose 'relax'")
    assert machine.state == "relax" and machine.results[0].result == "aborted"
    assert machine.results[0].ended_s == pytest.approx(0.1) and "operator" in machine.results[0].reason
    # the interrupted push froze its attractor a tenth of the way (0.1 s of its 1 s)
    assert view.controller.attractor_m[0] == pytest.approx(0.005)
