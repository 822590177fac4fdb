"""The post-capture behaviours in the servo tick with the PyBullet plant (headless).

Each test runs the automatic capture (AS) of a built-in scenario and then a task, and
reads what happened from the trial log: the contact force column against the limit the
task file sets, the pin's geometry against the posts' positions.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from capture_trainer import trial_log
from trials.behaviours.machine import TASKS
from trials.runner import Trial, TrialRequest, build_trial

pytest.importorskip("pybullet")

APPROACH = np.array([-0.945, -0.327, 0.0])  # the built-in tasks' push direction (toward the base)

WALL_TASK = """
start = "stabilise"
time_limit_s = 8.0
[fixtures]
frame = "capture"
approach = [-0.945, -0.327, 0.0]
pin = { radius_m = 0.01 }
posts = [{ name = "wall", position_m = [-0.0378, -0.01308, 0.0], radius_m = 0.01 }]   # 40 mm ahead
[states.stabilise]
behaviour = "ptwl"
params = { duration_s = 0.2, settle_s = 2.5, speed_tolerance_m_s = 0.005 }
on = { succeeded = "push" }
[states.push]
behaviour = "ptwl"
params = { displacement_m = [-0.0945, -0.0327, 0.0], duration_s = 4.0, wrench_limit_n = 6.0 }
on = { wrench_limit = "relax" }
[states.relax]
behaviour = "rwe"
params = { duration_s = 1.5, tolerance_n = 0.2, hold_s = 0.1 }
on = { succeeded = "done" }
"""


def run(tmp_path: Path, scenario: str, task: str | None = None) -> tuple[Trial, dict]:
    trial = build_trial(TrialRequest(scenario=scenario, condition="as", trial_id="t", task=task), tmp_path)
    summary = trial.run()
    return trial, summary


def force_norm(table) -> np.ndarray:  # noqa: ANN001
    return np.linalg.norm(np.column_stack([table[c].to_numpy() for c in trial_log.WRENCH_FORCE]), axis=1)


def test_a_push_against_a_wall_stops_on_its_limit_and_rwe_relaxes_the_contact(tmp_path: Path) -> None:
    path = tmp_path / "wall.toml"
    path.write_text(WALL_TASK)
    trial, summary = run(tmp_path, "berthing-planar", str(path))
    assert summary["task_outcome"] == "succeeded", summary["task_reason"]
    table, metadata = trial_log.read_trial_log(summary["path"])
    states = metadata["post_capture"]["states"]
    state = table[trial_log.STATE_INDEX].to_numpy()
    force = force_norm(table)
    push, relax = states.index("push"), states.index("relax")
    over = np.flatnonzero(force > 6.0)
    assert over.size, "the push never reached the wall's limit"
    first = over[0]
    # the tick the force first exceeds the row's limit (6 N) is the push's last row: RWE
    # from the next one; every row of the push before it was within the limit
    limit = table[trial_log.WRENCH_LIMIT].to_numpy()
    assert first == np.flatnonzero(force > limit)[0] and limit[first] == 6.0
    assert state[first] == push and state[first + 1] == relax
    assert np.all(force[state == push][:-1] <= 6.0)
    results = metadata["post_capture"]["results"]
    assert [r["result"] for r in results] == ["succeeded", "wrench_limit", "succeeded"]
    assert results[1]["ended_s"] == pytest.approx(table[trial_log.TIME].to_numpy()[first] - 1e-3)
    # RWE: the contact force falls from above the limit to within 0.2 N of zero, and stays
    # there, without the payload being moved much (the contact was ~1 mm deep)
    rows = np.flatnonzero(state == relax)
    assert force[rows[0]] > 5.0 and np.all(force[rows[-100:]] <= 0.2)
    assert np.all(force[rows[-1]:] <= 0.5)
    ee = np.column_stack([table[c].to_numpy() for c in trial_log.EE_POSITION])
    assert np.linalg.norm(ee[rows[-1]] - ee[rows[0]]) < 0.005


def test_the_built_in_berthing_succeeds_headless_with_the_pin_against_both_posts(tmp_path: Path) -> None:
    trial, summary = run(tmp_path, "berthing-planar")  # the scenario's own task
    assert summary["task"] == "berthing" and summary["end_reason"] == "task_done"
    assert summary["task_outcome"] == "succeeded", summary["task_reason"]
    table, metadata = trial_log.read_trial_log(summary["path"])
    phase = metadata["post_capture"]
    assert [r["state"] for r in phase["results"]] == ["stabilise", "approach", "seat", "release", "open"]
    world = trial.tick.post.world
    # the pin sits where it touches both posts (their surfaces, to a millimetre), found
    # from the posts' positions in the log
    posts = np.array(phase["posts_m"])
    for centre in posts:
        gap = np.hypot(*(world.pin_m[:2] - centre[:2])) - 0.01 - 0.01
        assert abs(gap) < 1e-3
    seat = phase["results"][2]
    assert seat["peak_force_n"] < seat["limit_n"] == 15.0
    for r in phase["results"]:
        assert r["base_attitude_change_rad"] < 1e-3  # rad
    # the tool opened: from the release's row on the captured flag is off (the debris a
    # free body), the debris rests against the posts (the pin within 1 mm of both, checked
    # above, slower than 1 mm/s over the last 0.1 s by finite differences of the logged
    # fixture), and the tool backed away at least the open state's clearance
    t = table[trial_log.TIME].to_numpy()
    captured = table[trial_log.FLAG_CAPTURED].to_numpy()
    release = phase["release"]
    opened = int(np.flatnonzero(captured)[-1]) + 1
    assert t[opened] == pytest.approx(release["t_s"]) and release["state"] == "open"
    assert not captured[opened:].any() and captured[opened - 200:opened].all()
    fixture = np.column_stack([table[c].to_numpy() for c in trial_log.TARGET_POSITION])
    ee = np.column_stack([table[c].to_numpy() for c in trial_log.EE_POSITION])
    assert np.linalg.norm(fixture[-1] - fixture[-101]) / (t[-1] - t[-101]) < 1e-3
    assert np.linalg.norm(ee[-1] - fixture[-1]) - metadata["target_radius_m"] >= 0.01
    # the debris left with the end effector's rigid motion (planar: v = v_ee + ω × (p − ee),
    # ω the tool link's, which the free debris keeps), not at the tool's own speed alone
    velocity = np.column_stack([table[c].to_numpy() for c in trial_log.TARGET_VELOCITY])
    ee_velocity = np.column_stack([table[c].to_numpy() for c in trial_log.EE_VELOCITY])
    spin = np.column_stack([table[c].to_numpy() for c in trial_log.DEBRIS_ANGULAR_VELOCITY])
    k = opened
    expected = ee_velocity[k] + np.cross(spin[k], fixture[k] - ee[k])
    assert np.linalg.norm(np.cross(spin[k], fixture[k] - ee[k])) > 1e-3  # the turning link's part counts
    np.testing.assert_allclose(velocity[k], expected, atol=2e-8)  # the read-outs' round-off, 1e-5 of it
    np.testing.assert_allclose(release["velocity_m_s"], velocity[k], atol=1e-12)
    assert phase["results"][-1]["result"] == "succeeded" and phase["results"][-1]["behaviour"] == "open"
    # what the release cost the base, as ``analyze`` reports it per behaviour, from the
    # log's attitude columns: a behaviour's tick sees the measurement of the row before,
    # and it starts one tick before its state shows in the rows; the net change over the
    # open state and the largest excursion from its start
    from analysis.behaviours import behaviour_rows, behaviour_summary

    summary = behaviour_summary(behaviour_rows([("t", metadata)])).set_index("behaviour")
    attitude = np.column_stack([table[c].to_numpy() for c in trial_log.BASE_ATTITUDE])
    rows = np.flatnonzero(table[trial_log.STATE_INDEX].to_numpy() == phase["states"].index("open"))
    seen = attitude[rows[0] - 2:rows[-1]]
    excursion = np.linalg.norm(seen - seen[0], axis=1)
    assert summary.loc["open", "runs"] == 1 and summary.loc["open", "success_rate"] == 1.0
    assert summary.loc["open", "mean_base_attitude_change_rad"] == pytest.approx(excursion[-1], rel=0.02)
    assert summary.loc["open", "max_base_attitude_change_rad"] == pytest.approx(excursion.max(), rel=0.02)
    assert 0.0 < excursion[-1] <= excursion.max() < 1e-3


def test_berthing_fails_naming_the_post_moved_out_of_reach(tmp_path: Path) -> None:
    text = TASKS.get("berthing").read_text(encoding="utf-8")
    moved = text.replace('{ name = "right", position_m = [-0.0471, -0.0322, 0.0]',
                         '{ name = "right", position_m = [1.0, -0.0322, 0.0]')
    assert moved != text
    path = tmp_path / "far.toml"
    path.write_text(moved)
    trial, summary = run(tmp_path, "berthing-planar", str(path))
    assert summary["task_outcome"] == "failed"
    reason = summary["task_reason"]
    assert "'approach'" in reason and "aborted" in reason
    assert "post 'right'" in reason and "beyond its reach" in reason


def test_a_jammed_pin_is_freed_by_jiggle_and_not_by_a_plain_push(tmp_path: Path) -> None:
    trial, summary = run(tmp_path, "jam-planar")
    assert summary["task"] == "jam"
    _, metadata = trial_log.read_trial_log(summary["path"])
    results = metadata["post_capture"]["results"]
    assert [(r["state"], r["result"]) for r in results] == [
        ("stabilise", "succeeded"), ("push", "wrench_limit"), ("relax", "succeeded"),
        ("push", "wrench_limit"), ("relax", "succeeded"), ("jiggle", "succeeded")]
    assert summary["task_outcome"] == "succeeded"
    posts = np.array(metadata["post_capture"]["posts_m"])
    pin = trial.tick.post.world.pin_m
    lateral = np.array([-APPROACH[1], APPROACH[0], 0.0])
    # in a slot: past the line of the post centres, and laterally between two neighbours
    along = (pin - posts[1]) @ APPROACH
    across = sorted((posts - pin) @ lateral)
    assert along > 0.0
    assert any(a < 0.0 < b and b - a == pytest.approx(0.042, abs=1e-3) for a, b in zip(across, across[1:]))
    # the plain push stalled on the middle post's crown: the pin never passed it
    assert all(math.isclose(r["limit_n"], 15.0) for r in results if r["state"] == "push")
