"""`capture-trainer tasks` and `run --task` (the post-capture behaviours from the CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import EXIT_ERROR, main


def test_tasks_lists_the_built_in_tasks_and_behaviours(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("berthing") and "(after berthing-planar)" in out and "(after jam-planar)" in out
    assert out.rstrip().endswith("behaviours: ptwl, rwe, jiggle, mixed, open")
    assert main(["tasks", "jam"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["states"]["push"]["exhausted"] == "jiggle" and shown["states"]["push"]["retries"] == 1


def test_a_broken_task_file_is_refused_before_the_simulation(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[states.a]\nbehaviour = "ptwl"\nparams = { wrench_limt_n = 3.0 }\n', encoding="utf-8")
    assert main(["run", "--scenario", "paper-2019", "--condition", "as", "--task", str(path),
                 "--out", str(tmp_path / "out")]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "states.a" in err and "did you mean 'wrench_limit_n'" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    assert main(["run", "--task", "berthin", "--out", str(tmp_path / "out")]) == EXIT_ERROR
    assert "did you mean 'berthing'" in capsys.readouterr().err


def test_analyze_json_reports_the_post_capture_phase(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np

    from tests.analysis.conftest import base_metadata, trial_columns, write_trial

    n = 400
    time_s = (np.arange(n) + 1) * 1e-3
    zeros = np.zeros((n, 3))
    phase = {"task": {"name": "wall"}, "states": ["push", "relax"], "behaviours": ["ptwl", "rwe", "jiggle"],
             "outcome": "failed", "reason": "state 'push' ended watchdog",
             "results": [{"state": "push", "behaviour": "ptwl", "result": "wrench_limit", "reason": "r",
                          "started_s": 0.1, "ended_s": 0.2, "duration_s": 0.1, "peak_force_n": 7.5, "limit_n": 6.0},
                         {"state": "relax", "behaviour": "rwe", "result": "succeeded", "reason": "r",
                          "started_s": 0.2, "ended_s": 0.3, "duration_s": 0.1, "peak_force_n": 7.5,
                          "limit_n": None}]}
    write_trial(tmp_path / "study" / "w.parquet", trial_columns(time_s, zeros, zeros, zeros, zeros),
                base_metadata("w", post_capture=phase))
    write_trial(tmp_path / "study" / "plain.parquet", trial_columns(time_s, zeros, zeros, zeros, zeros),
                base_metadata("plain"))
    assert main(["analyze", str(tmp_path / "study"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["post_capture"]
    assert found["tasks"] == {"w": {"task": "wall", "outcome": "failed", "reason": "state 'push' ended watchdog"}}
    by_kind = {row["behaviour"]: row for row in found["by_behaviour"]}
    assert by_kind["ptwl"]["max_peak_over_limit"] == pytest.approx(1.25)
    assert by_kind["rwe"]["max_peak_over_limit"] is None  # no limit: null, not NaN
    assert [run["result"] for run in found["runs"]] == ["wrench_limit", "succeeded"]
