"""An experimenter's session: one participant's trials of a study protocol, resumable.

The plan is the protocol's own (:func:`trials.protocol.plan_trials`): the participant's
condition blocks in the counterbalanced order of their participant index, the repetitions
and scenarios inside each block, and the protocol's seeds. Controller (AS) trials are not
part of a person's session (``capture-trainer study`` runs them).

Counterbalancing (:func:`trials.counterbalance.balanced_latin_square`, a Williams design:
``n`` rows for an even number of conditions, ``2 n`` for an odd number): the participant
index picks the row, modulo the number of rows. It is

1. the participant's index already recorded in this study directory (a resumed session
   keeps its order);
2. else its position in the protocol's ``participants.ids`` (a human protocol that lists
   its participants);
3. else the number of participants of the same sort (people, or simulated participants)
   already in this study directory. So successive people get successive rows even when
   the protocol lists no ids, and simulated sessions do not unbalance the people's rows.

People and simulations are kept apart: a participant id recorded in the study directory
as a person cannot continue as a simulated participant, nor the other way round. Ids are
NFC-normalised (:func:`app.ui.data.normalise_name`).

Files: the same study directory as a headless study (``study.json`` plus
``trials/<trial_id>.parquet``), so the same analysis applies. ``study.json`` lists every
participant who has had a session in this directory; a trial is done when its file is
complete, so a session stopped (or crashed) part-way resumes with the first trial that
is not.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from app.ui.data import normalise_name
from capture_trainer.errors import TrialError
from trials.counterbalance import condition_order
from trials.protocol import CONTROLLER_ID, Protocol, TrialSpec, phased_trials, plan_trials
from trials.study import STUDY_FILE, is_complete, trial_path, write_study_file

#: What the participant reads before a trial of each condition.
INSTRUCTIONS: dict[str, str] = {
    "dg": "Guidance is ON: the stylus pulls you along a path that meets the debris at its "
    "own speed. Go along with it; you stay in control.",
    "ng": "No guidance: reach the debris on your own and arrive at its speed, so that the "
    "capture is soft.",
    "apf": "An attracting force pulls the stylus toward the debris. Arrive at the debris' "
    "speed, so that the capture is soft.",
    "as": "Automatic capture: watch the controller capture the debris.",
}


def participant_plan(protocol: Protocol, participant_id: str, kind: str = "human",
                     index: int | None = None) -> list[TrialSpec]:
    """The participant's trials in session order (see the module docstring).

    Args:
        protocol: the loaded protocol.
        participant_id: the participant's id (NFC-normalised here).
        kind: ``human``, or the simulated operator's kind when a session is watched with
            the simulated device (recorded in ``study.json`` and the trial files).
        index: the participant index (its Latin-square row, modulo the rows). None: the
            id's position in the protocol's human ``participants.ids``, else 0.

    Raises:
        TrialError: an empty id, the controller's id, or a negative index.
    """
    participant_id = normalise_name(participant_id)
    if not participant_id or participant_id == CONTROLLER_ID:
        raise TrialError(f"a participant id is needed (not {participant_id!r})")
    if index is None:
        index = listed_index(protocol, participant_id) or 0
    if index < 0:
        raise TrialError(f"a participant index is at least 0, got {index}")
    if protocol.phases:  # a phased design: the phases' order, the group of the index
        return phased_trials(protocol, participant_id, kind, index, {})
    # The protocol's own plan for this one participant gives the trial ids and seeds
    # (they do not depend on the order); the blocks are then put in the index's row.
    own = [s for s in plan_trials(protocol, [(participant_id, kind, {})])
           if s.participant_id == participant_id]
    ordered = [s for condition in condition_order(protocol.conditions, index)
               for s in sorted((t for t in own if t.condition == condition), key=lambda t: t.order_index)]
    return [replace(s, order_index=order, participant_index=index) for order, s in enumerate(ordered)]


def listed_index(protocol: Protocol, participant_id: str) -> int | None:
    """The id's position in a human protocol's ``participants.ids`` (None: not listed)."""
    if protocol.participants.kind != "human":
        return None
    ids = [normalise_name(pid) for pid in protocol.participants.ids]
    participant_id = normalise_name(participant_id)
    return ids.index(participant_id) if participant_id in ids else None


def _is_person(kind: str) -> bool:
    return kind == "human"


def session_index(protocol: Protocol, participant_id: str, kind: str,
                  existing: dict[str, Any] | None) -> int:
    """The participant index of ``participant_id`` in a study directory (module docstring).

    Args:
        existing: the directory's ``study.json`` (None: a new directory).

    Raises:
        TrialError: the id is recorded as a person and now comes as a simulation, or
            the other way round.
    """
    recorded = (existing or {}).get("participants", {})
    recorded = {normalise_name(pid): entry for pid, entry in recorded.items() if pid != CONTROLLER_ID}
    mine = recorded.get(participant_id)
    if mine is not None:
        before = str(mine.get("kind", ""))
        if _is_person(before) != _is_person(kind):
            was = "a person" if _is_person(before) else f"a simulated {before} participant"
            now = "a person" if _is_person(kind) else f"a simulated {kind} participant"
            raise TrialError(
                f"participant {participant_id!r} is recorded in this study directory as {was}, "
                f"not {now}; use another --participant id or another --out"
            )
        for entry in (existing or {}).get("trials", []):
            if normalise_name(str(entry.get("participant_id", ""))) == participant_id:
                return int(entry.get("participant_index", 0))
    listed = listed_index(protocol, participant_id)
    if listed is not None:
        return listed
    return sum(1 for pid, entry in recorded.items()
               if pid != participant_id and _is_person(str(entry.get("kind", ""))) == _is_person(kind))


def _read_study(out_dir: Path) -> dict[str, Any] | None:
    path = out_dir / STUDY_FILE
    if not path.is_file():
        return None
    try:
        study: dict[str, Any] = json.loads(path.read_text())
        return study
    except (OSError, json.JSONDecodeError) as error:
        raise TrialError(f"{path}: not a readable study file ({error})") from None


def prepare_session(
    protocol: Protocol, participant_id: str, out_dir: Path, kind: str = "human"
) -> list[TrialSpec]:
    """Plan the participant's trials (:func:`participant_plan`, at :func:`session_index`)
    and record them in ``out_dir/study.json``.

    Trials of other participants already in ``study.json`` are kept (one study directory
    collects every participant's sessions).

    Raises:
        TrialError: ``out_dir`` holds a study of another protocol, or the id is recorded
            there as a person and now comes as a simulation (or the other way round).
    """
    participant_id = normalise_name(participant_id)
    existing = _read_study(out_dir)
    others: list[TrialSpec] = []
    if existing is not None:
        name = existing.get("protocol", {}).get("name")
        if name != protocol.name:
            raise TrialError(
                f"{out_dir} holds a study of protocol {name!r}, not {protocol.name!r}; "
                "choose another --out"
            )
    specs = participant_plan(protocol, participant_id, kind,
                             session_index(protocol, participant_id, kind, existing))
    if existing is not None:
        known = {f.name for f in fields(TrialSpec)}
        for entry in existing.get("trials", []):
            if normalise_name(str(entry.get("participant_id", ""))) != participant_id:
                others.append(TrialSpec(**{k: v for k, v in entry.items() if k in known}))
    write_study_file(out_dir, protocol, others + specs)
    return specs


def pause_lines(outcome: Any, complete: bool, status: str, message: str, metrics: dict[str, Any],
                left: int) -> list[str]:
    """What the pause screen after a trial says: how the trial ended, in the outcome's
    plain words (:mod:`app.ui.outcomes`) and its reason, the reach (time and impact
    velocity, when the debris was reached), whether the trial runs again, what is left.

    Args:
        outcome: the attempt's :class:`app.ui.outcomes.AttemptOutcome`.
        complete: the trial file is complete (an incomplete trial runs again).
        status, message: the attempt's status and error message.
        metrics: the trial's metrics (``reached``, ``time_to_reach_s``, ``impact_velocity_m_s``).
        left: trials still to run.
    """
    lines = []
    if outcome.word:
        lines.append(f"{outcome.label}." if not outcome.reason else f"{outcome.label}: {outcome.reason}")
    if complete and metrics.get("reached"):
        lines.append(f"Reached the debris after {metrics['time_to_reach_s']:.2f} s, impact velocity "
                     f"{metrics['impact_velocity_m_s'] * 1e3:.1f} mm/s.")
    elif complete:
        lines.append("The debris was not reached.")
    else:
        lines.append(f"The trial did not complete ({status}{': ' + message if message else ''}); "
                     "it will be run again.")
    return lines + ["", f"{left} trials left. Take a short rest."]


def pending_trials(out_dir: Path, specs: list[TrialSpec]) -> list[TrialSpec]:
    """The trials whose file is missing or incomplete, in session order."""
    return [spec for spec in specs if not is_complete(trial_path(out_dir, spec))]


# -- guidance schedules per attempt (guidance.schedule, the trainee database) ------------


def attempt_authority(db: Any, trainee: str, condition: str) -> float | None:
    """The guidance authority of ``trainee``'s next attempt in ``condition``: the
    trainee's schedule's next step (:meth:`app.ui.trainee_db.TraineeDB.guidance_authority`)
    for a condition with guidance, None for one without (NG, the automatic capture)."""
    from trials.conditions import CONDITIONS

    entry = CONDITIONS.get(condition)
    if entry.automatic or entry.law == "ng":
        return None
    return float(db.guidance_authority(trainee))


def start_scheduled_attempt(db: Any, trainee: str, attempt_id: int, condition: str) -> float | None:
    """Record the authority of an attempt that starts (its step in the trainee's
    authority history) and return it; None (nothing recorded) without guidance."""
    if attempt_authority(db, trainee, condition) is None:
        return None
    return float(db.record_authority(trainee, attempt_id).authority)


def finish_scheduled_attempt(db: Any, attempt_id: int, trial_path: str | None) -> float | None:
    """Record a scheduled attempt's error ``e(k)`` from its trial file
    (:func:`trials.study.trial_error`); None when the file is unreadable or incomplete
    (the step then keeps no error and does not count)."""
    from capture_trainer import trial_log
    from trials.study import trial_error

    if not trial_path:
        return None
    try:
        metadata = trial_log.read_metadata(trial_path)
    except Exception:  # noqa: BLE001 - an unreadable file has no error to record
        return None
    if not metadata.get("complete"):
        return None
    error = trial_error(metadata)
    db.record_error(attempt_id, error)
    return error


def scheduled_fields(spec: TrialSpec, out_dir: Path) -> tuple[float, dict[str, Any]]:
    """A session trial's guidance authority and the metadata a phased design adds, as a
    headless study's trial gets them (``trials.study.run_trial_spec``): ``(1.0, {})``
    for a plain protocol; else the phase, block and group (under ``study``) and, for a
    scheduled trial, ``guidance_schedule`` with the authority from the participant's
    earlier trials (:func:`trials.study.scheduled_authority`).

    Raises:
        TrialError: an earlier trial of the schedule is not complete.
    """
    from trials.study import scheduled_authority

    if not spec.phase:
        return 1.0, {}
    extra: dict[str, Any] = {"study": {"phase": spec.phase, "block": spec.block, "group": spec.group}}
    if not spec.schedule:
        return 1.0, extra
    schedule = scheduled_authority(spec, Path(out_dir))
    extra["guidance_schedule"] = schedule
    return float(schedule["authority"]), extra
