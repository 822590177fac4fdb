"""The capture tool in the attempt view: drawn at the end effector, coloured by contact state.

Frames are rendered under SDL's dummy driver. The envelope's ring is found from the
renderer's own geometry (its projection and drawn radii); the pixels on it must change
colour between "no contact", "contact" and "captured", and the panel's status line must
name the contact and capture times the snapshot carries.
"""

from __future__ import annotations

import math
from pathlib import Path
from dataclasses import replace

import numpy as np
import pytest

from app.ui.scene import COLOURS, MIN_ENVELOPE_PX, AttemptInfo, Frame, SceneRenderer, capture_status
from app.ui.servo import ServoStats
from capture_trainer import trial_log
from robot.models import CaptureTool
from trials.snapshot import SharedSnapshot, SnapshotLayout

SIZE = (1280, 760)
NAN = math.nan


def _fonts(pg) -> dict:
    return {name: pg.font.SysFont(None, size) for name, size in (("small", 20), ("normal", 26), ("large", 40))}


def _frame(flags: frozenset[str] = frozenset(), first_contact_s: float = NAN, captured_at_s: float = NAN,
           released_at_s: float = NAN) -> Frame:
    z = np.zeros(3)
    links = np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.0], [0.6, 0.1, 0.0], [0.8, 0.2, 0.0]])
    return Frame(
        t_s=1.5, ee_m=links[-1].copy(), ee_v_m_s=z.copy(),
        # the fixture 6 mm from the end effector (touching the probe), moving with it
        target_m=links[-1] + np.array([0.006, 0.0, 0.0]), target_v_m_s=np.array([-0.01, 0.0, 0.0]),
        command_m=z.copy(), guidance_force_n=z.copy(), dev_force_calc_n=z.copy(), dev_force_act_n=z.copy(),
        base_torque_n_m=z.copy(), base_attitude_rad=z.copy(), distance_m=0.0, flags=flags, phase="running",
        reached_at_s=1.0, links_m=links, servo_rate_hz=1000.0, servo_overruns=0,
        first_contact_s=first_contact_s, captured_at_s=captured_at_s, released_at_s=released_at_s,
    )


STATES = {
    "tool": _frame(),
    "contact": _frame(frozenset({"contact"}), first_contact_s=1.02),
    "captured": _frame(frozenset({"contact", "captured"}), first_contact_s=1.02, captured_at_s=1.27),
    # the task's open state let the debris go: no flag, the release time
    "open": _frame(first_contact_s=1.02, captured_at_s=1.27, released_at_s=1.41),
}


def _render(pg, model: str, fixture_radius_m: float) -> tuple[SceneRenderer, dict[str, np.ndarray]]:
    tool = CaptureTool()
    info = AttemptInfo(model=model, n_joints=3, target_radius_m=fixture_radius_m, condition="dg",
                       scenario="paper-2019", duration_s=10.0, tool_tip_radius_m=tool.tip_radius_m,
                       envelope_radius_m=tool.envelope_radius_m)
    renderer = SceneRenderer(SIZE, info, STATES["tool"], _fonts(pg))
    stats = ServoStats(ticks=250, rate_hz=1000.0, overruns=0, worst_period_ms=1.0, running=True)
    pixels = {}
    for state, frame in STATES.items():
        surface = pg.Surface(SIZE)
        renderer.draw(surface, frame, "header", stats, 60.0)
        pixels[state] = pg.surfarray.array3d(surface)  # indexed [x, y]
    return renderer, pixels


