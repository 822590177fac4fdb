"""The trainer window: the trainee flow and the experimenter's protocol session (pygame).

The window (this process) draws at display rate; every attempt runs in the servo
process (:mod:`app.ui.servo`) at 1 kHz on its own clock. Screens are small objects
with ``event``/``update``/``draw``; the :class:`App` loop feeds them and switches
between them:

    trainee:       Name -> Menu -> Attempt -> ScoreCard -> Menu ...  (Progress from Menu)
    experimenter:  Instruction -> Attempt -> Pause -> Instruction ... -> Done

Keys: Esc aborts a running attempt (its file is kept, marked incomplete) or leaves a
screen; closing the window at any time is safe (attempts already recorded stay in the
database; the running one is marked ``interrupted`` the next time the trainer starts).

With ``--device mouse`` the pointer over the task view moves the stylus in its x-y
plane (the view's area spans the device workspace), the mouse wheel or W/S moves it in
depth, the engage button is on at the start of an attempt and Space toggles it (released,
the stylus is clutched: the arm holds while the pointer re-centres), and the right mouse
button is the trainer button. Forces are drawn, not felt.

Without a display the window refuses to open (:func:`require_display`) rather than
drawing invisibly on SDL's off-screen driver; ``SDL_VIDEODRIVER=dummy`` (or any driver)
set explicitly by the caller is honoured, which is how tests and demos draw off-screen.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.ui.data import absolute_path, data_dir, normalise_name
from capture_trainer.errors import CaptureTrainerError, DeviceError, TrialError
from haptics.device import BUTTON_ENGAGE, BUTTON_TRAINER
from app.ui.servo import (
    RUNNER_FACTORY, AttemptSpec, ServoMonitor, ServoOptions, ServoProcess, ServoStats, priority_notice,
)

log = logging.getLogger(__name__)

WINDOW_SIZE = (1280, 760)
#: How long closing the window waits for the aborted attempt's result [s].
CLOSE_WAIT_S = 15.0
#: The trainee flow's conditions: practise with dynamic guidance, test without guidance.
PRACTISE, TEST = "dg", "ng"
#: The countdown before an attempt starts [s] (the servo holds the built trial).
COUNTDOWN_S = 3.0
#: Task metres the wheel or W/S moves the pointer's depth per step (device metres x scale).
DEPTH_STEP_DEV_M = 0.005
#: What the menu says about each device.
DEVICE_HINTS: dict[str, str] = {
    "mouse": "Mouse: move the mouse to move the tool (the white ring) inside the blue 'mouse reach' box; "
    "wheel or W/S for depth.",
    "simulated": "Simulated device: a simulated participant holds the stylus; you watch "
    "(start with --device mouse to drive it yourself).",
    "openhaptics": "Touch: hold the stylus; the guidance force pulls it, you stay in control.",
}
#: SDL's video drivers that draw nowhere a person can see.
HEADLESS_DRIVERS = ("dummy", "offscreen")
#: Platforms whose windows need DISPLAY or WAYLAND_DISPLAY (not macOS or Windows).
_X11_LIKE = ("linux", "freebsd", "openbsd", "netbsd", "dragonfly", "sunos")


@dataclass(frozen=True)
class WindowConfig:
    """What the window runs with.

    Attributes:
        device: ``simulated`` (watch a simulated participant), ``mouse`` or ``openhaptics``.
        participant_kind: the simulated operator's kind with ``device="simulated"``.
        scenario: scenario of the trainee flow's attempts (built-in name or path).
        out_dir: trainee flow: trial files go to ``out_dir/trials``; the database
            defaults to ``out_dir/trainees.sqlite`` (default: ``trainer/`` in the data
            folder, :func:`app.ui.data.data_dir`; made absolute).
        db_path: the trainee database (None: the default above; made absolute).
        view: ``window`` (draw the scene here) or ``pybullet`` (also PyBullet's 3-D view
            of the attempt, in a viewer process; needs a display).
        factory: the trial factory the servo process uses.
        size, fps: window size [px] and display rate [Hz].
        trainee: skip the name screen with this name (NFC-normalised).
        auto: run these conditions one after another without key presses (demos, tests).
        stop_after_s: stop each attempt after this much trial time [s], as ``stop_by``
            says: ``abort`` (as Esc) or ``close`` (as closing the window).
        screenshot: save the window to this PNG once an attempt reaches ``screenshot_at_s``.
        quit_when_done: close the window after the automatic attempts.
        arm, arm_keys: an arm server's address and the link's key folder: the attempts
            drive that arm over the link in real time (``TrialRequest.arm``).
        delay_s, jitter_s, loss: the delayed link between the stylus and the arm
            (``TrialRequest``; None: the scenario's ``[delay]``).
        compensator, contact_feedback, contact_mode: the delay compensator, the contact
            force in the hand and what it feels after the capture (``TrialRequest``; None:
            the scenario's ``[delay]`` and ``[rendering]``).
        countdown_s: the countdown before every attempt [s] (None: :data:`COUNTDOWN_S`,
            or none for ``auto`` runs).
        experimenter: start in the experimenter's view (servo figures, base disturbance,
            data-quality flags per trial); the E key toggles it.
        schedule: the trainee's guidance schedule (a name in
            ``guidance.schedule.SCHEDULES``, default parameters), set in the trainee
            database when the session opens; None keeps the one stored (none: authority 1).
        task: the task after the capture in the trainee flow (``TrialRequest.task``: a
            built-in task, a ``.toml`` path or ``"none"``; None: the scenario's own).
    """

    device: str = "simulated"
    participant_kind: str = "novice"
    scenario: str = "paper-2019"
    out_dir: Path = field(default_factory=lambda: data_dir() / "trainer")
    db_path: Path | None = None
    view: str = "window"
    factory: str = RUNNER_FACTORY
    size: tuple[int, int] = WINDOW_SIZE
    fps: float = 60.0
    trainee: str | None = None
    auto: tuple[str, ...] = ()
    stop_after_s: float | None = None
    stop_by: str = "abort"
    screenshot: Path | None = None
    screenshot_at_s: float = 1.0
    quit_when_done: bool = False
    arm: str | None = None
    arm_keys: str | None = None
    delay_s: float | None = None
    jitter_s: float | None = None
    loss: float | None = None
    compensator: str | None = None
    contact_feedback: bool | None = None
    contact_mode: str | None = None
    countdown_s: float | None = None
    experimenter: bool = False
    schedule: str | None = None
    task: str | None = None

    def __post_init__(self) -> None:
        # Anchored once, here: the database stores trial paths, and the history must not
        # depend on the directory the trainer is started from.
        object.__setattr__(self, "out_dir", absolute_path(self.out_dir))
        if self.db_path is not None:
            object.__setattr__(self, "db_path", absolute_path(self.db_path))
        if self.trainee is not None:
            object.__setattr__(self, "trainee", normalise_name(self.trainee))

    @property
    def countdown(self) -> float:
        """The countdown before each attempt [s]."""
        if self.countdown_s is not None:
            return max(0.0, float(self.countdown_s))
        return 0.0 if self.auto else COUNTDOWN_S

    @property
    def database(self) -> Path:
        return self.db_path if self.db_path is not None else self.out_dir / "trainees.sqlite"


@dataclass
class AttemptResult:
    """What the window learnt about one attempt."""

    spec: AttemptSpec
    status: str  # finished | aborted | error
    summary: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    live_stats: ServoStats | None = None
    frames_drawn: int = 0
    priority: str = ""

    @property
    def outcome(self) -> Any:
        """How the attempt ended (:class:`app.ui.outcomes.AttemptOutcome`)."""
        from app.ui.outcomes import attempt_outcome

        return attempt_outcome(self.status, self.summary, self.metrics, self.message)


def require_display(environ: Any = None, platform: str | None = None) -> None:
    """Refuse, in one line, to open the trainer window where nobody can see it.

    On Linux and the BSDs a window needs ``DISPLAY`` (X11) or ``WAYLAND_DISPLAY``; without
    either, SDL would fall back to its off-screen driver and the trainer would wait for
    key presses nobody can make. An ``SDL_VIDEODRIVER`` the caller set explicitly is
    honoured: ``dummy`` draws off-screen on purpose (tests, demos with ``--auto``), and
    ``kmsdrm`` opens a console display without X.

    Raises:
        DeviceError: no display and no explicit video driver.
    """
    env = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if env.get("SDL_VIDEODRIVER", "").strip():
        return
    if platform.startswith(_X11_LIKE) and not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        raise DeviceError(
            "the trainer window needs a display, but neither DISPLAY nor WAYLAND_DISPLAY is "
            "set; start it in a desktop session (or under xvfb-run); headless trials run with "
            "`capture-trainer run` / `study`; SDL_VIDEODRIVER=dummy draws off-screen on purpose"
        )


def check_display(view: str) -> None:
    """Fail with a clear message when the window (or ``--view pybullet``) cannot be seen."""
    require_display()
    if view == "pybullet":
        from app.ui.pybullet_view import check_gui_display

        check_gui_display()


def safe_id(text: str) -> str:
    """``text`` as one safe file-name component (``capture_trainer.paths.safe_component``)."""
    from capture_trainer.paths import safe_component

    return safe_component(text.strip() or "trainee")


class App:
    """The pygame application: window, fonts, servo process, pointer input, screens.

    Args:
        config: the window configuration.
        title: window caption.
    """

    def __init__(self, config: WindowConfig, title: str) -> None:
        check_display(config.view)
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        import pygame

        self.config = config
        self.pygame = pygame
        try:
            pygame.display.init()
            driver = pygame.display.get_driver()
            if driver in HEADLESS_DRIVERS and not os.environ.get("SDL_VIDEODRIVER", "").strip():
                # SDL fell back to drawing nowhere (e.g. DISPLAY set but unreachable).
                pygame.display.quit()
                raise DeviceError(
                    f"the trainer window cannot open on a display (SDL chose its {driver!r} "
                    "driver, which draws nowhere); check DISPLAY / WAYLAND_DISPLAY, or set "
                    "SDL_VIDEODRIVER=dummy to draw off-screen on purpose"
                )
            self.screen = pygame.display.set_mode(config.size)
        except pygame.error as error:
            pygame.display.quit()
            raise DeviceError(
                f"the trainer window cannot open ({error}): it needs a display; headless "
                "trials run with `capture-trainer run` / `study`, and SDL_VIDEODRIVER=dummy "
                "draws off-screen"
            ) from None
        pygame.font.init()
        pygame.display.set_caption(title)
        self.fonts = {
            "small": pygame.font.SysFont(None, 20),
            "normal": pygame.font.SysFont(None, 26),
            "large": pygame.font.SysFont(None, 40),
        }
        self.clock = pygame.time.Clock()
        self.input = None
        if config.device == "mouse":
            from haptics.shared_input import SharedInput

            self.input = SharedInput()
        self.servo = ServoProcess(
            ServoOptions(
                factory=config.factory,
                input_name=None if self.input is None else self.input.name,
                publish_joints=config.view == "pybullet",
            )
        )
        self.viewer: Any = None
        if config.view == "pybullet":
            from app.ui.pybullet_view import ViewerProcess

            self.viewer = ViewerProcess(self.servo.joints)
        self.results: list[AttemptResult] = []
        self.screen_obj: Screen | None = None
        self.running = True
        self._screenshot_done = config.screenshot is None
        self._priority = ""
        #: What the window says about the servo's priority ("" while all is well).
        self.notice = ""
        #: The experimenter's view (engineering figures); E toggles it.
        self.experimenter = config.experimenter

    def check_priority(self) -> None:
        """Once the servo has said which priority it got, warn (once) when it is not real-time."""
        if self._priority:
            return
        self._priority = self.servo.priority
        notice = priority_notice(self._priority) if self._priority else None
        if notice:
            log.warning("%s", notice)
            self.notice = notice

    def draw_notice(self, surface: Any, bottom: int) -> None:
        """The priority notice, in amber, wrapped to the window's width, ending at ``bottom``."""
        if not self.notice:
            return
        font = self.fonts["small"]
        words, line, lines = self.notice.split(" "), "", []
        for word in words:
            trial = f"{line} {word}".strip()
            if line and font.size(trial)[0] > surface.get_width() - 120:
                lines.append(line)
                line = word
            else:
                line = trial
        lines.append(line)
        for i, text in enumerate(lines):
            self.text(text, (60, bottom - 18 * (len(lines) - i)), "small", "warn")

    def close(self) -> None:
        if self.viewer is not None:
            self.viewer.close()
        self.servo.close()
        if self.input is not None:
            self.input.close()
        self.pygame.display.quit()

    def text(self, value: str, pos: tuple[int, int], font: str = "normal", colour: str = "text") -> None:
        from app.ui.palette import COLOURS

        self.screen.blit(self.fonts[font].render(value, True, COLOURS[colour]), pos)

    def switch(self, screen: Screen | None) -> None:
        if self.screen_obj is not None:
            self.screen_obj.leave()
        self.screen_obj = screen
        if screen is None:
            self.running = False
        else:
            screen.enter()

    def run(self, first: Screen, driver: Callable[[App], None] | None = None) -> list[AttemptResult]:
        """The display loop; returns the attempts' results when the window closes.

        Args:
            first: the first screen.
            driver: called once per frame before the events are read (a script that
                posts events, for demos and tests).
        """
        pygame = self.pygame
        self.switch(first)
        try:
            while self.running and self.screen_obj is not None:
                self.check_priority()
                if driver is not None:
                    driver(self)
                for event in pygame.event.get():
                    if event.type == pygame.QUIT:
                        self.switch(None)
                    else:
                        self.screen_obj.event(event)
                    if self.screen_obj is None:
                        break
                if self.screen_obj is None:
                    break
                self.screen_obj.update()
                if self.screen_obj is None:
                    break
                self.screen_obj.draw(self.screen)
                pygame.display.flip()
                self.clock.tick(self.config.fps)
        finally:
            if self.screen_obj is not None:
                self.screen_obj.leave()
                self.screen_obj = None
            self.close()
        return self.results

    def maybe_screenshot(self, trial_time_s: float) -> None:
        if not self._screenshot_done and trial_time_s >= self.config.screenshot_at_s:
            path = Path(self.config.screenshot)  # type: ignore[arg-type]
            path.parent.mkdir(parents=True, exist_ok=True)
            self.pygame.image.save(self.screen, str(path))
            self._screenshot_done = True


class Screen:
    """One screen of the flow."""

    def __init__(self, app: App) -> None:
        self.app = app

    def enter(self) -> None: ...

    def leave(self) -> None: ...

    def event(self, event: Any) -> None: ...

    def update(self) -> None: ...

    def draw(self, surface: Any) -> None: ...

    def key(self, event: Any) -> str | None:
        pygame = self.app.pygame
        if event.type == pygame.KEYDOWN:
            name: str = pygame.key.name(event.key)
            return name
        return None


class MessageScreen(Screen):
    """Lines of text and a set of keys, each with an action."""

    def __init__(self, app: App, title: str, lines: list[str],
                 actions: dict[str, tuple[str, Callable[[], None]]]) -> None:
        super().__init__(app)
        self.title = title
        self.lines = lines
        self.actions = actions

    def event(self, event: Any) -> None:
        key = self.key(event)
        if key in self.actions:
            self.actions[key][1]()

    def draw(self, surface: Any) -> None:
        from app.ui.palette import COLOURS

        surface.fill(COLOURS["background"])
        self.app.text(self.title, (60, 50), "large")
        for i, line in enumerate(self.lines):
            self.app.text(line, (60, 120 + 32 * i))
        y = surface.get_height() - 60 - 32 * len(self.actions)
        self.app.draw_notice(surface, y - 12)
        for key, (label, _) in self.actions.items():
            self.app.text(f"[{key.upper()}]  {label}", (60, y), colour="command")
            y += 32


class NameScreen(Screen):
    """Type a name, Enter to continue."""

    def __init__(self, app: App, on_name: Callable[[str], None]) -> None:
        super().__init__(app)
        self.name = ""
        self.on_name = on_name

    def event(self, event: Any) -> None:
        pygame = self.app.pygame
        if event.type == pygame.TEXTINPUT:
            self.name = (self.name + event.text)[:40]
        elif event.type == pygame.KEYDOWN:
            if event.key == pygame.K_BACKSPACE:
                self.name = self.name[:-1]
            elif event.key in (pygame.K_RETURN, pygame.K_KP_ENTER) and self.name.strip():
                self.on_name(self.name.strip())
            elif event.key == pygame.K_ESCAPE:
                self.app.switch(None)

    def draw(self, surface: Any) -> None:
        from app.ui.palette import COLOURS

        surface.fill(COLOURS["background"])
        self.app.text("Debris capture trainer", (60, 60), "large")
        self.app.text("Your name, then Enter:", (60, 160))
        caret = "_" if int(time.monotonic() * 2) % 2 else " "
        self.app.text(self.name + caret, (60, 200), "large", "command")
        self.app.draw_notice(surface, surface.get_height() - 40)


class AttemptScreen(Screen):
    """One running attempt: start it, draw its snapshots, collect its result.

    Args:
        app: the application.
        spec: the attempt.
        header: the line shown under the task view.
        on_start: called with the ``started`` message (the trial file's name is known).
        on_done: records the :class:`AttemptResult` and returns the next screen. When the
            window closes mid-attempt, the attempt is aborted, its result awaited (up to
            :data:`CLOSE_WAIT_S`) and recorded, and the returned screen is not shown.
    """

    def __init__(self, app: App, spec: AttemptSpec, header: str,
                 on_start: Callable[[dict[str, Any]], None],
                 on_done: Callable[[AttemptResult], Screen | None]) -> None:
        super().__init__(app)
        self.spec = spec
        self.header = header
        self.on_start = on_start
        self.on_done = on_done
        self.snapshot: Any = None
        self.renderer: Any = None
        self.info: Any = None
        self.frame: Any = None
        self.frames = 0
        self.error = ""
        self.engaged = True
        self.depth_m = 0.0
        self.finished = False
        self.monitor = ServoMonitor()
        #: When the servo said "started" (the countdown runs from then) [monotonic s].
        self.started_at_s: float | None = None
        #: The pointer's task point [m] (``--device mouse``), set when the attempt starts.
        self.cursor_m: Any = None
        self._grabbed = False

    def enter(self) -> None:
        # The tick anchors the workspace mapping at the stylus' first reading; the servo
        # parks the pointer's stylus at the centred start before that (_write_pointer).
        self.app.servo.start_attempt(self.spec)

    def leave(self) -> None:
        if not self.finished:
            self.app.servo.abort()
            result = self._await_result(CLOSE_WAIT_S)
            if result is not None:
                self._record(result)
        if self.snapshot is not None:
            self.snapshot.close()
            self.snapshot = None
        self._release_pointer()

    def event(self, event: Any) -> None:
        pygame = self.app.pygame
        if event.type == pygame.KEYDOWN:
            if event.key == pygame.K_ESCAPE:
                self.app.servo.abort()
            elif event.key == pygame.K_SPACE:
                self.engaged = not self.engaged
            elif event.key == pygame.K_w:
                self._move_pointer(0.0, 0.0, 1.0)
            elif event.key == pygame.K_s:
                self._move_pointer(0.0, 0.0, -1.0)
            elif event.key == pygame.K_e:
                self.app.experimenter = not self.app.experimenter
            else:
                self._request_state(pygame.key.name(event.key))
        elif event.type == pygame.MOUSEWHEEL:
            self._move_pointer(0.0, 0.0, float(event.y))
        elif event.type == pygame.MOUSEMOTION:
            self._move_pointer(float(event.rel[0]), float(event.rel[1]), 0.0)

    def _request_state(self, key: str) -> None:
        """After the capture, a task key asks the servo for a state
        (:func:`app.ui.behaviours_view.requested_state`)."""
        task = None if self.info is None else self.info.task
        if task is None or self.frame is None or not self.frame.captured:
            return
        from app.ui.behaviours_view import requested_state

        index = requested_state(key, task, self.frame.post_state_index)
        if index is not None:
            self.app.servo.request(index)

    @property
    def running(self) -> bool:
        """The attempt's first tick has run (the countdown is over)."""
        return self.frame is not None and self.frame.phase != "idle"

    def _move_pointer(self, dx_px: float, dy_px: float, depth_steps: float) -> None:
        """Move the cursor by a pointer motion (pixels in the first view) and depth steps,
        kept inside the pointer's reach; nothing moves during the countdown."""
        workspace = None if self.info is None else self.info.workspace
        if self.app.input is None or workspace is None or self.cursor_m is None or not self.running:
            return
        view = self.renderer.views[0][1]
        a, b = view.axes
        cursor = self.cursor_m.copy()
        cursor[a] += dx_px / view.px_per_m
        cursor[b] -= dy_px / view.px_per_m
        depth_axis = 3 - a - b
        cursor[depth_axis] += depth_steps * DEPTH_STEP_DEV_M * workspace.scale
        self.cursor_m = workspace.to_task(workspace.to_device(cursor))

    def _handle(self, message: tuple[str, dict[str, Any]]) -> AttemptResult | None:
        """Act on one servo message; the attempt's result once it has ended."""
        kind, payload = message
        if kind == "started":
            self._started(payload)
            return None
        if kind == "finished":
            return AttemptResult(
                spec=self.spec,
                status=payload["status"],
                summary=payload.get("summary", {}),
                metrics=payload.get("metrics", {}),
                timing=payload.get("timing", {}),
                message=payload.get("message", ""),
                live_stats=self.app.servo.stats(),
                frames_drawn=self.frames,
                priority=payload.get("priority", ""),
            )
        self.error = payload.get("message", "unknown error")
        return AttemptResult(self.spec, "error", message=self.error)

    def _record(self, result: AttemptResult) -> Screen | None:
        self.finished = True
        if self.app.viewer is not None:
            self.app.viewer.detach()
        self.app.results.append(result)
        return self.on_done(result)

    def _await_result(self, timeout_s: float) -> AttemptResult | None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0.0:
            try:
                message = self.app.servo.poll(left)
            except TrialError:
                return None
            if message is None:
                return None
            result = self._handle(message)
            if result is not None:
                return result
        return None

    def update(self) -> None:
        self._write_pointer()
        message = self.app.servo.poll()
        while message is not None:
            result = self._handle(message)
            if result is not None:
                self.app.switch(self._record(result))
                return
            message = self.app.servo.poll()
        if self.snapshot is not None:
            from app.ui.scene import Frame

            frame = Frame.read(self.snapshot)
            if frame is not None:
                self.frame = frame
            limit = self.app.config.stop_after_s
            if limit is not None and self.frame is not None and self.frame.t_s >= limit:
                if self.app.config.stop_by == "close":
                    self.app.pygame.event.post(self.app.pygame.event.Event(self.app.pygame.QUIT))
                else:
                    self.app.servo.abort()

    def _started(self, payload: dict[str, Any]) -> None:
        from trials.snapshot import SharedSnapshot, SnapshotLayout
        from app.ui.behaviours_view import TaskInfo
        from app.ui.scene import AttemptInfo, PointerWorkspace

        self.snapshot = SharedSnapshot(SnapshotLayout(payload["n_joints"]), name=payload["snapshot"])
        self.info = AttemptInfo(
            model=payload["model"], n_joints=payload["n_joints"],
            target_radius_m=payload["target_radius_m"], condition=payload["condition"],
            scenario=payload["scenario"], duration_s=payload["duration_s"],
            countdown_s=float(self.spec.countdown_s),
            workspace=PointerWorkspace.from_payload(payload) if self.app.input is not None else None,
            task=TaskInfo.from_payload(payload.get("task")),
            **{key: float(payload[key]) for key in (
                "tool_tip_radius_m", "envelope_radius_m", "capture_speed_m_s", "target_speed_m_s",
                "start_gap_m", "post_capture_window_s") if key in payload},
        )
        self.started_at_s = time.monotonic()
        if self.app.viewer is not None:
            self.app.viewer.attach(payload)
        self.on_start(payload)

    def _write_pointer(self) -> None:
        """Write the stylus position the pointer commands (``--device mouse``).

        Until the attempt's first tick the stylus rests at the servo's centred start
        (``PointerWorkspace.device_start_m``), where the tick anchors it to the end
        effector, so the device's box maps onto the capture task whatever the pointer
        does; from then on the cursor (a task point, moved by the pointer's relative
        motion and kept inside the box) is written back through the same mapping, so
        cursor and stylus command coincide (until a clutch re-anchors the mapping)."""
        app = self.app
        if app.input is None or self.info is None:
            return  # before "started" the servo parks the stylus at the centred start
        from haptics.shared_input import POINTER_SPEC

        pygame = app.pygame
        workspace = self.info.workspace
        if workspace is None:  # a factory without the figures: the workspace's centre
            lo, hi = POINTER_SPEC.workspace_min_m, POINTER_SPEC.workspace_max_m
            position: Any = tuple(0.5 * (a + b) for a, b in zip(lo, hi))
        elif self.cursor_m is None or not self.running:
            position = workspace.device_start_m
        else:
            position = workspace.to_device(self.cursor_m)
        buttons = (BUTTON_ENGAGE if self.engaged else 0) | (
            BUTTON_TRAINER if pygame.mouse.get_pressed()[2] else 0
        )
        app.input.write(position, buttons)

    def _grab_pointer(self) -> None:
        """Hide the system pointer and grab it: relative motion, not stopped by the
        window's edges, moves the drawn cursor (pygame's virtual input mode)."""
        import numpy as np

        pygame = self.app.pygame
        if self.info is None or self.info.workspace is None or self.cursor_m is not None:
            return
        self.cursor_m = np.array(self.info.workspace.ee0_m, dtype=float)
        pygame.mouse.set_visible(False)
        pygame.event.set_grab(True)
        self._grabbed = True

    def _release_pointer(self) -> None:
        if self._grabbed:
            self.app.pygame.event.set_grab(False)
            self.app.pygame.mouse.set_visible(True)
            self._grabbed = False

    def draw(self, surface: Any) -> None:
        from app.ui.palette import COLOURS
        from app.ui.scene import SceneRenderer

        if self.frame is None or self.info is None:
            surface.fill(COLOURS["background"])
            status = self.error or "preparing the attempt (loading the arm and the scenario)..."
            self.app.text(status, (60, 60), "normal", "bad" if self.error else "text")
            return
        if self.renderer is None:
            self.renderer = SceneRenderer(self.app.config.size, self.info, self.frame, self.app.fonts)
        if self.running and self.app.input is not None:
            self._grab_pointer()
        hint = "Esc: abort   E: experimenter" + (
            "   Space: engage   wheel, W/S: depth" if self.app.input else "")
        if self.app.input is not None and not self.engaged:
            hint += "   (DISENGAGED)"
        fps = self.app.clock.get_fps()
        stats = self.app.servo.stats()
        recent = self.monitor.update(stats, time.monotonic())
        note = f"no real-time priority ({stats.priority}): expect overruns" if self.app.notice else ""
        countdown = None
        if not self.running and self.started_at_s is not None:
            countdown = max(0.0, self.info.countdown_s - (time.monotonic() - self.started_at_s))
        self.renderer.draw(surface, self.frame, f"{self.header}    {hint}", stats, fps, recent, note,
                           cursor_m=self.cursor_m, countdown_left_s=countdown,
                           experimenter=self.app.experimenter)
        self.frames += 1
        self.app.maybe_screenshot(self.frame.t_s)


def participant_fields(device: str, person: str, kind: str) -> dict[str, Any]:
    """The runner's participant fields for a person, or for a simulated operator.

    With the simulated device the runner's participant is the operator model, named by
    its kind (as ``capture-trainer run --participant novice``); the trial file then
    records the trainee's (or participant's) name as the participant's id, with that kind.
    """
    if device == "simulated":
        return {"participant": kind,
                "metadata": {"participant": {"id": person, "kind": kind, "params": {}}}}
    return {"participant": person}


# -- the trainee flow ----------------------------------------------------------------


class TraineeFlow:
    """Name, menu, practise (DG) / test (NG) attempts, score cards, progress."""

    def __init__(self, app: App) -> None:
        from app.ui.trainee_db import TraineeDB

        self.app = app
        self.config = app.config
        self.db = TraineeDB(self.config.database)
        recovered = self.db.recover()
        if recovered:
            log.info("%d attempt(s) interrupted earlier are marked 'interrupted'", recovered)
        self.trainee = ""
        self.session_id = 0
        self.attempt_id = 0
        self.auto = list(self.config.auto)
        self.count = 0

    def first_screen(self) -> Screen:
        if self.config.trainee:
            return self.begin(self.config.trainee)
        return NameScreen(self.app, lambda name: self.app.switch(self.begin(name)))

    def begin(self, name: str) -> Screen:
        """Open ``name``'s session; the screen that comes next."""
        self.trainee = normalise_name(name)
        self.session_id = self.db.start_session(name, self.config.device)
        if self.config.schedule:  # the trainee's guidance schedule (guidance.schedule), kept in the database
            self.db.set_schedule(self.trainee, self.config.schedule)
        return self.next_screen()

    def close(self) -> None:
        if self.session_id:
            self.db.end_session(self.session_id)
        self.db.close()

    def next_screen(self) -> Screen:
        if self.auto:
            return self.attempt(self.auto.pop(0))
        if self.config.auto and self.config.quit_when_done:
            return _Quit(self.app)
        return self.menu()

    def menu(self) -> Screen:
        scored = self.db.attempts(self.trainee, status="finished")
        from app.ui.cards import plural

        lines = [f"Trainee: {self.trainee}   device: {self.config.device}   "
                 f"scenario: {self.config.scenario}",
                 f"{plural(len(scored), 'finished attempt')} so far.",
                 *self._bests(scored),
                 "",
                 "Capture the debris softly: arrive at its own velocity (closing speed near 0).",
                 "Practise with dynamic guidance, then test yourself without it.",
                 DEVICE_HINTS.get(self.config.device, "")]
        return MessageScreen(self.app, "Debris capture trainer", lines, {
            "p": ("practise with guidance (DG)", lambda: self.app.switch(self.attempt(PRACTISE))),
            "t": ("test without guidance (NG)", lambda: self.app.switch(self.attempt(TEST))),
            "h": ("progress over sessions", lambda: self.app.switch(self.progress())),
            "q": ("quit", lambda: self.app.switch(None)),
        })

    @staticmethod
    def _bests(scored: list[Any]) -> list[str]:
        """One line per condition: captures so far (outcome ``captured``), and the best
        impact velocity of the attempts that reached the debris."""
        lines = []
        for condition in (PRACTISE, TEST):
            mine = [a for a in scored if a.condition == condition]
            impacts = [a.scores["impact_velocity_m_s"] for a in mine if a.reached]
            if mine:
                captured = sum(1 for a in mine if a.captured)
                best = (f", best impact {min(impacts) * 1e3:.1f} mm/s (reached {len(impacts)})"
                        if impacts else "")
                lines.append(f"  {condition.upper()}: captured {captured} of {len(mine)}{best}")
        return lines

    def attempt(self, condition: str) -> Screen:
        self.count += 1
        stamp = time.strftime("%Y%m%dT%H%M%S")
        trial_id = f"{safe_id(self.trainee)}_{condition}_{stamp}_{self.count}"
        seed = int(time.time() * 1e3) % 2**31
        from app.ui.session import attempt_authority, start_scheduled_attempt

        authority = attempt_authority(self.db, self.trainee, condition)  # the schedule's next step
        spec = AttemptSpec(
            guidance_authority=1.0 if authority is None else authority,
            scenario=self.config.scenario, condition=condition, seed=seed,
            out_dir=str(self.config.out_dir / "trials"), device=self.config.device,
            trial_id=trial_id, end_on_capture=self.config.stop_after_s is None,
            arm=self.config.arm, arm_keys=self.config.arm_keys, delay_s=self.config.delay_s,
            jitter_s=self.config.jitter_s, loss=self.config.loss, compensator=self.config.compensator,
            contact_feedback=self.config.contact_feedback, contact_mode=self.config.contact_mode,
            countdown_s=self.config.countdown,
            task=self.config.task,
            **participant_fields(self.config.device, self.trainee, self.config.participant_kind),
        )
        label = {"dg": "practise with guidance", "ng": "test without guidance"}.get(condition, condition)
        self.attempt_id = 0

        def started(payload: dict[str, Any]) -> None:
            from capture_trainer.paths import trial_file

            path = trial_file(spec.out_dir, trial_id)
            self.attempt_id = self.db.start_attempt(
                self.session_id, spec.scenario, condition, seed, trial_id, path)
            start_scheduled_attempt(self.db, self.trainee, self.attempt_id, condition)

        return AttemptScreen(self.app, spec, f"{self.trainee}: {label}", started, self.done)

    def done(self, result: AttemptResult) -> Screen:
        if self.attempt_id:
            outcome = result.outcome
            self.db.finish_attempt(
                self.attempt_id, result.status, result.metrics,
                end_reason=result.summary.get("end_reason") or result.message or None,
                trial_path=result.summary.get("path"),
                outcome=outcome.recorded, outcome_reason=outcome.reason or None,
            )
            from app.ui.session import finish_scheduled_attempt

            finish_scheduled_attempt(self.db, self.attempt_id, result.summary.get("path"))  # e(k) of the schedule
        return self.score_card(result)

    def score_card(self, result: AttemptResult) -> Screen:
        if self.auto or (self.config.auto and self.config.quit_when_done):
            return _Deferred(self.app, self.next_screen)
        return _ScoreScreen(self, result, self.attempt_id)

    def progress(self) -> Screen:
        return _ProgressScreen(self)


class _Quit(Screen):
    def enter(self) -> None:
        self.app.running = False


class _Deferred(Screen):
    """Switch to the screen ``make()`` returns on the next update (not from inside a switch)."""

    def __init__(self, app: App, make: Callable[[], Screen]) -> None:
        super().__init__(app)
        self.make = make

    def update(self) -> None:
        self.app.switch(self.make())


def scenario_figures(scenario: str) -> tuple[float, float]:
    """The scenario's soft-contact band [m/s] and scored window after contact [s]
    (the schema's defaults when it cannot be read)."""
    from scenarios.schema import CaptureConfig

    try:
        from trials.vocabulary import load_scenario

        capture = load_scenario(scenario).capture
        return float(capture.capture_speed_m_s), float(capture.post_capture_window_s)
    except (CaptureTrainerError, OSError, ValueError):
        return CaptureConfig.capture_speed_m_s, CaptureConfig.post_capture_window_s


def guidance_authority(db: Any, trainee: str) -> float | None:
    """The trainee's guidance authority from the trainee database, when it keeps one
    (an accessor ``guidance_authority(trainee)``); None otherwise (nothing is shown)."""
    accessor = getattr(db, "guidance_authority", None)
    if accessor is None:
        return None
    try:
        value = accessor(trainee)
    except CaptureTrainerError:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None


def experimenter_lines(result: AttemptResult, operator: str) -> tuple[tuple[str, str], ...]:
    """The experimenter's lines on one attempt: the servo's figures, then each data-quality
    flag (:func:`app.ui.servo.data_quality`) or "data quality: nothing to remark"."""
    from app.ui.servo import data_quality

    timing = result.timing
    lines = [(f"servo {float(timing.get('rate_hz', math.nan)):.1f} Hz, "
              f"p99 {float(timing.get('p99_period_ms', math.nan)):.3f} ms, "
              f"worst {float(timing.get('max_period_ms', math.nan)):.2f} ms, "
              f"overruns {timing.get('overruns', '?')}, priority {result.priority or '?'}", "text")]
    flags = data_quality(timing, result.priority, operator, result.status)
    if not flags:
        lines.append(("data quality: nothing to remark", "good"))
    lines += [(f"data quality: {flag.text}", flag.level) for flag in flags]
    return tuple(lines)


def operator_of(device: str, kind: str) -> str:
    """``person`` for a device a person holds, else the simulated participant's kind."""
    return kind if device == "simulated" else "person"


class _ScoreScreen(Screen):
    def __init__(self, flow: TraineeFlow, result: AttemptResult, attempt_id: int) -> None:
        from app.ui.cards import compare

        super().__init__(flow.app)
        self.flow = flow
        self.result = result
        earlier = flow.db.attempts(flow.trainee, condition=result.spec.condition,
                                   status="finished", before_id=attempt_id or None)
        scores = {k: float(v) for k, v in result.metrics.items()
                  if isinstance(v, int | float) and not isinstance(v, bool)}
        self.comparisons = compare(scores, earlier)
        self.band_m_s, self.window_s = scenario_figures(result.spec.scenario)
        self.authority = guidance_authority(flow.db, flow.trainee)
        from app.ui.behaviours_view import read_timeline

        # a task trial's states over time (read once from its file; None: no task)
        self.timeline = read_timeline(result.summary.get("path")) if result.summary.get("task") else None

    def event(self, event: Any) -> None:
        key = self.key(event)
        if key in ("return", "space", "escape"):
            self.app.switch(self.flow.menu())
        elif key == "h":
            self.app.switch(self.flow.progress())
        elif key == "e":
            self.app.experimenter = not self.app.experimenter

    def extras(self) -> Any:
        """The card's verdict, scored-second line, authority and experimenter's lines."""
        from app.ui.cards import CardExtras, verdict_line

        metrics = self.result.metrics
        verdict = None
        if metrics:
            speed = metrics.get("contact_normal_speed_m_s", math.nan)
            speed = float(speed) if isinstance(speed, int | float) else math.nan
            if not math.isfinite(speed) and metrics.get("reached"):
                speed = float(metrics.get("impact_velocity_m_s", math.nan))
            verdict = verdict_line(speed, self.band_m_s)
        lines: tuple[tuple[str, str], ...] = ()
        if getattr(self.app, "experimenter", False):
            config = self.app.config
            lines = experimenter_lines(self.result, operator_of(config.device, config.participant_kind))
        return CardExtras(verdict=verdict,
                          scored=f"The {self.window_s:g} s after the first contact is scored "
                          "(speed error and gap while you stay with the debris).",
                          authority=self.authority, experimenter=lines, timeline=self.timeline)

    def draw(self, surface: Any) -> None:
        from app.ui.cards import draw_score_card

        spec = self.result.spec
        condition = {"dg": "practice with guidance", "ng": "test without guidance"}.get(
            spec.condition, spec.condition)
        reached = self.result.metrics.get("reached")
        status = self.result.status + (f": {self.result.message}" if self.result.message else "")
        draw_score_card(surface, self.app.fonts, f"{self.flow.trainee}: {condition}", status,
                        None if reached is None else bool(reached), self.comparisons,
                        "Enter: back to the menu    H: progress    E: experimenter's view",
                        f"trial file: {self.result.summary.get('path', '-')}", self.result.outcome,
                        self.extras())


class _ProgressScreen(Screen):
    def __init__(self, flow: TraineeFlow) -> None:
        super().__init__(flow.app)
        self.flow = flow
        self.attempts = [a for a in flow.db.attempts(flow.trainee) if a.status != "running"]
        scenario = self.attempts[-1].scenario if self.attempts else flow.config.scenario
        self.band_m_s, _ = scenario_figures(scenario)
        self.authority = guidance_authority(flow.db, flow.trainee)

    def event(self, event: Any) -> None:
        if self.key(event) in ("return", "space", "escape", "h"):
            self.app.switch(self.flow.menu())

    def draw(self, surface: Any) -> None:
        from app.ui.cards import draw_progress

        draw_progress(surface, self.app.fonts, self.flow.trainee, self.attempts,
                      "Enter: back to the menu", self.band_m_s, self.authority)


def run_trainer(config: WindowConfig, driver: Callable[[App], None] | None = None) -> list[AttemptResult]:
    """Open the trainer window (``capture-trainer train``); returns the attempts' results.

    ``driver`` is called once per frame (see :meth:`App.run`)."""
    if config.auto and config.trainee is None:
        config = replace(config, trainee="auto")
    app = App(config, "capture-trainer: trainer")
    flow = TraineeFlow(app)
    try:
        return app.run(flow.first_screen(), driver)
    finally:
        flow.close()



# -- the experimenter's session -----------------------------------------------------


@dataclass(frozen=True)
class SessionConfig:
    """An experimenter's session (``capture-trainer session PROTOCOL --participant ID``).

    Attributes:
        protocol: built-in protocol name or ``.toml`` path.
        participant: the participant's id (NFC-normalised).
        out_dir: the study directory (``study.json`` and ``trials/``; made absolute).
        window: device, view, factory, size, fps, automation (``auto`` is ignored:
            ``auto_trials`` runs that many trials without key presses).
        auto_trials: run this many pending trials without key presses, then stop.
    """

    protocol: str
    participant: str
    out_dir: Path
    window: WindowConfig = field(default_factory=WindowConfig)
    auto_trials: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "participant", normalise_name(self.participant))
        object.__setattr__(self, "out_dir", absolute_path(self.out_dir))


