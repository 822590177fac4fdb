"""`capture-trainer scenarios check`: the automatic capture run on a scenario, its verdict
checked against what the trial log shows when read independently."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app.cli import EXIT_ERROR, main
from app.scenario_check import ScenarioCheck, check_scenario, joint_limit_margin, verdict_lines
from robot.ik import IKSettings
from robot.models import get_model

BUILTIN = Path(__file__).resolve().parents[2] / "scenarios" / "builtin"
#: The keys `scenarios check --json` documents (docs/scenarios.md).
JSON_KEYS = {
    "scenario", "model", "solver", "reachable", "capturable", "outcome", "outcome_provisional", "end_reason",
    "time_to_reach_s", "impact_velocity_m_s", "capture_time_s", "duration_s", "min_joint_limit_margin_rad",
    "worst_joint", "worst_limit", "n_limited_ticks", "min_sigma_ratio", "sigma_threshold", "n_singular_ticks",
    "singular_fraction", "peak_base_attitude_rad", "final_base_attitude_rad", "peak_base_torque_n_m",
    "rms_base_torque_n_m", "n_ticks", "verdict",
}


@pytest.fixture(scope="module")
def paper(tmp_path_factory: pytest.TempPathFactory) -> tuple[ScenarioCheck, pd.DataFrame]:
    """The check of paper-2019 with its trial log kept, and the log's rows."""
    folder = tmp_path_factory.mktemp("check")
    check = check_scenario("paper-2019", out_dir=folder)
    (log,) = folder.glob("*.parquet")
    return check, pd.read_parquet(log)


def test_paper_2019_is_reachable_and_captured(paper: tuple[ScenarioCheck, pd.DataFrame]) -> None:
    check, frame = paper
    assert (check.scenario, check.model, check.solver) == ("paper-2019", "planar-3r", "lse")
    assert check.reachable is True and check.capturable is True
    assert 0.0 < check.time_to_reach_s < check.capture_time_s <= check.duration_s
    assert check.n_ticks == len(frame)
    assert check.verdict[0].startswith("reachable: yes") and "capturable: yes" in check.verdict[0]


def test_the_joint_limit_margin_is_the_logs(paper: tuple[ScenarioCheck, pd.DataFrame]) -> None:
    check, frame = paper
    model = get_model("planar-3r")
    margins = []
    for joint in range(model.n_joints):
        q = frame[f"q{joint}_rad"].to_numpy()
        margins.append(min((q - model.q_min_rad[joint]).min(), (model.q_max_rad[joint] - q).min()))
    assert check.min_joint_limit_margin_rad == pytest.approx(min(margins), abs=1e-12)
    assert check.worst_joint == int(np.argmin(margins))
    assert 0.0 < check.min_joint_limit_margin_rad < 2.9
    assert f"{check.min_joint_limit_margin_rad:.3f} rad (joint {check.worst_joint}" in check.verdict[1]


def test_singularity_and_base_figures_are_the_logs(paper: tuple[ScenarioCheck, pd.DataFrame]) -> None:
    check, frame = paper
    assert check.sigma_threshold == IKSettings().sigma_threshold
    assert check.min_sigma_ratio == pytest.approx(frame["sigma_ratio"].min())
    assert check.singular_fraction == pytest.approx(frame["singular"].mean())
    assert check.n_limited_ticks == int(frame["limited"].sum())
    torque = np.linalg.norm(frame[["base_torque_x_n_m", "base_torque_y_n_m", "base_torque_z_n_m"]], axis=1)
    attitude = np.linalg.norm(frame[["base_att_x_rad", "base_att_y_rad", "base_att_z_rad"]], axis=1)
    assert check.peak_base_torque_n_m == pytest.approx(torque.max())
    assert check.peak_base_attitude_rad == pytest.approx(attitude.max())
    assert check.final_base_attitude_rad == pytest.approx(attitude[-1])
    assert 0.0 < check.rms_base_torque_n_m <= check.peak_base_torque_n_m


def test_the_margin_names_the_nearer_limit() -> None:
    q = np.array([[0.0, 1.0], [0.5, -1.8]])
    margin, joint, side = joint_limit_margin(q, (-2.0, -2.0), (2.0, 2.0))
    assert margin == pytest.approx(0.2) and (joint, side) == (1, "lower")
    margin, joint, side = joint_limit_margin(q, (-2.0, -2.0), (0.6, 2.0))
    assert margin == pytest.approx(0.1) and (joint, side) == (0, "upper")
    margin, joint, side = joint_limit_margin(np.full((2, 2), np.nan), (-1.0, -1.0), (1.0, 1.0))
    assert math.isnan(margin) and (joint, side) == (-1, "")


def test_json_has_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios", "check", "paper-2019", "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert set(data) == JSON_KEYS
    assert data["reachable"] is True and data["model"] == "planar-3r"
    assert isinstance(data["verdict"], list) and len(data["verdict"]) == 4
    assert captured.out.count("\n") == 1


def test_the_human_output_is_a_short_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios", "check", "paper-2019", "--solver", "pinv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("paper-2019 (planar-3r, solver pinv")
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "reachable", "closest joint limit", "reaction singularity", "base"]


def test_an_unknown_name_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios", "check", "no-such-scenario"]) == EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("capture-trainer: error: ")
    assert "no-such-scenario" in captured.err


def test_a_broken_file_gives_the_same_lines_as_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text((BUILTIN / "paper-2019.toml").read_text().replace("radius_m = 0.0044", "radius_m = -0.01"))
    assert main(["scenarios", "validate", str(bad)]) == EXIT_ERROR
    validate = capsys.readouterr()
    assert main(["scenarios", "check", str(bad)]) == EXIT_ERROR
    check = capsys.readouterr()
    assert check.out == "" and check.err == validate.err
    assert check.err.count("\n") == 1 and "target.radius_m: expected a number > 0" in check.err


def test_a_target_5_m_away_is_not_reachable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (BUILTIN / "paper-2019.toml").read_text()
    text = re.sub(r"start_offset_m = \[.*\]", "start_offset_m = [5.0, 0.0, 0.0]", text)
    text = re.sub(r"time_limit_s = .*", "time_limit_s = 1.0", text)
    far = tmp_path / "far.toml"
    far.write_text(text)
    assert main(["scenarios", "check", str(far), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["reachable"] is False and data["capturable"] is False
    assert data["outcome"] in {"timeout", "missed"}
    assert data["time_to_reach_s"] is None and data["impact_velocity_m_s"] is None
    assert data["duration_s"] == pytest.approx(1.0, abs=2e-3)
    assert data["verdict"][0].startswith("reachable: no")


def test_a_logged_outcome_is_used_as_it_is(paper: tuple[ScenarioCheck, pd.DataFrame]) -> None:
    values = asdict(paper[0]) | {"outcome": "contact_lost", "outcome_provisional": False, "capturable": False,
                                 "duration_s": 3.214}
    assert verdict_lines(values, 1.0)[0].endswith("capturable: no (contact_lost at 3.21 s)")
