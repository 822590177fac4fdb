"""The trainee's keyboard flow, driven by posted key events, with the real servo.

Name -> menu -> practise (DG) -> Esc -> score card -> progress -> menu -> quit: every
screen is entered in that order, the attempt lands in the database as aborted with its
trial file, and the session is closed.
"""

from __future__ import annotations

from pathlib import Path

from app.ui.trainee_db import TraineeDB
from app.ui.window import App, WindowConfig, run_trainer


class Script:
    """Records every screen shown and presses one key per screen, like a trainee."""

    def __init__(self) -> None:
        self.visited: list[str] = []
        self.current: object = None
        self.pressed = False

    def __call__(self, app: App) -> None:
        pygame = app.pygame
        screen = app.screen_obj
        if screen is not self.current:
            self.current, self.pressed = screen, False
            self.visited.append(type(screen).__name__)
        if self.pressed:
            return
        keys = {"_ScoreScreen": [pygame.K_h], "_ProgressScreen": [pygame.K_RETURN],
                "MessageScreen": [pygame.K_p if self.visited.count("MessageScreen") == 1 else pygame.K_q]}
        name = self.visited[-1]
        if name == "NameScreen":
            pygame.event.post(pygame.event.Event(pygame.TEXTINPUT, text="zoe"))
            keys[name] = [pygame.K_RETURN]
        if name == "AttemptScreen":
            if screen.frame is None or screen.frame.t_s < 0.3:
                return  # let the attempt run a little
            keys[name] = [pygame.K_ESCAPE]
        for key in keys.get(name, []):
            pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=key))
        self.pressed = True


def test_keyboard_flow_through_every_trainee_screen(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    script = Script()
    results = run_trainer(WindowConfig(device="simulated", out_dir=tmp_path), driver=script)
    assert script.visited == ["NameScreen", "MessageScreen", "AttemptScreen", "_ScoreScreen",
                              "_ProgressScreen", "MessageScreen"]
    assert [r.status for r in results] == ["aborted"]
    with TraineeDB(tmp_path / "trainees.sqlite") as db:
        (attempt,) = db.attempts("zoe")
        (session,) = db.sessions("zoe")
    assert attempt.status == "aborted" and attempt.condition == "dg"
    assert Path(attempt.trial_path).is_file()
    assert session.ended_s is not None
