from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from analysis import cache as analysis_cache
from analysis.study import prime_trial
from trials.protocol import TrialSpec, load_protocol
from capture_trainer.trial_log import read_trial_log as read_trial
from trials.recorder import TrialRecorder
from trials.study import STUDY_FILE, TRIALS_DIR, _worker_call, run_study, trial_path

RAN: list[str] = []


def fake_trial(spec: TrialSpec, out: Path, metadata: dict[str, Any]) -> dict[str, Any]:
    """Writes a complete one-row trial file with the plan's entries, and remembers that it ran."""
    RAN.append(spec.trial_id)
    recorder = TrialRecorder(trial_path(out, spec), ("t_s",), (), {"trial_id": spec.trial_id, **metadata}, 1)
    recorder.append_row()
    recorder.close()
    return {"time_to_reach_s": 1.0, "impact_velocity_m_s": 0.01}


def _protocol(tmp_path: Path, scenario: str, participants: int, workers_note: str = "") -> Path:
    path = tmp_path / "p.toml"
    path.write_text(
        f'name = "mini"\nseed = 5\nscenarios = ["{scenario}"]\nconditions = ["dg", "ng"]\n'
        f'repetitions = 1\ncontroller_conditions = ["as"]\n'
        f'[participants]\nkind = "simulated"\ncount = {participants}\nmix = {{ novice = 1 }}\n'
    )
    return path


def test_a_resumed_study_runs_only_the_missing_trials(tmp_path: Path) -> None:
    protocol = load_protocol(_protocol(tmp_path, "paper-2019", participants=3))
    out = tmp_path / "study"
    RAN.clear()
    first = run_study(protocol, out, progress=io.StringIO(), run_trial=fake_trial)
    assert first.planned == 3 * 2 + 1 and first.ran == 7 and first.skipped == 0
    # lose two trials (one deleted, one left incomplete as after a crash), then resume
    done = sorted((out / TRIALS_DIR).glob("*.parquet"))
    done[0].unlink()
    broken = TrialRecorder(done[1], ("t_s",), (), {}, 1)
    broken.abort("killed")
    RAN.clear()
    progress = io.StringIO()
    second = run_study(protocol, out, progress=progress, run_trial=fake_trial)
    assert second.skipped == 5 and second.ran == 2
    assert sorted(RAN) == sorted(p.stem for p in done[:2])
    assert "resuming: 5 of 7" in progress.getvalue()
    design = json.loads((out / STUDY_FILE).read_text())
    assert len(design["trials"]) == 7 and design["protocol"]["name"] == "mini"


def test_a_small_real_study_in_two_worker_processes(tmp_path: Path, short_scenario: Path) -> None:
    protocol = load_protocol(_protocol(tmp_path, str(short_scenario), participants=2))
    out = tmp_path / "study"
    progress = io.StringIO()
    result = run_study(protocol, out, workers=2, progress=progress, on_trial_written=prime_trial)
    assert result.failed == () and result.ran == 5
    files = sorted((out / TRIALS_DIR).glob("*.parquet"))
    assert len(files) == 5
    participants = set()
    for path in files:
        _, meta = read_trial(path)
        assert meta["complete"] is True
        participants.add(meta["participant"]["id"])
        # the worker wrote the trial's analysis cache entry, for these very bytes
        entry = analysis_cache.load(path, analysis_cache.file_digest(path))
        assert entry is not None and entry.row["trial_id"] == meta["trial_id"]
    assert participants == {"S01", "S02", "controller"}
    assert progress.getvalue().count("\n") == 5
    # each worker that ran a trial warmed up once and reported its start-up
    assert 1 <= len(result.worker_start_up_s) <= 2
    assert all(seconds > 0.0 for seconds in result.worker_start_up_s)


def test_trials_in_chunks_all_run_once(tmp_path: Path, short_scenario: Path) -> None:
    protocol = load_protocol(_protocol(tmp_path, str(short_scenario), participants=2))
    result = run_study(protocol, tmp_path / "study", workers=2, progress=None, chunk_size=2)
    assert result.failed == () and result.ran == 5
    assert len(list((tmp_path / "study" / TRIALS_DIR).glob("*.parquet"))) == 5
    again = run_study(protocol, tmp_path / "study", workers=2, progress=None, chunk_size=2)
    assert again.skipped == 5 and again.ran == 0 and again.worker_start_up_s == ()


