"""The ``mixed`` behaviour (Yang & Konno's eq. 3 after the capture), against a wall.

A fake phase view stands in for the post-capture phase: the port is where the run
commanded it one tick earlier (a perfect slave), and a spring wall ``gap`` along the press
axis pushes back on the payload. Expectations are closed forms of eq. 3.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from analysis.metrics import trial_metrics
from capture_trainer.trial_log import read_trial_log
from robot.admittance import AdmittanceController, AdmittanceGains
from trials.behaviours import BEHAVIOURS, BehaviourError, make_behaviour
from trials.behaviours.runs import start_behaviour
from trials.behaviours.mixed import MixedRun, resolve_scheme
from trials.behaviours.spec import Mixed
from trials.runner import TrialRequest, build_trial

DT = 1e-3
GAP_M = 0.01
WALL_N_M = 2.0e4


class WallView:
    """A PhaseView over a perfect slave pressing a payload on a spring wall along +x."""

    def __init__(self, delay_s: float = 0.0, compensator: str = "none", wall_n_m: float = WALL_N_M) -> None:
        self.t_s = 0.0
        self.port_m = np.zeros(3)
        self.port_velocity_m_s = np.zeros(3)
        self.force_n = np.zeros(3)
        self.torque_n_m = np.zeros(3)
        self.post_force_n = np.zeros(1)
        self.base_attitude_rad = np.zeros(3)
        self.tracking_error_m = 0.0
        self.slave_fault = self.singular = self.limited = False
        self.sigma_ratio = 1.0
        self.controller = AdmittanceController(AdmittanceGains(), DT)
        self.command_delay_s = delay_s
        self.compensator = compensator
        self.hand_present = False
        self.hand_force_n = np.zeros(3)
        self.master_force_n = np.zeros(1)
        self.wall_n_m = wall_n_m

    def contact_gap(self, axis: np.ndarray) -> tuple[float, float, float] | None:
        return (GAP_M, self.wall_n_m, 0.0) if axis[0] > 0.9 else None

    def seat_goal(self, out: np.ndarray) -> str | None:
        return "no seat"

    def advance(self) -> None:
        """The plant: the port goes where it was commanded; the wall pushes back (−x)."""
        self.t_s += DT
        self.port_m[:] = self.controller.position_m
        self.port_velocity_m_s[:] = self.controller.velocity_m_s
        depth = self.port_m[0] - GAP_M
        self.force_n[:] = (-self.wall_n_m * depth if depth > 0.0 else 0.0, 0.0, 0.0)
        self.post_force_n[0] = -self.force_n[0]


def press(params: dict[str, object], view: WallView, seconds: float) -> tuple[MixedRun, list[float], str]:
    behaviour = make_behaviour("mixed", {"axis": [1.0, 0.0, 0.0], **params}, "test")
    run = start_behaviour("press", behaviour, view)
    assert isinstance(run, MixedRun)
    forces: list[float] = []
    result = ""
    for _ in range(int(round(seconds / DT))):
        forces.append(-float(view.force_n[0]))  # the force this tick is judged on (f_s)
        result = run.step(view)
        if result:
            break
        view.advance()
    return run, forces, result


def test_zero_delay_steady_state_force_is_g_times_the_master_force() -> None:
    # eq. 3 at rest, direct scheme: K_s (G f_m − f_s) = 0, so f_s = G f_m = 10 N
    # (the operator holds target / G = 1 N once they see the contact)
    run, forces, result = press({"scheme": "direct", "delay_s": 0.0, "target_force_n": 10.0, "force_scale": 10.0,
                                 "duration_s": 3.0}, WallView(), 3.5)
    assert result == "succeeded"
    assert run.master_force_n == pytest.approx(1.0, abs=1e-12)
    assert forces[-1] == pytest.approx(10.0, abs=1e-6)
    assert run.record.details["scheme"] == "direct"


def test_the_virtual_arms_model_error_shifts_the_force_by_the_restraint() -> None:
    # eq. 3 at rest with K_c: f_s = G f_m + (K_c / K_s)(x_vir − x_s); the ground's wall is
    # 20 % soft, so x_vir = gap + 10 / (0.8 k), x_s = gap + f_s / k, K_c / K_s = 0.08 * 1400:
    # f_s = (10 + 112 * 12.5 / k) / (1 + 112 / k)
    ratio = 0.08 * 1400.0
    expected = (10.0 + ratio * 12.5 / WALL_N_M) / (1.0 + ratio / WALL_N_M)
    _, forces, result = press({"scheme": "virtual", "delay_s": 0.0, "model_error": 0.2, "duration_s": 6.0},
                              WallView(), 6.5)
    assert result == "succeeded"
    assert forces[-1] == pytest.approx(expected, abs=1e-4)
    assert abs(forces[-1] - 10.0) > 5e-3  # the shift is there


def test_the_slave_moves_one_delay_after_the_operator_pushes() -> None:
    # the operator pushes from tick 0; the command reaches the slave at tick 200
    behaviour = make_behaviour("mixed", {"axis": [1.0, 0.0, 0.0], "scheme": "direct", "delay_s": 0.2}, "test")
    view = WallView()
    run = MixedRun("press", behaviour, view)  # type: ignore[arg-type]
    positions = []
    for _ in range(202):
        run.step(view)
        positions.append(view.controller.position_m[0])
        view.advance()
    assert all(p == 0.0 for p in positions[:200])
    # the first moving tick: v = (τ⁻¹ Δt) K_s G f_app = 0.05 * 30 / 1400 m/s
    assert positions[200] == pytest.approx(0.05 * 30.0 / 1400.0 * DT, rel=1e-12)


def test_with_delay_the_virtual_arm_presses_with_a_lower_force_mse_than_direct_commands() -> None:
    # direct: the operator sees the contact one delay late and the relief arrives one more
    # delay later, so the slave settles at G f_approach = 30 N for about 2 T
    results = {}
    for scheme in ("direct", "virtual"):
        run, forces, result = press({"scheme": scheme, "delay_s": 0.5, "model_error": 0.0, "duration_s": 4.0},
                                    WallView(), 4.5)
        assert result == "succeeded"
        results[scheme] = (max(forces), run.record.details["force_mse_n2"])
    assert results["direct"][0] == pytest.approx(30.0, abs=0.5)
    assert results["virtual"][0] < 20.0
    assert results["virtual"][1] < 0.8 * results["direct"][1]


def test_it_stops_on_the_tick_the_force_crosses_its_limit() -> None:
    run, forces, result = press({"scheme": "direct", "delay_s": 0.5, "target_force_n": 10.0, "wrench_limit_n": 20.0,
                                 "duration_s": 4.0}, WallView(), 4.0)
    assert result == "wrench_limit"
    assert forces[-1] > 20.0 and max(forces[:-1]) <= 20.0
    assert "over the limit 20.000 N" in run.record.reason


def test_auto_follows_the_compensator() -> None:
    behaviour = make_behaviour("mixed", {}, "test")
    assert isinstance(behaviour, Mixed)
    assert resolve_scheme(behaviour, "predictive") == "virtual"
    assert resolve_scheme(behaviour, "none") == "direct"
    assert resolve_scheme(behaviour, "passivity") == "direct"
    run = MixedRun("press", behaviour, WallView(0.25, "predictive"))  # type: ignore[arg-type]
    assert run.scheme == "virtual" and run.delay_s == 0.25


def test_table_2_gains_are_the_defaults_and_mixed_is_registered() -> None:
    assert "mixed" in BEHAVIOURS.names()
    b = Mixed()
    assert (b.force_gain_m_s_n, b.restraint_gain_1_s, b.damping) == (1.0 / 1400.0, 0.08, 0.3)


@pytest.mark.parametrize("params, message", [
    ({"scheme": "wave"}, "scheme must be one of"),
    ({"axis": [0.0, 0.0, 0.0]}, "axis must not be zero"),
    ({"target_force_n": 300.0}, "must be below wrench_limit_n"),
    ({"delay_s": -1.0}, "delay_s must be"),
    ({"force_scal": 2.0}, "did you mean 'force_scale'"),
])
def test_mixed_is_validated_naming_the_field(params: dict[str, object], message: str) -> None:
    with pytest.raises(BehaviourError, match=message):
        make_behaviour("mixed", params, "task t, state press")


@pytest.mark.parametrize("scheme", ["direct", "virtual"])
def test_a_non_finite_measurement_never_reaches_the_command(scheme: str) -> None:
    view = WallView()
    behaviour = make_behaviour("mixed", {"axis": [1.0, 0.0, 0.0], "delay_s": 0.0, "scheme": scheme}, "t")
    run = MixedRun("press", behaviour, view)  # type: ignore[arg-type]
    view.force_n[:] = (math.nan, 0.0, 0.0)
    view.port_m[:] = (math.nan, 0.0, 0.0)
    for _ in range(3):
        run.step(view)
        assert np.all(np.isfinite(view.controller.position_m)) and np.all(np.isfinite(view.controller.velocity_m_s))
    assert run.slave_force_n == 0.0


def test_a_massive_payload_trial_runs_the_mixed_command_after_the_capture(tmp_path: Path) -> None:
    """The built-in scenario, AS: captured, then the press; the log's slave force MSE is
    lower with the virtual arm (``predictive``) than with direct delayed commands."""
    mse = {}
    for compensator in ("none", "predictive"):
        out = tmp_path / compensator
        trial = build_trial(TrialRequest(scenario="massive-contact-planar", condition="as", trial_id="t",
                                         compensator=compensator), out)
        trial.run()
        log = read_trial_log(out / "t.parquet")
        runs = [r for r in log.metadata["post_capture"]["results"] if r["behaviour"] == "mixed"]
        assert log.metadata["outcome"] == "captured" and len(runs) == 1
        assert runs[0]["details"]["scheme"] == {"none": "direct", "predictive": "virtual"}[compensator]
        assert runs[0]["details"]["delay_s"] == 1.0
        assert runs[0]["peak_force_n"] > 0.0  # the payload met the posts
        mse[compensator] = trial_metrics(out / "t.parquet").mse_slave_force_n2
    assert mse["predictive"] < 0.5 * mse["none"]


def _hand_force(t_s: float) -> tuple[float, float, float]:
    """A hand pushing along the press axis (−x), 0.1-0.5 N, with a sideways drift."""
    return (-(0.3 + 0.2 * math.sin(2.0 * math.pi * 0.7 * t_s)), 0.05 * t_s, 0.0)


def test_the_hands_force_reaches_the_slave_one_link_delay_later_tick_exact(tmp_path: Path) -> None:
    """``master = "hand"``: f_m at the slave (``master_force_n``) is the hand's force on
    the stylus along the axis (``hand_force_*``) as the delayed command path delivers it:
    the lag read off the log is the link's 200 ms, to the tick and to the bit."""
    from trials.behaviours.machine import TASKS

    text = TASKS.get("massive-contact").read_text(encoding="utf-8")
    task = tmp_path / "hand-press.toml"
    press = "params = { axis = [-1.0, 0.0, 0.0],"
    assert press in text
    task.write_text(text.replace(press, 'params = { master = "hand", axis = [-1.0, 0.0, 0.0],'), encoding="utf-8")
    out = tmp_path / "run"
    trial = build_trial(TrialRequest(scenario="massive-contact-planar", condition="as", trial_id="t",
                                     task=str(task), delay_s=0.2), out)
    commander = trial.tick.parts.commander
    controller_command = commander.command

    def command(t_s: float, pos: np.ndarray, vel: np.ndarray, acc: np.ndarray) -> None:
        controller_command(t_s, pos, vel, acc)
        commander.hand_force_n[:] = _hand_force(t_s)  # the operator's side, at the command's time

    commander.command = command  # type: ignore[method-assign]
    trial.run()
    log = read_trial_log(out / "t.parquet")
    runs = [r for r in log.metadata["post_capture"]["results"] if r["behaviour"] == "mixed"]
    assert log.metadata["outcome"] == "captured" and len(runs) == 1
    assert runs[0]["details"]["master"] == "hand" and runs[0]["details"]["delay_s"] == pytest.approx(0.2)
    table = log.table
    t = table["t_s"].to_numpy()
    hand = np.column_stack([table[f"hand_force_{a}_n"].to_numpy() for a in "xyz"])
    # the operator's side as sent: the row's command time (the clock's rounding aside)
    np.testing.assert_allclose(hand[:, 0], [_hand_force(s - DT)[0] for s in t], rtol=0.0, atol=1e-12)
    master = table["master_force_n"].to_numpy()
    mixed = log.metadata["post_capture"]["behaviours"].index("mixed")
    rows = np.flatnonzero(table["behaviour_index"].to_numpy() == mixed)
    assert rows.size > 1000 and np.all(master[rows] != 0.0)
    along = -hand[:, 0]  # the press axis is −x
    errors = [np.max(np.abs(master[rows] - along[rows - lag])) for lag in range(0, 400)]
    assert int(np.argmin(errors)) == 200 and errors[200] == 0.0  # exact: the ring copies floats
    assert min(errors[:190] + errors[210:]) > 1e-3


