"""What a first-time trainee sees (issue 21, items 4 and 5), checked against figures
computed here by hand, not copied from the code's output.

Drawn under SDL's dummy driver with fonts that record what they render; no servo process
(frames are built by hand), except where a test says so.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from app.ui.cards import (ROWS_BY_NAME, Comparison, compare, conditions_used, draw_progress, plural,
                          verdict_line)
from app.ui.scene import (COLOURS, AttemptInfo, Frame, PointerWorkspace, SceneRenderer, contact_verdict,
                          gauge_range, nice_step)
from app.ui.servo import ServoStats, data_quality
from app.ui.trainee_db import Attempt

SIZE = (1280, 760)
NAN = math.nan


class RecordingFont:
    """A pygame font that also keeps every text it renders."""

    def __init__(self, font, seen: list[str]) -> None:
        self.font, self.seen = font, seen

    def render(self, text, antialias, colour):
        self.seen.append(text)
        return self.font.render(text, antialias, colour)

    def size(self, text):
        return self.font.size(text)


def _fonts(pg, seen: list[str]) -> dict:
    return {name: RecordingFont(pg.font.SysFont(None, size), seen)
            for name, size in (("small", 20), ("normal", 26), ("large", 40))}


def _frame(t_s: float = 1.0, phase: str = "running", first_contact_s: float = NAN,
           ee_v=(0.0, 0.0, 0.0), flags: frozenset[str] = frozenset(), force_z: float = 0.0) -> Frame:
    z = np.zeros(3)
    links = np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.0], [0.6, 0.1, 0.0], [0.8, 0.2, 0.0], [0.8, 0.2, 0.0]])
    return Frame(
        t_s=t_s, ee_m=np.array([0.8, 0.2, 0.0]), ee_v_m_s=np.array(ee_v, dtype=float),
        target_m=np.array([0.9, 0.2, 0.0]), target_v_m_s=np.array([-0.1, 0.0, 0.0]), command_m=z.copy(),
        guidance_force_n=z.copy(), dev_force_calc_n=np.array([0.0, 0.0, force_z]),
        dev_force_act_n=np.array([0.0, 0.0, force_z]), base_torque_n_m=z.copy(), base_attitude_rad=z.copy(),
        distance_m=0.1, flags=flags, phase=phase, reached_at_s=NAN, links_m=links,
        servo_rate_hz=1000.0, servo_overruns=0, first_contact_s=first_contact_s,
    )


def _info(**changes) -> AttemptInfo:
    values = dict(model="planar-3r", n_joints=3, target_radius_m=0.0044, condition="dg",
                  scenario="paper-2019", duration_s=10.0, capture_speed_m_s=0.05, target_speed_m_s=0.1,
                  start_gap_m=0.28, post_capture_window_s=1.0, countdown_s=3.0)
    values.update(changes)
    return AttemptInfo(**values)


STATS = ServoStats(ticks=250, rate_hz=1000.0, overruns=0, worst_period_ms=1.1, running=True,
                   recent_worst_ms=1.1, priority="realtime")


# -- the attempt view --------------------------------------------------------------


def test_gauge_range_comes_from_the_scenarios_speeds() -> None:
    # paper-2019: debris 0.1 m/s, band 0.05 m/s: max(5 x 0.1, 10 x 0.05) = 0.5 m/s, ticks 0.1
    assert gauge_range(0.1, 0.05) == pytest.approx((0.5, 0.1))
    # a fast debris (0.3 m/s): 1.5 m/s rounds up to 2 m/s, ticks 0.5 (2/5 = 0.4 -> 0.5)
    assert gauge_range(0.3, 0.05) == pytest.approx((2.0, 0.5))
    # a slow drift with a tight band: max(0.1, 0.2) = 0.2
    assert gauge_range(0.02, 0.02) == pytest.approx((0.2, 0.05))
    assert [nice_step(v) for v in (0.07, 0.1, 0.3, 3.5)] == pytest.approx([0.1, 0.1, 0.5, 5.0])
    # the approach's usual closing speeds (0.25-0.46 m/s in paper-2019) are on the dial
    assert 0.46 < gauge_range(0.1, 0.05)[0]


def test_contact_verdict_against_the_band() -> None:
    assert contact_verdict(0.031, 0.05) == "soft"
    assert contact_verdict(0.05, 0.05) == "soft"  # at most the band is soft
    assert contact_verdict(0.081, 0.05) == "hard"
    assert contact_verdict(NAN, 0.05) == "missed"
    text, colour = verdict_line(0.081, 0.05)
    assert text.startswith("Hard contact: 81 mm/s") and "50 mm/s" in text and colour == "bad"
    assert verdict_line(NAN, 0.05)[0].startswith("No contact")


def test_attempt_view_shows_goal_countdown_verdict_and_scored_second(pygame) -> None:
    seen: list[str] = []
    info = _info()
    renderer = SceneRenderer(SIZE, info, _frame(phase="idle", t_s=0.0), _fonts(pygame, seen))
    surface = pygame.Surface(SIZE)
    renderer.draw(surface, _frame(phase="idle", t_s=0.0), "h", STATS, 60.0, countdown_left_s=2.4,
                  experimenter=False)
    assert "Goal: touch the debris at its own speed: closing speed under 5 cm/s at contact is a soft capture." in seen
    assert "3" in seen  # ceil(2.4 s)
    # approach at 3 cm/s closing (ee moves +x toward the debris at +x), then the contact
    seen.clear()
    renderer.draw(surface, _frame(t_s=1.5, ee_v=(-0.07, 0.0, 0.0)), "h", STATS, 60.0, experimenter=False)
    renderer.draw(surface, _frame(t_s=1.6, ee_v=(-0.07, 0.0, 0.0), first_contact_s=1.6,
                                  flags=frozenset({"contact"})), "h", STATS, 60.0, experimenter=False)
    # closing speed (v_ee - v_debris) . u = (-0.07 + 0.1) = 0.03 m/s <= 0.05: soft
    assert any(t.startswith("Contact at 1.60 s: SOFT (about 3.0 cm/s") for t in seen)
    assert "The 1 s after the first contact is scored: stay with the debris, moving at its speed." in seen
    # the capture moment is marked where it happened
    assert "first contact" in seen
    assert renderer.contact_at is not None


def test_trainee_view_hides_the_engineering_figures(pygame) -> None:
    seen: list[str] = []
    frame = _frame()
    renderer = SceneRenderer(SIZE, _info(), frame, _fonts(pygame, seen))
    renderer.draw(pygame.Surface(SIZE), frame, "h", STATS, 60.0, experimenter=False)
    assert not any(t.startswith("servo ") or t.startswith("base disturbance") for t in seen)
    seen.clear()
    renderer.draw(pygame.Surface(SIZE), frame, "h", STATS, 60.0, experimenter=True)
    assert any(t.startswith("attempt: overruns") for t in seen)
    assert any(t.startswith("base disturbance") for t in seen)


def test_gauge_ticks_span_the_scenario_range(pygame) -> None:
    seen: list[str] = []
    frame = _frame()
    renderer = SceneRenderer(SIZE, _info(target_speed_m_s=0.3), frame, _fonts(pygame, seen))
    renderer.draw(pygame.Surface(SIZE), frame, "h", STATS, 60.0)
    # full scale 2 m/s, ticks every 0.5 m/s, every tick labelled in cm/s (n = 4 > 3: every other)
    for label in ("-200", "-100", "0", "100", "200"):
        assert label in seen


def test_force_inset_shows_the_z_axis(pygame) -> None:
    up = _frame(force_z=2.0)
    renderer = SceneRenderer(SIZE, _info(), up, _fonts(pygame, []))
    surface = pygame.Surface(SIZE)
    renderer.draw(surface, up, "h", STATS, 60.0)
    rect = renderer.force_rect
    zbar_x = rect.right - 34 + 10
    mid = rect.y + 8 + (rect.height - 16) // 2
    # +2 N on z: a calculated bar above the middle of the z bar, none below it
    assert tuple(surface.get_at((zbar_x, mid - 20)))[:3] in (COLOURS["force_calc"], COLOURS["force_act"])
    assert tuple(surface.get_at((zbar_x, mid + 20)))[:3] not in (COLOURS["force_calc"], COLOURS["force_act"])


def test_spatial_views_cast_shadows_on_a_ground_plane(pygame) -> None:
    frame = _frame()
    frame.target_m[2] = 0.3  # the debris above the tool
    info = _info(model="spatial-7dof")
    renderer = SceneRenderer(SIZE, info, frame, _fonts(pygame, []))
    surface = pygame.Surface(SIZE)
    renderer.draw(surface, frame, "h", STATS, 60.0)
    pixels = pygame.surfarray.array3d(surface)
    shadow = np.all(pixels == np.array(COLOURS["shadow"]), axis=-1)
    side = renderer.views[1][1]
    ground_y = side(np.array([0.0, 0.0, renderer.ground_z_m]))[1]
    assert shadow[side.rect.x + 5: side.rect.right - 5, ground_y].mean() > 0.6  # the ground line (the base may cover some)
    top = renderer.views[0][1]
    # the debris' shadow in the top view: offset by SHADOW_SLANT x height to the lower right
    x, y = top(frame.target_m)
    height_px = 0.6 * (0.3 - renderer.ground_z_m) * top.px_per_m
    assert shadow[int(x + height_px) - 3: int(x + height_px) + 4, int(y + height_px)].any()


# -- mouse mode --------------------------------------------------------------------


def test_pointer_reach_is_centred_on_the_capture_task() -> None:
    """paper-2019 with a Touch-sized pointer box: the debris path from its start to its
    closest approach lies inside what the pointer can reach (so an unguided attempt can
    reach it), and the cursor is the stylus command (the mapping x_task = ee0 + sR(x - x0))."""
    from haptics.shared_input import POINTER_SPEC
    from trials.runner import device_start_position
    from trials.vocabulary import load_scenario

    scenario = load_scenario("paper-2019")
    ee0 = np.array([0.5, 0.3, 0.0])
    start = device_start_position(scenario, ee0, POINTER_SPEC)
    workspace = PointerWorkspace(tuple(ee0), tuple(start), 1.75, ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
                                 POINTER_SPEC.workspace_min_m, POINTER_SPEC.workspace_max_m)
    # the box spans 1.75 x (160 x 120) mm = 280 x 210 mm of task
    corners = workspace.corners_task()
    assert np.ptp(corners[:, 0]) == pytest.approx(0.28) and np.ptp(corners[:, 1]) == pytest.approx(0.21)
    # the debris: ee0 + (0.27, -0.099) at t = 0, moving -x at 0.1 m/s; closest to ee0 at 2.7 s
    for t in np.linspace(0.3, 2.7, 25):
        debris = ee0 + np.array([0.27 - 0.1 * t, -0.099, 0.0])
        assert workspace.contains(debris), t
    assert workspace.contains(ee0)
    # the cursor at the end effector commands the anchored start; a point is its own image
    np.testing.assert_allclose(workspace.to_device(ee0), start)
    point = ee0 + np.array([0.1, -0.05, 0.0])
    np.testing.assert_allclose(workspace.to_task(workspace.to_device(point)), point, atol=1e-12)
    # outside the box: clipped to its edge
    far = workspace.to_task(workspace.to_device(ee0 + np.array([5.0, 0.0, 0.0])))
    assert far[0] == pytest.approx(corners[:, 0].max())


def test_mouse_view_draws_the_reach_and_links_the_cursor(pygame) -> None:
    frame = _frame()
    workspace = PointerWorkspace((0.8, 0.2, 0.0), (0.0, 0.0, 0.0), 1.75,
                                 ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
                                 (-0.08, -0.06, -0.035), (0.08, 0.06, 0.035))
    renderer = SceneRenderer(SIZE, _info(workspace=workspace), frame, _fonts(pygame, []))
    surface = pygame.Surface(SIZE)
    cursor = np.array([0.85, 0.25, 0.0])
    renderer.draw(surface, frame, "h", STATS, 60.0, cursor_m=cursor)
    view = renderer.views[0][1]
    # the reach's left edge: task x = 0.8 + 1.75 x (-0.08) = 0.66
    left = view(np.array([0.66, 0.25, 0.0]))  # off the debris path line (y = 0.2)
    column = [tuple(surface.get_at((left[0] + dx, left[1])))[:3] for dx in (-1, 0, 1)]
    assert COLOURS["reach"] in column
    cx, cy = view(cursor)
    assert tuple(surface.get_at((cx, cy)))[:3] == COLOURS["cursor"]


# -- the score card and the progress view ---------------------------------------------


def test_score_rows_in_readable_units_and_none_measurable() -> None:
    velocity = ROWS_BY_NAME["mse_velocity_m2_s2"]
    # an MSE of 797 mm²/s² is an RMS of sqrt(797) = 28.2 mm/s
    assert velocity.format(velocity.value(797e-6)) == "28.2 mm/s"
    torque = ROWS_BY_NAME["peak_base_torque_n_m"]
    assert torque.format(torque.value(2e-7)) == "none measurable"
    assert torque.format(torque.value(0.0123)) == "0.012 N m"
    drift = ROWS_BY_NAME["peak_base_attitude_rad"]
    assert drift.format(drift.value(3.4e-4)) == "0.34 mrad"


def test_no_better_or_worse_below_the_resolution() -> None:
    # 0.4 mm/s apart: below the 1 mm/s resolution, about the same (not "better")
    assert Comparison(0.0200, 0.0204, 0.0204, 1, resolution=1e-3).verdict == "same"
    assert Comparison(0.0150, 0.0204, 0.0204, 1, resolution=1e-3).verdict == "best"
    # tiny base torques compared: about the same, not "better"
    assert Comparison(1e-7, 3e-7, 3e-7, 2, resolution=1e-3).verdict == "same"


def _attempt(i: int, session: int, condition: str, impact: float, outcome: str, status: str = "finished") -> Attempt:
    scores = {"impact_velocity_m_s": impact, "time_to_reach_s": 2.0 if impact == impact else NAN,
              "mse_velocity_m2_s2": NAN, "mse_position_m2": NAN, "peak_base_torque_n_m": NAN,
              "peak_base_attitude_rad": NAN}
    return Attempt(i, session, "ada", 0.0, 1.0, "paper-2019", condition, i, f"t{i}", f"/t{i}", status,
                   None, impact == impact, scores, outcome, "")


def test_progress_counts_every_attempt_and_lists_used_conditions_only(pygame) -> None:
    attempts = [_attempt(1, 1, "dg", 0.03, "captured"), _attempt(2, 1, "ng", NAN, "missed"),
                _attempt(3, 1, "ng", 0.12, "pushed_away")]
    assert conditions_used(attempts) == ["dg", "ng"]
    seen: list[str] = []
    surface = pygame.Surface(SIZE)
    draw_progress(surface, _fonts(pygame, seen), "ada", attempts, "hint", 0.05)
    assert "1 session, 3 attempts: 1 captured, 2 reached the debris" in seen
    assert not any(t.startswith("APF") or t.startswith("AS") for t in seen)
    assert "soft capture: under 50 mm/s" in seen
    # y ticks: top 0.12 x 1.1 = 132 mm/s -> step nice(26.4) = 50: 0, 50, 100 and one above
    assert {"0", "50", "100"} <= set(seen)
    assert "no contact" in seen  # the miss is drawn, on the no-contact row
    assert plural(1, "session") == "1 session" and plural(2, "session") == "2 sessions"
    assert plural(0, "attempt") == "0 attempts"


def test_score_card_has_no_file_path_nor_finished(pygame, tmp_path: Path) -> None:
    from app.ui.servo import AttemptSpec
    from app.ui.trainee_db import TraineeDB
    from app.ui.window import AttemptResult, _ScoreScreen

    seen: list[str] = []
    db = TraineeDB(tmp_path / "t.sqlite")
    db.start_session("ada", "mouse")
    config = SimpleNamespace(device="mouse", participant_kind="novice")
    app = SimpleNamespace(fonts=_fonts(pygame, seen), pygame=pygame, experimenter=False, config=config)
    flow = SimpleNamespace(app=app, db=db, trainee="ada")
    spec = AttemptSpec(scenario="paper-2019", condition="ng", participant="ada", seed=1, out_dir=str(tmp_path))
    metrics = {"reached": True, "impact_velocity_m_s": 0.09, "contact_normal_speed_m_s": 0.081,
               "mse_velocity_m2_s2": 797e-6, "time_to_reach_s": 1.2, "complete": True}
    result = AttemptResult(spec=spec, status="finished", summary={"path": str(tmp_path / "a.parquet"),
                           "outcome": "pushed_away", "outcome_reason": "bounced"}, metrics=metrics,
                           timing={"rate_hz": 1000.0, "overruns": 3, "max_period_ms": 12.0}, priority="high")
    try:
        screen = _ScoreScreen(flow, result, 0)  # type: ignore[arg-type]
        screen.draw(pygame.Surface(SIZE))
        assert not any("parquet" in t or "finished" in t for t in seen)
        assert any(t.startswith("Hard contact: 81 mm/s") for t in seen)  # the scenario's band is 50 mm/s
        assert "28.2 mm/s" in seen
        assert not any("mm²" in t for t in seen)
        # the experimenter's view: the data-quality flags of this trial
        seen.clear()
        app.experimenter = True
        screen.draw(pygame.Surface(SIZE))
        texts = " | ".join(seen)
        assert "stall: the longest servo period was 12 ms" in texts
        assert "3 servo overruns" in texts and "no real-time priority" in texts
        assert "simulated participant" not in texts  # a person on the mouse
    finally:
        db.close()


def test_data_quality_flags() -> None:
    clean = data_quality({"rate_hz": 1000.0, "overruns": 0, "max_period_ms": 1.2}, "realtime", "person")
    assert clean == []
    flags = [f.text for f in data_quality({"rate_hz": 950.0, "overruns": 1, "max_period_ms": 3.0}, "normal",
                                          "novice", "aborted")]
    assert flags == ["1 servo overrun (periods over 1.5 ms)", "mean servo rate 950 Hz (nominal 1000 Hz)",
                     "no real-time priority (the servo ran at normal priority)",
                     "simulated participant (novice), not a person", "trial aborted: its file is incomplete"]


def test_compare_uses_rms_for_mse_rows() -> None:
    earlier = [_attempt(1, 1, "dg", 0.03, "captured")]
    earlier[0].scores["mse_velocity_m2_s2"] = 400e-6  # RMS 20 mm/s
    out = compare({"mse_velocity_m2_s2": 100e-6}, earlier)["mse_velocity_m2_s2"]  # RMS 10 mm/s
    assert out.value == pytest.approx(0.01) and out.best_before == pytest.approx(0.02)
    assert out.verdict == "best"


def test_countdown_hold_ends_at_once_on_abort() -> None:
    """Esc during the countdown: the servo's hold returns without waiting it out."""
    from app.ui.servo import ABORT, _hold

    control = [0.0] * 8
    control[ABORT] = 1.0
    _hold(control, 3600.0)  # a wait of an hour would trip the test's timeout


def test_pointer_workspace_from_the_started_message() -> None:
    payload = {"ee0_m": [0.5, 0.3, 0.0], "device_start_m": [-0.064, 0.028, 0.0], "position_scale": 1.75,
               "rotation_task_from_device": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
               "workspace_min_m": [-0.08, -0.06, -0.035], "workspace_max_m": [0.08, 0.06, 0.035]}
    workspace = PointerWorkspace.from_payload(payload)
    assert workspace is not None and workspace.scale == 1.75
    # the box's task x-range: 0.5 + 1.75 x (-0.08 + 0.064) = 0.472 to 0.5 + 1.75 x 0.144 = 0.752
    corners = workspace.corners_task()
    assert corners[:, 0].min() == pytest.approx(0.472) and corners[:, 0].max() == pytest.approx(0.752)
    assert PointerWorkspace.from_payload({"ee0_m": [0, 0, 0]}) is None  # a factory without the figures
