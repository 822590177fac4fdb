"""An experimenter's session: one participant's trials of a study protocol, resumable.

The plan is the protocol's own (:func:`trials.protocol.plan_trials`): the participant's
condition blocks in the counterbalanced (balanced Latin square) order of their index in
the protocol's ``participants.ids`` (index 0 for an id the protocol does not list), the
repetitions and scenarios inside each block, and the protocol's seeds. Controller (AS)
trials are not part of a person's session (``capture-trainer study`` runs them).

Files: the same study directory as a headless study (``study.json`` plus
``trials/<trial_id>.parquet``), so the same analysis applies. ``study.json`` lists every
participant who has had a session in this directory; a trial is done when its file is
complete, so a session stopped (or crashed) part-way resumes with the first trial that
is not.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from capture_trainer.errors import TrialError
from trials.protocol import CONTROLLER_ID, Protocol, TrialSpec, plan_trials
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


def participant_plan(protocol: Protocol, participant_id: str, kind: str = "human") -> list[TrialSpec]:
    """The participant's trials in session order (see the module docstring).

    Args:
        protocol: the loaded protocol.
        participant_id: the participant's id.
        kind: ``human``, or the simulated operator's kind when a session is watched with
            the simulated device (recorded in ``study.json`` and the trial files).

    Raises:
        TrialError: an empty id, or the controller's id.
    """
    participant_id = participant_id.strip()
    if not participant_id or participant_id == CONTROLLER_ID:
        raise TrialError(f"a participant id is needed (not {participant_id!r})")
    ids = protocol.participants.ids if protocol.participants.kind == "human" else ()
    if participant_id in ids:
        everyone = [(pid, kind if pid == participant_id else "human", {}) for pid in ids]
    else:
        everyone = [(participant_id, kind, {})]
    specs = [s for s in plan_trials(protocol, everyone) if s.participant_id == participant_id]
    return sorted(specs, key=lambda s: s.order_index)


def _read_study(out_dir: Path) -> dict[str, object] | None:
    path = out_dir / STUDY_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise TrialError(f"{path}: not a readable study file ({error})") from None


def prepare_session(
    protocol: Protocol, participant_id: str, out_dir: Path, kind: str = "human"
) -> list[TrialSpec]:
    """Plan the participant's trials (:func:`participant_plan`) and record them in
    ``out_dir/study.json``.

    Trials of other participants already in ``study.json`` are kept (one study directory
    collects every participant's sessions).

    Raises:
        TrialError: ``out_dir`` holds a study of another protocol.
    """
    specs = participant_plan(protocol, participant_id, kind)
    existing = _read_study(out_dir)
    others: list[TrialSpec] = []
    if existing is not None:
        name = existing.get("protocol", {}).get("name")  # type: ignore[union-attr]
        if name != protocol.name:
            raise TrialError(
                f"{out_dir} holds a study of protocol {name!r}, not {protocol.name!r}; "
                "choose another --out"
            )
        known = {f.name for f in fields(TrialSpec)}
        for entry in existing.get("trials", []):  # type: ignore[union-attr]
            if entry.get("participant_id") != participant_id:
                others.append(TrialSpec(**{k: v for k, v in entry.items() if k in known}))
    write_study_file(out_dir, protocol, others + specs)
    return specs


def pending_trials(out_dir: Path, specs: list[TrialSpec]) -> list[TrialSpec]:
    """The trials whose file is missing or incomplete, in session order."""
    return [spec for spec in specs if not is_complete(trial_path(out_dir, spec))]
