"""Running a study: every planned trial, resumable, in parallel worker processes.

The study directory holds ``study.json`` (the protocol, the participants with their
parameters, the planned order and the plan's fingerprint) and one trial file per trial
under ``trials/``.

Resume by identity: every trial file carries the fingerprint of its plan
(:func:`trial_identity`: protocol name and seed, the scenario file's content, condition,
participant, repetition, run seed, package version) and ``study.json`` the fingerprint of
the whole plan (:func:`study_identity`). A trial counts as done when its file is complete
and its fingerprint is the planned one; an interrupted study run again with the same
directory runs only what is missing. A directory holding complete trials of another plan
is refused with a one-line reason unless ``force`` (then they are replaced).

Stopping: SIGINT or SIGTERM to the study process stops its worker processes (each aborts
its trial, leaving the file readable and marked incomplete) and raises
:class:`StudyInterrupted`; completed trial files are untouched. Each worker also watches
its parent (:data:`PARENT_POLL_S`) and stops the same way when the parent has died
(SIGKILL), so no worker outlives its study.

Workers: each worker process warms up once when it starts (the imports, loading the
compiled kernels from numba's cache, a first PyBullet client: one tiny trial into a
temporary directory, :func:`warm_up_trial`) and reports how long its start-up took
(:attr:`StudyResult.worker_start_up_s`). Trials go to the workers one at a time (or in
chunks of ``chunk_size``); the pool always holds more submitted trials than workers, so
a worker never waits for the study process between trials.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import logging
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from capture_trainer import __version__, trial_log
from capture_trainer.errors import CaptureTrainerError, TrialError
from capture_trainer.paths import TRIAL_SUFFIX, resolve_inside, trial_file
from trials.protocol import Protocol, TrialSpec, all_scenarios, plan_trials, validate_protocol
from trials.recorder import TrialRecorder
from trials.runner import TrialRequest, build_trial

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

#: What a worker may do with each trial once it is written: ``(path, table)``, the file
#: and the table written into it (``analysis.study.prime_trial``; :func:`after_written`).
TrialWritten = Callable[[Path, "pa.Table"], object]

STUDY_FILE = "study.json"
TRIALS_DIR = "trials"
#: How often a worker checks that its parent (the study process) is still alive [s].
PARENT_POLL_S = 0.1
#: How long a stopped worker may take to abort its trial before it is killed [s].
STOP_GRACE_S = 5.0
#: Simulated length of the warm-up trial each worker runs once [s].
WARM_UP_TRIAL_S = 0.05
#: Protocol fields that do not change what is run (left out of the study's fingerprint).
_NOT_PLAN = ("description", "source")
#: The trial function of :func:`run_study`: (spec, study directory, metadata entries for
#: the trial file) -> summary.
TrialFunction = Callable[[TrialSpec, Path, dict[str, Any]], dict[str, Any]]


class StudyInterrupted(KeyboardInterrupt):
    """The study was stopped by a signal (SIGINT or SIGTERM); its workers are gone and
    the trials completed so far are kept.

    Attributes:
        signum: the signal's number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


