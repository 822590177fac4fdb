"""Running a study: every planned trial, resumable, in parallel worker processes.

The study directory holds ``study.json`` (the protocol, the participants with their
parameters, and the planned order) and one trial file per trial under ``trials/``.
A trial counts as done when its file exists and its metadata says ``complete``; an
interrupted study run again with the same directory runs only what is missing.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from capture_trainer import __version__
from capture_trainer.errors import TrialError
from trials.protocol import Protocol, TrialSpec, plan_trials
from trials.recorder import read_trial

log = logging.getLogger(__name__)

STUDY_FILE = "study.json"
TRIALS_DIR = "trials"


@dataclass(frozen=True)
class StudyResult:
    """What a study run did."""

    out_dir: Path
    planned: int
    skipped: int
    ran: int
    failed: tuple[str, ...]
    wall_s: float


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
    return out_dir / TRIALS_DIR / f"{spec.trial_id}.parquet"


def is_complete(path: Path) -> bool:
    """True when ``path`` is a readable trial file marked complete."""
    if not path.is_file():
        return False
    try:
        _, metadata = read_trial(path)
    except Exception:  # noqa: BLE001 - any unreadable file is simply not done
        return False
    return bool(metadata.get("complete"))


def write_study_file(out_dir: Path, protocol: Protocol, specs: list[TrialSpec]) -> None:
    """The design, recorded once beside the trials (the analysis report shows it)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    participants: dict[str, Any] = {}
    for spec in specs:
        participants.setdefault(
            spec.participant_id,
            {"kind": spec.participant_kind, "params": spec.participant_params, "order": []},
        )["order"].append(spec.trial_id)
    document = {
        "package_version": __version__,
        "protocol": protocol.as_dict(),
        "participants": participants,
        "trials": [asdict(spec) for spec in specs],
    }
    tmp = out_dir / f".{STUDY_FILE}.tmp"
    tmp.write_text(json.dumps(document, indent=2))
    os.replace(tmp, out_dir / STUDY_FILE)


def run_study(
    protocol: Protocol,
    out_dir: str | os.PathLike[str],
    workers: int = 1,
    progress: TextIO | None = sys.stderr,
    run_trial: Callable[[TrialSpec, Path], dict[str, Any]] | None = None,
) -> StudyResult:
    """Run (or resume) every trial of ``protocol`` into ``out_dir``.

    Args:
        protocol: the loaded protocol.
        out_dir: the study directory (created).
        workers: parallel worker processes (1 runs in this process).
        progress: where one progress line per finished trial goes (None: silent).
        run_trial: the trial function (default :func:`trials.runner.run_trial`); it
            must be picklable when ``workers > 1``.

    Returns:
        Counts of planned, skipped (already complete), run and failed trials.
    """
    if workers < 1:
        raise TrialError(f"--workers must be at least 1, got {workers}")
    if run_trial is None:
        from trials.runner import run_trial_spec as run_trial
    out = Path(out_dir)
    specs = plan_trials(protocol, participants_for(protocol))
    write_study_file(out, protocol, specs)
    todo = [spec for spec in specs if not is_complete(trial_path(out, spec))]
    skipped = len(specs) - len(todo)
    if skipped and progress:
        print(f"resuming: {skipped} of {len(specs)} trials already complete", file=progress)
    started = time.perf_counter()
    failed: list[str] = []
    reporter = _Progress(len(todo), progress, started)
    if workers == 1 or len(todo) <= 1:
        for spec in todo:
            try:
                summary = run_trial(spec, out)
            except Exception as error:  # noqa: BLE001 - one failed trial must not stop a study
                log.error("trial %s failed: %s", spec.trial_id, error)
                failed.append(spec.trial_id)
                summary = {"error": str(error)}
            reporter.done(spec, summary)
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            pending: dict[Future[dict[str, Any]], TrialSpec] = {
                pool.submit(run_trial, spec, out): spec for spec in todo
            }
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    spec = pending.pop(future)
                    try:
                        summary = future.result()
                    except Exception as error:  # noqa: BLE001
                        log.error("trial %s failed: %s", spec.trial_id, error)
                        failed.append(spec.trial_id)
                        summary = {"error": str(error)}
                    reporter.done(spec, summary)
    return StudyResult(
        out_dir=out,
        planned=len(specs),
        skipped=skipped,
        ran=len(todo) - len(failed),
        failed=tuple(failed),
        wall_s=time.perf_counter() - started,
    )


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
    reach = summary.get("time_to_reach_s")
    if reach is None:
        return f"not reached ({summary.get('end_reason', '?')})"
    return f"reached at {reach:5.2f} s, impact {summary.get('impact_velocity_m_s', float('nan')):.4f} m/s"


def completed_trials(out_dir: str | os.PathLike[str]) -> Iterable[Path]:
    """Trial files of a study directory that are complete."""
    return (p for p in sorted((Path(out_dir) / TRIALS_DIR).glob("*.parquet")) if is_complete(p))
