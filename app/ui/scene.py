"""Drawing one servo snapshot: the arm, the debris, the capture tool, the guidance, the gauges.

Everything here runs in the window process at display rate and never touches the servo
loop. A :class:`Frame` is a plain copy of one consistent snapshot; :class:`Projection`
maps two task-frame axes to a screen rectangle (x-y top view, x-z side view);
:class:`SceneRenderer` draws a frame into the left part of the window (one view for
planar models, two orthogonal views for spatial ones) and the gauges into the right.

The capture tool (:class:`robot.models.CaptureTool`) is drawn at the end effector: the
probe tip as a small filled circle of ``tip_radius_m``, the capture envelope as a thin
circle of ``envelope_radius_m``. Its colour is the contact state of the snapshot's flags:
``tool`` before any contact, ``contact`` while the ``contact`` flag is set, ``captured``
once the ``captured`` flag is set (the envelope drawn thick, the tool joined to the
debris' fixture by a bar), ``open`` once the tool has opened again after the capture
(the snapshot's ``released_at_s``; the envelope drawn as two jaws open toward the debris). The parts that live at the capture's scale (the fixture, the
tip, the envelope: millimetres, a few pixels at the views' scale) are drawn at one common
magnification (:attr:`SceneRenderer.detail`, at least 1, shown in the view's corner when
above 1) so that the fixture is at least :data:`MIN_FIXTURE_PX` and the envelope at least
:data:`MIN_ENVELOPE_PX` pixels in radius; their sizes relative to one another are true,
their centres are where the snapshot puts them.

The panel's **base-safe margin** gauge reads the IK's reaction-singularity gauge
(``Frame.sigma_ratio``, σ_min(M (I − J⁺J)) / ‖M‖): full and green at or above
:data:`BASE_MARGIN`, falling linearly to empty at :data:`BASE_THRESHOLD`, the two marks
drawn at the bar's ends, and a warning line below :data:`BASE_MARGIN` (where the
reaction-boundary fixture starts to pull the stylus back); see :func:`base_margin`.

Colours are module constants (:data:`COLOURS`) so that tests can look for them.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.ui.behaviours_view import TaskInfo, close_up_rect, draw_close_up, draw_fixtures, task_visible
from app.ui.palette import COLOURS
from app.ui.palette import arrow as _arrow
from app.ui.ghost import draw_ghost, draw_predicted_arm
from robot.models import CaptureTool
from trials.snapshot import FLAG_BITS, PHASES, SharedSnapshot

#: The servo corner's colour for each level of :func:`app.ui.servo.servo_health`.
HEALTH_COLOURS: dict[str, str] = {"idle": "dim", "good": "good", "warn": "warn", "bad": "bad"}
#: Predicted debris path horizon [s] (constant-velocity prediction from the snapshot).
PATH_HORIZON_S = 3.0
#: The soft-contact band [m/s] when the servo does not say the scenario's own
#: (``scenarios.schema.CaptureConfig.capture_speed_m_s``'s default): a contact whose
#: closing speed is at most this is soft, and only a soft contact can become a capture.
SOFT_CLOSING_M_S = 0.05
#: The closing-speed gauge's full scale is the larger of these multiples of the debris'
#: speed and of the soft band, rounded up to a 1-2-5 step (:func:`gauge_range`).
GAUGE_TARGET_SPEEDS, GAUGE_SOFT_BANDS = 5.0, 10.0
#: The countdown's last word, shown this long [s] after the attempt starts.
GO_SHOWN_S = 0.8
#: The oblique light of the top view's shadows: a point ``h`` above the ground casts its
#: shadow ``SHADOW_SLANT * h`` to the right of and below its own image.
SHADOW_SLANT = 0.6
#: Force arrow scale [px/N].
FORCE_PX_PER_N = 28.0
#: Smallest drawn radius of the debris' fixture [px].
MIN_FIXTURE_PX = 7
#: The opened tool's envelope is drawn as two jaws: the angle left open toward the
#: debris [rad] (half of it at the back).
OPEN_JAW_GAP_RAD = 1.6
#: Smallest drawn radius of the capture envelope [px] (outside the end-effector dot).
MIN_ENVELOPE_PX = 11
#: Smallest drawn radius of the probe tip [px].
MIN_TIP_PX = 2
#: Radius of the end-effector dot [px].
EE_PX = 7
#: The tool drawn when the servo does not say which (the models' default probe).
DEFAULT_TOOL = CaptureTool()
#: The base-safe margin gauge's marks on ``sigma_ratio``: full at or above BASE_MARGIN,
#: empty at BASE_THRESHOLD. They are the defaults of ``guidance.fixtures.ReactionBoundary``
#: (``margin``, ``threshold``: where its pull-back starts and where it is at full weight);
#: tests/app/test_window_margin.py checks that they agree.
BASE_MARGIN = 0.03
BASE_THRESHOLD = 0.01
#: The warning under the base-safe margin gauge while ``sigma_ratio`` < BASE_MARGIN.
MARGIN_WARNING = "arm near limit: base would turn, stylus pushes back"


@dataclass
class Frame:
    """One consistent snapshot, copied out of shared memory (task frame, SI)."""

    t_s: float
    ee_m: NDArray[np.float64]
    ee_v_m_s: NDArray[np.float64]
    target_m: NDArray[np.float64]
    target_v_m_s: NDArray[np.float64]
    command_m: NDArray[np.float64]
    guidance_force_n: NDArray[np.float64]
    dev_force_calc_n: NDArray[np.float64]
    dev_force_act_n: NDArray[np.float64]
    base_torque_n_m: NDArray[np.float64]
    base_attitude_rad: NDArray[np.float64]
    distance_m: float
    flags: frozenset[str]
    phase: str
    reached_at_s: float
    links_m: NDArray[np.float64]
    servo_rate_hz: float
    servo_overruns: int
    first_contact_s: float = math.nan  # NaN until the tool first touches the debris
    captured_at_s: float = math.nan  # NaN until the tool closes on the debris
    released_at_s: float = math.nan  # NaN until the tool opens again (the task's ``open``)
    sigma_ratio: float = math.nan  # the IK's reaction-singularity gauge; NaN: no reading
    ghost_m: NDArray[np.float64] | None = None  # the delayed real end effector (app.ui.ghost)
    virtual_ee_m: NDArray[np.float64] | None = None  # the predicted (virtual) end effector (app.ui.ghost)
    # the task after the capture (app.ui.behaviours_view; trials.snapshot's post-capture slots)
    post_state_index: int = -1  # the running state (-1: none)
    post_behaviour_index: int = -1  # its behaviour kind (-1: none)
    attractor_m: NDArray[np.float64] | None = None  # the admittance controller's attractor [m]
    wrench_force_n: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))  # posts on payload [N]
    wrench_limit_n: float = math.inf  # the running behaviour's limit on |wrench_force_n| [N]
    post_outcome: int = 0  # 0 while no machine ended, else 1 + index of the outcome
    pin_m: NDArray[np.float64] | None = None  # the payload's pin [m] (NaN or None: none)
    posts_m: NDArray[np.float64] | None = None  # (n, 3) posts [m] (NaN rows: none)

    @classmethod
    def read(cls, snapshot: SharedSnapshot) -> Frame | None:
        """Copy the snapshot's current block; None before the first publish or when busy."""
        values = snapshot.read()
        if values is None or values[0] < 2.0:  # busy, or nothing published yet
            return None

        def vec(name: str) -> NDArray[np.float64]:
            return snapshot.field(values, name).copy()

        def num(name: str) -> float:
            return float(snapshot.field(values, name)[0])

        bits = int(num("flags"))
        phase = int(num("phase"))
        return cls(
            t_s=num("t_s"),
            ee_m=vec("ee_position_m"),
            ee_v_m_s=vec("ee_velocity_m_s"),
            target_m=vec("target_position_m"),
            target_v_m_s=vec("target_velocity_m_s"),
            command_m=vec("command_position_m"),
            guidance_force_n=vec("guidance_force_n"),
            dev_force_calc_n=vec("dev_force_calc_n"),
            dev_force_act_n=vec("dev_force_act_n"),
            base_torque_n_m=vec("base_torque_n_m"),
            base_attitude_rad=vec("base_attitude_rad"),
            distance_m=num("distance_m"),
            flags=frozenset(name for i, name in enumerate(FLAG_BITS) if bits >> i & 1),
            phase=PHASES[phase] if 0 <= phase < len(PHASES) else "idle",
            reached_at_s=num("reached_at_s"),
            links_m=vec("links").reshape(-1, 3),
            servo_rate_hz=num("servo_rate_hz"),
            servo_overruns=int(num("servo_overruns")),
            first_contact_s=num("first_contact_s"),
            captured_at_s=num("captured_at_s"),
            released_at_s=num("released_at_s") if "released_at_s" in snapshot.offsets else math.nan,
            # NaN (no reading) for a block laid out without the field
            sigma_ratio=num("sigma_ratio") if "sigma_ratio" in snapshot.offsets else math.nan,
            ghost_m=vec("ghost_ee_position_m") if "ghost_ee_position_m" in snapshot.offsets else None,
            virtual_ee_m=vec("virtual_ee_position_m") if "virtual_ee_position_m" in snapshot.offsets else None,
            **(cls._post(vec, num) if "post_state_index" in snapshot.offsets else {}),
        )

    @staticmethod
    def _post(vec: Any, num: Any) -> dict[str, Any]:
        """The post-capture slots of a snapshot (a block laid out without them: defaults)."""
        return {"post_state_index": int(num("post_state_index")),
                "post_behaviour_index": int(num("post_behaviour_index")),
                "attractor_m": vec("attractor_m"), "wrench_force_n": vec("wrench_force_n"),
                "wrench_limit_n": num("wrench_limit_n"), "post_outcome": int(num("post_outcome")),
                "pin_m": vec("pin_m"), "posts_m": vec("posts_m").reshape(-1, 3)}

    @property
    def in_contact(self) -> bool:
        """The tool touches the debris' fixture on this snapshot (the ``contact`` flag)."""
        return "contact" in self.flags

    @property
    def captured(self) -> bool:
        """The tool has closed on the debris (the ``captured`` flag)."""
        return "captured" in self.flags

    @property
    def released(self) -> bool:
        """The tool has opened again after the capture (the debris free once more)."""
        return not self.captured and self.released_at_s >= self.captured_at_s  # False while either is NaN

    @property
    def tool_state(self) -> str:
        """``captured``, ``contact``, ``open`` (opened after the capture) or ``tool``
        (none of these): the tool's colour key."""
        if self.captured:
            return "captured"
        if self.in_contact:
            return "contact"
        return "open" if self.released else "tool"

    @property
    def closing_speed_m_s(self) -> float:
        """Relative velocity along the approach: -(v_ee - v_target) . u, u = ee -> target.

        Positive while the end effector closes in; a soft capture ends near zero.
        """
        gap = self.target_m - self.ee_m
        norm = float(np.linalg.norm(gap))
        if norm < 1e-9:
            return 0.0
        return float(np.dot(self.ee_v_m_s - self.target_v_m_s, gap) / norm)

    @property
    def relative_speed_m_s(self) -> float:
        return float(np.linalg.norm(self.ee_v_m_s - self.target_v_m_s))


