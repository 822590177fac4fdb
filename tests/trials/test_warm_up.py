"""`capture-trainer warm-up`: the trials it runs call what trials call, and it runs them."""

from __future__ import annotations

import pytest

from app.cli import main
from trials.vocabulary import load_scenario
from trials.conditions import CONDITIONS
from trials.warm_up import warm_up_cases


def test_the_cases_cover_both_models_every_condition_both_paths_a_capture_and_the_compensators() -> None:
    cases = warm_up_cases()
    models = {load_scenario(c.request.scenario).robot.model for c in cases}
    assert models == {"planar-3r", "spatial-7dof"}
    for model in models:
        for condition in CONDITIONS.names():
            paths = {c.staged for c in cases if c.request.condition == condition
                     and load_scenario(c.request.scenario).robot.model == model}
            assert paths == {False, True}, (model, condition)
    # a capture needs time: the automatic one closes the tool about 2 s in
    for model in models:  # on both paths: each carries the debris with its own call
        assert {c.staged for c in cases if c.request.condition == "as" and (c.request.time_limit_s or 0.0) >= 3.0
                and load_scenario(c.request.scenario).robot.model == model} == {False, True}, model
    assert {c.request.compensator for c in cases} >= {"predictive", "passivity"}


def test_the_command_runs_every_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["warm-up"]) == 0
    lines = capsys.readouterr().err.strip().splitlines()
    count = len(warm_up_cases())
    assert [line.split("]")[0] for line in lines[:-1]] == [f"[{i:2d}/{count}" for i in range(1, count + 1)]
    assert lines[-1].startswith(f"warm-up: {count} short trials")