def test_auto_takes_the_hand_when_one_is_measured_and_the_script_otherwise() -> None:
    from trials.behaviours.mixed import resolve_master

    auto = make_behaviour("mixed", {}, "test")
    assert isinstance(auto, Mixed)
    assert (resolve_master(auto, True), resolve_master(auto, False)) == ("hand", "scripted")
    scripted = make_behaviour("mixed", {"master": "scripted"}, "test")
    assert isinstance(scripted, Mixed) and resolve_master(scripted, True) == "scripted"
    with pytest.raises(BehaviourError, match="master must be one of auto, hand, scripted"):
        make_behaviour("mixed", {"master": "foot"}, "test")


def test_with_the_hand_and_no_link_the_slave_uses_the_hands_force_at_once() -> None:
    """Without a link f_m is this tick's hand force (no ring of the task's delay_s):
    with a constant push the steady force is G f_m on a perfect slave and spring wall."""
    view = WallView()
    view.hand_present = True
    view.hand_force_n[:] = (0.7, 0.3, 0.0)  # 0.7 N along the press axis +x
    run, forces, _ = press({"target_force_n": 10.0, "delay_s": 0.5, "duration_s": 30.0}, view, 25.0)
    assert run.master == "hand" and run.delay_s == 0.0
    assert view.master_force_n[0] == 0.7
    assert forces[-1] == pytest.approx(10.0 * 0.7, abs=1e-3)  # G f_m