class Projection:
    """Task-frame axes ``axes`` (e.g. (0, 1) for x-y) to pixels inside ``rect``.

    The scale is fixed when built (from the points to keep in view), so the picture does
    not breathe during an attempt. Screen y grows downward, so the second axis is flipped.
    """

    def __init__(self, rect: Any, axes: tuple[int, int], points_m: NDArray[np.float64],
                 margin: float = 0.12, min_span_m: float = 0.4) -> None:
        self.rect = rect
        self.axes = axes
        pts = points_m[:, axes]
        lo = pts.min(axis=0)
        hi = pts.max(axis=0)
        span = np.maximum(hi - lo, min_span_m) * (1.0 + 2.0 * margin)
        self.px_per_m = float(min(rect.width / span[0], rect.height / span[1]))
        self.centre_m = (lo + hi) / 2.0

    def __call__(self, point_m: NDArray[np.float64]) -> tuple[int, int]:
        a, b = self.axes
        x = self.rect.centerx + (point_m[a] - self.centre_m[0]) * self.px_per_m
        y = self.rect.centery - (point_m[b] - self.centre_m[1]) * self.px_per_m
        return int(round(x)), int(round(y))

    def vector(self, vec: NDArray[np.float64], px_per_unit: float) -> tuple[float, float]:
        """A vector's screen components (pixels) at ``px_per_unit`` pixels per unit."""
        a, b = self.axes
        return float(vec[a]) * px_per_unit, -float(vec[b]) * px_per_unit


def _at_least(min_px: float, radius_px: float) -> float:
    """The magnification that draws ``radius_px`` at least ``min_px`` (1 for no radius)."""
    return min_px / radius_px if radius_px > 0.0 else 1.0


def capture_status(frame: Frame) -> tuple[str, str, str]:
    """The panel's capture line: ``(text, font, colour key)``.

    "captured at X s" once the tool has closed, "contact at X s" (the first contact)
    while the tool touches the fixture, "contact at X s, not touching now" after a contact
    that ended, "no contact yet" before any.
    """
    first, closed = frame.first_contact_s, frame.captured_at_s
    if frame.released:
        return f"tool opened at {frame.released_at_s:.2f} s (captured at {closed:.2f} s)", "normal", "open"
    if frame.captured:
        return (f"captured at {closed:.2f} s" if closed == closed else "captured"), "normal", "captured"
    if frame.in_contact:
        return (f"contact at {first:.2f} s" if first == first else "in contact"), "normal", "contact"
    if first == first:
        return f"contact at {first:.2f} s, not touching now", "normal", "warn"
    return "no contact yet", "normal", "dim"


