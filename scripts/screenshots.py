"""Take the README's screenshots of the trainer window from the current code.

Runs the real trainer (servo process, trial assembly, trainee database) under SDL's
dummy video driver, drives it through :func:`app.ui.window.run_trainer`'s ``driver`` hook
(one call per frame: it saves the window and posts key presses) and writes PNGs:

    trainer-menu.png          the menu, after one earlier session
    trainer-countdown.png     the goal line and the countdown before an attempt
    trainer-planar.png        a guided (DG) attempt under way, planar arm
    trainer-contact.png       the moment of contact: the verdict and the scored second
    trainer-experimenter.png  the same attempt in the experimenter's view (E)
    trainer-score-card.png    the score card after it
    trainer-progress.png      the progress view: every attempt, misses marked
    trainer-mouse.png         mouse mode: the pointer's reach, cursor linked to the arm
    trainer-spatial.png       a spatial scenario: two projections, shadows as depth cues
    trainer-berthing.png      after the capture on berthing-planar: the task's state, the
                              attractor, the posts' wrench on the pin against its limit
    trainer-berthing-card.png the score card after it, with the task's state timeline
    trainer-delay.png         300 ms each way with the predictive compensator: the
                              predicted arm the trainee steers, the real arm, the ghost
    session-instruction.png   an experimenter's session: the next trial's instructions
    session-pause.png         the pause after a trial: outcome and data-quality flags

Usage::

    .venv/bin/python scripts/screenshots.py [--out docs/images] [--only berthing|delay]

It takes about a minute (each attempt runs in real time at 1 kHz).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

from app.ui.window import App, SessionConfig, WindowConfig, run_session, run_trainer  # noqa: E402

Step = tuple[str | None, Callable[[App], bool], tuple[str, ...]]


def screen(name: str) -> Callable[[App], bool]:
    return lambda app: type(app.screen_obj).__name__ == name


def attempt_at(t_s: float) -> Callable[[App], bool]:
    def when(app: App) -> bool:
        frame = getattr(app.screen_obj, "frame", None)
        return bool(frame is not None and frame.phase != "idle" and frame.t_s >= t_s)
    return when


def countdown_below(left_s: float) -> Callable[[App], bool]:
    import time

    def when(app: App) -> bool:
        shot: Any = app.screen_obj
        started = getattr(shot, "started_at_s", None)
        frame = getattr(shot, "frame", None)
        if started is None or frame is None or getattr(shot, "renderer", None) is None:
            return False
        return bool(frame.phase == "idle" and shot.info.countdown_s - (time.monotonic() - started) < left_s)
    return when


def after_contact(delay_s: float) -> Callable[[App], bool]:
    def when(app: App) -> bool:
        frame = getattr(app.screen_obj, "frame", None)
        renderer = getattr(app.screen_obj, "renderer", None)
        if frame is None or renderer is None or renderer.contact_at is None:
            return False
        return bool(frame.t_s - frame.first_contact_s >= delay_s)
    return when


def task_state(name: str, min_force_n: float) -> Callable[[App], bool]:
    """The task machine runs state ``name`` and the posts push the pin with at least
    ``min_force_n`` [N]."""
    import numpy as np

    def when(app: App) -> bool:
        shot: Any = app.screen_obj
        frame, info = getattr(shot, "frame", None), getattr(shot, "info", None)
        if frame is None or info is None or info.task is None:
            return False
        return bool(info.task.state_name(frame.post_state_index) == name
                    and float(np.linalg.norm(frame.wrench_force_n)) >= min_force_n)
    return when


def frames_later(n: int) -> Callable[[App], bool]:
    count = [0]

    def when(app: App) -> bool:
        count[0] += 1
        return count[0] > n
    return when


class Shooter:
    """The driver: saves the window when each step's condition holds, then posts its keys."""

    def __init__(self, out: Path, steps: list[Step]) -> None:
        self.out = out
        self.steps = list(steps)
        self.shown: object = None

    def __call__(self, app: App) -> None:
        import pygame

        # The driver runs before a frame is drawn: a screen met for the first time has not
        # been drawn yet, so wait one frame before saving or pressing anything.
        fresh = app.screen_obj is not self.shown
        self.shown = app.screen_obj
        if fresh:
            return
        if not self.steps:
            pygame.event.post(pygame.event.Event(pygame.QUIT))
            return
        name, when, keys = self.steps[0]
        if not when(app):
            return
        self.steps.pop(0)
        if name:
            pygame.image.save(app.screen, str(self.out / name))
            print(f"wrote {self.out / name}")
        for key in keys:
            if key.startswith("motion:"):  # a pointer motion, "motion:DX,DY" pixels
                dx, dy = (int(v) for v in key.split(":", 1)[1].split(","))
                pygame.event.post(pygame.event.Event(pygame.MOUSEMOTION, pos=(0, 0), rel=(dx, dy),
                                                     buttons=(0, 0, 0)))
            else:
                pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.key.key_code(key)))