def test_one_worker_warms_up_in_the_study_process(tmp_path: Path, short_scenario: Path) -> None:
    calls: list[str] = []
    protocol = load_protocol(_protocol(tmp_path, str(short_scenario), participants=1))
    result = run_study(protocol, tmp_path / "study", progress=None, run_trial=fake_trial,
                       warm_up=lambda: calls.append("warm"))
    assert calls == ["warm"] and len(result.worker_start_up_s) == 1


class _Unpicklable(Exception):
    def __reduce__(self) -> Any:
        raise TypeError("not picklable")


def _sometimes_failing(spec: TrialSpec, out: Path, metadata: dict[str, Any]) -> dict[str, Any]:
    if spec.condition == "ng":
        raise _Unpicklable("boom")
    if spec.condition == "as":
        raise ValueError("bad value")
    return {"trial_id": spec.trial_id}


def test_a_failed_trial_in_a_chunk_does_not_take_the_others_with_it(tmp_path: Path) -> None:
    from trials.protocol import plan_trials
    from trials.study import participants_for

    protocol = load_protocol(_protocol(tmp_path, "paper-2019", participants=1))
    specs = plan_trials(protocol, participants_for(protocol))
    report = _worker_call(_sometimes_failing, [(spec, {}) for spec in specs], tmp_path)
    assert len(report.outcomes) == len(specs) == 3
    for spec, (summary, error) in zip(specs, report.outcomes):
        if spec.condition == "dg":
            assert summary == {"trial_id": spec.trial_id} and error is None
        elif spec.condition == "ng":  # sent back as its text, since it cannot travel
            assert summary is None and "_Unpicklable: boom" in str(error)
        else:
            assert summary is None and isinstance(error, ValueError)


def test_a_worker_freezes_what_its_warm_up_left_out_of_the_collectors_reach() -> None:
    """After the warm-up (a Dask worker's imports are many) a full collection during a
    trial walks only what the trials made: a worker's heap so far is frozen, even when
    the warm-up failed; the study's own process (trials run in it) keeps its heap."""
    import gc

    from trials.study import _warm_up_safely, _warm_up_worker

    def failing() -> None:
        raise RuntimeError("no warm-up here")

    assert gc.get_freeze_count() == 0
    _warm_up_safely(failing)
    assert gc.get_freeze_count() == 0
    try:
        _warm_up_worker(failing)
        assert gc.get_freeze_count() > 1000
    finally:
        gc.unfreeze()


def _refuse(path: Path, table: Any) -> None:
    raise RuntimeError(f"no analysis for {path.name} ({table.num_rows} rows)")


def test_what_runs_after_a_trial_is_written_never_fails_it(tmp_path: Path, short_scenario: Path, caplog: Any) -> None:
    """``on_trial_written`` runs in the study's process with one worker, with the written
    file and its table; when it raises, the trial still counts as run and its file stays."""
    seen: list[tuple[str, int]] = []
    protocol = load_protocol(_protocol(tmp_path, str(short_scenario), participants=1))
    result = run_study(protocol, tmp_path / "study", progress=None,
                       on_trial_written=lambda path, table: seen.append((path.name, table.num_rows)))
    assert result.failed == () and result.ran == 3
    files = sorted((tmp_path / "study" / TRIALS_DIR).glob("*.parquet"))
    # the warm-up's trial first (in a temporary folder), then each trial with its own rows
    assert sorted(seen[1:]) == sorted((path.name, read_trial(path).table.num_rows) for path in files)
    with caplog.at_level("WARNING", logger="trials.study"):
        again = run_study(protocol, tmp_path / "again", progress=None, on_trial_written=_refuse)
    assert again.failed == () and again.ran == 3
    assert len(list((tmp_path / "again" / TRIALS_DIR).glob("*.parquet"))) == 3
    assert sum("no analysis for" in record.getMessage() for record in caplog.records) == 4  # warm-up too