@dataclass(frozen=True)
class BaseMargin:
    """What the base-safe margin gauge shows for one ``sigma_ratio`` (:func:`base_margin`)."""

    level: float  # the bar's fill, 0 (empty) to 1 (full)
    colour: str  # the fill's (and the warning's) key in COLOURS
    label: str  # the line above the bar
    warning: str  # the line below the bar; "" at or above BASE_MARGIN and without a reading


def base_margin(sigma_ratio: float) -> BaseMargin:
    """The gauge for ``sigma_ratio``: fill ``clip((σ − BASE_THRESHOLD) / (BASE_MARGIN −
    BASE_THRESHOLD), 0, 1)``; green when full, amber down to half, red below half; the
    warning :data:`MARGIN_WARNING` below BASE_MARGIN; "no reading" (empty, dim) for NaN."""
    if not math.isfinite(sigma_ratio):
        return BaseMargin(0.0, "dim", "base-safe margin: no reading", "")
    level = max(0.0, min(1.0, (sigma_ratio - BASE_THRESHOLD) / (BASE_MARGIN - BASE_THRESHOLD)))
    if sigma_ratio >= BASE_MARGIN:
        level, colour = 1.0, "good"
    else:
        colour = "warn" if level >= 0.5 else "bad"
    label = f"base-safe margin {level * 100:3.0f}%   (sigma {sigma_ratio:.3f})"
    return BaseMargin(level, colour, label, MARGIN_WARNING if sigma_ratio < BASE_MARGIN else "")


