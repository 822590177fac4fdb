"""How each trial ended, in one word: the logged outcome, or a provisional one.

A trial that records its outcome writes it as the metadata key ``outcome``, one of
:data:`OUTCOMES` (``captured``, ``contact_lost``, ``pushed_away``, ``missed``,
``timeout``, ``aborted``); that word is used as it is. Logs written before outcomes were
recorded only carry ``end_reason`` (``capture_window_done``, ``time_limit``, ``fault``,
``write_failed``, ...) and ``complete``, and the analysis derives a **provisional**
outcome from what they show (:func:`provisional_outcome`):

1. ``aborted``: the file is incomplete, or ``end_reason`` is ``aborted``, ``fault`` or
   ``write_failed``;
2. ``reached``: the surface distance reached 0 (see :mod:`analysis.metrics`). Deliberately
   not ``captured``: a kinematic distance test cannot tell a held capture from a touch
   that was lost or pushed the debris away;
3. ``timeout``: never reached and the trial ran into its time limit (``time_limit``);
4. ``missed``: never reached, for any other reason.

The capture used for the capture rate follows the same split (:func:`capture_value`):
the logged ``outcome == "captured"`` when the log has an outcome, otherwise the
kinematic ``captured`` metric (a contact held for a whole post-capture window).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capture_trainer import trial_log

#: The outcomes a trial records in its metadata key ``outcome`` (the log's contract).
OUTCOMES: tuple[str, ...] = trial_log.OUTCOMES
#: The provisional outcome of a reached trial of a log without ``outcome``.
PROVISIONAL_REACHED = "reached"
#: Every word :func:`trial_outcome` can give for a log without ``outcome``.
PROVISIONAL_OUTCOMES: tuple[str, ...] = ("aborted", PROVISIONAL_REACHED, "timeout", "missed")
#: Order of the outcome counts in tables: the recorded words, then the provisional one.
OUTCOME_ORDER: tuple[str, ...] = ("captured", "contact_lost", "pushed_away", PROVISIONAL_REACHED,
                                  "missed", "timeout", "aborted")
#: The metadata key of a logged outcome.
OUTCOME_KEY = "outcome"
#: ``end_reason`` values that mean the trial did not end normally.
ABORT_REASONS = frozenset({"aborted", "fault", "write_failed"})


def logged_outcome(metadata: Mapping[str, Any]) -> str | None:
    """The metadata's ``outcome`` if it is a non-empty string, else None."""
    value = metadata.get(OUTCOME_KEY)
    return value if isinstance(value, str) and value else None


def provisional_outcome(end_reason: str, reached: bool, complete: bool) -> str:
    """The outcome derived from a log without ``outcome`` (rules in the module docstring)."""
    if not complete or end_reason in ABORT_REASONS:
        return "aborted"
    if reached:
        return PROVISIONAL_REACHED
    if end_reason == "time_limit":
        return "timeout"
    return "missed"


def trial_outcome(metadata: Mapping[str, Any], reached: bool, complete: bool) -> tuple[str, bool]:
    """``(outcome, provisional)``: the logged outcome, or the provisional one and True."""
    logged = logged_outcome(metadata)
    if logged is not None:
        return logged, False
    return provisional_outcome(str(metadata.get("end_reason", "")), reached, complete), True


def capture_value(outcome: str, provisional: bool, kinematic_captured: bool) -> float:
    """1.0 for a captured trial, 0.0 otherwise (the unit of the capture rate)."""
    return float(kinematic_captured if provisional else outcome == "captured")


def ordered_outcomes(outcomes: Any) -> list[str]:
    """The outcome words present, in :data:`OUTCOME_ORDER`, then any other sorted."""
    present = {str(outcome) for outcome in outcomes}
    return [name for name in OUTCOME_ORDER if name in present] + sorted(present - set(OUTCOME_ORDER))