def run(config: WindowConfig, out: Path, steps: list[Step]) -> None:
    run_trainer(config, driver=Shooter(out, steps))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    parser.add_argument("--only", choices=("berthing", "delay"), help="take only these screenshots")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="capture-trainer-shots-") as tmp:
        data = Path(tmp)
        base: dict[str, Any] = {"out_dir": data, "trainee": "ada", "countdown_s": 1.5}
        delayed = WindowConfig(device="simulated", participant_kind="expert", delay_s=0.3, compensator="predictive",
                               **{**base, "out_dir": data / "delay"})
        run(delayed, out, [
            (None, screen("MessageScreen"), ("p",)),
            ("trainer-delay.png", attempt_at(0.8), ("escape",)),
            (None, screen("_ScoreScreen"), ("return",)),
            (None, screen("MessageScreen"), ("q",)),
        ])
        if args.only == "delay":
            return 0
        berthing = WindowConfig(device="simulated", participant_kind="expert", scenario="berthing-planar",
                                **{**base, "out_dir": data / "berthing"})
        run(berthing, out, [
            (None, screen("MessageScreen"), ("p",)),
            ("trainer-berthing.png", task_state("seat", 2.0), ()),
            ("trainer-berthing-card.png", screen("_ScoreScreen"), ("return",)),
            (None, screen("MessageScreen"), ("q",)),
        ])
        if args.only == "berthing":
            return 0
        # An earlier session: a guided and an unguided attempt (a miss or a hard hit is likely).
        earlier = WindowConfig(device="simulated", participant_kind="novice", **base)
        run(earlier, out, [
            (None, screen("MessageScreen"), ("p",)),
            (None, screen("_ScoreScreen"), ("return",)),
            (None, screen("MessageScreen"), ("t",)),
            (None, screen("_ScoreScreen"), ("return",)),
            (None, screen("MessageScreen"), ("q",)),
        ])
        # This session: the menu, a guided attempt from countdown to score card, progress.
        guided = WindowConfig(device="simulated", participant_kind="expert", **base)
        run(guided, out, [
            ("trainer-menu.png", screen("MessageScreen"), ("p",)),
            ("trainer-countdown.png", countdown_below(0.9), ()),
            ("trainer-planar.png", attempt_at(1.0), ()),
            ("trainer-contact.png", after_contact(0.45), ("e",)),
            ("trainer-experimenter.png", frames_later(2), ("e",)),
            ("trainer-score-card.png", screen("_ScoreScreen"), ("h",)),
            ("trainer-progress.png", screen("_ProgressScreen"), ("return",)),
            (None, screen("MessageScreen"), ("q",)),
        ])
        mouse = WindowConfig(device="mouse", **{**base, "out_dir": data / "mouse"})
        run(mouse, out, [
            (None, screen("MessageScreen"), ("t",)),
            (None, attempt_at(0.3), ("motion:12,10",)),
            (None, attempt_at(0.5), ("motion:12,10",)),
            (None, attempt_at(0.7), ("motion:12,10",)),
            ("trainer-mouse.png", attempt_at(0.8), ("escape",)),
            (None, screen("_ScoreScreen"), ("return",)),
            (None, screen("MessageScreen"), ("q",)),
        ])
        spatial = WindowConfig(device="simulated", participant_kind="expert", scenario="from-above-3d",
                               **{**base, "out_dir": data / "spatial"})
        run(spatial, out, [
            (None, screen("MessageScreen"), ("p",)),
            ("trainer-spatial.png", attempt_at(1.0), ("escape",)),
            (None, screen("_ScoreScreen"), ("return",)),
            (None, screen("MessageScreen"), ("q",)),
        ])
        session = SessionConfig(protocol="paper-2019", participant="P01", out_dir=data / "session",
                                window=WindowConfig(device="simulated", participant_kind="novice",
                                                    out_dir=data, countdown_s=0.5))
        run_session(session, driver=Shooter(out, [
            (None, screen("MessageScreen"), ("space",)),
            ("session-instruction.png", screen("MessageScreen"), ("space",)),
            (None, attempt_at(1.0), ("escape",)),
            ("session-pause.png", screen("MessageScreen"), ("q",)),
        ]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