@dataclass(frozen=True)
class StudyResult:
    """What a study run did.

    Attributes:
        wall_s: from the call to the end, every start-up included [s].
        worker_start_up_s: per worker (the study process itself with one worker), how
            long it took from the start of the run (from the pool's creation, for worker
            processes) until it was ready for its first trial: process start, imports
            and the warm-up trial [s]; empty when nothing ran or no warm-up was asked for.
    """

    out_dir: Path
    planned: int
    skipped: int
    ran: int
    failed: tuple[str, ...]
    wall_s: float
    replaced: int = 0
    worker_start_up_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class PlanIdentity:
    """What a plan (a whole study's or one trial's) is made of, and its fingerprint.

    Attributes:
        fields: the plan as plain JSON values (recorded beside the fingerprint, so that a
            mismatch can say what changed).
    """

    fields: dict[str, Any]

    @property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of the canonical JSON of :attr:`fields` (sorted keys, no spaces)."""
        canonical = json.dumps(self.fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()

    def metadata(self) -> dict[str, Any]:
        """The entries a trial file or ``study.json`` carries: ``plan_fingerprint`` and ``plan``."""
        return {"plan_fingerprint": self.fingerprint, "plan": self.fields}

    def changed(self, recorded: object) -> list[str]:
        """The fields that differ from a recorded plan (``["plan fingerprint"]`` when there
        is none to compare, as in files written before plans were fingerprinted)."""
        if not isinstance(recorded, dict):
            return ["plan fingerprint (none recorded)"]
        keys = list(self.fields) + [key for key in recorded if key not in self.fields]
        return [key for key in keys if self.fields.get(key) != recorded.get(key)] or ["plan fingerprint"]


def scenario_digest(reference: str) -> str:
    """SHA-256 (hex) of a scenario's text: the file's bytes, or the built-in's.

    A reference is a file when ``scenarios.loader.load_scenario`` would read it as one
    (a ``.toml`` suffix, an existing path, or a ``/`` in it); otherwise a built-in name.

    Raises:
        TrialError: the file cannot be read.
        ScenarioError: no built-in scenario of that name (with "did you mean").
    """
    from scenarios.loader import builtin_scenarios

    path = Path(reference)
    if path.suffix == ".toml" or path.exists() or "/" in reference:
        try:
            data = path.read_bytes()
        except OSError as error:
            raise TrialError(f"{reference}: cannot read the scenario file ({error.strerror or error})") from None
    else:
        data = builtin_scenarios().get(reference).read_bytes()
    return hashlib.sha256(data).hexdigest()


def study_identity(protocol: Protocol, digests: dict[str, str] | None = None,
                   design: dict[str, Any] | None = None) -> PlanIdentity:
    """The whole study's plan: the protocol's fields that decide what is run (not its
    description or where it was read from), its scenarios' content and the package version.

    Args:
        protocol: the loaded protocol.
        digests: :func:`scenario_digest` per scenario reference (computed when None).
        design: what else decides the plan (a sweep's design points: their participant
            parameters and conditions, ``trials.sweep``), as plain JSON data; a plain
            study has none, and its fingerprint is what it always was.
    """
    digests = digests if digests is not None else {ref: scenario_digest(ref) for ref in all_scenarios(protocol)}
    fields = {key: value for key, value in protocol.as_dict().items() if key not in _NOT_PLAN}
    fields["scenario_content"] = [digests[ref] for ref in all_scenarios(protocol)]
    fields["package_version"] = __version__
    if design is not None:
        fields["design"] = design
    return PlanIdentity(json.loads(json.dumps(fields)))


def trial_identity(protocol: Protocol, spec: TrialSpec, digests: dict[str, str] | None = None) -> PlanIdentity:
    """One planned trial's plan: protocol name and seed, the scenario's content, condition,
    participant (id, kind, parameters), repetition, run seed and package version.

    Args:
        protocol: the loaded protocol.
        spec: the planned trial.
        digests: :func:`scenario_digest` per scenario reference (computed when None).
    """
    digest = digests[spec.scenario] if digests is not None else scenario_digest(spec.scenario)
    fields = {
        "protocol": protocol.name,
        "seed": protocol.seed,
        "scenario_content": digest,
        "condition": spec.condition,
        "participant": {"id": spec.participant_id, "kind": spec.participant_kind,
                        "params": spec.participant_params},
        "repetition": spec.repetition,
        "run_seed": spec.seed,
        "package_version": __version__,
    }
    if spec.phase:  # a phased design (plain studies keep their fingerprints)
        fields.update(phase=spec.phase, block=spec.block, group=spec.group, schedule=spec.schedule)
    return PlanIdentity(json.loads(json.dumps(fields)))


def participants_for(protocol: Protocol) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, kind, params) per participant: sampled (seeded) or the protocol's human ids."""
    plan = protocol.participants
    if plan.kind == "human":
        return [(pid, "human", {}) for pid in plan.ids]
    from haptics.operators import sample_population

    population = sample_population(plan.count, seed=protocol.seed, mix=dict(plan.mix))
    return [
        (f"S{i + 1:02d}", params.kind, params.as_dict()) for i, params in enumerate(population)
    ]


def trial_path(out_dir: Path, spec: TrialSpec) -> Path:
    """``out_dir/trials/<trial id>.parquet``, the id made a safe file name
    (``capture_trainer.paths.trial_file``), checked to resolve inside ``out_dir``.

    Raises:
        TrialError: the file would resolve outside ``out_dir`` (e.g. through a link).
    """
    return resolve_inside(out_dir, trial_file(Path(out_dir) / TRIALS_DIR, spec.trial_id))


def is_complete(path: Path) -> bool:
    """True when ``path`` is a readable trial file marked complete."""
    return _complete_metadata(path) is not None


def _complete_metadata(path: Path) -> dict[str, Any] | None:
    """The metadata of a readable trial file marked complete, else None."""
    if not path.is_file():
        return None
    try:
        metadata = trial_log.read_metadata(path)
    except Exception:  # noqa: BLE001 - any unreadable file is simply not done
        return None
    return metadata if metadata.get("complete") else None


