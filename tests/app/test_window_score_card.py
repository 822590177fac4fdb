"""The score card leads with the attempt's outcome in plain words, and its reason.

The card is drawn by the window's score screen under SDL's dummy driver with fonts that
record what they render (and render it for real), so the test sees the card's text.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from app.ui.outcomes import OUTCOME_LABELS, attempt_outcome, outcome_label
from app.ui.scene import COLOURS
from app.ui.servo import AttemptSpec
from app.ui.trainee_db import TraineeDB
from app.ui.window import AttemptResult, _ScoreScreen

SIZE = (1280, 760)
PUSHED_REASON = ("contact at 1.234 s (0.081 m/s closing); the debris leaves the tool at 0.052 m/s "
                 "(> 0.020 m/s)")


class RecordingFont:
    """A pygame font that also keeps every (text, colour) it renders."""

    def __init__(self, font, seen: list[tuple[str, tuple[int, int, int]]]) -> None:
        self.font = font
        self.seen = seen

    def render(self, text, antialias, colour):
        self.seen.append((text, tuple(colour)[:3]))
        return self.font.render(text, antialias, colour)

    def size(self, text):
        return self.font.size(text)


def _card(pg, tmp_path: Path, summary: dict, metrics: dict, status: str = "finished"):
    seen: list[tuple[str, tuple[int, int, int]]] = []
    fonts = {name: RecordingFont(pg.font.SysFont(None, size), seen)
             for name, size in (("small", 20), ("normal", 26), ("large", 40))}
    db = TraineeDB(tmp_path / "t.sqlite")
    db.start_session("ada", "mouse")
    flow = SimpleNamespace(app=SimpleNamespace(fonts=fonts, pygame=pg), db=db, trainee="ada")
    spec = AttemptSpec(scenario="paper-2019", condition="ng", participant="ada", seed=1, out_dir=str(tmp_path))
    result = AttemptResult(spec=spec, status=status, summary=summary, metrics=metrics)
    try:
        screen = _ScoreScreen(flow, result, 0)  # type: ignore[arg-type]
        surface = pg.Surface(SIZE)
        screen.draw(surface)
    finally:
        db.close()
    return seen, surface


def test_card_shows_pushed_away_and_its_reason(pygame, tmp_path: Path) -> None:
    summary = {"path": str(tmp_path / "a.parquet"), "end_reason": "capture_window_done",
               "outcome": "pushed_away", "outcome_at_s": 1.234, "outcome_reason": PUSHED_REASON}
    metrics = {"reached": True, "impact_velocity_m_s": 0.081, "time_to_reach_s": 1.23, "complete": True}
    seen, _ = _card(pygame, tmp_path, summary, metrics)
    texts = [text for text, _ in seen]
    assert ("Pushed away", COLOURS["bad"]) in seen
    assert PUSHED_REASON in texts
    assert any("reached the debris" in text for text in texts)  # the reach is still said
    assert not any(text.startswith("Captured") for text in texts)
    # the outcome comes before the score table
    assert texts.index("Pushed away") < texts.index("score (lower is better)")


def test_card_shows_captured_in_the_good_colour(pygame, tmp_path: Path) -> None:
    summary = {"path": "a.parquet", "end_reason": "capture_window_done", "outcome": "captured",
               "outcome_reason": "tool closed at 2.300 s after a 0.200 s hold at 0.004 m/s"}
    seen, surface = _card(pygame, tmp_path, summary, {"reached": True, "complete": True})
    assert ("Captured", COLOURS["good"]) in seen
    good = sum(1 for x in range(60, 400) for y in range(80, 120) if tuple(surface.get_at((x, y)))[:3] == COLOURS["good"])
    assert good > 50  # drawn, large, where the card's outcome line is


def test_card_of_an_attempt_stopped_with_escape(pygame, tmp_path: Path) -> None:
    summary = {"path": "a.parquet", "end_reason": "aborted", "outcome": "aborted",
               "outcome_reason": "stopped before the end (Esc, or the window closed)"}
    seen, _ = _card(pygame, tmp_path, summary, {}, status="aborted")
    texts = [text for text, _ in seen]
    assert "Aborted" in texts and "stopped before the end (Esc, or the window closed)" in texts


def test_outcome_words_in_plain_language() -> None:
    assert [outcome_label(w) for w in ("captured", "contact_lost", "pushed_away", "missed", "timeout", "aborted")] == [
        "Captured", "Contact lost", "Pushed away", "Missed", "Out of time", "Aborted"]
    assert outcome_label(None) == "" and outcome_label("new_word") == "New word"
    assert set(OUTCOME_LABELS) >= {"captured", "contact_lost", "pushed_away", "missed", "timeout", "aborted"}


def test_outcome_of_an_attempt() -> None:
    recorded = attempt_outcome("finished", {"outcome": "timeout", "outcome_reason": "no contact"}, {})
    assert (recorded.word, recorded.reason, recorded.provisional, recorded.recorded) == (
        "timeout", "no contact", False, "timeout")
    # a summary without an outcome (a factory that records none): provisional, never stored
    old = attempt_outcome("finished", {"end_reason": "capture_window_done"}, {"reached": True, "complete": True})
    assert old.word == "reached" and old.provisional and old.recorded is None
    assert attempt_outcome("finished", {"end_reason": "time_limit"}, {"reached": False}).word == "timeout"
    stopped = attempt_outcome("aborted", {"path": "x", "end_reason": "aborted"}, {})
    assert stopped.word == "aborted" and stopped.recorded == "aborted"
    never_ran = attempt_outcome("error", {}, {}, "cannot build")
    assert never_ran.word is None and never_ran.recorded is None and never_ran.reason == "cannot build"


def test_session_pause_says_how_the_trial_ended() -> None:
    from app.ui.session import pause_lines

    pushed = attempt_outcome("finished", {"outcome": "pushed_away", "outcome_reason": PUSHED_REASON}, {})
    metrics = {"reached": True, "time_to_reach_s": 1.23, "impact_velocity_m_s": 0.081}
    lines = pause_lines(pushed, True, "finished", "", metrics, 4)
    assert lines[0] == f"Pushed away: {PUSHED_REASON}"
    assert lines[1] == "Reached the debris after 1.23 s, impact velocity 81.0 mm/s."
    assert lines[-1] == "4 trials left. Take a short rest."
    timeout = attempt_outcome("finished", {"outcome": "timeout", "outcome_reason": "no contact by 10 s"}, {})
    assert pause_lines(timeout, True, "finished", "", {"reached": False}, 0)[:2] == [
        "Out of time: no contact by 10 s", "The debris was not reached."]
    stopped = attempt_outcome("aborted", {"outcome": "aborted", "outcome_reason": "stopped"}, {})
    assert pause_lines(stopped, False, "aborted", "", {}, 3)[:2] == [
        "Aborted: stopped", "The trial did not complete (aborted); it will be run again."]
