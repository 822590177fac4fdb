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

    def __post_init__(self) -> None:
        # Anchored once, here: the database stores trial paths, and the history must not
        # depend on the directory the trainer is started from.
        object.__setattr__(self, "out_dir", absolute_path(self.out_dir))
        if self.db_path is not None:
            object.__setattr__(self, "db_path", absolute_path(self.db_path))
        if self.trainee is not None:
            object.__setattr__(self, "trainee", normalise_name(self.trainee))

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
        from app.ui.scene import COLOURS

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
        from app.ui.scene import COLOURS

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
        from app.ui.scene import COLOURS

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

    def enter(self) -> None:
        # The runner anchors the workspace mapping at the stylus position it reads while
        # building the trial, so the pointer must be in the shared block before that.
        self._write_pointer()
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

    def event(self, event: Any) -> None:
        pygame = self.app.pygame
        if event.type == pygame.KEYDOWN:
            if event.key == pygame.K_ESCAPE:
                self.app.servo.abort()
            elif event.key == pygame.K_SPACE:
                self.engaged = not self.engaged
            elif event.key == pygame.K_w:
                self.depth_m += 0.005
            elif event.key == pygame.K_s:
                self.depth_m -= 0.005
        elif event.type == pygame.MOUSEWHEEL:
            self.depth_m += 0.005 * event.y

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
        from app.ui.scene import AttemptInfo

        self.snapshot = SharedSnapshot(SnapshotLayout(payload["n_joints"]), name=payload["snapshot"])
        self.info = AttemptInfo(
            model=payload["model"], n_joints=payload["n_joints"],
            target_radius_m=payload["target_radius_m"], condition=payload["condition"],
            scenario=payload["scenario"], duration_s=payload["duration_s"],
            **{key: float(payload[key]) for key in ("tool_tip_radius_m", "envelope_radius_m") if key in payload},
        )
        if self.app.viewer is not None:
            self.app.viewer.attach(payload)
        self.on_start(payload)

    def _write_pointer(self) -> None:
        app = self.app
        if app.input is None:
            return
        from app.ui.scene import SceneRenderer
        from haptics.shared_input import POINTER_SPEC

        pygame = app.pygame
        width, height = app.config.size
        area = pygame.Rect(0, 0, width - SceneRenderer.PANEL_W, height)
        mx, my = pygame.mouse.get_pos()
        fx = min(max((mx - area.x) / max(area.width, 1), 0.0), 1.0)
        fy = min(max((my - area.y) / max(area.height, 1), 0.0), 1.0)
        lo, hi = POINTER_SPEC.workspace_min_m, POINTER_SPEC.workspace_max_m
        self.depth_m = min(max(self.depth_m, lo[2]), hi[2])
        position = (lo[0] + fx * (hi[0] - lo[0]), hi[1] - fy * (hi[1] - lo[1]), self.depth_m)
        buttons = (BUTTON_ENGAGE if self.engaged else 0) | (
            BUTTON_TRAINER if pygame.mouse.get_pressed()[2] else 0
        )
        app.input.write(position, buttons)

    def draw(self, surface: Any) -> None:
        from app.ui.scene import COLOURS, SceneRenderer

        if self.frame is None or self.info is None:
            surface.fill(COLOURS["background"])
            status = self.error or "preparing the attempt (loading the arm and the scenario)..."
            self.app.text(status, (60, 60), "normal", "bad" if self.error else "text")
            return
        if self.renderer is None:
            self.renderer = SceneRenderer(self.app.config.size, self.info, self.frame, self.app.fonts)
        hint = "Esc: abort" + ("   Space: engage on/off   wheel / W S: depth" if self.app.input else "")
        if self.app.input is not None and not self.engaged:
            hint += "   (DISENGAGED)"
        fps = self.app.clock.get_fps()
        stats = self.app.servo.stats()
        recent = self.monitor.update(stats, time.monotonic())
        note = f"no real-time priority ({stats.priority}): expect overruns" if self.app.notice else ""
        self.renderer.draw(surface, self.frame, f"{self.header}    {hint}", stats, fps, recent, note)
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
        lines = [f"Trainee: {self.trainee}   device: {self.config.device}   "
                 f"scenario: {self.config.scenario}",
                 f"{len(scored)} finished attempts so far.",
                 *self._bests(scored),
                 "",
                 "Capture the debris softly: arrive at its own velocity (closing speed near 0).",
                 "Practise with dynamic guidance, then test yourself without it."]
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
        spec = AttemptSpec(
            scenario=self.config.scenario, condition=condition, seed=seed,
            out_dir=str(self.config.out_dir / "trials"), device=self.config.device,
            trial_id=trial_id, end_on_capture=self.config.stop_after_s is None,
            arm=self.config.arm, arm_keys=self.config.arm_keys, delay_s=self.config.delay_s,
            jitter_s=self.config.jitter_s, loss=self.config.loss,
            **participant_fields(self.config.device, self.trainee, self.config.participant_kind),
        )
        label = {"dg": "practise with guidance", "ng": "test without guidance"}.get(condition, condition)
        self.attempt_id = 0

        def started(payload: dict[str, Any]) -> None:
            from capture_trainer.paths import trial_file

            path = trial_file(spec.out_dir, trial_id)
            self.attempt_id = self.db.start_attempt(
                self.session_id, spec.scenario, condition, seed, trial_id, path)

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

    def event(self, event: Any) -> None:
        key = self.key(event)
        if key in ("return", "space", "escape"):
            self.app.switch(self.flow.menu())
        elif key == "h":
            self.app.switch(self.flow.progress())

    def draw(self, surface: Any) -> None:
        from app.ui.cards import draw_score_card

        spec = self.result.spec
        condition = {"dg": "practice with guidance", "ng": "test without guidance"}.get(
            spec.condition, spec.condition)
        reached = self.result.metrics.get("reached")
        status = self.result.status + (f": {self.result.message}" if self.result.message else "")
        draw_score_card(surface, self.app.fonts, f"{self.flow.trainee}: {condition}", status,
                        None if reached is None else bool(reached), self.comparisons,
                        "Enter: back to the menu    H: progress",
                        f"trial file: {self.result.summary.get('path', '-')}", self.result.outcome)


class _ProgressScreen(Screen):
    def __init__(self, flow: TraineeFlow) -> None:
        super().__init__(flow.app)
        self.flow = flow
        self.attempts = flow.db.attempts(flow.trainee)

    def event(self, event: Any) -> None:
        if self.key(event) in ("return", "space", "escape", "h"):
            self.app.switch(self.flow.menu())

    def draw(self, surface: Any) -> None:
        from app.ui.cards import draw_progress

        draw_progress(surface, self.app.fonts, self.flow.trainee, self.attempts,
                      "Enter: back to the menu")


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
        attempt = AttemptSpec(
            scenario=spec.scenario, condition=spec.condition, seed=spec.seed,
            out_dir=str(self.config.out_dir / TRIALS_DIR), device=window.device,
            trial_id=spec.trial_id, repetition=spec.repetition, metadata=metadata,
            end_on_capture=window.stop_after_s is None, arm=window.arm, arm_keys=window.arm_keys,
            delay_s=window.delay_s, jitter_s=window.jitter_s, loss=window.loss, **fields_,
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


def run_session(config: SessionConfig) -> list[AttemptResult]:
    """Open the experimenter's session window; returns the attempts' results."""
    app = App(config.window, f"capture-trainer: session {config.protocol} / {config.participant}")
    try:
        flow = SessionFlow(app, config)
    except BaseException:
        app.close()
        raise
    return app.run(flow.first_screen())
