"""The task after the capture as the trainer draws it (issue 19, item 4): keys to states,
the wrench arrow and its limit, the close-up, the state timeline, the snapshot's slots.

Expectations are computed here by hand from the drawing's documented scales
(``LIMIT_RING_PX`` pixels at the limit, ``CLOSE_UP_SPAN_M`` across the close-up), on
hand-made frames; no servo process.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.ui.behaviours_view import (CLOSE_UP_SPAN_M, LIMIT_BAR_PX, LIMIT_RING_PX, NO_LIMIT_FULL_SCALE_N,
                                    TASK_COLOURS, CloseUp, StateTimeline, TaskInfo, draw_close_up,
                                    limit_fraction, requested_state, state_durations, task_line,
                                    timeline_segments, wrench_arrow)
from app.ui.scene import COLOURS, Frame

BERTHING = TaskInfo.from_payload({
    "name": "berthing",
    "states": ["stabilise", "approach", "relax_approach", "seat", "relax_seat", "release", "open"],
    "state_behaviours": ["ptwl", "ptwl", "rwe", "ptwl", "rwe", "rwe", "open"],
    "wrench_limit_targets": {"approach": "relax_approach", "seat": "relax_seat"},
    "next_targets": {"stabilise": "approach", "approach": "seat", "relax_approach": "approach", "seat": "release",
                     "relax_seat": "seat", "release": "open", "open": None},
    "behaviours": ["ptwl", "rwe", "jiggle"],
    "post_names": ["left", "right"], "post_radii_m": [0.01, 0.01], "pin_radius_m": 0.01,
})
JAM = TaskInfo.from_payload({
    "name": "jam", "states": ["stabilise", "push", "relax", "jiggle"],
    "state_behaviours": ["ptwl", "ptwl", "rwe", "jiggle"], "wrench_limit_targets": {"push": "relax"},
    "behaviours": ["ptwl", "rwe", "jiggle"],
})


def test_number_keys_choose_the_states_in_file_order() -> None:
    assert BERTHING is not None
    assert requested_state("1", BERTHING, -1) == 0
    assert requested_state("4", BERTHING, 0) == 3  # seat
    assert requested_state("6", BERTHING, 0) == 5  # release
    assert requested_state("7", BERTHING, 0) == 6  # open
    assert requested_state("8", BERTHING, 0) is None  # seven states only
    assert requested_state("x", BERTHING, 0) is None


def test_r_relaxes_into_the_running_states_own_rwe_else_the_first() -> None:
    assert BERTHING is not None and JAM is not None
    assert requested_state("r", BERTHING, 3) == 4  # seat -> relax_seat (its wrench_limit target)
    assert requested_state("r", BERTHING, 1) == 2  # approach -> relax_approach
    assert requested_state("r", BERTHING, 0) == 2  # stabilise has none: the first rwe state
    assert requested_state("j", BERTHING, 0) is None  # berthing has no jiggle
    # N (and the device's second button): the running state's succeeded target
    assert requested_state("n", BERTHING, 0) == 1  # stabilise -> approach
    assert requested_state("n", BERTHING, 5) == 6  # release -> open
    assert requested_state("n", BERTHING, 6) is None  # open -> done: nothing to go to
    assert requested_state("n", BERTHING, -1) is None  # no state runs
    assert requested_state("n", JAM, 1) is None  # a task without next targets (an older servo's message)
    assert requested_state("j", JAM, 1) == 3
    assert requested_state("r", JAM, 1) == 2


def test_limit_fraction_is_the_force_over_the_limit() -> None:
    assert limit_fraction(np.array([3.0, 4.0, 0.0]), 10.0) == pytest.approx(0.5)  # |F| = 5 N
    assert limit_fraction(np.array([0.0, 0.0, 15.0]), 15.0) == pytest.approx(1.0)
    assert math.isnan(limit_fraction(np.array([1.0, 0.0, 0.0]), math.inf))  # RWE: no limit


def test_the_wrench_arrow_is_proportional_to_the_force_and_reaches_the_ring_at_the_limit() -> None:
    import pygame

    close = CloseUp(pygame.Rect(0, 0, 300, 260), (0, 1), np.zeros(3))
    # 5 N against a 10 N limit: half the ring's radius, screen y pointing down
    dx, dy = wrench_arrow(close, np.array([3.0, 4.0, 0.0]), 10.0)
    assert (dx, dy) == pytest.approx((0.3 * LIMIT_RING_PX, -0.4 * LIMIT_RING_PX))
    double = wrench_arrow(close, np.array([6.0, 8.0, 0.0]), 10.0)
    assert math.hypot(*double) == pytest.approx(2.0 * math.hypot(dx, dy))
    at_limit = wrench_arrow(close, np.array([0.0, -12.0, 0.0]), 12.0)
    assert at_limit == pytest.approx((0.0, LIMIT_RING_PX))
    # without a limit the ring stands for NO_LIMIT_FULL_SCALE_N
    assert wrench_arrow(close, np.array([NO_LIMIT_FULL_SCALE_N, 0.0, 0.0]), math.inf) == pytest.approx(
        (LIMIT_RING_PX, 0.0))


def _frame(force=(6.0, 0.0, 0.0), limit=12.0, state=3, outcome=0) -> Frame:
    z = np.zeros(3)
    posts = np.full((4, 3), math.nan)
    posts[0], posts[1] = (0.47, 0.2, 0.0), (0.53, 0.2, 0.0)
    return Frame(
        t_s=4.0, ee_m=np.array([0.5, 0.2, 0.0]), ee_v_m_s=z.copy(), target_m=np.array([0.5, 0.2, 0.0]),
        target_v_m_s=z.copy(), command_m=z.copy(), guidance_force_n=z.copy(), dev_force_calc_n=z.copy(),
        dev_force_act_n=z.copy(), base_torque_n_m=z.copy(), base_attitude_rad=z.copy(), distance_m=0.0,
        flags=frozenset({"captured"}), phase="running", reached_at_s=1.0,
        links_m=np.array([[0.0, 0.0, 0.0], [0.2, 0.0, 0.0], [0.5, 0.2, 0.0]]), servo_rate_hz=1000.0,
        servo_overruns=0, post_state_index=state, post_behaviour_index=0,
        attractor_m=np.array([0.5, 0.24, 0.0]), wrench_force_n=np.array(force, dtype=float), wrench_limit_n=limit,
        post_outcome=outcome, pin_m=np.array([0.5, 0.2, 0.0]), posts_m=posts,
    )


def _fonts(pg) -> dict:
    return {name: pg.font.SysFont(None, size) for name, size in (("small", 20), ("normal", 26), ("large", 40))}


def _has(pixels: np.ndarray, x: int, y: int, colour: tuple[int, int, int], half: int = 2) -> bool:
    box = pixels[x - half:x + half + 1, y - half:y + half + 1]
    return bool(np.all(box == np.array(colour), axis=-1).any())


def test_the_close_up_draws_posts_attractor_arrow_ring_and_the_limit_bar(pygame) -> None:
    assert BERTHING is not None
    surface = pygame.Surface((800, 700))
    rect = pygame.Rect(100, 50, 300, 260)  # centre (250, 180)
    draw_close_up(surface, rect, (0, 1), _frame(), BERTHING, _fonts(pygame))
    pixels = pygame.surfarray.array3d(surface)
    px_per_m = 300 / CLOSE_UP_SPAN_M  # the larger side spans the close-up: 1875 px/m
    cx, cy = 250, 180  # the posts' centroid (0.5, 0.2) and the pin
    # the arrow: 6 N of 12 N is half the ring's radius, to the right of the pin
    tip = int(0.5 * LIMIT_RING_PX)
    assert _has(pixels, cx + tip - 8, cy, TASK_COLOURS["wrench"], 1)
    assert not _has(pixels, cx + tip + 6, cy, TASK_COLOURS["wrench"], 1)
    # the limit ring above the pin (no arrow there)
    assert _has(pixels, cx, cy - int(LIMIT_RING_PX), TASK_COLOURS["limit"])
    # the posts 30 mm either side: rings of 10 mm, touched at their tops
    offset, radius = round(0.03 * px_per_m), round(0.01 * px_per_m)
    assert _has(pixels, cx + offset, cy - radius, TASK_COLOURS["post"])
    assert _has(pixels, cx - offset, cy - radius, TASK_COLOURS["post"])
    # the attractor 40 mm above the pin
    assert _has(pixels, cx, cy - round(0.04 * px_per_m) - 7, TASK_COLOURS["attractor"])
    # the bar under the close-up: |F| / limit = 0.5, so half of it is filled (green below 0.7)
    bar_y = rect.bottom + 6 + 26 + LIMIT_BAR_PX[1] // 2
    row = pixels[rect.x:rect.x + LIMIT_BAR_PX[0], bar_y]
    filled = int(np.all(row == np.array(COLOURS["good"]), axis=-1).sum())
    assert filled == pytest.approx(0.5 * LIMIT_BAR_PX[0], abs=2)


def test_the_bar_is_red_and_full_over_the_limit(pygame) -> None:
    assert BERTHING is not None
    surface = pygame.Surface((800, 700))
    rect = pygame.Rect(100, 50, 300, 260)
    draw_close_up(surface, rect, (0, 1), _frame(force=(0.0, 18.0, 0.0), limit=15.0), BERTHING, _fonts(pygame))
    pixels = pygame.surfarray.array3d(surface)
    row = pixels[rect.x:rect.x + LIMIT_BAR_PX[0], rect.bottom + 6 + 26 + LIMIT_BAR_PX[1] // 2]
    assert int(np.all(row == np.array(COLOURS["bad"]), axis=-1).sum()) >= LIMIT_BAR_PX[0] - 2


def test_the_task_line_names_state_behaviour_and_outcome() -> None:
    assert BERTHING is not None
    assert task_line(_frame(state=3), BERTHING) == "Task berthing: seat (ptwl)"
    assert task_line(_frame(state=-1, outcome=1), BERTHING) == "Task berthing: succeeded"
    assert task_line(_frame(state=-1, outcome=2), BERTHING) == "Task berthing: failed"


def test_timeline_segments_and_time_per_state() -> None:
    t = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    states = [-1, 0, 0, 5, 5, 0, -1]
    segments = timeline_segments(t, states)
    assert segments == [(0, 1.0, 3.0), (5, 3.0, 5.0), (0, 5.0, 6.0)]
    timeline = StateTimeline("berthing", ("stabilise",) + ("x",) * 4 + ("release",), tuple(segments))
    assert state_durations(timeline) == {0: pytest.approx(3.0), 5: pytest.approx(2.0)}
    assert timeline_segments([0.0, 1.0], [-1, -1]) == []


def test_the_snapshot_carries_the_post_capture_slots_to_the_frame() -> None:
    from trials.snapshot import MAX_POSTS, SharedSnapshot, SnapshotLayout

    snapshot = SharedSnapshot(SnapshotLayout(3))
    try:
        values, field = snapshot.staging, snapshot.offsets
        values[field["post_state_index"]] = 3
        values[field["post_behaviour_index"]] = 1
        values[field["attractor_m"]] = (0.1, 0.2, 0.3)
        values[field["wrench_force_n"]] = (4.0, -3.0, 0.0)
        values[field["wrench_limit_n"]] = 15.0
        values[field["post_outcome"]] = 0
        values[field["pin_m"]] = (0.5, 0.6, 0.0)
        posts = np.full(3 * MAX_POSTS, math.nan)
        posts[:6] = (0.4, 0.6, 0.0, 0.45, 0.55, 0.0)
        values[field["posts_m"]] = posts
        snapshot.publish()
        frame = Frame.read(snapshot)
        assert frame is not None
        assert (frame.post_state_index, frame.post_behaviour_index, frame.wrench_limit_n) == (3, 1, 15.0)
        assert frame.attractor_m is not None and frame.attractor_m.tolist() == [0.1, 0.2, 0.3]
        assert frame.wrench_force_n.tolist() == [4.0, -3.0, 0.0]
        assert frame.posts_m is not None and frame.posts_m.shape == (MAX_POSTS, 3)
        assert frame.posts_m[1].tolist() == [0.45, 0.55, 0.0] and np.isnan(frame.posts_m[2:]).all()
    finally:
        snapshot.close()


def test_the_guard_hands_new_requests_to_an_active_phase_only() -> None:
    """The window's request (a state index and a counter) reaches ``post.request`` once per
    new count, in the guard before the tick; before the capture (phase inactive) it is
    dropped, not kept for later."""
    from types import SimpleNamespace

    from app.ui.servo import _CONTROL_SIZE, REQUEST_COUNT, REQUEST_STATE, _guarded

    asked: list[str] = []
    post = SimpleNamespace(task=SimpleNamespace(state_names=("stabilise", "seat", "release")), active=False,
                           request=asked.append)
    control = [0.0] * _CONTROL_SIZE
    tick = _guarded(lambda: True, control, None, None, None, 10, post)

    def press(index: int) -> None:  # as ServoProcess.request writes it
        control[REQUEST_STATE] = float(index)
        control[REQUEST_COUNT] += 1.0

    press(2)
    tick()
    assert asked == []  # before the capture: dropped
    post.active = True
    tick()
    assert asked == []  # and not replayed at the capture
    press(2)
    tick()
    tick()
    assert asked == ["release"]  # once per request
    press(2)
    press(1)  # two presses between ticks: the later one counts
    tick()
    assert asked == ["release", "seat"]
    press(7)  # not a state of the task
    tick()
    assert asked == ["release", "seat"]