def write_study_file(out_dir: Path, protocol: Protocol, specs: list[TrialSpec],
                     identity: PlanIdentity | None = None) -> None:
    """The design, recorded once beside the trials (the analysis report shows it), with
    the plan's fingerprint (:func:`study_identity`, computed when ``identity`` is None)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    identity = identity if identity is not None else study_identity(protocol)
    participants: dict[str, Any] = {}
    for spec in specs:
        participants.setdefault(
            spec.participant_id,
            {"kind": spec.participant_kind, "params": spec.participant_params, "order": []},
        )["order"].append(spec.trial_id)
    document = {
        "package_version": __version__,
        **identity.metadata(),
        "protocol": protocol.as_dict(),
        "participants": participants,
        "trials": [asdict(spec) for spec in specs],
    }
    tmp = resolve_inside(out_dir, out_dir / f".{STUDY_FILE}.tmp")
    tmp.write_text(json.dumps(document, indent=2))
    os.replace(tmp, resolve_inside(out_dir, out_dir / STUDY_FILE))


@dataclass(frozen=True)
class FolderPlan:
    """A study directory checked against a plan: what to run and what to replace.

    Attributes:
        identity: the whole study's plan.
        trial_metadata: per trial id, the plan entries its trial file carries.
        todo: the planned trials to run (missing, incomplete or of another plan), in order.
        replace: complete trial files of another plan (planned trials' files of another
            plan, and trial files that are not in this plan).
        reason: why the directory holds another plan (empty when it does not).
    """

    identity: PlanIdentity
    trial_metadata: dict[str, dict[str, Any]]
    todo: list[TrialSpec]
    replace: list[Path]
    reason: str


def check_folder(protocol: Protocol, specs: list[TrialSpec], out_dir: str | os.PathLike[str],
                 design: dict[str, Any] | None = None) -> FolderPlan:
    """Compare a study directory with the plan of ``protocol`` (nothing is written);
    ``design`` as :func:`study_identity`'s.

    First the study's fingerprint against ``study.json``'s, then each complete trial file's
    against its planned trial's; trial files not in the plan count as another plan too.

    Raises:
        TrialError: two planned trials share a file name, a path would leave ``out_dir``,
            or ``study.json`` is not readable.
        ScenarioError: a scenario the protocol names does not exist.
    """
    out = Path(out_dir)
    digests = {ref: scenario_digest(ref) for ref in all_scenarios(protocol)}
    identity = study_identity(protocol, digests, design)
    paths = {spec.trial_id: trial_path(out, spec) for spec in specs}
    _check_unique_files(paths)
    recorded = _read_study_file(out)
    trial_metadata: dict[str, dict[str, Any]] = {}
    todo: list[TrialSpec] = []
    replace: list[Path] = []
    stale_changes: list[str] = []
    for spec in specs:
        planned = trial_identity(protocol, spec, digests)
        trial_metadata[spec.trial_id] = planned.metadata()
        metadata = _complete_metadata(paths[spec.trial_id])
        if metadata is not None and metadata.get("plan_fingerprint") == planned.fingerprint:
            continue
        todo.append(spec)
        if metadata is not None:
            replace.append(paths[spec.trial_id])
            stale_changes += [c for c in planned.changed(metadata.get("plan")) if c not in stale_changes]
    names = {path.name for path in paths.values()}
    foreign = [path for path in sorted((out / TRIALS_DIR).glob(f"*{TRIAL_SUFFIX}"))
               if path.name not in names and is_complete(path)]
    replace += foreign
    reason = ""
    if replace:
        if recorded is not None and recorded.get("plan_fingerprint") != identity.fingerprint:
            changes = identity.changed(recorded.get("plan"))
        else:
            changes = stale_changes or [f"{len(foreign)} trial files not in this plan, e.g. {foreign[0].name}"]
        reason = f"{out} holds trials of a different plan (changed: {', '.join(changes)})"
    return FolderPlan(identity, trial_metadata, todo, replace, reason)


def _check_unique_files(paths: dict[str, Path]) -> None:
    """Two planned trials must not share a file (case-insensitively, for such file systems)."""
    seen: dict[str, str] = {}
    for trial_id, path in paths.items():
        other = seen.setdefault(path.name.casefold(), trial_id)
        if other != trial_id:
            raise TrialError(f"planned trials {other!r} and {trial_id!r} would share the file {path.name}")


def _read_study_file(out: Path) -> dict[str, Any] | None:
    path = out / STUDY_FILE
    if not path.is_file():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TrialError(f"{path}: not a readable study file ({error})") from None
    return document if isinstance(document, dict) else {}


def run_study(
    protocol: Protocol,
    out_dir: str | os.PathLike[str],
    workers: int = 1,
    progress: TextIO | None | str = "stderr",
    run_trial: TrialFunction | None = None,
    force: bool = False,
    chunk_size: int | None = None,
    warm_up: Callable[[], None] | None = None,
    executor: str = "local",
    scheduler: str | None = None,
    specs: list[TrialSpec] | None = None,
    design: dict[str, Any] | None = None,
    on_trial_written: TrialWritten | None = None,
) -> StudyResult:
    """Run (or resume) every trial of ``protocol`` into ``out_dir``.

    Args:
        protocol: the loaded protocol.
        out_dir: the study directory (created).
        workers: parallel worker processes (1 runs in this process).
        progress: where one progress line per finished trial goes (None: silent; the
            default: the standard error stream at the time of the call).
        run_trial: the trial function (default :func:`run_trial_spec`); it must be
            picklable when ``workers > 1`` and record the metadata entries it is given.
        force: replace complete trials of another plan (they are deleted, then run again)
            instead of refusing the directory.
        chunk_size: trials handed to a worker at a time. None: 1 on the local pool (each
            trial on its own, which balances the end of the study best; see
            docs/benchmarks.md), :func:`dask_chunk_size` on Dask (whose per-task round
            trip costs more than a short trial's tail).
        warm_up: run once per worker before its first trial (picklable when
            ``workers > 1``); default with the default ``run_trial``: a tiny trial of the
            first planned scenario (:func:`warm_up_trial`), otherwise none.
        executor: where the workers are (:data:`EXECUTORS`): ``local`` (a process pool
            of this machine), ``dask-local`` (a Dask ``LocalCluster`` of ``workers``
            processes) or ``dask`` (the Dask scheduler at ``scheduler``).
        scheduler: the Dask scheduler's address with ``executor="dask"``
            (``tcp://`` on loopback, ``tls://`` anywhere; :func:`check_scheduler`).
        specs: the planned trials, when the caller derived them from the protocol's plan
            (a sweep: per design point its condition and participant parameters,
            ``trials.sweep.sweep_specs``); default :func:`trials.protocol.plan_trials`.
        design: what beside the protocol decides that plan (plain JSON data), part of
            the study's fingerprint (:func:`study_identity`).
        on_trial_written: with the default ``run_trial`` and warm-up: called in the
            worker with each trial's file and the table written into it
            (:func:`after_written`; picklable when the trials run in workers):
            ``analysis.study.prime_trial`` writes the trial's analysis cache entry there.

    Returns:
        Counts of planned, skipped (already complete), run, failed and replaced trials.

    Raises:
        TrialError: the directory holds trials of another plan (without ``force``), or
            a path would leave it.
        StudyInterrupted: SIGINT or SIGTERM; the workers have been stopped.
    """
    if isinstance(progress, str):
        progress = sys.stderr
    if workers < 1:
        raise TrialError(f"--workers must be at least 1, got {workers}")
    if executor not in EXECUTORS:
        raise TrialError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if executor == "dask":
        check_scheduler(scheduler)
    if chunk_size is not None and chunk_size < 1:
        raise TrialError(f"the chunk size must be at least 1, got {chunk_size}")
    if run_trial is None:
        run_trial = (run_trial_spec if on_trial_written is None
                     else functools.partial(run_trial_spec, on_written=on_trial_written))
        default_warm_up = True
    else:
        default_warm_up = False
    validate_protocol(protocol)  # scenarios included, before anything is written
    out = Path(out_dir)
    if specs is None:
        specs = plan_trials(protocol, participants_for(protocol))
    folder = check_folder(protocol, specs, out, design)
    if folder.reason and not force:
        raise TrialError(f"{folder.reason}; use --force to replace them")
    for path in folder.replace:
        log.warning("replacing %s (a trial of another plan)", path)
        path.unlink(missing_ok=True)
    write_study_file(out, protocol, specs, folder.identity)
    todo = folder.todo
    skipped = len(specs) - len(todo)
    if progress and folder.replace:
        print(f"replacing {len(folder.replace)} trials of another plan", file=progress)
    if skipped and progress:
        print(f"resuming: {skipped} of {len(specs)} trials already complete", file=progress)
    if warm_up is None and default_warm_up and todo:
        warm_up = _warm_up_for(todo, on_trial_written)
    started = time.perf_counter()
    failed: list[str] = []
    start_up: list[float] = []
    reporter = _Progress(len(todo), progress, started)

    def finished(spec: TrialSpec, outcome: Callable[[], dict[str, Any]]) -> None:
        try:
            summary = outcome()
        except Exception as error:  # noqa: BLE001 - one failed trial must not stop a study
            log.error("trial %s failed: %s", spec.trial_id, error)
            failed.append(spec.trial_id)
            summary = {"error": str(error)}
        reporter.done(spec, summary)

    with _stop_on_signals():
        if executor != "local" and todo:
            start_up += _run_on_dask(todo, out, run_trial, folder.trial_metadata, workers, finished,
                                     chunk_size or dask_chunk_size(len(todo), workers), warm_up,
                                     scheduler if executor == "dask" else None)
        elif workers == 1 or len(todo) <= 1:
            if todo and warm_up is not None:
                _warm_up_safely(warm_up)
                start_up.append(time.perf_counter() - started)
            for spec in todo:
                meta = folder.trial_metadata[spec.trial_id]
                finished(spec, functools.partial(run_trial, spec, out, meta))
        else:
            start_up += _run_in_workers(todo, out, run_trial, folder.trial_metadata, workers, finished,
                                        chunk_size or 1, warm_up)
    return StudyResult(
        out_dir=out,
        planned=len(specs),
        skipped=skipped,
        ran=len(todo) - len(failed),
        failed=tuple(failed),
        wall_s=time.perf_counter() - started,
        replaced=len(folder.replace),
        worker_start_up_s=tuple(start_up),
    )


def run_trial_spec(spec: TrialSpec, study_dir: Path, metadata: dict[str, Any] | None = None, *,
                   arm: str | None = None, arm_keys: str | None = None, on_written: TrialWritten | None = None,
                   **link: Any) -> dict[str, Any]:
    """Run one planned study trial (a worker process's entry point).

    Args:
        spec: the planned trial.
        study_dir: the study directory (the file goes to its ``trials/``).
        metadata: entries added to the trial file's metadata (the plan's fingerprint).
        arm, arm_keys: drive an arm server over the link (``TrialRequest.arm``).
        on_written: called with the trial's file and the table written into it once the
            trial is complete (:func:`after_written`).
        link: ``TrialRequest`` overrides of the delayed link and its compensator
            (``delay_s``, ``jitter_s``, ``loss``, ``compensator``, ``contact_feedback``,
            ``contact_mode``;
            ``study --delay-ms ...``).
    """
    schedule = scheduled_authority(spec, Path(study_dir)) if spec.schedule else None
    practice = participant_practice(spec, Path(study_dir)) if spec.participant_params.get("learning") else None
    request = TrialRequest(
        scenario=spec.scenario,
        condition=spec.condition,
        participant=spec.participant_kind,
        seed=spec.seed,
        trial_id=spec.trial_id,
        participant_params=(dict(spec.participant_params, practice=practice) if practice is not None
                            else spec.participant_params or None),
        repetition=spec.repetition,
        arm=arm,
        arm_keys=arm_keys,
        guidance_authority=1.0 if schedule is None else schedule["authority"],
        **link,
    )
    trial = build_trial(request, Path(study_dir) / TRIALS_DIR)
    study_entry: dict[str, Any] = {"order_index": spec.order_index, "participant_index": spec.participant_index}
    if spec.phase:
        study_entry.update(phase=spec.phase, block=spec.block, group=spec.group)
    try:
        trial.recorder.update_metadata(
            participant={"id": spec.participant_id, "kind": spec.participant_kind, "params": spec.participant_params},
            study=study_entry,
            **({} if schedule is None else {"guidance_schedule": schedule}),
            **({} if practice is None else {"participant_model": _participant_model(spec, practice)}),
            **(metadata or {}),
        )
    except CaptureTrainerError as error:
        trial.abort(f"metadata refused: {error}")
        raise
    summary = trial.run()
    after_written(trial.recorder, on_written)
    return summary


def after_written(recorder: TrialRecorder, on_written: TrialWritten | None) -> None:
    """``on_written(path, table)`` with a closed recorder's file and the table it wrote
    (``TrialRecorder.final_table``; nothing when its final write failed), in the worker:
    e.g. the trial's analysis cache entry without reading the file back
    (``analysis.study.prime_trial``, which ``study``, ``sweep`` and ``demo`` pass). Never
    fails the trial, which is done and written: a failure is logged."""
    table = recorder.final_table
    if on_written is None or table is None:
        return
    try:
        on_written(recorder.path, table)
    except Exception as error:  # noqa: BLE001 - see the docstring
        log.warning("%s: after the trial: %s", recorder.path, error)


def participant_practice(spec: TrialSpec, study_dir: Path) -> dict[str, Any]:
    """A learning simulated participant's practice before ``spec``: its trials in the
    study's plan (``study.json``) with a smaller ``order_index``, counted per condition
    and as guided (a condition with a guidance law) or unguided.

    A pure function of the plan (not of results), so every worker computes the same
    practice and a study stays deterministic per seed (``haptics.learning``).

    Raises:
        TrialError: ``study.json`` is missing.
    """
    from trials.conditions import CONDITIONS

    document = _read_study_file(Path(study_dir))
    if document is None:
        raise TrialError(f"{study_dir}: no {STUDY_FILE}; a learning participant's trial needs its study's plan")
    by_condition: dict[str, int] = {}
    for entry in document.get("trials", []):
        if entry.get("participant_id") == spec.participant_id and int(entry.get("order_index", 0)) < spec.order_index:
            condition = str(entry.get("condition"))
            by_condition[condition] = by_condition.get(condition, 0) + 1
    guided = sum(n for condition, n in by_condition.items() if CONDITIONS.get(condition).law != "ng")
    return {"by_condition": dict(sorted(by_condition.items())), "guided": guided,
            "unguided": sum(by_condition.values()) - guided}


def _participant_model(spec: TrialSpec, practice: dict[str, Any]) -> dict[str, Any]:
    """The trial's ``participant_model`` metadata (``haptics.learning.participant_model``)."""
    from haptics.learning import participant_model
    from haptics.participants import ParticipantParams

    entry = participant_model(ParticipantParams(**spec.participant_params), practice["unguided"], practice["guided"])
    entry["learning"]["by_condition"] = practice["by_condition"]
    return entry


def trial_error(metadata: dict[str, Any]) -> float:
    """A finished trial's error for the guidance schedules, from its metadata:
    ``guidance.schedule.normalised_error`` of ``first_contact.normal_speed_m_s`` over the
    soft band ``capture_rules.capture_speed_m_s`` (no contact: the cap)."""
    from guidance.schedule import normalised_error
    from scenarios.schema import CaptureConfig

    contact = metadata.get("first_contact") or {}
    rules = metadata.get("capture_rules") or {}
    soft = rules.get("capture_speed_m_s", CaptureConfig().capture_speed_m_s)
    speed = contact.get("normal_speed_m_s") if isinstance(contact, dict) else None
    return normalised_error(speed if isinstance(speed, (int, float)) else None, float(soft))


def scheduled_authority(spec: TrialSpec, study_dir: Path) -> dict[str, Any]:
    """The guidance authority of a scheduled study trial, from the participant's earlier
    trials of the same schedule (``guidance.schedule.replay`` over their errors).

    The earlier trials are those of ``study.json`` with the same participant and schedule
    name and a smaller ``order_index``; each one's error is
    ``guidance.schedule.normalised_error`` of its file's first contact (closing speed
    over the soft band ``capture_rules.capture_speed_m_s``).

    Returns:
        ``{"name", "params", "index", "assist", "authority", "errors"}`` (the earlier
        trials' errors, for an adaptive schedule), recorded as the trial's metadata
        ``guidance_schedule``.

    Raises:
        TrialError: ``study.json`` is missing, or an earlier trial's file is missing or
            incomplete (run the participant's trials in order).
    """
    from guidance.schedule import adapts, make_schedule, replay

    name = str(spec.schedule.get("name", ""))
    params = dict(spec.schedule.get("params") or {})
    schedule = make_schedule(name, **params)
    document = _read_study_file(Path(study_dir))
    if document is None:
        raise TrialError(f"{study_dir}: no {STUDY_FILE}; a scheduled trial needs its study's plan")
    earlier = [entry for entry in document.get("trials", [])
               if entry.get("participant_id") == spec.participant_id
               and (entry.get("schedule") or {}).get("name") == name
               and int(entry.get("order_index", 0)) < spec.order_index]
    earlier.sort(key=lambda entry: int(entry.get("order_index", 0)))
    errors: list[float] = []
    for entry in earlier:
        if not adapts(schedule):
            errors.append(0.0)  # only the count matters
            continue
        path = trial_path(Path(study_dir), TrialSpec(**{k: v for k, v in entry.items()
                                                         if k in TrialSpec.__dataclass_fields__}))
        metadata = _complete_metadata(path)
        if metadata is None:
            raise TrialError(f"trial {spec.trial_id}: its schedule needs the earlier trial {entry.get('trial_id')} "
                             "complete first (a participant's trials run in order)")
        errors.append(trial_error(metadata))
    step = replay(schedule, errors)[-1]
    return {"name": name, "params": schedule.params(), "index": step.index, "assist": step.assist,
            "authority": step.authority, "errors": errors if adapts(schedule) else []}


def warm_up_trial(scenario: str, condition: str, on_written: TrialWritten | None = None) -> None:
    """Pay a process's one-off costs before its first study trial: the imports, loading
    the compiled kernels from numba's cache and a first PyBullet client, by running a
    :data:`WARM_UP_TRIAL_S` trial (a simulated novice) into a temporary directory, then
    ``on_written`` on it as on a study trial (its imports: the analysis' pandas).

    Args:
        scenario: built-in scenario name or scenario file.
        condition: the condition (one with a device, so that the device's and the
            operator's kernels are loaded too, when the study has one).
    """
    import tempfile

    request = TrialRequest(scenario=scenario, condition=condition, participant="novice", seed=0,
                           trial_id="warm-up", time_limit_s=WARM_UP_TRIAL_S, end_on_capture=False)
    with tempfile.TemporaryDirectory(prefix="capture-trainer-warm-up-") as tmp:
        trial = build_trial(request, tmp)
        trial.run()
        after_written(trial.recorder, on_written)


def _warm_up_for(todo: list[TrialSpec], on_written: TrialWritten | None) -> Callable[[], None]:
    """The default warm-up: a tiny trial of the first planned trial's scenario, with the
    first planned condition that has a device (the automatic one needs fewer kernels)."""
    from trials.conditions import CONDITIONS

    spec = next((s for s in todo if not CONDITIONS.get(s.condition).automatic), todo[0])
    return functools.partial(warm_up_trial, spec.scenario, spec.condition, on_written)


def _warm_up_safely(warm_up: Callable[[], None]) -> None:
    """Run a warm-up; it only saves time, so a failure is logged and the trials go on
    (a real problem fails the trials themselves, each reported)."""
    try:
        warm_up()
    except Exception as error:  # noqa: BLE001 - see the docstring
        log.warning("the warm-up failed (%s); the trials go on without it", error)


def _warm_up_worker(warm_up: Callable[[], None] | None) -> None:
    """A worker process's warm-up (:func:`_warm_up_safely`), then what the process holds
    after it (its imports: a Dask worker's are many) frozen out of the garbage
    collector's reach (``gc.freeze``): a full collection during a trial then walks only
    what the trials made. Only in a worker: the study's own process keeps its heap."""
    if warm_up is not None:
        _warm_up_safely(warm_up)
    gc.collect()
    gc.freeze()


# -- stopping: signals in the study process, a watchdog in each worker ------------------


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`StudyInterrupted` in the main thread (once: the
    stop that follows is bounded and must not be cut short); outside the main thread,
    nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        raise StudyInterrupted(signum)

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _run_in_workers(todo: list[TrialSpec], out: Path, run_trial: TrialFunction,
                    trial_metadata: dict[str, dict[str, Any]], workers: int,
                    finished: Callable[[TrialSpec, Callable[[], dict[str, Any]]], None],
                    chunk_size: int = 1, warm_up: Callable[[], None] | None = None) -> list[float]:
    """Run ``todo`` in at most ``workers`` spawned processes, ``chunk_size`` trials per
    task, all submitted at once (the pool keeps every worker busy); on any exception here
    (a signal), stop the workers before it propagates.

    Returns:
        Each worker's start-up [s], from the pool's creation until it was warmed up.
    """
    chunks = _chunks(todo, chunk_size)
    _single_threaded_children()
    context = multiprocessing.get_context("spawn")
    others = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=context,
                               initializer=_worker_init, initargs=(os.getpid(), time.time(), warm_up))
    pending: dict[Future[_ChunkDone], list[TrialSpec]] = {}
    start_up: dict[int, float] = {}
    try:
        for chunk in chunks:
            items = [(spec, trial_metadata[spec.trial_id]) for spec in chunk]
            pending[pool.submit(_worker_call, run_trial, items, out)] = chunk
        _collect(pending, finished, start_up)
    except BaseException:
        for future in pending:
            future.cancel()
        _stop_workers([p for p in multiprocessing.active_children() if p not in others])
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return list(start_up.values())


#: Thread-pool sizes of the numerical libraries, set for the worker processes a study
#: starts (they inherit the environment): each worker is one thread of simulation.
#: Measured: with the BLAS default (one thread per core) a trial took 1.36 cores for the
#: same wall time as 1.02 with one thread (the pool's threads spin), which capped two
#: workers on two cores at 1.49x one worker.
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _single_threaded_children() -> None:
    """Workers started from now on load their numerical libraries single-threaded
    (unless the user's environment says otherwise)."""
    for variable, value in SINGLE_THREADED.items():
        os.environ.setdefault(variable, value)


def _chunks(todo: list[TrialSpec], chunk_size: int) -> list[list[TrialSpec]]:
    """The tasks handed to workers: ``chunk_size`` trials each; but a phased design's
    trials (``spec.phase``) go as one task per participant, in session order, because a
    trial's guidance authority (and a learning participant's state) follows from the
    participant's earlier trials."""
    if todo and todo[0].phase:
        by_participant: dict[str, list[TrialSpec]] = {}
        for spec in todo:
            by_participant.setdefault(spec.participant_id, []).append(spec)
        return list(by_participant.values())
    return [todo[i:i + chunk_size] for i in range(0, len(todo), chunk_size)]


#: Where a study's workers run.
EXECUTORS: tuple[str, ...] = ("local", "dask-local", "dask")


def check_scheduler(address: str | None) -> str:
    """A Dask scheduler address the study may use: ``tcp://`` only on loopback (nothing
    that crosses a network goes unauthenticated), ``tls://`` anywhere (Dask's TLS
    security from its configuration: ``distributed.comm.tls.*``).

    Raises:
        TrialError: missing, another scheme, or ``tcp://`` off loopback (one line).
    """
    import ipaddress
    from urllib.parse import urlsplit

    if not address:
        raise TrialError("--executor dask needs --scheduler ADDRESS (tcp://127.0.0.1:8786, or tls://HOST:PORT)")
    parts = urlsplit(address)
    if parts.scheme not in ("tcp", "tls") or not parts.hostname:
        raise TrialError(f"--scheduler: expected tcp://HOST:PORT or tls://HOST:PORT, got {address!r}")
    if parts.scheme == "tcp":
        host = parts.hostname
        loopback = host == "localhost"
        try:
            loopback = loopback or ipaddress.ip_address(host).is_loopback
        except ValueError:
            pass
        if not loopback:
            raise TrialError(f"--scheduler {address}: off this machine the scheduler must be reached over tls:// "
                             "(Dask's TLS security: distributed.comm.tls.* in its configuration)")
    return address


def _dask_call(run_trial: TrialFunction, items: list[tuple[TrialSpec, dict[str, Any]]], out: Path,
               warm_up: Callable[[], None] | None) -> _ChunkDone:
    """A chunk on a Dask worker: the warm-up once per worker process (its time is the
    worker's start-up), then the trials as in a local worker."""
    if not _worker_state.get("warmed"):
        started = time.perf_counter()
        _warm_up_worker(warm_up)
        _worker_state["start_up_s"] = time.perf_counter() - started
        _worker_state["warmed"] = True
    return _worker_call(run_trial, items, out)


#: Dask's per-task overhead against a short trial: chunks of up to this many trials
DASK_MAX_CHUNK = 4
#: ... while every worker still gets at least this many chunks (the end stays balanced)
DASK_CHUNKS_PER_WORKER = 32


def dask_chunk_size(trials: int, workers: int) -> int:
    """Trials per Dask task: up to :data:`DASK_MAX_CHUNK`, as long as each worker gets at
    least :data:`DASK_CHUNKS_PER_WORKER` tasks (1 for small studies). Each task costs a
    round trip through the scheduler and its bookkeeping on both ends, a few ms against
    trials of 0.1-0.3 s; a 1,080-trial planar sweep on 2 workers ran 114.6 s in single
    trials and 102.6 s in fours (the local pool 99.3-107.1 s)."""
    return max(1, min(DASK_MAX_CHUNK, trials // (max(1, workers) * DASK_CHUNKS_PER_WORKER)))


#: The ``LocalCluster``'s settings (``dask-local``; a cluster of one's own sets its own):
#: the scheduler hands every task to a worker at once instead of queueing all but one
#: per thread (``worker-saturation``: each queued task waited for a round trip through
#: the scheduler when the one before it ended; work stealing still balances the end);
#: the workers' statistical profiler (a stack sample every 10 ms, taking the GIL from
#: the trial) is off; their memory and system monitors poll every 1 and 2 s instead of
#: 0.1 and 0.5 s; and the nannies start them without ``MALLOC_TRIM_THRESHOLD_``, which set
#: from the environment also fixes glibc's mmap threshold, so large buffers are mapped
#: and faulted in anew each time (a 240-trial sweep: 35.5-39.1 s without it, 39.0-41.2 s
#: with it; the recorder gives its memory back itself, malloc_trim after each write).
LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.scheduler.worker-saturation": math.inf,
    "distributed.worker.profile.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
}


def _run_on_dask(todo: list[TrialSpec], out: Path, run_trial: TrialFunction,
                 trial_metadata: dict[str, dict[str, Any]], workers: int,
                 finished: Callable[[TrialSpec, Callable[[], dict[str, Any]]], None], chunk_size: int,
                 warm_up: Callable[[], None] | None, scheduler: str | None) -> list[float]:
    """Run ``todo`` on Dask: a ``LocalCluster`` of ``workers`` single-threaded processes,
    or the scheduler at ``scheduler``; the chunks go through the client's
    ``concurrent.futures`` executor, so the bookkeeping is the local pool's."""
    from distributed import Client, LocalCluster

    _single_threaded_children()

    cluster = None
    if scheduler is None:
        import dask

        with dask.config.set(LOCAL_CLUSTER_CONFIG):  # the nannies pass it on to their workers
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                                   silence_logs=logging.WARNING)
        client = Client(cluster)
    else:
        client = Client(scheduler)
    pool = client.get_executor(pure=False)
    chunks = _chunks(todo, chunk_size)
    pending: dict[Future[_ChunkDone], list[TrialSpec]] = {}
    start_up: dict[int, float] = {}
    try:
        for chunk in chunks:
            items = [(spec, trial_metadata[spec.trial_id]) for spec in chunk]
            pending[pool.submit(_dask_call, run_trial, items, out, warm_up)] = chunk
        _collect(pending, finished, start_up)
    finally:
        for future in pending:
            future.cancel()
        client.close()
        if cluster is not None:
            cluster.close()
    return list(start_up.values())


def _collect(pending: dict[Future[_ChunkDone], list[TrialSpec]],
             finished: Callable[[TrialSpec, Callable[[], dict[str, Any]]], None], start_up: dict[int, float]) -> None:
    """Report each chunk's trials as its future completes (a lost chunk fails its trials
    as one), emptying ``pending``; each worker's start-up goes into ``start_up`` by pid."""
    while pending:
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            chunk = pending.pop(future)
            try:
                report = future.result()
            except Exception as lost:  # noqa: BLE001 - the chunk's trials failed as one
                for spec in chunk:
                    finished(spec, functools.partial(_outcome, None, lost))
                continue
            start_up.setdefault(report.pid, report.start_up_s)
            for spec, (summary, error) in zip(chunk, report.outcomes):
                finished(spec, functools.partial(_outcome, summary, error))


def _outcome(summary: dict[str, Any] | None, error: BaseException | None) -> dict[str, Any]:
    """A trial's outcome as the study process reports it: its summary, or its error raised."""
    if error is not None:
        raise error
    return summary or {}


@dataclass(frozen=True)
class _ChunkDone:
    """What a worker sends back for a chunk: its pid and start-up [s], and per trial
    (summary, None) or (None, the exception)."""

    pid: int
    start_up_s: float
    outcomes: list[tuple[dict[str, Any] | None, BaseException | None]]


def _stop_workers(processes: list[BaseProcess], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM each worker (it aborts its trial, keeping the file, and exits), wait up to
    ``grace_s``, then SIGKILL what is left."""
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + grace_s
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            log.warning("worker %s did not stop in %.0f s; killing it", process.pid, grace_s)
            process.kill()
            process.join(1.0)


class WorkerStopped(BaseException):
    """Raised in a worker's trial when the worker must stop (a signal, or its parent died)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"worker stopped by {signal.Signals(signum).name}")
        self.signum = signum


#: A worker process's own state, read by its signal handler: both run in the worker's main
#: thread (Python runs signal handlers there), so no lock is needed.
_worker_state: dict[str, Any] = {"in_trial": False, "stopping": False, "start_up_s": 0.0}


def _worker_init(parent_pid: int, pool_started: float | None = None,
                 warm_up: Callable[[], None] | None = None) -> None:
    """In each worker: SIGTERM and SIGINT stop it, and a watchdog thread stops it when
    its parent has died (the worker is re-parented, so ``os.getppid()`` changes); then
    the warm-up runs once (stoppable like a trial) and the start-up is recorded: wall
    seconds since ``pool_started`` (``time.time()`` in the study process)."""
    signal.signal(signal.SIGTERM, _worker_stop)
    signal.signal(signal.SIGINT, _worker_stop)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="parent-watchdog", daemon=True).start()
    if warm_up is not None:
        _worker_state["in_trial"] = True
        try:
            _warm_up_worker(warm_up)
        except WorkerStopped as stop:
            os._exit(128 + stop.signum)
        finally:
            _worker_state["in_trial"] = False
    if pool_started is not None:
        _worker_state["start_up_s"] = time.time() - pool_started


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_S)
    log.warning("the study process %d is gone; worker %d stops", parent_pid, os.getpid())
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(STOP_GRACE_S)  # the main thread did not get to the signal: stop regardless
    os._exit(128 + signal.SIGTERM)


