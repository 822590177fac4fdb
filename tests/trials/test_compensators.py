"""Delay compensators and contact feedback (``trials.compensators``, docs/delay.md)."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

import numpy as np
import pytest

from benchmarks.bench_passivity import bounce
from capture_trainer import trial_log
from capture_trainer.errors import ScenarioError, TrialError
from capture_trainer.trial_log import read_trial_log
from haptics.participants import PARTICIPANT_PRESETS
from scenarios.motion import LinearMotion
from trials.compensators import (COMPENSATORS, CompensatorConfig, PassivityCompensation, PredictiveCompensation,
                                 make_compensator)
from trials.runner import TrialRequest, build_trial, run_trial
from trials.snapshot import SharedSnapshot, SnapshotLayout
from trials.vocabulary import loads_scenario

DT = 1e-3


def _columns(table, names) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.column_stack([table.column(name).to_numpy() for name in names])


# ------------------------------------------------------------------ passivity, one tick by hand
def test_the_controller_removes_exactly_the_active_part_of_one_tick() -> None:
    """W = 0; the hand moved 0.1 mm in the last tick (v = 0.1 m/s along x); a 2 N force
    along the motion would deliver 2 · 0.1 · 1e-3 = 2e-4 J: α = 2e-4 / (0.01 · 1e-3) = 20 N s/m,
    and 2 − 20 · 0.1 = 0 N is left. A force against the motion is passive: untouched."""
    passivity = PassivityCompensation(CompensatorConfig("passivity", contact_feedback=True), DT)
    force = np.zeros(3)
    passivity.shape(0.0, force, np.zeros(3))  # first observation: the start position
    force[:] = (2.0, 0.0, 0.0)
    passivity.shape(DT, force, np.array([1e-4, 0.0, 0.0]))
    np.testing.assert_allclose(force, 0.0, atol=1e-12)
    assert passivity.observer.dissipated_j == pytest.approx(2e-4)

    against = PassivityCompensation(CompensatorConfig("passivity", contact_feedback=True), DT)
    against.shape(0.0, np.zeros(3), np.zeros(3))
    force[:] = (-2.0, 0.5, 0.0)
    against.shape(DT, force, np.array([1e-4, 0.0, 0.0]))
    np.testing.assert_array_equal(force, (-2.0, 0.5, 0.0))
    assert against.observer.active_ticks == 0


def test_the_observer_counts_the_held_forces_work_on_the_displacement() -> None:
    """2 N held along +x while the hand moves 1 cm back along x, then 3 N along y while it
    moves 2 cm along +y: the operator put in 2 · 0.01 J and took out 3 · 0.02 J."""
    observer = make_compensator(CompensatorConfig("none", contact_feedback=True), DT)
    observer.shape(0.0, np.array([2.0, 0.0, 0.0]), np.zeros(3))
    observer.shape(DT, np.array([0.0, 3.0, 0.0]), np.array([-0.01, 0.0, 0.0]))
    observer.shape(2 * DT, np.zeros(3), np.array([-0.01, 0.02, 0.0]))
    figures = observer.metadata()
    assert figures["energy_j"] == pytest.approx(0.02 - 0.06)
    assert figures["min_energy_j"] == pytest.approx(-0.04)


# ------------------------------------------------------------------ Campbell's bouncing higher
def test_without_delay_the_spring_table_gives_back_the_drop_height() -> None:
    result = bounce("none", 0.0, 2.0)
    assert len(result.apex_energy_j) >= 4
    np.testing.assert_allclose(result.apex_energy_j, result.apex_energy_j[0], rtol=1e-3)


@pytest.mark.parametrize("delay_s", [0.001, 0.005])
def test_delay_makes_the_contact_bounce_higher_and_passivity_stops_it(delay_s: float) -> None:
    """With a round trip τ the table's energy ratio per bounce is at least the linearised
    exp(π ω τ / sqrt(1 − (ω τ/2)²)) (the discrete hold adds to τ); with the passivity
    controller no bounce is higher than the drop and the observed energy stays ≥ 0."""
    plain = bounce("none", delay_s, 2.0)
    assert plain.energy_ratio_per_bounce >= plain.predicted_ratio > 1.1
    assert plain.min_port_energy_j < -0.01 * plain.apex_energy_j[0]
    passive = bounce("passivity", delay_s, 2.0)
    energies = np.array(passive.apex_energy_j)
    assert len(energies) >= 4
    assert np.all(np.diff(energies) <= 1e-12)
    assert passive.min_port_energy_j >= -1e-3 * energies[0]
    assert passive.dissipated_j > 0.0


# ------------------------------------------------------------------ the predictor's bookkeeping
def test_the_predictor_shows_the_real_arm_one_command_delay_ahead() -> None:
    """A real arm that follows the same law one command delay late, with a 1 cm bias the
    model does not know, seen one state delay late: the prediction is where the real arm
    will be when this tick's command reaches it (its state at t + T_c), bias included;
    the debris on a straight line is predicted exactly at t + T_c."""
    t_c, t_s = 0.05, 0.03
    k_p, k_d = 100.0, 20.0
    ee0 = np.array([0.1, 0.2, 0.0])
    motion = LinearMotion(np.array([0.4, 0.0, 0.0]), (-0.1, 0.02, 0.0))
    predictor = PredictiveCompensation(CompensatorConfig("predictive"), DT, motion=motion, ee0_m=ee0,
                                       gains=(k_p, k_d), command_delay_s=t_c, history_s=2 * (t_c + t_s) + 0.1)
    bias = np.array([0.01, 0.0, 0.0])
    lag_c, lag_s, n = round(t_c / DT), round(t_s / DT), 1500

    def command(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = k * DT
        return (ee0 + 0.05 * np.array([math.sin(3 * t), 1 - math.cos(2 * t), 0.0]),
                0.05 * np.array([3 * math.cos(3 * t), 2 * math.sin(2 * t), 0.0]),
                0.05 * np.array([-9 * math.sin(3 * t), 4 * math.cos(2 * t), 0.0]))

    real_x, real_v = np.zeros((n + 1, 3)), np.zeros((n + 1, 3))  # row j: the model's arm at j dt
    real_x[0] = ee0
    for j in range(n):  # the arm's side: the law on the command sent lag_c ticks earlier
        x_c, v_c, a_c = command(j - lag_c) if j >= lag_c else (ee0, np.zeros(3), np.zeros(3))
        real_v[j + 1] = real_v[j] + (a_c + k_p * (x_c - real_x[j]) + k_d * (v_c - real_v[j])) * DT
        real_x[j + 1] = real_x[j] + real_v[j + 1] * DT
    out = tuple(np.zeros(3) for _ in range(6))
    for k in range(n - lag_c - 1):
        sent_row = k + 1 - lag_s  # the state sample sent at plant time (k + 1 - lag_s) dt
        sent_s = sent_row * DT if sent_row >= 1 else -math.inf
        row = max(sent_row, 0)
        p, v, a = np.zeros(3), np.zeros(3), np.zeros(3)
        motion.state(row * DT, p, v, a)
        delayed = (real_x[row] + bias, real_v[row], p, v, a, np.zeros(3))
        predictor.view((k + 1) * DT, command(k), delayed, sent_s, out)
        if k > lag_c + lag_s + 5:
            future = k + 1 + lag_c
            np.testing.assert_allclose(out[0], real_x[future] + bias, atol=1e-9)
            np.testing.assert_allclose(out[1], real_v[future], atol=1e-9)
            motion.state(future * DT, p, v, a)
            np.testing.assert_allclose(out[2], p, atol=1e-12)
            np.testing.assert_allclose(out[3], v, atol=1e-12)


# ------------------------------------------------------------------ settings, scenario, CLI
def test_names_come_from_the_registry_and_mistakes_are_refused() -> None:
    assert COMPENSATORS.names() == ("none", "passivity", "predictive")
    with pytest.raises(TrialError, match="did you mean 'passivity'"):
        CompensatorConfig("pasivity")
    with pytest.raises(TrialError, match="contact_force_scale"):
        CompensatorConfig(contact_force_scale=-1.0)


def test_the_scenario_chooses_the_compensator_and_contact_feedback() -> None:
    base = ("seed = 1\n[robot]\nmodel = \"planar-3r\"\n[target]\nradius_m = 0.01\nstart_offset_m = [0.2, 0.0, 0.0]\n"
            "velocity_m_s = [-0.1, 0.0, 0.0]\n")
    scenario = loads_scenario(base + "[delay]\ndelay_s = 0.4\ncompensator = \"predictive\"\n"
                              "[rendering]\ncontact_feedback = true\ncontact_force_scale = 0.1\n")
    assert scenario.delay.compensator == "predictive"
    assert scenario.rendering.contact_feedback and scenario.rendering.contact_force_scale == 0.1
    with pytest.raises(ScenarioError, match="compensator"):
        loads_scenario(base + "[delay]\ncompensator = \"smith\"\n")


def test_run_and_study_take_the_compensator_options() -> None:
    from app.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["study", "demo", "--out", "/tmp", "--delay-ms", "250", "--compensator", "passivity",
                              "--contact-feedback", "on"])
    assert (args.delay_ms, args.compensator, args.contact_feedback) == (250.0, "passivity", "on")
    args = parser.parse_args(["run", "--compensator", "predictive"])
    assert args.compensator == "predictive" and args.contact_feedback is None
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--compensator", "smith"])


# ------------------------------------------------------------------ in trials
def test_without_delay_compensator_or_feedback_the_trial_is_todays(tmp_path) -> None:
    a = run_trial(TrialRequest(trial_id="a", time_limit_s=1.0), tmp_path)
    b = run_trial(TrialRequest(trial_id="b", time_limit_s=1.0, compensator="none", contact_feedback=False), tmp_path)
    table_a, meta_a = read_trial_log(a["path"])
    table_b, meta_b = read_trial_log(b["path"])
    assert meta_a["compensator"] is None and meta_b["compensator"] is None
    assert table_a.column_names == table_b.column_names
    for name in table_a.column_names:
        np.testing.assert_array_equal(table_a.column(name).to_numpy(), table_b.column(name).to_numpy())


def test_contact_feedback_adds_the_tools_reaction_to_the_guidance(tmp_path) -> None:
    """No delay, identity mapping, force scale 1: the calculated device force is the
    guidance minus 0.02 (the default scale) times the contact force on the debris, on every row up to the
    capture (after it the post-capture phase decides what the hand feels)."""
    summary = run_trial(TrialRequest(trial_id="felt", time_limit_s=4.0, contact_feedback=True), tmp_path)
    table, meta = read_trial_log(summary["path"])
    before = ~np.maximum.accumulate(table.column(trial_log.FLAG_CAPTURED).to_numpy(zero_copy_only=False))
    guide = _columns(table, trial_log.GUIDANCE_FORCE)[before]
    contact = _columns(table, trial_log.CONTACT_FORCE)[before]
    calculated = _columns(table, trial_log.DEVICE_FORCE_CALCULATED)[before]
    assert np.abs(contact).max() > 1.0  # there was a contact to feel
    np.testing.assert_allclose(calculated, guide - 0.02 * contact, atol=1e-12)
    assert meta["compensator"]["name"] == "none" and meta["compensator"]["contact_feedback"] is True


def test_over_a_long_delay_the_contact_port_is_active_and_passivity_keeps_it_passive(tmp_path) -> None:
    """200 ms each way, an expert on DG feeling the contact of a hard hit (0.16 m/s
    normal): the delayed contact force is active at the hand (W < 0, about −0.4 mJ); the
    passivity controller keeps W >= 0 on the same hit, within a few µJ (it only shapes the
    force felt, not what the arm does). The expert does not re-plan on feel
    (``replan_deviation_m`` beyond reach): the model's operators that do chase the paper's
    debris on the delayed view without touching it (docs/delay.md), and the port needs a
    hit."""
    expert = replace(PARTICIPANT_PRESETS["expert"], replan_deviation_m=1.0).as_dict()
    runs = {}
    for name in ("none", "passivity"):
        summary = run_trial(TrialRequest(participant="expert", participant_params=expert, trial_id=name,
                                         time_limit_s=6.0, delay_s=0.2, contact_feedback=True, compensator=name),
                            tmp_path)
        table, meta = read_trial_log(summary["path"])
        runs[name] = (meta["compensator"], np.abs(_columns(table, trial_log.CONTACT_FORCE)).max())
    assert runs["none"][1] > 1.0 and runs["passivity"][1] > 1.0  # there were contacts to feel
    assert runs["none"][0]["min_energy_j"] < -2e-4  # about -1 mJ
    assert runs["passivity"][0]["min_energy_j"] >= -2e-5 and runs["passivity"][0]["dissipated_j"] > 2e-4


def test_the_virtual_arm_is_where_the_real_arm_will_be_one_delay_later(tmp_path) -> None:
    """200 ms each way, before the first contact: what the operator's side sees of the end
    effector (the virtual arm, corrected) at t is where the real arm is at t + 200 ms,
    within a millimetre, while the arm moves by centimetres in 200 ms (Yang & Konno's
    Fig. 17: 2 mm)."""
    trial = build_trial(TrialRequest(participant="expert", trial_id="virtual", time_limit_s=4.0, delay_s=0.2,
                                     compensator="predictive"), tmp_path)
    seen, real = [], []
    try:
        while trial.tick() and math.isnan(trial.tick.monitor.first_contact_s):
            seen.append(trial.tick.guidance_state.ee_position_m.copy())
            real.append(trial.tick._m.ee_position_m.copy())
    finally:
        trial.abort("test over")
    lag = 200
    seen_a, real_a = np.array(seen), np.array(real)
    assert len(seen_a) > 1000
    error = np.linalg.norm(seen_a[:-lag] - real_a[lag:], axis=1)
    travel = np.linalg.norm(real_a[lag:] - real_a[:-lag], axis=1)
    assert error.max() < 2e-3 and travel.max() > 0.02


def test_the_snapshot_carries_the_delayed_real_end_effector_as_a_ghost(tmp_path) -> None:
    trial = build_trial(TrialRequest(trial_id="ghost", time_limit_s=1.0, delay_s=0.1, compensator="predictive"),
                        tmp_path)
    snapshot = SharedSnapshot(SnapshotLayout(trial.n_joints))
    try:
        trial.attach_snapshot(snapshot, every_n_ticks=1)
        history = []
        for _ in range(300):
            trial.tick()
            history.append(trial.tick._m.ee_position_m.copy())
        values = snapshot.read()
        assert values is not None
        ghost = snapshot.field(values, "ghost_ee_position_m")
        np.testing.assert_allclose(ghost, history[-1 - 100], atol=1e-12)  # where it was 100 ticks ago
        assert not np.allclose(ghost, history[-1], atol=1e-4)  # the arm has moved since
    finally:
        trial.abort("test over")
        snapshot.close()


def test_a_delayed_trial_records_the_link_and_compensator_through_argparse_fields(tmp_path) -> None:
    from app.commands.arguments import compensator_request, delay_request

    args = argparse.Namespace(delay_ms=30.0, jitter_ms=None, loss=None, compensator="passivity",
                              contact_feedback="off")
    request = TrialRequest(trial_id="cli", time_limit_s=0.5, **delay_request(args), **compensator_request(args))
    _, meta = read_trial_log(run_trial(request, tmp_path)["path"])
    assert meta["link_delay"]["delay_s"] == pytest.approx(0.03)
    assert meta["compensator"]["name"] == "passivity" and meta["compensator"]["contact_feedback"] is False


def test_bench_passivity_json() -> None:
    """``capture-trainer bench passivity --json``: energy per bounce with and without."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "app.cli", "bench", "passivity", "--delay-ms", "2", "--duration",
                             "1.5", "--json"], env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) == {"none", "passivity"}
    assert out["none"]["energy_ratio_per_bounce"] > 1.0 >= out["passivity"]["energy_ratio_per_bounce"]
    assert out["passivity"]["min_port_energy_j"] >= -1e-3 * out["passivity"]["apex_energy_j"][0]


