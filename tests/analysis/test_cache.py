"""The per-trial analysis cache (analysis/cache.py): a study opened from its entries is the
study read and measured afresh, an entry is used only for the bytes and the analysis it
was made from, and a damaged or unwritable cache costs only time."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import analysis.study as study_module
from analysis import cache
from analysis.study import Study, analyse_trial, open_study, prime_trial
from analysis.trial import read_trial


def _write_study(root: Path, synth: SimpleNamespace) -> list[Path]:
    """Three trials: two that reach at distinct closing speeds, one that never does."""
    paths = []
    for name, speed, gap in (("a", 0.12, 0.1), ("b", 0.2, 0.1), ("c", 0.05, 0.4)):
        columns = synth.approach(relative_speed_m_s=speed, start_gap_m=gap, duration_s=1.5)
        paths.append(synth.write_trial(root / "trials" / f"{name}.parquet", columns, synth.base_metadata(name)))
    return paths


def _assert_same(a: Study, b: Study) -> None:
    pd.testing.assert_frame_equal(a.table, b.table)
    assert a.paths == b.paths
    assert a.metadata == b.metadata and a.metadata.keys() == a.paths.keys()
    assert a.traces.keys() == b.traces.keys()
    for trial_id, trace in a.traces.items():
        other = b.traces[trial_id]
        assert np.array_equal(trace.time_s, other.time_s)
        assert np.array_equal(trace.relative_m, other.relative_m)
        assert (trace.reach_m is None) == (other.reach_m is None)
        if trace.reach_m is not None:
            assert other.reach_m is not None and np.array_equal(trace.reach_m, other.reach_m)
        assert (trace.radius_m, trace.condition) == (other.radius_m, other.condition)


class _Reads:
    """Counts the trial files the study reads (``read_trial``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = study_module.read_trial

        def counted(path: Any) -> Any:
            self.count += 1
            return real(path)

        monkeypatch.setattr(study_module, "read_trial", counted)


def test_a_study_from_its_entries_is_the_study_read_afresh(tmp_path: Path, synth: SimpleNamespace,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _write_study(tmp_path, synth)
    fresh = open_study(tmp_path, use_cache=False)
    assert not (tmp_path / "trials" / cache.CACHE_DIR).exists()  # use_cache=False writes nothing
    reads = _Reads(monkeypatch)
    filling = open_study(tmp_path)
    assert reads.count == 3
    assert all(cache.entry_path(path).is_file() for path in paths)
    cached = open_study(tmp_path)
    assert reads.count == 3  # nothing read again: every row and trace came from an entry
    _assert_same(fresh, filling)
    _assert_same(fresh, cached)
    assert fresh.table["reached"].tolist() == [True, True, False]  # the rows are the trials' own
    # opened from elsewhere, the file column is relative to where it was opened from
    assert open_study(tmp_path / "trials").table["file"].tolist() == ["a.parquet", "b.parquet", "c.parquet"]
    assert reads.count == 3


def test_a_rewritten_file_is_measured_again(tmp_path: Path, synth: SimpleNamespace) -> None:
    (path, *_) = _write_study(tmp_path, synth)
    before = open_study(tmp_path).table.set_index("trial_id")
    # same name and length, at once (maybe within the file system's clock tick): only
    # the closing speed differs
    columns = synth.approach(relative_speed_m_s=0.3, start_gap_m=0.1, duration_s=1.5)
    synth.write_trial(path, columns, synth.base_metadata("a"))
    after = open_study(tmp_path).table.set_index("trial_id")
    assert after.loc["a", "impact_velocity_m_s"] == pytest.approx(0.3, rel=1e-9)
    assert before.loc["a", "impact_velocity_m_s"] == pytest.approx(0.12, rel=1e-9)
    pd.testing.assert_frame_equal(after.reset_index(), open_study(tmp_path, use_cache=False).table)


def test_another_analysis_makes_every_entry_stale(tmp_path: Path, synth: SimpleNamespace,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _write_study(tmp_path, synth)
    open_study(tmp_path)
    reads = _Reads(monkeypatch)
    monkeypatch.setattr(cache, "analysis_version", lambda: "another analysis")
    open_study(tmp_path)
    assert reads.count == 3
    open_study(tmp_path)
    assert reads.count == 3  # rewritten for that analysis


def test_the_version_follows_the_metrics_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = cache._source_files()
    assert {path.name for path in sources} >= {"metrics.py", "outcomes.py", "study.py", "trial.py", "trial_log.py"}
    version = cache.analysis_version()
    changed = tmp_path / "metrics.py"
    changed.write_bytes(sources[0].read_bytes() + b"\n# changed\n")
    monkeypatch.setattr(cache, "_source_files", lambda: [changed, *sources[1:]])
    cache.analysis_version.cache_clear()
    try:
        assert cache.analysis_version() != version
    finally:
        monkeypatch.undo()
        cache.analysis_version.cache_clear()
    assert cache.analysis_version() == version


@pytest.mark.parametrize("damage", ["garbage", "empty", "other file's entry"])
def test_a_damaged_entry_is_computed_again(tmp_path: Path, synth: SimpleNamespace, damage: str) -> None:
    paths = _write_study(tmp_path, synth)
    fresh = open_study(tmp_path, use_cache=False)
    open_study(tmp_path)
    entry = cache.entry_path(paths[0])
    if damage == "garbage":
        entry.write_bytes(b"PK\x03\x04 not a zip")
    elif damage == "empty":
        entry.write_bytes(b"")
    else:
        entry.write_bytes(cache.entry_path(paths[1]).read_bytes())
    _assert_same(fresh, open_study(tmp_path))
    assert cache.load(paths[0], cache.file_digest(paths[0])) is not None  # written anew


def test_an_unwritable_cache_analyses_as_before(tmp_path: Path, synth: SimpleNamespace) -> None:
    _write_study(tmp_path, synth)
    blocker = tmp_path / "trials" / cache.CACHE_DIR
    blocker.write_text("a file where the folder would go")
    _assert_same(open_study(tmp_path, use_cache=False), open_study(tmp_path))
    assert blocker.read_text() == "a file where the folder would go"


def test_an_exported_table_is_never_an_entry(tmp_path: Path, synth: SimpleNamespace) -> None:
    _write_study(tmp_path, synth)
    study = open_study(tmp_path)
    study_module.export_table(study.table, tmp_path / "table.parquet")
    again = open_study(tmp_path)
    _assert_same(study, again)
    assert not cache.entry_path(tmp_path / "table.parquet").exists()


def test_a_trial_primed_from_its_table_is_the_trial_read_back(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A study's worker writes the entry from the table it has just written (the trial
    recorder's ``final_table``), without reading the file; that entry is the analysis of
    the file as read back."""
    from trials.runner import TrialRequest, build_trial

    request = TrialRequest(scenario="paper-2019", condition="dg", participant="novice", seed=3, trial_id="t",
                           time_limit_s=0.6, end_on_capture=False)
    trial = build_trial(request, tmp_path)
    trial.run()
    path, table = trial.recorder.path, trial.recorder.final_table
    assert table is not None and pq.read_table(path).equals(table)
    assert prime_trial(path, table) is True
    entry = cache.load(path, cache.file_digest(path))
    assert entry is not None
    read_back = read_trial(path)
    row, trace = analyse_trial(read_back)
    assert _same_with_nan(entry.row, row)
    assert entry.metadata == read_back.metadata and entry.metadata["complete"] is True
    assert np.array_equal(entry.relative_m, trace.relative_m) and np.array_equal(entry.time_s, trace.time_s)
    reads = _Reads(monkeypatch)
    assert open_study(tmp_path).table["trial_id"].tolist() == ["t"]
    assert reads.count == 0
    assert prime_trial(tmp_path / "gone.parquet", table) is False  # no file: nothing written


def _same_with_nan(cached: dict[str, Any], row: dict[str, Any]) -> bool:
    """Equal rows where NaN equals NaN."""
    expected = {key: value for key, value in row.items() if key != "file"}
    if cached.keys() != expected.keys():
        return False
    for key, value in expected.items():
        other = cached[key]
        if isinstance(value, float) and np.isnan(value):
            if not (isinstance(other, float) and np.isnan(other)):
                return False
        elif other != value:
            return False
    return True
