"""The predicted (virtual) arm in the trainer's view under delay (app.ui.ghost).

With the ``predictive`` compensator the servo publishes the virtual end effector; the
window draws an arm reaching it, with the real arm's link lengths and shoulder. Checked
against geometry (lengths, the shoulder, the tip) and, through a real trial's snapshot,
pixel by pixel where the snapshot says the virtual arm is.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.ui.ghost import PREDICTED_COLOUR, predicted_links
from app.ui.scene import AttemptInfo, Frame, SceneRenderer
from app.ui.servo import ServoStats
from trials.runner import TrialRequest, build_trial
from trials.snapshot import SharedSnapshot, SnapshotLayout

SIZE = (1280, 760)
#: A planar three-link arm: base centre, shoulder, elbow, wrist, end effector.
LINKS = np.array([[0.0, -0.1, 0.0], [0.0, 0.0, 0.0], [0.4, 0.0, 0.0], [0.7, 0.2, 0.0], [0.85, 0.3, 0.0]])


def _lengths(points: np.ndarray) -> np.ndarray:
    return np.linalg.norm(np.diff(points[1:], axis=0), axis=1)


def test_the_predicted_links_keep_the_shoulder_and_lengths_and_reach_the_virtual_end_effector() -> None:
    goal = np.array([0.8, 0.38, 0.0])  # 9.4 cm from the real end effector, within reach
    points = predicted_links(LINKS, goal)
    np.testing.assert_array_equal(points[:2], LINKS[:2])  # base centre and shoulder kept
    np.testing.assert_allclose(points[-1], goal, atol=1e-6)
    np.testing.assert_allclose(_lengths(points), _lengths(LINKS), rtol=1e-12)
    assert np.all(points[:, 2] == 0.0)  # a planar arm stays in its plane
    np.testing.assert_allclose(predicted_links(LINKS, LINKS[-1]), LINKS, atol=1e-12)  # no prediction error: as is
    reach = float(_lengths(LINKS).sum())
    far = predicted_links(LINKS, np.array([3.0, 0.0, 0.0]))  # beyond the reach: stretched toward it
    np.testing.assert_allclose(far[-1], [reach, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(far[1:, 1], 0.0, atol=1e-12)


def _fonts(pg) -> dict:
    return {name: pg.font.SysFont(None, size) for name, size in (("small", 20), ("normal", 26), ("large", 40))}


def test_the_window_draws_the_predicted_arm_where_the_snapshot_puts_it(tmp_path: Path) -> None:
    """A predictive trial with 300 ms each way: the snapshot's virtual end effector is
    the compensator's view; the drawn arm's joints and end effector are at the
    projections of the snapshot's values, the real arm's pixels elsewhere."""
    import pygame

    pygame.init()
    trial = build_trial(TrialRequest(trial_id="virtual", time_limit_s=2.0, delay_s=0.3, compensator="predictive"),
                        tmp_path)
    snapshot = SharedSnapshot(SnapshotLayout(trial.n_joints))
    try:
        trial.attach_snapshot(snapshot, every_n_ticks=1)
        for _ in range(900):
            trial.tick()
        values = snapshot.read()
        assert values is not None
        virtual = snapshot.field(values, "virtual_ee_position_m").copy()
        links = snapshot.field(values, "links").reshape(-1, 3).copy()
        np.testing.assert_array_equal(virtual, trial.tick.guidance_state.ee_position_m)  # what guidance sees
        assert np.linalg.norm(virtual - links[-1]) > 0.005  # the prediction is ahead of the real arm
        frame = Frame.read(snapshot)
        assert frame is not None and frame.virtual_ee_m is not None
        np.testing.assert_array_equal(frame.virtual_ee_m, virtual)
    finally:
        trial.abort("test over")
        snapshot.close()
    info = AttemptInfo(model="planar-3dof", n_joints=trial.n_joints, target_radius_m=0.01, condition="dg",
                       scenario="paper-2019", duration_s=2.0)
    renderer = SceneRenderer(SIZE, info, frame, _fonts(pygame))
    surface = pygame.Surface(SIZE)
    renderer.draw(surface, frame, "header", ServoStats(ticks=900, rate_hz=1000.0, overruns=0, worst_period_ms=1.0,
                                                       running=True), 60.0)
    expected = predicted_links(links, virtual)
    np.testing.assert_allclose(expected[-1], virtual, atol=1e-6)
    for _, view in renderer.views:
        for point in expected[2:]:  # the elbow, the wrist and the end effector as predicted
            assert tuple(surface.get_at(view(point)))[:3] == PREDICTED_COLOUR
    # a NaN virtual end effector (no predictive compensator) draws no predicted arm
    blank = pygame.Surface(SIZE)
    renderer.draw(blank, replace(frame, virtual_ee_m=np.full(3, math.nan)), "header",
                  ServoStats(ticks=900, rate_hz=1000.0, overruns=0, worst_period_ms=1.0, running=True), 60.0)
    pixels = pygame.surfarray.array3d(blank).reshape(-1, 3)
    assert not np.any(np.all(pixels == PREDICTED_COLOUR, axis=1))


@pytest.mark.parametrize("compensator", ["none", "passivity"])
def test_without_a_prediction_the_snapshot_has_no_virtual_end_effector(tmp_path: Path, compensator: str) -> None:
    trial = build_trial(TrialRequest(trial_id="plain", time_limit_s=0.2, delay_s=0.05, compensator=compensator),
                        tmp_path)
    snapshot = SharedSnapshot(SnapshotLayout(trial.n_joints))
    try:
        trial.attach_snapshot(snapshot, every_n_ticks=1)
        for _ in range(20):
            trial.tick()
        values = snapshot.read()
        assert values is not None
        assert np.all(np.isnan(snapshot.field(values, "virtual_ee_position_m")))
    finally:
        trial.abort("test over")
        snapshot.close()
