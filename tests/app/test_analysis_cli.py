"""`capture-trainer analyze`: report path, --json shape, exports, errors."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics

import pandas as pd
import pytest

from app.commands.analysis import add_commands
from capture_trainer.errors import AnalysisError

#: The metrics analysis must give, by name (SI units in the names).
EXPECTED_METRICS = (
    "time_to_reach_s",
    "distance_travelled_m",
    "impact_velocity_m_s",
    "impact_velocity_x_m_s",
    "impact_velocity_y_m_s",
    "impact_velocity_z_m_s",
    "mse_position_m2",
    "mse_velocity_m2_s2",
    "peak_base_torque_n_m",
    "rms_base_torque_n_m",
    "final_base_attitude_rad",
    "peak_base_attitude_rad",
    "peak_force_calculated_n",
    "peak_force_actuated_n",
    "saturated_fraction",
    "n_replans",
    "captured",
    "capture_time_s",
    "n_fault_ticks",
    "n_watchdog_ticks",
)


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="capture-trainer")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


def reject_constant(name: str) -> None:
    raise ValueError(f"not strict JSON: {name}")


def test_json_prints_exactly_one_strict_object_of_the_documented_shape(study_dir, synth, capsys):
    assert run(["analyze", str(study_dir), "--json"]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out, parse_constant=reject_constant)
    assert out.count("\n") == 1
    assert set(summary) >= {"conditions", "trials", "unreached"}
    assert summary["trials"] == 21 and summary["unreached"] == 1
    assert set(summary["conditions"]) == {"dg", "ng", "apf", "as"}
    for condition, metrics in summary["conditions"].items():
        for name in EXPECTED_METRICS:
            assert set(metrics[name]) >= {"mean", "std", "n"}, (condition, name)
    apf = [synth.study_closing_speed("apf", i) for i in range(synth.STUDY_PARTICIPANTS)]
    assert summary["conditions"]["apf"]["impact_velocity_m_s"]["mean"] == pytest.approx(statistics.fmean(apf))
    assert summary["conditions"]["apf"]["impact_velocity_m_s"]["n"] == 6
    assert summary["conditions"]["as"]["impact_velocity_m_s"]["std"] is None
    assert not (study_dir / "report.html").exists()  # --json alone writes no report


def test_default_report_path_is_printed_and_exports_are_written(study_dir, tmp_path, capsys, monkeypatch):
    copy = tmp_path / "study"
    copy.mkdir()
    names = ["dg-p0-r0", "ng-p0-r0", "apf-p0-r0", "ng-p1-r1"]
    for name in names:
        shutil.copy(study_dir / f"{name}.parquet", copy)
    monkeypatch.setattr("app.commands.analysis.PROGRESS_MIN_FILES", 4)
    csv = tmp_path / "out" / "table.csv"
    assert run(["analyze", str(copy), "--csv", str(csv), "--parquet", str(copy / "table.parquet")]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(copy / "report.html")
    assert (copy / "report.html").stat().st_size > 0
    assert sorted(pd.read_csv(csv)["trial_id"]) == sorted(names)
    assert "loading trials 4/4" in captured.err
    # the Parquet export inside the study is not mistaken for a trial on the next run
    assert run(["analyze", str(copy), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["trials"], summary["unreached"]) == (4, 1)


def test_no_cache_gives_the_same_summary_and_writes_no_entries(study_dir, tmp_path, capsys):
    copy = tmp_path / "study"
    copy.mkdir()
    for name in ["dg-p0-r0", "ng-p0-r0", "apf-p0-r0"]:
        shutil.copy(study_dir / f"{name}.parquet", copy)
    assert run(["analyze", str(copy), "--json", "--no-cache"]) == 0
    fresh = capsys.readouterr().out
    assert not (copy / ".analysis").exists()
    assert run(["analyze", str(copy), "--json"]) == 0
    assert capsys.readouterr().out == fresh
    assert len(list((copy / ".analysis").glob("*.npz"))) == 3
    assert run(["analyze", str(copy), "--json"]) == 0  # from the entries
    assert capsys.readouterr().out == fresh


def test_single_trial_file_and_errors(study_dir, tmp_path, capsys):
    single = tmp_path / "one.parquet"
    shutil.copy(study_dir / "dg-p0-r0.parquet", single)
    assert run(["analyze", str(single)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "one.report.html")
    (tmp_path / "empty").mkdir()
    with pytest.raises(AnalysisError, match="no trial files"):
        run(["analyze", str(tmp_path / "empty")])
    (tmp_path / "broken.parquet").write_text("garbage")
    with pytest.raises(AnalysisError, match="broken.parquet"):
        run(["analyze", str(tmp_path)])


def test_json_has_per_scenario_statistics_beside_the_pooled_conditions(synth, tmp_path, capsys):
    root = synth.write_scenario_study(tmp_path / "study")
    assert run(["analyze", str(root), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out, parse_constant=reject_constant)
    assert set(summary["conditions"]) == {"dg", "ng", "apf", "as"}
    assert "capture_rate" not in summary["conditions"]["dg"]  # the pooled object keeps its shape
    assert list(summary["scenarios"]) == ["alpha", "beta"]
    beta = summary["scenarios"]["beta"]
    assert beta["conditions"]["dg"]["outcomes"] == {"captured": 7, "contact_lost": 1, "pushed_away": 0}
    assert beta["conditions"]["dg"]["capture_rate"]["mean"] == pytest.approx(7 / 8)
    metrics = {row["metric"] for row in beta["comparisons"] if row["test"] == "wilcoxon_signed_rank"}
    assert metrics >= {"impact_velocity_m_s", "time_to_reach_s", "mse_velocity_m2_s2", "capture_rate"}
    for row in beta["comparisons"]:
        assert set(row) >= {"metric", "a", "b", "test", "p", "p_holm", "effect_size"}
