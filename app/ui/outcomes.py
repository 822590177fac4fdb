"""How an attempt ended, in the trainee's words.

Every trial ends with one outcome word (:data:`analysis.outcomes.OUTCOMES`: ``captured``,
``contact_lost``, ``pushed_away``, ``missed``, ``timeout``, ``aborted``) and a one-line
reason (:class:`trials.capture_event.CaptureMonitor`). The runner's summary carries both
(``outcome``, ``outcome_reason``); the servo process adds them to the summaries it writes
itself (an attempt stopped with Esc or by a fault). The window shows them in plain
language (:data:`OUTCOME_LABELS`) on the score card, in the menu's counts, on the
session's pause screen, and stores the word in the trainee database.

A summary without an outcome (a trial factory that records none) gets the analysis'
provisional outcome (:func:`analysis.outcomes.trial_outcome`), which may be ``reached``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from analysis.outcomes import OUTCOMES, PROVISIONAL_REACHED, trial_outcome

#: Each outcome word as the trainee reads it.
OUTCOME_LABELS: dict[str, str] = {
    "captured": "Captured",
    "contact_lost": "Contact lost",
    "pushed_away": "Pushed away",
    "missed": "Missed",
    "timeout": "Out of time",
    "aborted": "Aborted",
    PROVISIONAL_REACHED: "Reached (no outcome recorded)",
}
#: The colour key (:data:`app.ui.scene.COLOURS`) each outcome is shown in.
OUTCOME_COLOURS: dict[str, str] = {
    "captured": "good",
    "contact_lost": "warn",
    "pushed_away": "bad",
    "missed": "warn",
    "timeout": "warn",
    "aborted": "dim",
    PROVISIONAL_REACHED: "text",
}
#: What a trainee can take from each outcome (shown under the reason on the score card).
OUTCOME_HINTS: dict[str, str] = {
    "captured": "The tool closed on the fixture: a soft capture.",
    "contact_lost": "You touched the fixture but did not hold it long enough for the tool to close.",
    "pushed_away": "The contact was too hard: the debris bounced off the tool.",
    "missed": "The debris passed out of reach without a contact.",
    "timeout": "No contact before the time ran out.",
    "aborted": "The attempt was stopped before its end.",
}

__all__ = ["OUTCOMES", "OUTCOME_COLOURS", "OUTCOME_HINTS", "OUTCOME_LABELS", "AttemptOutcome",
           "attempt_outcome", "outcome_label"]


def outcome_label(outcome: str | None) -> str:
    """The plain-language label of an outcome word ("" for None; unknown words as they are)."""
    if not outcome:
        return ""
    return OUTCOME_LABELS.get(outcome, outcome.replace("_", " ").capitalize())


@dataclass(frozen=True)
class AttemptOutcome:
    """An attempt's outcome as the window shows it.

    Attributes:
        word: the outcome word (one of :data:`OUTCOMES`, or ``reached`` when provisional),
            or None when the attempt never ran (its build failed).
        reason: the one-line reason ("" when none is known).
        provisional: derived from ``end_reason``, not recorded by the trial.
    """

    word: str | None
    reason: str = ""
    provisional: bool = False

    @property
    def label(self) -> str:
        return outcome_label(self.word)

    @property
    def colour(self) -> str:
        return OUTCOME_COLOURS.get(self.word or "", "dim")

    @property
    def captured(self) -> bool:
        return self.word == "captured"

    @property
    def recorded(self) -> str | None:
        """The word to store: a recorded outcome, never a provisional one."""
        return None if self.provisional else self.word


def attempt_outcome(status: str, summary: Mapping[str, Any], metrics: Mapping[str, Any],
                    message: str = "") -> AttemptOutcome:
    """The outcome of one attempt from the servo's ``finished`` message.

    Args:
        status: ``finished``, ``aborted`` or ``error``.
        summary: the trial's summary (``outcome``, ``outcome_reason``, ``end_reason``).
        metrics: the trial's metrics (``reached``, ``complete``), possibly empty.
        message: the error message of a failed attempt.
    """
    word = summary.get("outcome")
    if isinstance(word, str) and word:
        reason = summary.get("outcome_reason")
        return AttemptOutcome(word, reason if isinstance(reason, str) else "")
    if not summary:  # nothing ran: the attempt could not be built
        return AttemptOutcome(None, message)
    if status != "finished":
        return AttemptOutcome("aborted", message or str(summary.get("end_reason") or status))
    complete = bool(metrics.get("complete", True))
    provisional, _ = trial_outcome(summary, bool(metrics.get("reached")), complete)
    return AttemptOutcome(provisional, f"end reason: {summary.get('end_reason', 'unknown')}", provisional=True)
