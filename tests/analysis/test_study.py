"""Loading a study directory into the tidy table, and exporting it."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.metrics import METRIC_NAMES
from analysis.study import ID_COLUMNS, export_table, load_study, open_study, read_design
from capture_trainer.errors import AnalysisError


def test_table_has_one_row_per_trial_with_identity_and_every_metric(study_dir, synth):
    table = load_study(study_dir)
    assert len(table) == 3 * synth.STUDY_PARTICIPANTS + 3
    assert list(table.columns) == list(ID_COLUMNS) + list(METRIC_NAMES)
    row = table.set_index("trial_id").loc["apf-p3-r0"]
    assert (row["condition"], row["participant_id"], row["participant_kind"]) == ("apf", "p3", "novice")
    assert (row["scenario"], row["repetition"], row["seed"]) == ("paper-planar", 0, 7)
    assert row["impact_velocity_m_s"] == pytest.approx(synth.study_closing_speed("apf", 3))
    assert table.set_index("trial_id").loc["as-controller", "file"] == "auto/as-controller.parquet"


def test_unreached_and_incomplete_trials_are_kept_and_marked(study_dir):
    table = load_study(study_dir).set_index("trial_id")
    assert not table.loc["ng-p1-r1", "reached"]
    assert math.isnan(table.loc["ng-p1-r1", "impact_velocity_m_s"])
    assert not table.loc["dg-p2-r1", "complete"]
    assert table.loc["dg-p2-r1", "reached"]
    assert int((~table["reached"]).sum()) == 1 and int((~table["complete"]).sum()) == 1


def test_design_file_is_read_when_present_and_optional(study_dir, factory, synth):
    assert open_study(study_dir).design["order"] == "latin-square"
    factory.write("only", synth.approach())
    assert read_design(factory.root) is None
    assert open_study(factory.root).design is None


def test_progress_is_reported_per_file(study_dir):
    calls = []
    open_study(study_dir, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i, 21) for i in range(1, 22)]


def test_csv_and_parquet_export_round_trip_and_parquet_export_is_not_read_as_a_trial(study_dir, tmp_path):
    table = load_study(study_dir)
    csv = pd.read_csv(export_table(table, tmp_path / "t.csv"))
    assert list(csv.columns) == list(table.columns)
    assert csv["impact_velocity_m_s"].sum() == pytest.approx(table["impact_velocity_m_s"].sum())
    exported = export_table(table, study_dir / "table.parquet")
    try:
        back = pd.read_parquet(exported)
        assert back["trial_id"].tolist() == table["trial_id"].tolist()
        assert len(load_study(study_dir)) == len(table)  # the export is skipped
    finally:
        exported.unlink()
    with pytest.raises(AnalysisError, match="csv or .parquet"):
        export_table(table, tmp_path / "t.xlsx")


def test_empty_directory_and_foreign_files_are_clear_errors(tmp_path, factory, synth):
    with pytest.raises(AnalysisError, match="no trial files"):
        load_study(tmp_path)
    with pytest.raises(AnalysisError, match="no such"):
        load_study(tmp_path / "missing")
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "other.parquet")
    with pytest.raises(AnalysisError, match="not a capture-trainer trial log"):
        load_study(tmp_path)
    (tmp_path / "other.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(AnalysisError, match="not a readable Parquet file"):
        load_study(tmp_path)


def test_duplicate_trial_ids_are_an_error(factory, synth):
    factory.write("same", synth.approach())
    synth.write_trial(factory.root / "sub" / "copy.parquet", synth.approach(), synth.base_metadata("same"))
    with pytest.raises(AnalysisError, match="appears twice"):
        load_study(factory.root)
