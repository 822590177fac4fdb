"""The servo corner's lamp takes the colour of the servo's health, and the window tells the
user, once and visibly, when the servo has no real-time priority."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from app.ui.scene import COLOURS, AttemptInfo, Frame, SceneRenderer
from app.ui.servo import ServoMonitor, ServoStats

SIZE = (1280, 760)


def _frame() -> Frame:
    z = np.zeros(3)
    links = np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.0], [0.6, 0.1, 0.0], [0.8, 0.2, 0.0]])
    return Frame(
        t_s=1.0, ee_m=links[-1].copy(), ee_v_m_s=z.copy(), target_m=np.array([1.0, 0.3, 0.0]),
        target_v_m_s=np.array([-0.01, 0.0, 0.0]), command_m=z.copy(), guidance_force_n=z.copy(),
        dev_force_calc_n=z.copy(), dev_force_act_n=z.copy(), base_torque_n_m=z.copy(),
        base_attitude_rad=z.copy(), distance_m=0.2, flags=frozenset(), phase="approach",
        reached_at_s=float("nan"), links_m=links, servo_rate_hz=1000.0, servo_overruns=0,
    )


def _stats(rate: float, window_worst: float, worst: float) -> ServoStats:
    return ServoStats(ticks=250, rate_hz=rate, overruns=0, worst_period_ms=worst, running=True,
                      recent_worst_ms=window_worst, priority="realtime")


@pytest.mark.parametrize(("rate", "window_worst", "colour"), [
    (1000.0, 1.1, "good"),
    (1000.0, 3.0, "warn"),
    (1000.0, 117.0, "bad"),
    (930.0, 1.1, "bad"),
])
def test_lamp_colour_follows_the_health(pygame, rate: float, window_worst: float, colour: str) -> None:
    fonts = {name: pygame.font.SysFont(None, size) for name, size in
             (("small", 20), ("normal", 26), ("large", 40))}
    info = AttemptInfo(model="planar-3r", n_joints=3, target_radius_m=0.05, condition="dg",
                       scenario="paper-2019", duration_s=10.0)
    frame = _frame()
    renderer = SceneRenderer(SIZE, info, frame, fonts)
    surface = pygame.Surface(SIZE)
    stats = _stats(rate, window_worst, window_worst)
    recent = ServoMonitor().update(stats, 0.0)
    renderer.draw(surface, frame, "header", stats, 60.0, recent)
    lamp = (SIZE[0] - SceneRenderer.PANEL_W + 26, SIZE[1] - 98)
    assert tuple(surface.get_at(lamp))[:3] == COLOURS[colour]


def test_window_says_once_that_the_servo_has_no_realtime_priority(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    """The servo here may well get real-time priority (tests often run as root), so the
    window is told it did not; what is checked is that the notice is shown and logged."""
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    import app.ui.window as window
    from app.ui.servo import priority_notice

    monkeypatch.setattr(window, "priority_notice", lambda got: priority_notice("normal"))
    frames_with_notice = [0]
    amber_pixels = [0]

    def driver(app: window.App) -> None:
        if not app.notice:
            return
        frames_with_notice[0] += 1
        if frames_with_notice[0] == 3:  # the menu has been drawn with the notice
            pixels = app.pygame.surfarray.pixels3d(app.screen)
            amber_pixels[0] = int(np.all(pixels == np.array(COLOURS["warn"]), axis=-1).sum())
            del pixels
            app.pygame.event.post(app.pygame.event.Event(app.pygame.KEYDOWN, key=app.pygame.K_q))

    with caplog.at_level(logging.WARNING, logger="app.ui.window"):
        window.run_trainer(window.WindowConfig(out_dir=tmp_path, trainee="ada"), driver=driver)
    assert amber_pixels[0] > 50  # amber text on the menu
    warnings = [r.getMessage() for r in caplog.records if "real-time priority" in r.getMessage()]
    assert len(warnings) == 1 and "setcap cap_sys_nice+ep" in warnings[0]