def test_the_ghost_is_a_hollow_ring_where_the_delayed_arm_was() -> None:
    import pygame
    from app.ui.ghost import GHOST_COLOUR, GHOST_PX, draw_ghost

    surface = pygame.Surface((120, 120))

    def view(point: np.ndarray) -> tuple[int, int]:
        return int(round(point[0] * 100)) + 50, int(round(point[1] * 100)) + 50

    draw_ghost(surface, view, np.array([0.1, 0.2, 0.0]))
    assert tuple(surface.get_at((60 + GHOST_PX - 1, 70)))[:3] == GHOST_COLOUR
    assert tuple(surface.get_at((60, 70)))[:3] == (0, 0, 0)  # hollow
    blank = pygame.Surface((120, 120))
    draw_ghost(blank, view, np.full(3, np.nan))  # no link: nothing
    draw_ghost(blank, view, None)
    assert pygame.transform.average_color(blank)[:3] == (0, 0, 0)


def test_a_non_finite_force_does_not_poison_the_observer() -> None:
    passivity = PassivityCompensation(CompensatorConfig("passivity", contact_feedback=True), DT)
    passivity.shape(0.0, np.array([np.nan, 0.0, 0.0]), np.zeros(3))
    passivity.shape(DT, np.array([1.0, 0.0, 0.0]), np.array([1e-4, 0.0, 0.0]))
    passivity.shape(2 * DT, np.zeros(3), np.array([3e-4, 0.0, 0.0]))
    figures = passivity.metadata()
    assert all(math.isfinite(figures[key]) for key in ("energy_j", "min_energy_j", "dissipated_j"))