class SessionFlow:
    """Intro, then per pending trial: instructions, the attempt, a pause; resumable."""

    def __init__(self, app: App, config: SessionConfig) -> None:
        from trials.protocol import load_protocol
        from app.ui.session import pending_trials, prepare_session

        self.app = app
        self.config = config
        self.protocol = load_protocol(config.protocol)
        window = app.config
        # A person only with a device a person holds; the simulated device is always a
        # simulated participant, recorded with its kind, never as "human".
        self.kind = window.participant_kind if window.device == "simulated" else "human"
        self.specs = prepare_session(self.protocol, config.participant, config.out_dir, self.kind)
        self.pending = pending_trials(config.out_dir, self.specs)
        self.auto_left = config.auto_trials

    def first_screen(self) -> Screen:
        done = len(self.specs) - len(self.pending)
        lines = [f"Protocol {self.protocol.name}: {self.protocol.description}",
                 f"Participant {self.config.participant} ({self._who()}): {len(self.specs)} "
                 f"trials, {done} already complete, {len(self.pending)} to run.",
                 f"Condition order: {', '.join(self._blocks())} ({self._row()}).",
                 f"Device: {self.app.config.device}.   Study directory: {self.config.out_dir}",
                 "",
                 "Between trials there is a pause; the session can be stopped at any pause",
                 "and resumed later with the same command."]
        if not self.pending:
            return MessageScreen(self.app, "Session complete", lines, {
                "q": ("quit", lambda: self.app.switch(None))})
        if self.auto_left:
            return _Deferred(self.app, self.instruction)
        return MessageScreen(self.app, "Experimenter session", lines, {
            "space": ("begin" if not done else "resume", lambda: self.app.switch(self.instruction())),
            "q": ("quit", lambda: self.app.switch(None)),
        })

    def _who(self) -> str:
        if self.kind == "human":
            return "a person"
        return f"a simulated {self.kind} participant, not a person"

    def _row(self) -> str:
        from trials.counterbalance import square_rows

        size = square_rows(len(self.protocol.conditions))
        index = self.specs[0].participant_index if self.specs else 0
        return f"balanced Latin square, row {index % size + 1} of {size}"

    def _blocks(self) -> list[str]:
        order: list[str] = []
        for spec in self.specs:
            if spec.condition.upper() not in order:
                order.append(spec.condition.upper())
        return order

    def _position(self, spec: Any) -> str:
        return f"Trial {self.specs.index(spec) + 1} of {len(self.specs)}"

    def instruction(self) -> Screen:
        from app.ui.session import INSTRUCTIONS

        if not self.pending or (self.config.auto_trials and not self.auto_left):
            return self.finished()
        spec = self.pending[0]
        if self.auto_left:
            return _Deferred(self.app, lambda: self.attempt(spec))
        lines = [f"Condition {spec.condition.upper()}, repetition {spec.repetition + 1}, "
                 f"scenario {spec.scenario}.", "", INSTRUCTIONS.get(spec.condition, "")]
        return MessageScreen(self.app, self._position(spec), lines, {
            "space": ("start the trial", lambda: self.app.switch(self.attempt(spec))),
            "q": ("stop the session here (resume later)", lambda: self.app.switch(None)),
        })

    def attempt(self, spec: Any) -> Screen:
        from trials.study import TRIALS_DIR

        window = self.app.config
        fields_ = participant_fields(window.device, spec.participant_id, window.participant_kind)
        study = {"order_index": spec.order_index, "participant_index": spec.participant_index}
        metadata = {"participant": {"id": spec.participant_id, "kind": self.kind, "params": {}},
                    "study": study,
                    "session": {"device": window.device,
                                "operator": "person" if self.kind == "human" else "simulated"}}
        fields_.pop("metadata", None)
        from app.ui.session import scheduled_fields

        authority, extra = scheduled_fields(spec, self.config.out_dir)  # a phased design's schedule
        study.update(extra.pop("study", {}))
        metadata.update(extra)
        attempt = AttemptSpec(
            guidance_authority=authority,
            scenario=spec.scenario, condition=spec.condition, seed=spec.seed,
            out_dir=str(self.config.out_dir / TRIALS_DIR), device=window.device,
            trial_id=spec.trial_id, repetition=spec.repetition, metadata=metadata,
            end_on_capture=window.stop_after_s is None, arm=window.arm, arm_keys=window.arm_keys,
            delay_s=window.delay_s, jitter_s=window.jitter_s, loss=window.loss,
            compensator=window.compensator, contact_feedback=window.contact_feedback,
            contact_mode=window.contact_mode, countdown_s=0.0 if self.auto_left else window.countdown, **fields_,
        )
        header = f"{self._position(spec)}: {spec.condition.upper()}  ({spec.participant_id})"
        return AttemptScreen(self.app, attempt, header, lambda payload: None,
                             lambda result: self.done(spec, result))

    def done(self, spec: Any, result: AttemptResult) -> Screen:
        from app.ui.session import pause_lines
        from trials.study import is_complete, trial_path

        complete = is_complete(trial_path(self.config.out_dir, spec))
        if complete:
            self.pending.remove(spec)
        if self.auto_left:
            self.auto_left -= 1
            return _Deferred(self.app, self.instruction)
        lines = pause_lines(result.outcome, complete, result.status, result.message, result.metrics,
                            len(self.pending))
        # The pause is the experimenter's screen: the trial's data quality, always.
        operator = operator_of(self.app.config.device, self.app.config.participant_kind)
        lines += ["", *(line for line, _ in experimenter_lines(result, operator))]
        actions: dict[str, tuple[str, Callable[[], None]]] = {
            "space": ("next trial" if self.pending else "finish",
                      lambda: self.app.switch(self.instruction())),
            "q": ("stop the session here (resume later)", lambda: self.app.switch(None)),
        }
        return MessageScreen(self.app, "Pause", lines, actions)

    def finished(self) -> Screen:
        if self.config.auto_trials:
            return _Quit(self.app)
        lines = [f"All {len(self.specs)} trials of {self.config.participant} are complete.",
                 f"Trial files: {self.config.out_dir / 'trials'}",
                 f"Analyse with: capture-trainer analyze {self.config.out_dir}"]
        return MessageScreen(self.app, "Session complete", lines, {
            "q": ("quit", lambda: self.app.switch(None))})


def run_session(config: SessionConfig, driver: Callable[[App], None] | None = None) -> list[AttemptResult]:
    """Open the experimenter's session window; returns the attempts' results.

    ``driver`` is called once per frame (see :meth:`App.run`)."""
    app = App(config.window, f"capture-trainer: session {config.protocol} / {config.participant}")
    try:
        flow = SessionFlow(app, config)
    except BaseException:
        app.close()
        raise
    return app.run(flow.first_screen(), driver)
