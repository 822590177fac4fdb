"""Post-capture analysis (analysis/behaviours.py) on synthetic logs with hand-set results."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from analysis.behaviours import behaviour_rows, behaviour_summary, state_timeline_figure, state_times
from analysis.trial import read_trial
from capture_trainer import trial_log
from tests.analysis.conftest import base_metadata, trial_columns, write_trial


def result(state: str, behaviour: str, outcome: str, start: float, end: float, peak: float, limit: float | None,
           attitude: float) -> dict[str, object]:
    return {"state": state, "behaviour": behaviour, "result": outcome, "reason": "r", "started_s": start,
            "ended_s": end, "duration_s": end - start, "peak_force_n": peak, "limit_n": limit,
            "base_attitude_change_rad": attitude, "peak_base_attitude_change_rad": 2 * attitude,
            "min_sigma_ratio": 0.1, "singular_ticks": 3, "limited_ticks": 0}


def post_capture_trial(tmp_path: Path) -> Path:
    n = 3000
    time_s = (np.arange(n) + 1) * 1e-3
    zeros = np.zeros((n, 3))
    state = np.full(n, -1.0)
    state[1000:1500] = 0  # push: 0.5 s
    state[1500:1700] = 1  # relax: 0.2 s
    state[1700:2500] = 0  # push again: 0.8 s
    force = np.zeros(n)
    force[1300:1500] = np.linspace(0.0, 6.1, 200)
    columns = trial_columns(time_s, zeros, zeros, zeros, zeros, state_index=state, wrench_force_x_n=force,
                            wrench_limit_n=np.where(state == 0, 6.0, np.inf))
    phase = {"task": {"name": "wall"}, "states": ["push", "relax"], "behaviours": ["ptwl", "rwe", "jiggle"],
             "outcome": "succeeded", "reason": "ok",
             "results": [result("push", "ptwl", "wrench_limit", 1.0, 1.5, 6.1, 6.0, 1e-4),
                         result("relax", "rwe", "succeeded", 1.5, 1.7, 6.1, None, 2e-5),
                         result("push", "ptwl", "succeeded", 1.7, 2.5, 2.0, 6.0, 3e-4)]}
    return write_trial(tmp_path / "t.parquet", columns, base_metadata("t", post_capture=phase))


def test_rows_summary_and_state_times_from_the_log(tmp_path: Path) -> None:
    trial = read_trial(post_capture_trial(tmp_path))
    rows = behaviour_rows([(trial.trial_id, trial.metadata)])
    assert list(rows["result"]) == ["wrench_limit", "succeeded", "succeeded"]
    assert rows["peak_over_limit"].iloc[0] == pytest.approx(6.1 / 6.0)
    assert math.isnan(rows["peak_over_limit"].iloc[1])  # RWE has no limit
    summary = behaviour_summary(rows).set_index("behaviour")
    assert summary.loc["ptwl", "runs"] == 2 and summary.loc["ptwl", "wrench_limit"] == 1
    assert summary.loc["ptwl", "success_rate"] == 0.5
    assert summary.loc["ptwl", "mean_base_attitude_change_rad"] == pytest.approx(2e-4)
    assert summary.loc["ptwl", "max_base_attitude_change_rad"] == pytest.approx(6e-4)
    assert summary.loc["rwe", "singular_ticks"] == 3
    times = state_times(trial)
    assert times == {"push": pytest.approx(1.3), "relax": pytest.approx(0.2)}
    figure = state_timeline_figure(trial)
    assert figure is not None and len(figure.axes) == 3


def test_a_log_without_a_task_or_older_than_version_3_has_no_post_capture_phase(tmp_path: Path) -> None:
    n = 100
    time_s = (np.arange(n) + 1) * 1e-3
    zeros = np.zeros((n, 3))
    columns = trial_columns(time_s, zeros, zeros, zeros, zeros)
    for name in trial_log.POST_CAPTURE_COLUMNS:
        del columns[name]
    trial = read_trial(write_trial(tmp_path / "v2.parquet", columns, base_metadata("v2", format_version=2)))
    assert behaviour_rows([(trial.trial_id, trial.metadata)]).empty
    assert state_times(trial) == {} and state_timeline_figure(trial) is None
    # a version-3 reader still requires its columns of a version-3 file
    from capture_trainer.errors import AnalysisError

    with pytest.raises(AnalysisError, match="state_index"):
        read_trial(write_trial(tmp_path / "v3.parquet", columns, base_metadata("v3", format_version=3)))


def test_the_report_shows_the_post_capture_phase(tmp_path: Path) -> None:
    import pandas as pd

    from analysis import report
    from analysis.study import Study

    path = post_capture_trial(tmp_path)
    # the two sections alone (the full report computes every metric and draws every example figure)
    section = report._post_capture_section(Study(tmp_path, pd.DataFrame(), None, paths={"t": path}))
    trial = report._trial_post_capture(read_trial(path))
    assert "After the capture: behaviours" in section and ">ptwl<" in section
    assert "After the capture: task wall, succeeded" in trial and trial.count("data:image/png;base64") == 1
    assert trial.count("<table") == 2
