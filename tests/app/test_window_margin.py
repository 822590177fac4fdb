"""The base-safe margin gauge in the attempt panel: the reactionless workspace's margin.

The gauge reads the snapshot's ``sigma_ratio`` (the IK's reaction-singularity gauge):
full and green at or above the reaction-boundary fixture's margin (0.03), falling
linearly to empty at its threshold (0.01), with a warning line below the margin. Frames
are rendered under SDL's dummy driver and the gauge's pixels counted in the renderer's
own bar rectangle.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from app.ui.scene import (BASE_MARGIN, BASE_THRESHOLD, COLOURS, MARGIN_WARNING, AttemptInfo, Frame,
                          SceneRenderer, base_margin)
from app.ui.servo import ServoStats
from guidance.fixtures import ReactionBoundary
from trials.snapshot import SharedSnapshot, SnapshotLayout

SIZE = (1280, 760)
NAN = math.nan
FILLS = ("good", "warn", "bad")


def _fonts(pg) -> dict:
    return {name: pg.font.SysFont(None, size) for name, size in (("small", 20), ("normal", 26), ("large", 40))}


def _frame(sigma_ratio: float = NAN) -> Frame:
    z = np.zeros(3)
    links = np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.0], [0.6, 0.1, 0.0], [0.8, 0.2, 0.0]])
    return Frame(
        t_s=1.0, ee_m=links[-1].copy(), ee_v_m_s=z.copy(), target_m=np.array([1.0, 0.3, 0.0]),
        target_v_m_s=np.array([-0.01, 0.0, 0.0]), command_m=z.copy(), guidance_force_n=z.copy(),
        dev_force_calc_n=z.copy(), dev_force_act_n=z.copy(), base_torque_n_m=z.copy(),
        base_attitude_rad=z.copy(), distance_m=0.2, flags=frozenset(), phase="running",
        reached_at_s=NAN, links_m=links, servo_rate_hz=1000.0, servo_overruns=0, sigma_ratio=sigma_ratio,
    )


def _render(pg, sigmas: tuple[float, ...]) -> tuple[SceneRenderer, dict[float, np.ndarray]]:
    info = AttemptInfo(model="planar-3r", n_joints=3, target_radius_m=0.05, condition="dg",
                       scenario="paper-2019", duration_s=10.0)
    renderer = SceneRenderer(SIZE, info, _frame(), _fonts(pg))
    stats = ServoStats(ticks=250, rate_hz=1000.0, overruns=0, worst_period_ms=1.0, running=True)
    pixels = {}
    for sigma in sigmas:
        surface = pg.Surface(SIZE)
        renderer.draw(surface, _frame(sigma), "header", stats, 60.0)
        pixels[sigma] = pg.surfarray.array3d(surface)  # indexed [x, y]
    return renderer, pixels


def _count(pixels: np.ndarray, box: tuple[int, int, int, int], colour: str) -> int:
    x, y, w, h = box
    region = pixels[x:x + w, y:y + h]
    return int(np.all(region == np.array(COLOURS[colour]), axis=-1).sum())


def test_marks_are_the_reaction_boundary_defaults() -> None:
    fixture = ReactionBoundary()
    assert BASE_MARGIN == fixture.margin
    assert BASE_THRESHOLD == fixture.threshold


def test_gauge_fills_from_threshold_to_margin() -> None:
    full, half, empty = base_margin(0.5), base_margin(0.02), base_margin(0.005)
    assert (full.level, full.colour, full.warning) == (1.0, "good", "")
    assert half.level == pytest.approx(0.5) and half.colour == "warn" and half.warning == MARGIN_WARNING
    assert (empty.level, empty.colour, empty.warning) == (0.0, "bad", MARGIN_WARNING)
    # the marks themselves: full without a warning at the margin, empty at the threshold
    assert (base_margin(BASE_MARGIN).level, base_margin(BASE_MARGIN).warning) == (1.0, "")
    assert base_margin(BASE_THRESHOLD).level == 0.0
    assert base_margin(0.015).level == pytest.approx(0.25) and base_margin(0.015).colour == "bad"
    assert "50%" in half.label and "100%" in full.label
    none = base_margin(NAN)
    assert (none.level, none.colour, none.warning) == (0.0, "dim", "") and "no reading" in none.label


def test_window_draws_the_gauge_full_half_and_empty(pygame) -> None:
    renderer, pixels = _render(pygame, (0.5, 0.02, 0.005, NAN))
    bar = renderer.margin_bar()
    box = (bar.x, bar.y, bar.width, bar.height)
    area = bar.width * bar.height

    # Fill pixels in the bar: all green at 0.5, about half amber at 0.02, none at 0.005 or NaN.
    counts = {sigma: {c: _count(pixels[sigma], box, c) for c in FILLS} for sigma in pixels}
    assert counts[0.5] == {"good": area, "warn": 0, "bad": 0}
    assert counts[0.02]["good"] == 0 and counts[0.02]["bad"] == 0
    assert abs(counts[0.02]["warn"] / area - 0.5) < 0.03
    assert counts[0.005] == {"good": 0, "warn": 0, "bad": 0}
    assert counts[NAN] == {"good": 0, "warn": 0, "bad": 0}
    # The filled part starts at the threshold's mark (left end).
    left = (bar.x, bar.y, bar.width // 4, bar.height)
    assert _count(pixels[0.02], left, "warn") == (bar.width // 4) * bar.height

    # The two marks, just outside the fill area, in every frame.
    for sigma in pixels:
        for mark_x in (bar.left - 2, bar.right):
            assert _count(pixels[sigma], (mark_x, bar.y - 3, 2, bar.height + 6), "text") == 2 * (bar.height + 6)

    # The warning line under the bar: amber at 0.02, red at 0.005, absent at 0.5 and without a reading.
    line = (renderer.panel.x, renderer.margin_rect.bottom + 4, renderer.PANEL_W, 16)
    assert _count(pixels[0.02], line, "warn") > 20 and _count(pixels[0.02], line, "bad") == 0
    assert _count(pixels[0.005], line, "bad") > 20 and _count(pixels[0.005], line, "warn") == 0
    for sigma in (0.5, NAN):
        assert all(_count(pixels[sigma], line, c) == 0 for c in FILLS)
        assert np.all(pixels[sigma][line[0]:line[0] + line[2], line[1]:line[1] + line[3]]
                      == np.array(COLOURS["panel"]))


def test_warning_fits_the_panel_above_the_legend(pygame) -> None:
    renderer, _ = _render(pygame, ())
    font = renderer.fonts["small"]
    width, height = font.size(MARGIN_WARNING)
    rect = renderer.margin_rect
    assert rect.x + width <= renderer.panel.right
    assert rect.bottom + 4 + height < 530  # the legend's first row


def test_frame_reads_sigma_ratio_and_is_nan_without_it() -> None:
    snapshot = SharedSnapshot(SnapshotLayout(3))
    try:
        staging = snapshot.staging
        staging[:] = 0.0
        snapshot.field(staging, "sigma_ratio")[0] = 0.021
        snapshot.publish()
        frame = Frame.read(snapshot)
        assert frame is not None and frame.sigma_ratio == 0.021
        # A block laid out without the field: no reading rather than a wrong one.
        snapshot.offsets = {k: v for k, v in snapshot.offsets.items() if k != "sigma_ratio"}
        frame = Frame.read(snapshot)
        assert frame is not None and math.isnan(frame.sigma_ratio)
    finally:
        snapshot.close()
    assert math.isnan(replace(_frame(0.5), sigma_ratio=NAN).sigma_ratio)
