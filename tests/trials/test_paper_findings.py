"""The built-in paper-2019 study, run headless with simulated participants, reproduces
the paper's qualitative findings (MISSION.md §3; Li & Yan 2019, Figs. 16-21)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.study import load_study
from trials.protocol import load_protocol
from trials.study import run_study


@pytest.fixture(scope="module")
def paper_study(tmp_path_factory: pytest.TempPathFactory):
    out: Path = tmp_path_factory.mktemp("paper-2019")
    result = run_study(load_protocol("paper-2019"), out, workers=2, progress=None)
    assert result.failed == ()
    return load_study(out)


@pytest.mark.slow
def test_every_planned_trial_was_recorded(paper_study) -> None:
    counts = paper_study.groupby("condition").size().to_dict()
    assert counts == {"dg": 30, "ng": 30, "apf": 30, "as": 3}


@pytest.mark.slow
def test_dg_has_the_lowest_mean_impact_velocity(paper_study) -> None:
    # The paper also has APF between DG and NG. The simulated participants do not
    # reproduce that order robustly (APF and NG within a few mm/s of each other, either
    # way round with the seed): not asserted until the operator model is grounded in
    # motor control (docs/haptics.md, "Does it reproduce the paper?").
    mean = paper_study.groupby("condition")["impact_velocity_m_s"].mean()
    assert mean["dg"] < mean["apf"] and mean["dg"] < mean["ng"], mean.to_dict()


@pytest.mark.slow
def test_apf_reaches_first(paper_study) -> None:
    reach = paper_study.groupby("condition")["time_to_reach_s"].mean()
    assert reach["apf"] < reach["dg"] and reach["apf"] < reach["ng"], reach.to_dict()


@pytest.mark.slow
def test_ng_is_the_least_stable(paper_study) -> None:
    spread = paper_study.groupby("condition")["impact_velocity_m_s"].std()
    assert spread["ng"] > spread["dg"] and spread["ng"] > spread["apf"], spread.to_dict()


@pytest.mark.slow
def test_dg_tracks_the_target_better_after_the_reach_than_apf(paper_study) -> None:
    mse = paper_study.groupby("condition")["mse_velocity_m2_s2"].mean()
    assert mse["dg"] < mse["apf"], mse.to_dict()