def _worker_stop(signum: int, frame: FrameType | None) -> None:
    """A worker's signal handler: abort the running trial (its file is kept, incomplete)
    by raising in it, or exit at once when idle; a backstop exits after the grace time."""
    if _worker_state["stopping"]:
        return
    _worker_state["stopping"] = True
    backstop = threading.Timer(STOP_GRACE_S, os._exit, args=(128 + signum,))
    backstop.daemon = True
    backstop.start()
    if not _worker_state["in_trial"]:
        os._exit(128 + signum)
    raise WorkerStopped(signum)


def _worker_call(run_trial: TrialFunction, items: list[tuple[TrialSpec, dict[str, Any]]],
                 out: Path) -> _ChunkDone:
    """Run a chunk of trials in a worker, each failure kept with its trial; a stopped
    trial ends the worker (no next trial)."""
    outcomes: list[tuple[dict[str, Any] | None, BaseException | None]] = []
    for spec, metadata in items:
        _worker_state["in_trial"] = True
        try:
            outcomes.append((run_trial(spec, out, metadata), None))
        except WorkerStopped as stop:
            os._exit(128 + stop.signum)
        except Exception as error:  # noqa: BLE001 - reported by the study process
            outcomes.append((None, _picklable(error)))
        finally:
            _worker_state["in_trial"] = False
    return _ChunkDone(os.getpid(), float(_worker_state["start_up_s"]), outcomes)


