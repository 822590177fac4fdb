"""The trainer window under SDL's dummy driver, with the real servo process and runner.

What it checks: the arm, the debris and the force arrows are drawn where the
trial log says they are, and the servo ran and timed every tick while the window drew.
The servo's rate while drawing is a measurement (``capture-trainer bench window``), not
an assertion here.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from app.ui.scene import COLOURS, SceneRenderer
from app.ui.trainee_db import TraineeDB
from app.ui.window import WindowConfig, run_trainer

SCREENSHOT_AT_S = 0.06  # the guidance is saturating (the passive hand has not caught up yet): both force arrows are long
SIZE = (1280, 760)


def _mask(pixels: np.ndarray, colour: tuple[int, int, int]) -> np.ndarray:
    return np.all(pixels == np.array(colour, dtype=pixels.dtype), axis=-1)


def _centroid(mask: np.ndarray) -> tuple[float, float]:
    xs, ys = np.nonzero(mask)  # surfarray is indexed [x, y]
    return float(xs.mean()), float(ys.mean())


@pytest.fixture(scope="module")
def trainer_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, Path]:
    out = tmp_path_factory.mktemp("trainer")
    mp = pytest.MonkeyPatch()
    mp.setenv("SDL_VIDEODRIVER", "dummy")
    try:
        results = run_trainer(WindowConfig(
            device="simulated", participant_kind="passive", out_dir=out, size=SIZE,
            trainee="tester", auto=("dg",), stop_after_s=4.0, quit_when_done=True,
            screenshot=out / "shot.png", screenshot_at_s=SCREENSHOT_AT_S,
        ))
    finally:
        mp.undo()
    return results, out


def test_servo_ticked_and_timed_while_drawing(trainer_run: tuple[list, Path]) -> None:
    results, _ = trainer_run
    assert len(results) == 1
    result = results[0]
    assert result.status == "aborted", result.message  # stopped by stop_after_s
    assert result.frames_drawn > 60  # the window really drew during the attempt
    timing = result.timing
    # every tick of the 4 s attempt was run, logged and timed: the clock marks a tick
    # before calling it, so the tick that met the abort is timed but logs no row
    rows = pq.read_metadata(result.summary["path"]).num_rows
    assert rows >= 4000 and timing["ticks"] - rows in (0, 1)
    assert timing["periods"] == timing["ticks"] - 1
    assert sum(timing["histogram_counts"]) == timing["periods"]
    assert timing["rate_hz"] == pytest.approx(1e3 / timing["mean_period_ms"], rel=1e-6)


def test_scene_drawn_where_the_log_says(trainer_run: tuple[list, Path]) -> None:
    import pygame

    results, out = trainer_run
    pixels = pygame.surfarray.array3d(pygame.image.load(str(out / "shot.png")))
    assert pixels.shape[:2] == SIZE
    view = np.zeros(pixels.shape[:2], dtype=bool)
    view[: SIZE[0] - SceneRenderer.PANEL_W, :] = True

    arm = _mask(pixels, COLOURS["arm"]) & view
    target = _mask(pixels, COLOURS["target"]) & view
    ee = _mask(pixels, COLOURS["ee"]) & view
    assert arm.sum() > 500 and target.sum() > 50 and ee.sum() > 50

    # Where the debris is relative to the end effector at the screenshot's time, from
    # the trial log: the screen's x grows with task x, its y against task y.
    table = pq.read_table(results[0].summary["path"]).to_pandas()
    row = table.iloc[int(np.searchsorted(table["t_s"], SCREENSHOT_AT_S))]
    dx, dy = row["target_x_m"] - row["ee_x_m"], row["target_y_m"] - row["ee_y_m"]
    tx, ty = _centroid(target)
    ex, ey = _centroid(ee)
    assert math.copysign(1.0, tx - ex) == math.copysign(1.0, dx)
    assert abs(dx) < 0.01 or abs(tx - ex) > 5
    if abs(dy) > 0.02:
        assert math.copysign(1.0, ty - ey) == -math.copysign(1.0, dy)

    # The capture tool (no contact yet at this time) is drawn around the end effector.
    tool = _mask(pixels, COLOURS["tool"]) & view
    txs, tys = np.nonzero(tool)
    assert tool.sum() > 20
    assert np.max(np.hypot(txs - ex, tys - ey)) < 40
    assert not (_mask(pixels, COLOURS["contact"]) & view).any()
    assert not (_mask(pixels, COLOURS["captured"]) & view).any()

    # The guidance arrow starts at the end effector.
    guidance = _mask(pixels, COLOURS["guidance"]) & view
    gx, gy = np.nonzero(guidance)
    assert guidance.sum() > 10
    assert np.min(np.hypot(gx - ex, gy - ey)) < 15

    # Calculated and actuated force arrows in the stylus-force inset (not the legend).
    inset = np.zeros_like(view)
    inset[SIZE[0] - SceneRenderer.PANEL_W :, 275:445] = True
    assert (_mask(pixels, COLOURS["force_calc"]) & inset).sum() > 20
    assert (_mask(pixels, COLOURS["force_act"]) & inset).sum() > 20


def test_attempt_recorded_in_trainee_database(trainer_run: tuple[list, Path]) -> None:
    results, out = trainer_run
    with TraineeDB(out / "trainees.sqlite") as db:
        attempts = db.attempts("tester")
        sessions = db.sessions("tester")
    assert len(sessions) == 1 and sessions[0].ended_s is not None
    assert [a.status for a in attempts] == ["aborted"]
    assert results[0].summary["outcome"] == "aborted"  # stopped by stop_after_s, as with Esc
    assert [a.outcome for a in attempts] == ["aborted"] and attempts[0].outcome_reason
    assert attempts[0].condition == "dg"
    assert Path(attempts[0].trial_path) == Path(results[0].summary["path"])
    assert Path(attempts[0].trial_path).is_file()


def test_closing_the_window_mid_attempt_records_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    results = run_trainer(WindowConfig(
        device="simulated", out_dir=tmp_path, trainee="tester", auto=("ng",),
        stop_after_s=0.5, stop_by="close",
    ))
    assert [r.status for r in results] == ["aborted"]
    with TraineeDB(tmp_path / "trainees.sqlite") as db:
        (attempt,) = db.attempts("tester")
        (session,) = db.sessions("tester")
    assert attempt.status == "aborted" and attempt.condition == "ng"
    assert session.ended_s is not None
    table = pq.read_table(attempt.trial_path)
    assert 400 <= table.num_rows <= 2000  # what ran before the close is kept