def _ring(renderer: SceneRenderer, view_index: int, width_px: float = 3.5) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (x, y) within ``width_px`` inside the drawn envelope's radius,
    on the side away from the fixture (which sits at +x of the end effector)."""
    _, view = renderer.views[view_index]
    cx, cy = view(STATES["tool"].ee_m)
    _, _, envelope_px = renderer.radii_px(view)
    xs, ys = np.meshgrid(np.arange(SIZE[0]), np.arange(SIZE[1]), indexing="ij")
    r = np.hypot(xs - cx, ys - cy)
    ring = (r <= envelope_px + 0.5) & (r >= envelope_px - width_px) & (xs < cx)
    return xs[ring], ys[ring]


def _share(pixels: np.ndarray, where: tuple[np.ndarray, np.ndarray], colour: str) -> float:
    return float(np.mean(np.all(pixels[where] == np.array(COLOURS[colour]), axis=-1)))


@pytest.mark.parametrize(("model", "fixture_radius_m", "n_views"),
                         [("planar-3r", 0.0044, 1), ("spatial-7dof", 0.01, 2)])
def test_envelope_changes_colour_with_contact_and_capture(pygame, model: str, fixture_radius_m: float,
                                                          n_views: int) -> None:
    renderer, pixels = _render(pygame, model, fixture_radius_m)
    assert len(renderer.views) == n_views
    for index in range(n_views):
        ring = _ring(renderer, index)
        assert ring[0].size > 20
        # Each state's colour covers a good part of the ring in its own frame, none in the others.
        for state in STATES:
            assert _share(pixels[state], ring, state) > 0.15, (state, index)
            for other in STATES:
                if other != state:
                    assert _share(pixels[other], ring, state) == 0.0, (state, other, index)
        # Pixel by pixel: the ring's contact-coloured pixels are another colour once captured.
        touched = np.all(pixels["contact"][ring] == np.array(COLOURS["contact"]), axis=-1)
        assert not np.any(np.all(pixels["captured"][ring][touched] == pixels["contact"][ring][touched], axis=-1))


def test_tool_drawn_to_scale_with_the_fixture(pygame) -> None:
    renderer, pixels = _render(pygame, "planar-3r", 0.0044)
    _, view = renderer.views[0]
    fixture_px, tip_px, envelope_px = renderer.radii_px(view)
    tool = CaptureTool()
    # one magnification for the three: their drawn sizes keep the true proportions (to a pixel)
    scale = view.px_per_m * renderer.detail
    assert renderer.detail >= 1.0
    assert envelope_px >= MIN_ENVELOPE_PX
    assert abs(envelope_px - tool.envelope_radius_m * scale) <= 0.5
    assert abs(fixture_px - 0.0044 * scale) <= 0.5 or fixture_px == 7
    assert abs(tip_px - tool.tip_radius_m * scale) <= 0.5 or tip_px == 2
    assert tip_px < fixture_px < envelope_px
    # The probe tip is a filled circle at the end effector, in the state's colour.
    ee = view(STATES["tool"].ee_m)
    for state in STATES:
        assert tuple(pixels[state][ee[0], ee[1]]) == COLOURS[state]


def test_the_opened_tool_is_drawn_as_jaws_open_toward_the_debris(pygame) -> None:
    """The closed tool's envelope is a whole ring; the opened one's leaves a gap on the
    side of the fixture (at +x of the end effector here) and covers the side away."""
    renderer, pixels = _render(pygame, "planar-3r", 0.0044)
    _, view = renderer.views[0]
    cx, cy = view(STATES["tool"].ee_m)
    _, _, envelope_px = renderer.radii_px(view)
    xs, ys = np.meshgrid(np.arange(SIZE[0]), np.arange(SIZE[1]), indexing="ij")
    r = np.hypot(xs - cx, ys - cy)
    band = (r <= envelope_px + 0.5) & (r >= envelope_px - 2.5)
    toward = band & (xs > cx) & (np.abs(ys - cy) < 0.3 * envelope_px)  # within ±17° of the fixture
    assert toward.sum() > 3
    assert _share(pixels["captured"], (xs[toward], ys[toward]), "captured") > 0.5
    assert _share(pixels["open"], (xs[toward], ys[toward]), "open") == 0.0
    assert STATES["open"].tool_state == "open" and STATES["open"].released and not STATES["captured"].released


def test_status_line_names_contact_and_capture_times() -> None:
    assert capture_status(STATES["tool"]) == ("no contact yet", "normal", "dim")
    assert capture_status(STATES["contact"])[::2] == ("contact at 1.02 s", "contact")
    assert capture_status(STATES["captured"])[::2] == ("captured at 1.27 s", "captured")
    assert capture_status(STATES["open"])[::2] == ("tool opened at 1.41 s (captured at 1.27 s)", "open")
    lost = replace(STATES["contact"], flags=frozenset())
    assert capture_status(lost)[0] == "contact at 1.02 s, not touching now"


def test_status_line_is_drawn_in_the_state_colour(pygame) -> None:
    renderer, pixels = _render(pygame, "planar-3r", 0.0044)
    label = np.zeros(SIZE, dtype=bool)
    label[SIZE[0] - SceneRenderer.PANEL_W:, 234:256] = True  # the panel's capture line
    for state in ("contact", "captured"):
        assert np.all(pixels[state][label] == np.array(COLOURS[state]), axis=-1).sum() > 30


def test_frame_reads_the_contact_fields_of_the_snapshot() -> None:
    snapshot = SharedSnapshot(SnapshotLayout(3))
    try:
        staging = snapshot.staging
        staging[:] = 0.0
        bits = (1 << trial_log.FLAGS.index("contact")) | (1 << trial_log.FLAGS.index("captured"))
        snapshot.field(staging, "flags")[0] = bits
        snapshot.field(staging, "first_contact_s")[0] = 0.75
        snapshot.field(staging, "captured_at_s")[0] = 1.25
        snapshot.field(staging, "reached_at_s")[0] = NAN
        snapshot.publish()
        frame = Frame.read(snapshot)
        assert frame is not None
        assert frame.in_contact and frame.captured and frame.tool_state == "captured"
        assert frame.first_contact_s == 0.75 and frame.captured_at_s == 1.25
        snapshot.field(staging, "flags")[0] = 0
        snapshot.field(staging, "first_contact_s")[0] = NAN
        snapshot.field(staging, "captured_at_s")[0] = NAN
        snapshot.publish()
        frame = Frame.read(snapshot)
        assert frame is not None and frame.tool_state == "tool"
        assert math.isnan(frame.first_contact_s) and math.isnan(frame.captured_at_s)
    finally:
        snapshot.close()


def test_a_whole_attempt_draws_the_tool_state_of_each_frame(tmp_path: Path, monkeypatch) -> None:
    """The real servo and window, a simulated expert to the end of the attempt: every drawn
    frame shows the tool in its state's colour (and no other state's) around the end
    effector; the outcome reaches the summary and the trainee database."""
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    from analysis.outcomes import OUTCOMES
    from app.ui.trainee_db import TraineeDB
    from app.ui.window import App, AttemptScreen, WindowConfig, run_trainer

    seen: dict[str, int] = {}
    wrong: list[str] = []

    def driver(app: App) -> None:
        screen = app.screen_obj
        if not isinstance(screen, AttemptScreen) or screen.renderer is None or screen.frame is None:
            return
        frame, renderer = screen.frame, screen.renderer
        _, view = renderer.views[0]
        cx, cy = view(frame.ee_m)
        reach = renderer.radii_px(view)[2] + 3
        pixels = app.pygame.surfarray.pixels3d(app.screen)
        box = pixels[max(cx - reach, 0):cx + reach + 1, max(cy - reach, 0):cy + reach + 1].copy()
        del pixels
        state = frame.tool_state
        seen[state] = seen.get(state, 0) + 1
        counts = {s: int(np.all(box == np.array(COLOURS[s]), axis=-1).sum()) for s in ("tool", "contact", "captured")}
        if counts[state] < 10 or any(n for s, n in counts.items() if s != state):
            wrong.append(f"t={frame.t_s:.3f} {state}: {counts}")

    results = run_trainer(WindowConfig(device="simulated", participant_kind="expert", out_dir=tmp_path,
                                       trainee="ada", auto=("dg",), quit_when_done=True), driver=driver)
    (result,) = results
    assert result.status == "finished", result.message
    assert not wrong, wrong[:5]
    assert seen.get("tool", 0) > 30
    outcome = result.summary["outcome"]
    assert outcome in OUTCOMES and outcome != "aborted" and result.summary["outcome_reason"]
    if outcome == "captured":
        assert seen.get("captured", 0) > 10  # the post-capture window is shown
    with TraineeDB(tmp_path / "trainees.sqlite") as db:
        (attempt,) = db.attempts("ada")
    assert attempt.outcome == outcome and attempt.outcome_reason == result.summary["outcome_reason"]
    assert attempt.captured == (outcome == "captured")