def _dashed(surface: Any, colour: tuple[int, int, int], start: tuple[int, int],
            end: tuple[int, int], dash_px: float = 8.0) -> None:
    import pygame

    dx, dy = end[0] - start[0], end[1] - start[1]
    length = math.hypot(dx, dy)
    if length < 1.0:
        return
    steps = int(length // dash_px)
    for i in range(0, steps, 2):
        a = i * dash_px / length
        b = min((i + 1) * dash_px / length, 1.0)
        pygame.draw.line(surface, colour, (start[0] + a * dx, start[1] + a * dy),
                         (start[0] + b * dx, start[1] + b * dy), 2)


@dataclass(frozen=True)
class AttemptInfo:
    """What the window knows about the running attempt (from the servo's ``started``)."""

    model: str
    n_joints: int
    target_radius_m: float
    condition: str
    scenario: str
    duration_s: float
    tool_tip_radius_m: float = DEFAULT_TOOL.tip_radius_m
    envelope_radius_m: float = DEFAULT_TOOL.envelope_radius_m
    capture_speed_m_s: float = SOFT_CLOSING_M_S  # the soft-contact band [m/s]
    target_speed_m_s: float = 0.1  # the debris' speed [m/s] (scales the gauge)
    start_gap_m: float = 0.3  # the start distance to contact [m] (scales the distance bar)
    post_capture_window_s: float = 1.0  # the scored time after contact [s]
    countdown_s: float = 0.0  # the hold before the first tick [s]
    workspace: PointerWorkspace | None = None  # the pointer's reach (``--device mouse``)
    task: TaskInfo | None = None  # the task after the capture (keys, close-up), None: none

    @property
    def spatial(self) -> bool:
        return not self.model.startswith("planar")

    @property
    def goal(self) -> str:
        """The attempt's goal in one line, with the scenario's soft band."""
        return (f"Goal: touch the debris at its own speed: closing speed under "
                f"{self.capture_speed_m_s * 100:.0f} cm/s at contact is a soft capture.")

    @property
    def scored_line(self) -> str:
        """What is scored after the contact."""
        return (f"The {self.post_capture_window_s:g} s after the first contact is scored: "
                "stay with the debris, moving at its speed.")


def nice_step(value: float) -> float:
    """The smallest 1-2-5 x 10^k at or above ``value`` (> 0)."""
    if not value > 0.0 or not math.isfinite(value):
        return 1.0
    exponent = math.floor(math.log10(value))
    for mantissa in (1.0, 2.0, 5.0, 10.0):
        step = mantissa * 10.0**exponent
        if step >= value * (1.0 - 1e-12):
            return step
    return 10.0 ** (exponent + 1)


def gauge_range(target_speed_m_s: float, capture_speed_m_s: float) -> tuple[float, float]:
    """The closing-speed gauge's ``(full scale, tick step)`` [m/s] for a scenario.

    Full scale: ``max(GAUGE_TARGET_SPEEDS * |v_debris|, GAUGE_SOFT_BANDS * band)`` rounded
    up to a 1-2-5 step (a closing speed ten soft bands or five debris speeds fast is a hard
    hit, and the approach's usual speeds stay on the dial); the gauge spans ± full scale.
    Ticks every full scale / 5 rounded up to a 1-2-5 step.
    """
    raw = max(GAUGE_TARGET_SPEEDS * max(target_speed_m_s, 0.0), GAUGE_SOFT_BANDS * max(capture_speed_m_s, 0.0))
    full = nice_step(raw if raw > 0.0 else 0.2)
    return full, nice_step(full / 5.0)


@dataclass(frozen=True)
class PointerWorkspace:
    """Where a pointer (``--device mouse``) can put the stylus, in the task frame.

    The servo anchors the stylus' first reading at the end effector's start (the tick's
    haptic commander: ``x_task = ee0 + s R (x_dev - x_dev0)``); the window writes
    ``device_start_m`` (:func:`trials.runner.device_start_position`: the capture region's
    centre at the workspace's centre) until the attempt starts, so the device's box maps
    onto the capture task. The window's cursor is a task point; :meth:`to_device` is the
    stylus position that commands it (clipped to the device's box).

    Attributes:
        ee0_m: the end effector at the start [m], task frame.
        device_start_m: the stylus' anchored first reading [m], device frame.
        scale: task metres per device metre.
        rotation: (3, 3) device -> task rotation, as nested tuples.
        lo_m, hi_m: the device's workspace box [m], device frame.
    """

    ee0_m: tuple[float, float, float]
    device_start_m: tuple[float, float, float]
    scale: float
    rotation: tuple[tuple[float, ...], ...]
    lo_m: tuple[float, float, float]
    hi_m: tuple[float, float, float]

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> PointerWorkspace | None:
        """From the servo's ``started`` message; None when it lacks the figures."""
        try:
            def vec(name: str) -> tuple[float, float, float]:
                x, y, z = (float(v) for v in payload[name])
                return x, y, z

            return cls(vec("ee0_m"), vec("device_start_m"), float(payload["position_scale"]),
                       tuple(tuple(float(v) for v in row) for row in payload["rotation_task_from_device"]),
                       vec("workspace_min_m"), vec("workspace_max_m"))
        except (KeyError, TypeError, ValueError):
            return None

    def to_device(self, task_m: NDArray[np.float64]) -> NDArray[np.float64]:
        """The stylus position [m, device frame] commanding ``task_m``, clipped to the box:
        ``x_dev = x_dev0 + Rᵀ (x_task − ee0) / s``."""
        r = np.array(self.rotation)
        dev = np.array(self.device_start_m) + r.T @ (np.asarray(task_m, dtype=float) - np.array(self.ee0_m)) / self.scale
        clipped: NDArray[np.float64] = np.clip(dev, self.lo_m, self.hi_m)
        return clipped

    def to_task(self, device_m: NDArray[np.float64]) -> NDArray[np.float64]:
        """The task point [m] a stylus position commands: ``ee0 + s R (x_dev − x_dev0)``."""
        r = np.array(self.rotation)
        task: NDArray[np.float64] = np.array(self.ee0_m) + self.scale * r @ (
            np.asarray(device_m, dtype=float) - np.array(self.device_start_m))
        return task

    def corners_task(self) -> NDArray[np.float64]:
        """The device box's eight corners in the task frame, (8, 3) [m]."""
        lo, hi = self.lo_m, self.hi_m
        corners = [(x, y, z) for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
        return np.array([self.to_task(np.array(c)) for c in corners])

    def contains(self, task_m: NDArray[np.float64], tol_m: float = 1e-9) -> bool:
        """Whether the pointer can command ``task_m`` (inside the mapped box)."""
        r = np.array(self.rotation)
        dev = np.array(self.device_start_m) + r.T @ (np.asarray(task_m, dtype=float) - np.array(self.ee0_m)) / self.scale
        return bool(np.all(dev >= np.array(self.lo_m) - tol_m) and np.all(dev <= np.array(self.hi_m) + tol_m))


def contact_verdict(closing_m_s: float, band_m_s: float) -> str:
    """``soft`` (closing speed at most the band), ``hard`` (above it), ``missed`` (NaN:
    no contact)."""
    if not math.isfinite(closing_m_s):
        return "missed"
    return "soft" if closing_m_s <= band_m_s else "hard"


class SceneRenderer:
    """Draws frames of one attempt.

    Args:
        size: window size in pixels.
        info: the attempt's model and target.
        first: the first frame (fixes the views' scale and centre).
        fonts: ``{"small", "normal", "large"}`` pygame fonts.
    """

    PANEL_W = 360

    def __init__(self, size: tuple[int, int], info: AttemptInfo, first: Frame,
                 fonts: dict[str, Any]) -> None:
        import pygame

        self.info = info
        self.fonts = fonts
        width, height = size
        self.view_area = pygame.Rect(0, 0, width - self.PANEL_W, height)
        self.panel = pygame.Rect(width - self.PANEL_W, 0, self.PANEL_W, height)
        path_end = first.target_m + first.target_v_m_s * min(PATH_HORIZON_S, info.duration_s)
        half = self._base_half(first)
        base = first.links_m[0]
        points = np.vstack([first.links_m, first.target_m, path_end, first.ee_m,
                            base - half, base + half])
        if info.workspace is not None:
            # The pointer's task: the views frame its whole reach, the debris' start and the
            # end effector (the base may leave the view), so that one pixel of pointer
            # motion is a fine step of the cursor.
            points = np.vstack([info.workspace.corners_task(), first.target_m, first.ee_m])
        if info.spatial:
            top = pygame.Rect(0, 0, self.view_area.width, height // 2).inflate(-16, -40)
            side = pygame.Rect(0, height // 2, self.view_area.width, height // 2).inflate(-16, -40)
            self.views = [("top view (x-y)", Projection(top, (0, 1), points)),
                          ("side view (x-z)", Projection(side, (0, 2), points))]
            scale = min(v.px_per_m for _, v in self.views)
            for _, view in self.views:
                view.px_per_m = scale
        else:
            area = self.view_area.inflate(-24, -60)
            self.views = [("top view (x-y)", Projection(area, (0, 1), points))]
        px_per_m = min(v.px_per_m for _, v in self.views)
        #: The common magnification of the fixture, the probe tip and the envelope (>= 1).
        self.detail = max(1.0, _at_least(MIN_FIXTURE_PX, info.target_radius_m * px_per_m),
                          _at_least(MIN_ENVELOPE_PX, info.envelope_radius_m * px_per_m))
        self.trail: deque[NDArray[np.float64]] = deque(maxlen=240)
        self.base_half_m = half
        #: The closing speed [m/s] of the last frame before the first contact, and where
        #: the end effector and the debris were at the first contact and at the capture.
        self.closing_before_contact_m_s = math.nan
        self.contact_at: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None
        self.captured_at: NDArray[np.float64] | None = None
        self.gauge_full_m_s, self.gauge_step_m_s = gauge_range(info.target_speed_m_s, info.capture_speed_m_s)
        #: The ground of the depth cues (spatial views) [m, task z]: 0.1 m below the lower of
        #: the end effector and the debris at the start, so that the shadows stay near
        #: what casts them and their offsets differ by the height difference.
        self.ground_z_m = float(min(first.ee_m[2], first.target_m[2])) - 0.1
        self.force_rect = pygame.Rect(self.panel.x + 20, 275, self.PANEL_W - 40, 150)
        #: The base-safe margin gauge's bar (its label above, its warning line below).
        self.margin_rect = pygame.Rect(self.panel.x + 20, 489, self.PANEL_W - 40, 16)

    def radii_px(self, view: Projection) -> tuple[int, int, int]:
        """Drawn radii [px] of the fixture, the probe tip and the capture envelope in ``view``."""
        scale = view.px_per_m * self.detail
        info = self.info
        return (max(MIN_FIXTURE_PX, int(round(info.target_radius_m * scale))),
                max(MIN_TIP_PX, int(round(info.tool_tip_radius_m * scale))),
                max(MIN_ENVELOPE_PX, int(round(info.envelope_radius_m * scale))))

    @staticmethod
    def _base_half(frame: Frame) -> float:
        """Half the base's side [m]: the arm's first joint sits on the base's edge."""
        if len(frame.links_m) < 2:
            return 0.2
        reach = float(np.max(np.abs(frame.links_m[1] - frame.links_m[0])))
        return reach if reach > 0.05 else 0.2

    def text(self, surface: Any, text: str, pos: tuple[int, int], font: str = "small",
             colour: str = "text") -> None:
        surface.blit(self.fonts[font].render(text, True, COLOURS[colour]), pos)

    def banner(self, surface: Any, text: str, pos: tuple[int, int], font: str = "normal",
               colour: str = "text") -> None:
        """Text over the task view on a dark backdrop, readable over the arm and the base."""
        import pygame

        rendered = self.fonts[font].render(text, True, COLOURS[colour])
        backdrop = pygame.Surface((rendered.get_width() + 8, rendered.get_height() + 4), pygame.SRCALPHA)
        backdrop.fill((*COLOURS["background"], 210))
        surface.blit(backdrop, (pos[0] - 4, pos[1] - 2))
        surface.blit(rendered, pos)

    # -- the task views ------------------------------------------------------------

    def draw(self, surface: Any, frame: Frame, header: str, stats: Any, fps: float,
             recent: Any = None, note: str = "", *, cursor_m: NDArray[np.float64] | None = None,
             countdown_left_s: float | None = None, experimenter: bool = True) -> None:
        """Draw everything for one frame (views, overlay, panel, servo corner).

        Args:
            stats: the live :class:`app.ui.servo.ServoStats`.
            fps: the display rate [Hz].
            recent: :class:`app.ui.servo.RecentServo` (None: judged from ``stats`` alone).
            note: a short warning shown in the servo corner (e.g. no real-time priority).
            cursor_m: the pointer's task point [m] (``--device mouse``), drawn as the cursor
                and joined to the stylus command and the end effector.
            countdown_left_s: seconds before the attempt starts (the countdown), None
                once it runs.
            experimenter: the engineering figures too (servo corner, base disturbance);
                the trainee's view shows a servo lamp only.
        """
        import pygame

        surface.fill(COLOURS["background"])
        self._track(frame)
        for title, view in self.views:
            pygame.draw.rect(surface, COLOURS["grid"], view.rect, 1)
            self._grid(surface, view)
            self._draw_view(surface, view, frame, cursor_m)
            self.text(surface, title, (view.rect.x + 6, view.rect.y + 4), colour="dim")
            if self.detail > 1.05:
                self.text(surface, f"tool and debris fixture drawn x{self.detail:.1f}",
                          (view.rect.x + 6, view.rect.bottom - 18), colour="dim")
        self._overlay(surface, frame, countdown_left_s)
        task = self.info.task
        if task is not None and task_visible(frame):
            view = self.views[0][1]
            draw_close_up(surface, close_up_rect(view.rect), view.axes, frame, task, self.fonts)
        self.text(surface, header, (12, self.view_area.height - 26), "normal")
        self._panel(surface, frame, experimenter)
        if experimenter:
            self._servo_corner(surface, stats, fps, recent, note)
        else:
            self._servo_lamp(surface, stats, recent)

    def _track(self, frame: Frame) -> None:
        """Keep the trail, the closing speed just before the contact, and where the
        contact and the capture happened (the capture moment's marks)."""
        if frame.phase == "idle":
            return
        self.trail.append(frame.ee_m.copy())
        touched = math.isfinite(frame.first_contact_s) or frame.in_contact
        if not touched:
            self.closing_before_contact_m_s = frame.closing_speed_m_s
        elif self.contact_at is None:
            self.contact_at = (frame.ee_m.copy(), frame.target_m.copy())
        if frame.captured and self.captured_at is None:
            self.captured_at = frame.ee_m.copy()

    def verdict(self, frame: Frame) -> tuple[str, str] | None:
        """The contact's verdict as the attempt view shows it: ``(text, colour key)``, or
        None before any contact. The closing speed is that of the last frame drawn before
        the contact (the score card uses the trial's exact figure)."""
        if self.contact_at is None:
            return None
        band = self.info.capture_speed_m_s
        closing = self.closing_before_contact_m_s
        word = contact_verdict(closing, band)
        at = frame.first_contact_s
        when = f" at {at:.2f} s" if math.isfinite(at) else ""
        if word == "missed":
            return f"Contact{when}", "contact"
        sign = "<=" if word == "soft" else ">"
        text = (f"Contact{when}: {word.upper()} (about {closing * 100:.1f} cm/s {sign} "
                f"{band * 100:.0f} cm/s soft band)")
        return text, "good" if word == "soft" else "bad"

    def _overlay(self, surface: Any, frame: Frame, countdown_left_s: float | None) -> None:
        """The goal line, the countdown, the contact's verdict and the scored second."""
        import pygame

        first = self.views[0][1].rect
        x, y = first.x + 8, first.y + 24
        self.banner(surface, self.info.goal, (x, y), "normal")
        if countdown_left_s is not None and countdown_left_s > 0.0:
            number = str(int(math.ceil(countdown_left_s)))
            big = self.fonts["large"].render(number, True, COLOURS["ee"])
            big = pygame.transform.smoothscale(big, (big.get_width() * 3, big.get_height() * 3))
            centre = self.view_area.center
            where = big.get_rect(center=centre)
            backdrop = pygame.Surface(where.inflate(40, 10).size, pygame.SRCALPHA)
            backdrop.fill((*COLOURS["background"], 210))
            surface.blit(backdrop, where.inflate(40, 10).topleft)
            surface.blit(big, where)
            self.banner(surface, "Get ready: the attempt starts when the count reaches zero",
                        (centre[0] - 250, centre[1] + 70), "normal", "ee")
            return
        if frame.phase != "idle" and frame.t_s < GO_SHOWN_S and self.info.countdown_s > 0.0:
            go = self.fonts["large"].render("GO", True, COLOURS["good"])
            go = pygame.transform.smoothscale(go, (go.get_width() * 3, go.get_height() * 3))
            surface.blit(go, go.get_rect(center=self.view_area.center))
        verdict = self.verdict(frame)
        if verdict is not None:
            self.banner(surface, verdict[0], (x, y + 28), "large", verdict[1])
            window = self.info.post_capture_window_s
            since = frame.t_s - frame.first_contact_s if math.isfinite(frame.first_contact_s) else math.nan
            self.banner(surface, self.info.scored_line, (x, y + 66), "normal")
            if math.isfinite(since) and window > 0.0:
                bar = pygame.Rect(x, y + 92, 260, 10)
                pygame.draw.rect(surface, COLOURS["grid"], bar)
                fill = int(bar.width * max(0.0, min(1.0, since / window)))
                pygame.draw.rect(surface, COLOURS["captured" if frame.captured else "contact"],
                                 (bar.x, bar.y, fill, bar.height))
                self.text(surface, f"scored {min(since, window):.1f} of {window:g} s", (bar.right + 8, bar.y - 4))
        else:
            self.banner(surface, self.info.scored_line, (x, y + 28), "small", "dim")

    def _grid(self, surface: Any, view: Projection) -> None:
        import pygame

        step_px = 0.1 * view.px_per_m
        if step_px < 6:
            return
        rect = view.rect
        origin = view(np.zeros(3))
        x = origin[0] - math.floor((origin[0] - rect.left) / step_px) * step_px
        while x < rect.right:
            pygame.draw.line(surface, COLOURS["grid"], (x, rect.top), (x, rect.bottom))
            x += step_px
        y = origin[1] - math.floor((origin[1] - rect.top) / step_px) * step_px
        while y < rect.bottom:
            pygame.draw.line(surface, COLOURS["grid"], (rect.left, y), (rect.right, y))
            y += step_px
        self.text(surface, "grid 0.1 m", (rect.right - 80, rect.bottom - 18), colour="dim")

    def _draw_view(self, surface: Any, view: Projection, frame: Frame,
                   cursor_m: NDArray[np.float64] | None = None) -> None:
        import pygame

        clip = surface.get_clip()
        surface.set_clip(view.rect)
        if self.info.workspace is not None:
            self._workspace(surface, view)
        if self.info.spatial:
            self._depth_cues(surface, view, frame)
        self._base(surface, view, frame)
        start = view(frame.target_m)
        end = view(frame.target_m + frame.target_v_m_s * PATH_HORIZON_S)
        _dashed(surface, COLOURS["path"], start, end)
        if len(self.trail) > 1:
            pygame.draw.lines(surface, COLOURS["trail"], False, [view(p) for p in self.trail], 2)
        # links_m[0] is the base's centre (drawn as the base); the arm starts at joint 1.
        points = [view(p) for p in frame.links_m[1:]]
        if len(points) > 1:
            pygame.draw.lines(surface, COLOURS["arm"], False, points, 9)
        for point in points[:-1]:
            pygame.draw.circle(surface, COLOURS["joint"], point, 6)
        fixture_px, tip_px, envelope_px = self.radii_px(view)
        cx, cy = view(frame.command_m)
        pygame.draw.line(surface, COLOURS["command"], (cx - 7, cy), (cx + 7, cy), 2)
        pygame.draw.line(surface, COLOURS["command"], (cx, cy - 7), (cx, cy + 7), 2)
        draw_ghost(surface, view, frame.ghost_m)
        if self.info.task is not None:
            draw_fixtures(surface, view, frame, self.info.task)
        ee = view(frame.ee_m)
        pygame.draw.circle(surface, COLOURS["ee"], ee, EE_PX)
        # The fixture over the end-effector dot: at contact their centres are millimetres apart.
        pygame.draw.circle(surface, COLOURS["target"], start, fixture_px)
        _arrow(surface, COLOURS["guidance"], ee, view.vector(frame.guidance_force_n, FORCE_PX_PER_N))
        self._tool(surface, frame, ee, start, (fixture_px, tip_px, envelope_px))
        # what the trainee steers under delay, over the real arm (thin: the real one shows through)
        draw_predicted_arm(surface, view, frame.links_m, frame.virtual_ee_m)
        self._moments(surface, view)
        if cursor_m is not None:
            self._cursor(surface, view, cursor_m, (cx, cy), ee)
        surface.set_clip(clip)

    def _workspace(self, surface: Any, view: Projection) -> None:
        """The pointer's reach: the device's box mapped into the task, as this view sees it
        (the bounding rectangle of its eight corners' images)."""
        import pygame

        assert self.info.workspace is not None
        pixels = np.array([view(c) for c in self.info.workspace.corners_task()])
        left, top = pixels.min(axis=0)
        right, bottom = pixels.max(axis=0)
        rect = pygame.Rect(int(left), int(top), int(right - left), int(bottom - top))
        pygame.draw.rect(surface, COLOURS["reach"], rect, 2)
        self.text(surface, "mouse reach", (rect.x + 4, rect.y + 3), colour="reach")

    def _cursor(self, surface: Any, view: Projection, cursor_m: NDArray[np.float64],
                command_px: tuple[int, int], ee_px: tuple[int, int]) -> None:
        """The pointer's cursor, joined to the stylus command and the end effector."""
        import pygame

        cursor = view(cursor_m)
        _dashed(surface, COLOURS["command"], cursor, command_px, 4.0)
        _dashed(surface, COLOURS["command"], command_px, ee_px, 4.0)
        pygame.draw.circle(surface, COLOURS["cursor"], cursor, 9, 2)
        pygame.draw.circle(surface, COLOURS["cursor"], cursor, 2)

    def _moments(self, surface: Any, view: Projection) -> None:
        """The capture moment marked where it happened, in the ``moment`` colour (the tool's
        state colours stay the tool's own): a ring and a flag at the end effector's position
        at the first contact, a larger ring at the capture."""
        import pygame

        colour = COLOURS["moment"]
        if self.contact_at is not None:
            point = view(self.contact_at[0])
            pygame.draw.circle(surface, colour, point, 26, 2)
            pygame.draw.line(surface, colour, (point[0] + 18, point[1] - 18), (point[0] + 34, point[1] - 34), 2)
            self.text(surface, "first contact", (point[0] + 36, point[1] - 48), colour="moment")
        if self.captured_at is not None:
            point = view(self.captured_at)
            pygame.draw.circle(surface, colour, point, 32, 1)
            self.text(surface, "captured", (point[0] + 36, point[1] - 30), colour="moment")

    def _depth_cues(self, surface: Any, view: Projection, frame: Frame) -> None:
        """Depth cues for spatial scenarios: shadows of the end effector and the debris on a
        ground plane (z = :attr:`ground_z_m`), cast by an oblique light in the top view
        (offset by :data:`SHADOW_SLANT` times the height) and straight down in the side
        view, with a line from each to its shadow; the side view draws the ground."""
        import pygame

        shadow = COLOURS["shadow"]
        for point_m, radius in ((frame.target_m, 9), (frame.ee_m, 7)):
            height = float(point_m[2]) - self.ground_z_m
            image = view(point_m)
            if view.axes == (0, 1):
                offset = SHADOW_SLANT * height * view.px_per_m
                at = (int(image[0] + offset), int(image[1] + offset))
            else:
                ground = point_m.copy()
                ground[2] = self.ground_z_m
                at = view(ground)
            pygame.draw.line(surface, shadow, image, at, 1)
            pygame.draw.ellipse(surface, shadow, (at[0] - radius, at[1] - radius // 2, 2 * radius, radius))
        if view.axes == (0, 2):
            ground_px = view(np.array([0.0, 0.0, self.ground_z_m]))[1]
            pygame.draw.line(surface, shadow, (view.rect.left, ground_px), (view.rect.right, ground_px), 2)
            self.text(surface, "ground: shadows straight below", (view.rect.right - 230, ground_px + 4),
                      colour="dim")
        else:
            dz = float(frame.target_m[2] - frame.ee_m[2])
            where = "above" if dz > 0 else "below"
            self.text(surface, f"debris {abs(dz) * 100:.1f} cm {where} the tool (shadows: light from the top left)",
                      (view.rect.x + 6, view.rect.bottom - 36), colour="dim")

    @staticmethod
    def _tool(surface: Any, frame: Frame, ee: tuple[int, int], fixture: tuple[int, int],
              radii_px: tuple[int, int, int]) -> None:
        """The capture tool at the end effector, in the colour of its contact state."""
        import pygame

        fixture_px, tip_px, envelope_px = radii_px
        state = frame.tool_state
        colour = COLOURS[state]
        if state == "captured":  # closed: the debris is joined to the tool
            pygame.draw.line(surface, colour, ee, fixture, 3)
            pygame.draw.circle(surface, colour, fixture, fixture_px + 3, 2)
        pygame.draw.circle(surface, colour, ee, tip_px)
        if frame.released:  # opened: the envelope drawn as two jaws, open toward the debris
            toward = math.atan2(-(fixture[1] - ee[1]), fixture[0] - ee[0])  # screen y points down
            rect = pygame.Rect(ee[0] - envelope_px, ee[1] - envelope_px, 2 * envelope_px, 2 * envelope_px)
            gap = OPEN_JAW_GAP_RAD
            pygame.draw.arc(surface, colour, rect, toward + 0.5 * gap, toward + math.pi - 0.25 * gap, 3)
            pygame.draw.arc(surface, colour, rect, toward + math.pi + 0.25 * gap, toward + 2.0 * math.pi - 0.5 * gap, 3)
            return
        pygame.draw.circle(surface, colour, ee, envelope_px, {"tool": 1, "contact": 2}.get(state, 3))

    def _base(self, surface: Any, view: Projection, frame: Frame) -> None:
        import pygame

        centre = frame.links_m[0]
        # Rotation of the base about the axis normal to this view (z for x-y, y for x-z).
        normal = 3 - view.axes[0] - view.axes[1]
        angle = float(frame.base_attitude_rad[normal]) * (1.0 if normal == 2 else -1.0)
        c, s = math.cos(angle), math.sin(angle)
        h = self.base_half_m
        corners = []
        for u, v in ((-h, -h), (h, -h), (h, h), (-h, h)):
            p = centre.copy()
            p[view.axes[0]] += c * u - s * v
            p[view.axes[1]] += s * u + c * v
            corners.append(view(p))
        pygame.draw.polygon(surface, COLOURS["base"], corners)
        pygame.draw.polygon(surface, COLOURS["joint"], corners, 2)

    # -- the panel -------------------------------------------------------------------

    def _panel(self, surface: Any, frame: Frame, experimenter: bool = True) -> None:
        import pygame

        pygame.draw.rect(surface, COLOURS["panel"], self.panel)
        x = self.panel.x + 20
        width = self.PANEL_W - 40
        self.text(surface, f"{self.info.condition.upper()}  {self.info.scenario}", (x, 24), "large")
        self.text(surface, f"t = {max(frame.t_s, 0.0):5.2f} s / {self.info.duration_s:.0f} s", (x, 62), "normal")
        self._velocity_gauge(surface, frame, pygame.Rect(x + 10, 112, width - 20, 26))
        self._distance(surface, frame, pygame.Rect(x, 210, width, 20))
        self._capture_status(surface, frame, (x, 236))
        self._forces(surface, frame)
        if experimenter:
            self._base_gauge(surface, frame, pygame.Rect(x, 449, width, 16))
        self._margin_gauge(surface, frame, self.margin_rect)
        self._legend(surface, (x, 530), frame)

    def gauge_x(self, rect: Any, speed_m_s: float) -> int:
        """The closing-speed gauge's pixel column for ``speed_m_s`` (clipped to the ends)."""
        full = self.gauge_full_m_s
        return int(rect.centerx) + int(round(max(-1.0, min(1.0, speed_m_s / full)) * rect.width / 2))

    def _velocity_gauge(self, surface: Any, frame: Frame, rect: Any) -> None:
        """Closing speed on a dial spanning ± :func:`gauge_range`'s full scale, ticks
        labelled in cm/s, the soft band (± the scenario's ``capture_speed_m_s``) drawn green."""
        import pygame

        closing = frame.closing_speed_m_s
        band = self.info.capture_speed_m_s
        self.text(surface, f"closing speed {closing * 100:+.1f} cm/s   soft: under {band * 100:.0f} cm/s",
                  (rect.x - 10, rect.y - 20))
        pygame.draw.rect(surface, COLOURS["grid"], rect)
        soft = pygame.Rect(0, rect.y, max(2, self.gauge_x(rect, band) - self.gauge_x(rect, -band)), rect.height)
        soft.centerx = rect.centerx
        pygame.draw.rect(surface, COLOURS["good"], soft, 2)
        step, full = self.gauge_step_m_s, self.gauge_full_m_s
        n = int(round(full / step))
        for i in range(-n, n + 1):
            tick = self.gauge_x(rect, i * step)
            pygame.draw.line(surface, COLOURS["dim"], (tick, rect.bottom), (tick, rect.bottom + 5), 1)
            if i % 2 == 0 or n <= 3:
                label = self.fonts["small"].render(f"{i * step * 100:g}", True, COLOURS["dim"])
                surface.blit(label, (tick - label.get_width() // 2, rect.bottom + 6))
        self.text(surface, "cm/s  (+ closing, - apart)", (rect.right - 150, rect.bottom + 22), colour="dim")
        pos = self.gauge_x(rect, closing)
        near = frame.distance_m < 0.05
        colour = "good" if abs(closing) <= band else ("bad" if near else "warn")
        pygame.draw.rect(surface, COLOURS[colour], (pos - 4, rect.y - 3, 8, rect.height + 6))
        if abs(closing) > self.gauge_full_m_s:
            self.text(surface, "off scale", (rect.x, rect.bottom + 22), colour="warn")

    def _distance(self, surface: Any, frame: Frame, rect: Any) -> None:
        import pygame

        d = frame.distance_m
        reached = frame.reached_at_s == frame.reached_at_s
        label = f"distance to contact {d * 100:6.1f} cm"
        if reached:
            label += f"   reached at {frame.reached_at_s:.2f} s"
        self.text(surface, label, (rect.x, rect.y - 18))
        pygame.draw.rect(surface, COLOURS["grid"], rect)
        span = self.info.start_gap_m if self.info.start_gap_m > 0.0 else 0.3
        fill = int(rect.width * max(0.0, min(1.0, d / span)))
        pygame.draw.rect(surface, COLOURS["good" if d <= 0.0 else "command"],
                         (rect.x, rect.y, fill, rect.height))

    def _capture_status(self, surface: Any, frame: Frame, pos: tuple[int, int]) -> None:
        text, font, colour = capture_status(frame)
        self.text(surface, text, pos, font, colour)

    def _forces(self, surface: Any, frame: Frame) -> None:
        """The stylus force, device frame: x-y as arrows in the inset against the 3.3 N
        peak circle, z as a vertical bar at its right (up: +z), both calculated (orange,
        wide) and actuated (magenta, thin)."""
        import pygame

        rect = self.force_rect
        self.text(surface, "stylus force, device frame (x-y arrows, z bar)", (rect.x, rect.y - 18))
        pygame.draw.rect(surface, COLOURS["background"], rect)
        plane = pygame.Rect(rect.x, rect.y, rect.width - 48, rect.height)
        centre = plane.center
        limit_px = 3.3 * FORCE_PX_PER_N * 0.7
        pygame.draw.circle(surface, COLOURS["grid"], centre, int(limit_px), 1)
        scale = FORCE_PX_PER_N * 0.7
        calc = frame.dev_force_calc_n
        act = frame.dev_force_act_n
        _arrow(surface, COLOURS["force_calc"], centre, (calc[0] * scale, -calc[1] * scale), 7)
        _arrow(surface, COLOURS["force_act"], centre, (act[0] * scale, -act[1] * scale), 3)
        zbar = pygame.Rect(rect.right - 34, rect.y + 8, 20, rect.height - 16)
        pygame.draw.rect(surface, COLOURS["grid"], zbar, 1)
        mid = zbar.centery
        pygame.draw.line(surface, COLOURS["dim"], (zbar.x - 3, mid), (zbar.right + 3, mid), 1)
        half_px = zbar.height / 2
        for value, colour, width in ((calc[2], "force_calc", 12), (act[2], "force_act", 4)):
            length = max(-half_px, min(half_px, float(value) * half_px / 3.3))
            if abs(length) >= 1.0:
                top = mid - length if length > 0 else mid
                pygame.draw.rect(surface, COLOURS[colour],
                                 (zbar.centerx - width // 2, int(top), width, int(abs(length))))
        self.text(surface, "z", (zbar.centerx - 3, zbar.bottom - 2), colour="dim")
        self.text(surface, f"calc {np.linalg.norm(calc):4.2f} N", (rect.x + 4, rect.bottom - 36),
                  colour="dim")
        self.text(surface, f"act  {np.linalg.norm(act):4.2f} N", (rect.x + 4, rect.bottom - 18),
                  colour="dim")
        if "saturated" in frame.flags:
            self.text(surface, "SATURATED", (plane.right - 90, rect.y + 4), colour="warn")

    def _base_gauge(self, surface: Any, frame: Frame, rect: Any) -> None:
        import pygame

        torque = float(np.linalg.norm(frame.base_torque_n_m))
        drift_deg = math.degrees(float(np.linalg.norm(frame.base_attitude_rad)))
        self.text(surface, f"base disturbance {torque:6.3f} N m   drift {drift_deg:5.2f} deg",
                  (rect.x, rect.y - 18))
        pygame.draw.rect(surface, COLOURS["grid"], rect)
        level = max(0.0, min(1.0, torque / 0.5))
        colour = "good" if level < 0.2 else ("warn" if level < 0.6 else "bad")
        pygame.draw.rect(surface, COLOURS[colour], (rect.x, rect.y, int(rect.width * level), rect.height))

    def margin_bar(self) -> Any:
        """The margin gauge's fill area: :attr:`margin_rect` less room for the marks' numbers."""
        return self.margin_rect.inflate(-2 * 34, 0)

    def _margin_gauge(self, surface: Any, frame: Frame, rect: Any) -> None:
        """The base-safe margin (:func:`base_margin`): the fill between the two marks,
        ``BASE_THRESHOLD`` on the left (empty) and ``BASE_MARGIN`` on the right (full)."""
        import pygame

        gauge = base_margin(frame.sigma_ratio)
        self.text(surface, gauge.label, (rect.x, rect.y - 18),
                  colour="dim" if gauge.colour == "dim" else "text")
        bar = self.margin_bar()
        pygame.draw.rect(surface, COLOURS["grid"], bar)
        fill = int(round(bar.width * gauge.level))
        if fill > 0:
            pygame.draw.rect(surface, COLOURS[gauge.colour], (bar.x, bar.y, fill, bar.height))
        for mark_x in (bar.left - 2, bar.right):  # the two marks, just outside the fill area
            pygame.draw.rect(surface, COLOURS["text"], (mark_x, bar.y - 3, 2, bar.height + 6))
        self.text(surface, f"{BASE_THRESHOLD:g}", (rect.x, rect.y + 2), colour="dim")
        self.text(surface, f"{BASE_MARGIN:g}", (bar.right + 6, rect.y + 2), colour="dim")
        if gauge.warning:
            self.text(surface, gauge.warning, (rect.x, rect.bottom + 4), colour=gauge.colour)

    def _legend(self, surface: Any, pos: tuple[int, int], frame: Frame | None = None) -> None:
        import pygame

        entries: tuple[tuple[str, str], ...] = (
            ("arm", "arm"), ("ee", "end effector"), ("target", "debris"),
            ("path", "debris predicted path"), ("command", "stylus command"),
            ("guidance", "guidance force (task)"), ("force_calc", "calculated force"),
            ("force_act", "actuated force"), ("tool", "capture tool"),
            ("contact", "tool: in contact"), ("captured", "tool: captured"), ("open", "tool: opened"))
        delayed = frame is not None and frame.ghost_m is not None and bool(np.all(np.isfinite(frame.ghost_m)))
        if delayed:  # a delayed link: the ghost, and with a prediction the arm the trainee steers
            predicted = frame is not None and frame.virtual_ee_m is not None and bool(
                np.all(np.isfinite(frame.virtual_ee_m)))
            entries += ((("predicted", "predicted arm (steered)"),) if predicted else ()) + (
                ("ghost", "delayed end effector"),)
        spacing = 20 if len(entries) <= 12 else 18
        x, y = pos
        for i, (key, label) in enumerate(entries):
            row = y + spacing * (i // 2)
            col = x + 160 * (i % 2)
            pygame.draw.rect(surface, COLOURS[key], (col, row + 3, 12, 12))
            self.text(surface, label, (col + 18, row), colour="dim")

    def _servo_lamp(self, surface: Any, stats: Any, recent: Any) -> None:
        """The trainee's view of the servo: the lamp and one word (the figures are in the
        experimenter's view)."""
        import pygame

        from app.ui.servo import servo_health

        health = recent.health if recent is not None else servo_health(stats.rate_hz, stats.worst_period_ms)
        x, y = self.panel.x + 20, surface.get_height() - 106
        colour = HEALTH_COLOURS[health.level]
        pygame.draw.circle(surface, COLOURS[colour], (x + 6, y + 8), 6)
        word = {"idle": "starting", "good": "smooth", "warn": "hiccups", "bad": "stalling"}[health.level]
        self.text(surface, f"force loop {word}   (E: experimenter's view)", (x + 18, y), colour="dim")

    def _servo_corner(self, surface: Any, stats: Any, fps: float, recent: Any, note: str) -> None:
        """The servo's health (:func:`app.ui.servo.servo_health`): a lamp and the recent
        figures in its colour, the reason or ``note``, the whole attempt's figures."""
        import pygame

        from app.ui.servo import RECENT_S, ServoHealth, servo_health

        if recent is None:
            health = servo_health(stats.rate_hz, getattr(stats, "recent_worst_ms", stats.worst_period_ms))
            rate, worst, overruns = stats.rate_hz, stats.worst_period_ms, stats.overruns
            attempt = ServoHealth("idle")
        else:
            health, attempt = recent.health, recent.attempt
            rate, worst, overruns = recent.rate_hz, recent.worst_period_ms, recent.overruns
        x, y = self.panel.x + 20, surface.get_height() - 106
        colour = HEALTH_COLOURS[health.level]
        pygame.draw.circle(surface, COLOURS[colour], (x + 6, y + 8), 6)
        if health.level == "idle":
            self.text(surface, "servo: measuring...", (x + 18, y), colour=colour)
        else:
            self.text(surface, f"servo {rate:6.1f} Hz   last {RECENT_S:.0f} s: worst {worst:.1f} ms",
                      (x + 18, y), colour=colour)
            self.text(surface, health.reason or f"overruns in the last {RECENT_S:.0f} s: {overruns}",
                      (x + 18, y + 20), colour=colour)
        if note:
            self.text(surface, note, (x + 18, y + 40), colour="warn")
        whole = "dim" if attempt.level in ("good", "idle") else HEALTH_COLOURS[attempt.level]
        self.text(surface, f"attempt: overruns {stats.overruns}, worst {stats.worst_period_ms:.1f} ms",
                  (x + 18, y + 60), colour=whole)
        self.text(surface, f"display {fps:4.1f} fps", (x + 18, y + 80), colour="dim")