def _picklable(error: Exception) -> Exception:
    """The error itself when it can travel back to the study process, else a
    :class:`TrialError` with its text."""
    import pickle

    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 - any failure to round-trip
        return TrialError(f"{type(error).__name__}: {error}")
    return error


class _Progress:
    """One line per finished trial with the count, a short result and an ETA."""

    def __init__(self, total: int, stream: TextIO | None, started: float) -> None:
        self.total = total
        self.count = 0
        self.stream = stream
        self.started = started

    def done(self, spec: TrialSpec, summary: dict[str, Any]) -> None:
        self.count += 1
        if self.stream is None:
            return
        elapsed = time.perf_counter() - self.started
        eta = elapsed / self.count * (self.total - self.count)
        print(
            f"[{self.count:>{len(str(self.total))}}/{self.total}] {spec.trial_id:<32} "
            f"{_describe(summary)}  (elapsed {elapsed:5.1f} s, eta {eta:5.1f} s)",
            file=self.stream,
            flush=True,
        )


def _describe(summary: dict[str, Any]) -> str:
    if "error" in summary:
        return f"FAILED: {summary['error']}"
    outcome = summary.get("outcome") or summary.get("end_reason", "?")
    reach = summary.get("time_to_reach_s")
    if reach is None:
        return f"{outcome:<12} not reached"
    return f"{outcome:<12} reached at {reach:5.2f} s, impact {summary.get('impact_velocity_m_s', float('nan')):.4f} m/s"


def completed_trials(out_dir: str | os.PathLike[str]) -> Iterable[Path]:
    """Trial files of a study directory that are complete."""
    return (p for p in sorted((Path(out_dir) / TRIALS_DIR).glob("*.parquet")) if is_complete(p))
