"""The task after the capture in the trainer's view: state, attractor, wrench, posts, keys.

After the tool closes on a scenario with a task (``trials.behaviours``, docs/behaviours.md)
the servo's snapshot carries the task machine's state and behaviour, the admittance
controller's attractor, the posts' force on the payload and the running behaviour's
limit on it, the pin and the posts (``trials.snapshot``, filled by the tick at display
rate). This module draws them, and maps the trainee's keys to the task's states:

- in the task view, at true scale: the posts (rings), the pin, the attractor (a
  diamond), joined to the end effector by a dashed line;
- in a close-up (:data:`CLOSE_UP_SPAN_M` across, centred on the posts): the same, plus
  the wrench on the payload as an arrow from the pin, scaled so that an arrow reaching
  the limit ring (:data:`LIMIT_RING_PX`) is a force at the running limit;
- under the close-up: the state and its behaviour, a bar of |F| against the limit (full
  at the limit, :func:`limit_fraction`), the machine's outcome once it ended, the keys.

Keys (:func:`requested_state`): ``1`` .. ``9`` the task's states in file order; ``R`` a
reset of the wrench equilibrium (the running state's ``wrench_limit`` target when that
is an ``rwe`` state, else the first ``rwe`` state); ``J`` the first ``jiggle`` state;
``N`` next: the running state's ``succeeded`` target (``TaskSpec.next_state``), as the
device's second button does in the servo. The window sends the state's index to the
servo (``app.ui.servo.ServoProcess.request``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: The task's colours (the tool's state colours stay the tool's own).
TASK_COLOURS: dict[str, tuple[int, int, int]] = {
    "post": (200, 200, 215),
    "pin": (255, 140, 90),
    "attractor": (120, 200, 255),
    "wrench": (255, 90, 200),
    "limit": (150, 110, 150),
}
#: The close-up's width and height in task metres, centred on the posts.
CLOSE_UP_SPAN_M = 0.16
#: The close-up's size [px].
CLOSE_UP_PX = (300, 260)
#: Radius of the limit ring round the pin [px]: the wrench arrow reaches it at the limit.
LIMIT_RING_PX = 100.0
#: Without a limit (RWE) the arrow reaches the ring at this force [N].
NO_LIMIT_FULL_SCALE_N = 15.0
#: The |F| / limit bar's size [px].
LIMIT_BAR_PX = (250, 12)
#: Key hints per line under the close-up.
HINTS_PER_LINE = 3
#: Key names (pygame's) of the task's first states, in file order.
STATE_KEYS = ("1", "2", "3", "4", "5", "6", "7", "8", "9")
#: Shortcut keys: a behaviour kind, reached through a state that runs it.
RELAX_KEY, JIGGLE_KEY, NEXT_KEY = "r", "j", "n"
#: The machine's outcomes as the snapshot's ``post_outcome`` numbers them (1 + index).
OUTCOME_WORDS = ("succeeded", "failed", "aborted")


@dataclass(frozen=True)
class TaskInfo:
    """The running attempt's task, from the servo's ``started`` message (``task``).

    Attributes:
        name: the task's name.
        states: its states in file order (the snapshot's ``post_state_index``).
        state_behaviours: each state's behaviour kind.
        wrench_limit_targets: each state's ``wrench_limit`` transition ("" when none).
        next_targets: each state's ``succeeded`` target when that is a state ("" when
            none): the "next" of the N key and the device's second button.
        behaviours: every behaviour kind (the snapshot's ``post_behaviour_index``).
        post_names, post_radii_m: the posts' names and radii [m].
        pin_radius_m: the payload's pin radius [m] (NaN: no fixtures).
    """

    name: str
    states: tuple[str, ...]
    state_behaviours: tuple[str, ...]
    wrench_limit_targets: tuple[str, ...]
    behaviours: tuple[str, ...]
    post_names: tuple[str, ...] = ()
    post_radii_m: tuple[float, ...] = ()
    pin_radius_m: float = math.nan
    next_targets: tuple[str, ...] = ()

    @classmethod
    def from_payload(cls, task: dict[str, Any] | None) -> TaskInfo | None:
        """From the ``started`` message's ``task`` entry (None: no task)."""
        if not task:
            return None
        states = tuple(str(s) for s in task["states"])
        targets = task.get("wrench_limit_targets") or {}
        following = task.get("next_targets") or {}
        pin = task.get("pin_radius_m")
        return cls(name=str(task["name"]), states=states,
                   state_behaviours=tuple(str(b) for b in task["state_behaviours"]),
                   wrench_limit_targets=tuple(str(targets.get(s) or "") for s in states),
                   behaviours=tuple(str(b) for b in task["behaviours"]),
                   post_names=tuple(str(n) for n in task.get("post_names", ())),
                   post_radii_m=tuple(float(r) for r in task.get("post_radii_m", ())),
                   pin_radius_m=math.nan if pin is None else float(pin),
                   next_targets=tuple(str(following.get(s) or "") for s in states))

    def state_name(self, index: int) -> str:
        """The state of a snapshot's ``post_state_index`` ("" for none)."""
        return self.states[index] if 0 <= index < len(self.states) else ""

    def behaviour_name(self, index: int) -> str:
        """The behaviour kind of a snapshot's ``post_behaviour_index`` ("" for none)."""
        return self.behaviours[index] if 0 <= index < len(self.behaviours) else ""

    def key_hints(self) -> str:
        """The keys that choose a state, in one line."""
        keys = [f"{key} {name}" for key, name in zip(STATE_KEYS, self.states)]
        if "rwe" in self.state_behaviours:
            keys.append("R relax")
        if "jiggle" in self.state_behaviours:
            keys.append("J jiggle")
        if any(self.next_targets):
            keys.append("N / button 2 next")
        return "   ".join(keys)


def requested_state(key: str, info: TaskInfo, running_index: int) -> int | None:
    """The state index a key asks for (None: the key chooses none).

    Args:
        key: pygame's key name (``"1"``, ``"r"``, ...).
        info: the task.
        running_index: the running state's index (-1: none).
    """
    if key in STATE_KEYS:
        index = STATE_KEYS.index(key)
        return index if index < len(info.states) else None
    if key == RELAX_KEY:
        if 0 <= running_index < len(info.states):
            target = info.wrench_limit_targets[running_index]
            if target in info.states and info.state_behaviours[info.states.index(target)] == "rwe":
                return info.states.index(target)
        return _first(info, "rwe")
    if key == JIGGLE_KEY:
        return _first(info, "jiggle")
    if key == NEXT_KEY:
        following = info.next_targets[running_index] if 0 <= running_index < len(info.next_targets) else ""
        return info.states.index(following) if following in info.states else None
    return None


def _first(info: TaskInfo, kind: str) -> int | None:
    return info.state_behaviours.index(kind) if kind in info.state_behaviours else None


def limit_fraction(force_n: NDArray[np.float64], limit_n: float) -> float:
    """|F| / limit (1: at the limit); NaN without a finite positive limit."""
    if not (math.isfinite(limit_n) and limit_n > 0.0):
        return math.nan
    return float(np.linalg.norm(force_n)) / limit_n


def wrench_px_per_n(limit_n: float) -> float:
    """The wrench arrow's scale [px/N]: the arrow reaches :data:`LIMIT_RING_PX` at the
    limit, or at :data:`NO_LIMIT_FULL_SCALE_N` without one."""
    full = limit_n if math.isfinite(limit_n) and limit_n > 0.0 else NO_LIMIT_FULL_SCALE_N
    return LIMIT_RING_PX / full


@dataclass(frozen=True)
class CloseUp:
    """Task axes ``axes`` to pixels in ``rect``, :data:`CLOSE_UP_SPAN_M` across the
    larger side, centred on ``centre_m`` (screen y grows downward)."""

    rect: Any
    axes: tuple[int, int]
    centre_m: NDArray[np.float64]

    @property
    def px_per_m(self) -> float:
        return float(max(self.rect.width, self.rect.height)) / CLOSE_UP_SPAN_M

    def __call__(self, point_m: NDArray[np.float64]) -> tuple[int, int]:
        a, b = self.axes
        scale = self.px_per_m
        return (int(round(self.rect.centerx + (point_m[a] - self.centre_m[a]) * scale)),
                int(round(self.rect.centery - (point_m[b] - self.centre_m[b]) * scale)))

    def vector(self, vec: NDArray[np.float64], px_per_unit: float) -> tuple[float, float]:
        a, b = self.axes
        return float(vec[a]) * px_per_unit, -float(vec[b]) * px_per_unit


def posts_of(frame: Any) -> NDArray[np.float64]:
    """The frame's posts that exist (rows without NaN), ``(n, 3)`` [m]."""
    posts = getattr(frame, "posts_m", None)
    if posts is None:
        return np.zeros((0, 3))
    posts = np.asarray(posts, dtype=float).reshape(-1, 3)
    return posts[np.all(np.isfinite(posts), axis=1)]


def task_visible(frame: Any) -> bool:
    """Whether the task has started on this frame (a state runs, it ended, or the pin is set)."""
    pin = getattr(frame, "pin_m", None)
    return (getattr(frame, "post_state_index", -1) >= 0 or getattr(frame, "post_outcome", 0) > 0
            or (pin is not None and bool(np.all(np.isfinite(pin)))))


def _finite(point: NDArray[np.float64] | None) -> bool:
    return point is not None and bool(np.all(np.isfinite(point)))


def draw_fixtures(surface: Any, view: Any, frame: Any, info: TaskInfo, min_px: int = 3) -> None:
    """Posts, pin and attractor in a task view (``view``: a projection with ``px_per_m``);
    the attractor joined to the end effector by a dashed line."""
    import pygame

    scale = view.px_per_m
    for i, post in enumerate(posts_of(frame)):
        radius = info.post_radii_m[i] if i < len(info.post_radii_m) else 0.01
        pygame.draw.circle(surface, TASK_COLOURS["post"], view(post), max(min_px, int(round(radius * scale))), 2)
    pin = getattr(frame, "pin_m", None)
    if _finite(pin):
        radius = info.pin_radius_m if math.isfinite(info.pin_radius_m) else 0.01
        pygame.draw.circle(surface, TASK_COLOURS["pin"], view(pin), max(min_px, int(round(radius * scale))), 2)
    attractor = getattr(frame, "attractor_m", None)
    if frame.post_state_index >= 0 and _finite(attractor):
        at = view(attractor)
        _diamond(surface, at, 7)
        _dashed_line(surface, TASK_COLOURS["attractor"], view(frame.ee_m), at)


def _diamond(surface: Any, at: tuple[int, int], half_px: int) -> None:
    import pygame

    x, y = at
    pygame.draw.polygon(surface, TASK_COLOURS["attractor"],
                        ((x, y - half_px), (x + half_px, y), (x, y + half_px), (x - half_px, y)), 2)


def _dashed_line(surface: Any, colour: tuple[int, int, int], start: tuple[int, int], end: tuple[int, int],
                 dash_px: float = 5.0) -> None:
    import pygame

    dx, dy = end[0] - start[0], end[1] - start[1]
    length = math.hypot(dx, dy)
    for i in range(0, int(length // dash_px), 2):
        a, b = i * dash_px / length, min((i + 1) * dash_px / length, 1.0)
        pygame.draw.line(surface, colour, (start[0] + a * dx, start[1] + a * dy),
                         (start[0] + b * dx, start[1] + b * dy), 1)


def wrench_arrow(view: Any, force_n: NDArray[np.float64], limit_n: float) -> tuple[float, float]:
    """The wrench arrow's screen components [px] in ``view`` (:func:`wrench_px_per_n`)."""
    result: tuple[float, float] = view.vector(force_n, wrench_px_per_n(limit_n))
    return result


def draw_close_up(surface: Any, rect: Any, axes: tuple[int, int], frame: Any, info: TaskInfo,
                  fonts: dict[str, Any]) -> None:
    """The close-up of the posts (``rect``), then the task box under it: state,
    behaviour, |F| against the limit, the outcome, the keys."""
    import pygame

    from app.ui.palette import COLOURS
    from app.ui.palette import arrow as _arrow

    posts = posts_of(frame)
    pin = getattr(frame, "pin_m", None)
    if len(posts):
        centre = posts.mean(axis=0)
    elif _finite(pin):
        centre = np.asarray(pin, dtype=float)
    else:
        centre = np.asarray(frame.ee_m, dtype=float)
    close = CloseUp(rect, axes, centre)
    pygame.draw.rect(surface, COLOURS["background"], rect)
    pygame.draw.rect(surface, COLOURS["grid"], rect, 1)
    clip = surface.get_clip()
    surface.set_clip(rect)
    draw_fixtures(surface, close, frame, info, min_px=2)
    pygame.draw.circle(surface, COLOURS["ee"], close(frame.ee_m), 3)
    limit = float(frame.wrench_limit_n)
    if pin is not None and _finite(pin):
        start = close(pin)
        if math.isfinite(limit) and limit > 0.0 and frame.post_state_index >= 0:
            pygame.draw.circle(surface, TASK_COLOURS["limit"], start, int(LIMIT_RING_PX), 1)
        force = np.asarray(frame.wrench_force_n, dtype=float)
        _arrow(surface, TASK_COLOURS["wrench"], start, wrench_arrow(close, force, limit), width=3,
               max_px=1.5 * LIMIT_RING_PX)
    surface.set_clip(clip)
    text = _texter(surface, fonts, COLOURS)
    text(f"berthing close-up ({CLOSE_UP_SPAN_M * 100:.0f} cm)", (rect.x + 4, rect.y + 3), "dim")
    text("posts grey, pin orange, attractor: blue diamond", (rect.x + 4, rect.bottom - 36), "dim")
    text("wrench on the pin: pink (the ring: its limit)", (rect.x + 4, rect.bottom - 19), "dim")
    y = rect.bottom + 6
    text(task_line(frame, info), (rect.x, y), "text", "normal")
    force = np.asarray(frame.wrench_force_n, dtype=float)
    fraction = limit_fraction(force, limit)
    bar = pygame.Rect(rect.x, y + 26, *LIMIT_BAR_PX)
    pygame.draw.rect(surface, COLOURS["grid"], bar)
    if math.isfinite(fraction):
        fill = int(round(bar.width * min(1.0, fraction)))
        level = "good" if fraction < 0.7 else "warn" if fraction < 1.0 else "bad"
        pygame.draw.rect(surface, COLOURS[level], (bar.x, bar.y, fill, bar.height))
        label = f"|F| {np.linalg.norm(force):.1f} N of {limit:g} N limit ({fraction:.0%})"
    else:
        label = f"|F| {np.linalg.norm(force):.1f} N (no limit)"
    pygame.draw.rect(surface, COLOURS["text"], bar, 1)
    text(label, (rect.x, bar.bottom + 3), "text")
    hints = info.key_hints().split("   ")
    for row in range(0, len(hints), HINTS_PER_LINE):
        text("   ".join(hints[row:row + HINTS_PER_LINE]), (rect.x, bar.bottom + 21 + 17 * (row // HINTS_PER_LINE)),
             "command")


def task_line(frame: Any, info: TaskInfo) -> str:
    """``Task berthing: seat (ptwl)``, or how the machine ended."""
    state = info.state_name(int(frame.post_state_index))
    if state:
        return f"Task {info.name}: {state} ({info.behaviour_name(int(frame.post_behaviour_index))})"
    outcome = int(getattr(frame, "post_outcome", 0))
    if 1 <= outcome <= len(OUTCOME_WORDS):
        return f"Task {info.name}: {OUTCOME_WORDS[outcome - 1]}"
    return f"Task {info.name}: starting"


def _texter(surface: Any, fonts: dict[str, Any], colours: dict[str, tuple[int, int, int]]) -> Any:
    def text(value: str, pos: tuple[int, int], colour: str, font: str = "small") -> None:
        surface.blit(fonts[font].render(value, True, colours[colour]), pos)

    return text


def close_up_rect(view_rect: Any) -> Any:
    """Where the close-up goes: the view's lower right corner, its task box under it."""
    import pygame

    width, height = CLOSE_UP_PX
    return pygame.Rect(view_rect.right - width - 12, view_rect.bottom - height - 128, width, height)


def timeline_segments(t_s: Sequence[float], state_index: Sequence[float]) -> list[tuple[int, float, float]]:
    """Runs of one state over time: ``(state index, start [s], end [s])``, -1 rows left out."""
    segments: list[tuple[int, float, float]] = []
    current, start = -1, math.nan
    for t, s in zip(t_s, state_index):
        index = int(s)
        if index != current:
            if current >= 0:
                segments.append((current, start, float(t)))
            current, start = index, float(t)
    if current >= 0 and len(t_s):
        segments.append((current, start, float(t_s[-1])))
    return segments


#: Fill colours of the timeline's states, by state index (cycled).
TIMELINE_COLOURS = ((90, 150, 230), (120, 200, 140), (230, 170, 80), (200, 110, 200), (110, 200, 210),
                    (220, 120, 110), (170, 170, 90), (140, 130, 230), (200, 200, 200))


@dataclass(frozen=True)
class StateTimeline:
    """A task trial's states over time, for the score card.

    Attributes:
        task: the task's name.
        states: its states in file order.
        segments: ``(state index, start [s], end [s])`` runs (:func:`timeline_segments`).
        outcome: how the machine ended ("" when unknown), reason: why.
    """

    task: str
    states: tuple[str, ...]
    segments: tuple[tuple[int, float, float], ...]
    outcome: str = ""
    reason: str = ""


def read_timeline(path: str | None) -> StateTimeline | None:
    """The state timeline of a trial file (None: no file, no task, or unreadable)."""
    if not path:
        return None
    from capture_trainer.errors import CaptureTrainerError
    from capture_trainer.trial_log import STATE_INDEX, TIME, read_trial_log

    try:
        log = read_trial_log(path)
    except (CaptureTrainerError, OSError):
        return None
    post = log.metadata.get("post_capture")
    if not isinstance(post, dict) or STATE_INDEX not in log.table.column_names:
        return None
    task = post.get("task") or {}
    segments = timeline_segments(log.table.column(TIME).to_pylist(), log.table.column(STATE_INDEX).to_pylist())
    return StateTimeline(task=str(task.get("name", "")), states=tuple(str(s) for s in post.get("states", ())),
                         segments=tuple(segments), outcome=str(post.get("outcome") or ""),
                         reason=str(post.get("reason") or ""))


def timeline_x(rect: Any, timeline: StateTimeline, t_s: float) -> int:
    """The strip's pixel column of time ``t_s`` (the strip spans the first start to the last end)."""
    start, end = timeline.segments[0][1], timeline.segments[-1][2]
    span = max(end - start, 1e-9)
    return int(round(rect.x + (t_s - start) / span * rect.width))


def draw_timeline(surface: Any, rect: Any, timeline: StateTimeline, fonts: dict[str, Any]) -> None:
    """The state timeline strip in ``rect``: one block per run of a state, named when it
    fits, the times at the ends, the machine's outcome above."""
    import pygame

    from app.ui.palette import COLOURS

    text = _texter(surface, fonts, COLOURS)
    word = f": {timeline.outcome}" if timeline.outcome else ""
    text(f"Task {timeline.task}{word}" + (f" ({timeline.reason})" if timeline.reason else ""),
         (rect.x, rect.y - 22), "text", "normal")
    if not timeline.segments:
        text("the task never started", (rect.x, rect.y + 4), "dim")
        return
    for index, start, end in timeline.segments:
        left, right = timeline_x(rect, timeline, start), timeline_x(rect, timeline, end)
        block = pygame.Rect(left, rect.y, max(1, right - left), rect.height)
        pygame.draw.rect(surface, TIMELINE_COLOURS[index % len(TIMELINE_COLOURS)], block)
        pygame.draw.rect(surface, COLOURS["background"], block, 1)
        name = timeline.states[index] if 0 <= index < len(timeline.states) else str(index)
        label = fonts["small"].render(name, True, COLOURS["background"])
        if label.get_width() + 4 <= block.width:
            surface.blit(label, (block.x + 3, block.y + (block.height - label.get_height()) // 2))
    first, last = timeline.segments[0][1], timeline.segments[-1][2]
    text(f"{first:.2f} s", (rect.x, rect.bottom + 3), "dim")
    text(f"{last:.2f} s", (rect.right - 50, rect.bottom + 3), "dim")
    x = rect.x
    for index, seconds in state_durations(timeline).items():  # the legend: time in each state
        name = timeline.states[index] if 0 <= index < len(timeline.states) else str(index)
        pygame.draw.rect(surface, TIMELINE_COLOURS[index % len(TIMELINE_COLOURS)], (x, rect.bottom + 26, 12, 12))
        label = f"{name} {seconds:.2f} s"
        text(label, (x + 16, rect.bottom + 24), "text")
        x += 16 + fonts["small"].size(label)[0] + 18


def state_durations(timeline: StateTimeline) -> dict[int, float]:
    """Time spent in each state [s] (all its runs), in the order the states first ran."""
    durations: dict[int, float] = {}
    for index, start, end in timeline.segments:
        durations[index] = durations.get(index, 0.0) + (end - start)
    return durations
