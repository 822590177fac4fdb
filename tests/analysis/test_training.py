"""Retention and transfer effects and learning curves (analysis/training.py) on synthetic
data sets with known effects."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.training import effects, learning_curves, reference_group, welch_interval

#: Two-sided 95 % t quantiles from tables: t(0.975; 4) and t(0.975; 8).
T_4 = 2.7764451051977987
T_8 = 2.3060041350333704
SPREAD = (-0.02, -0.01, 0.0, 0.01, 0.02)  # mean 0, sample sd sqrt(2.5e-4)
EFFECTS = {"fixed-dg": -0.10, "fading-dg": -0.05, "ng": 0.0}


def _rows(group: str, pid: str, phase: str, block: int, step: int, condition: str, value: float,
          captured: float, scenario: str = "paper-2019") -> dict:
    return {"participant_id": pid, "group": group, "phase": phase, "block": block, "step": step,
            "scenario": scenario,
            "condition": condition, "impact_velocity_m_s": value, "capture_rate": captured,
            "guidance_authority": 1.0 if condition == "dg" else math.nan}


def _table(pre: float = 0.30) -> pd.DataFrame:
    rows = []
    for group, delta in EFFECTS.items():
        training = "ng" if group == "ng" else "dg"
        for i, spread in enumerate(SPREAD):
            pid = f"{group}-{i}"
            # two pre-test trials around `pre`: the participant's mean is `pre` exactly
            rows += [_rows(group, pid, "pre-test", 0, 0, "ng", pre + d, 0.0) for d in (-0.05, 0.05)]
            rows += [_rows(group, pid, "training", b, 1 + b, training, 0.2, 1.0) for b in range(2)]
            rows.append(_rows(group, pid, "retention", 0, 3, "ng", pre + delta + spread, 1.0))
            rows.append(_rows(group, pid, "transfer", 0, 4, "ng", 0.4 + delta + spread, 0.0, "side"))
            rows.append(_rows(group, pid, "transfer", 0, 4, "ng", 0.5 + delta + spread, 0.0, "above"))
    return pd.DataFrame(rows)


def test_the_retention_effect_and_its_t_interval_by_hand() -> None:
    found = effects(_table(), metrics=("impact_velocity_m_s",)).set_index(["effect", "group"])
    half = T_4 * math.sqrt(2.5e-4) / math.sqrt(5)  # t * s / sqrt(n)
    for group, delta in EFFECTS.items():
        row = found.loc[("retention", group)]
        assert row["n"] == 5
        assert row["mean"] == pytest.approx(delta, abs=1e-12)
        assert row["ci95_low"] == pytest.approx(delta - half, abs=1e-9)
        assert row["ci95_high"] == pytest.approx(delta + half, abs=1e-9)
        assert row["ci95_low"] < delta < row["ci95_high"]
    # fixed vs the unguided reference: -0.1 with Welch's interval (se 0.01, 8 degrees of freedom)
    fixed = found.loc[("retention", "fixed-dg")]
    assert fixed["vs"] == "ng"
    assert fixed["difference"] == pytest.approx(-0.10, abs=1e-12)
    assert fixed["diff_ci95_low"] == pytest.approx(-0.10 - T_8 * 0.01, abs=1e-9)
    assert fixed["diff_ci95_high"] == pytest.approx(-0.10 + T_8 * 0.01, abs=1e-9)
    assert fixed["diff_ci95_high"] < 0.0  # the known effect is detected
    transfer = found.loc[("transfer", "fading-dg")]
    assert transfer["mean"] == pytest.approx(0.40, abs=1e-12)  # the mean of 0.35 (side) and 0.45 (above)
    assert transfer["difference"] == pytest.approx(-0.05, abs=1e-12)
    assert found.loc[("transfer: side", "fading-dg")]["mean"] == pytest.approx(0.35, abs=1e-12)
    assert found.loc[("transfer: above", "fixed-dg")]["mean"] == pytest.approx(0.40, abs=1e-12)
    assert found.loc[("transfer: above", "fixed-dg")]["ci95_high"] == pytest.approx(0.40 + half, abs=1e-9)
    assert found.loc[("transfer", "ng")]["vs"] == ""
    rates = effects(_table(), metrics=("capture_rate",)).set_index(["effect", "group"])
    assert rates.loc[("retention", "ng")][["mean", "ci95_low", "ci95_high"]].tolist() == [1.0, 1.0, 1.0]


def test_the_interval_covers_a_known_effect_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(21)
    runs = 120
    rows = []
    for run in range(runs):  # each synthetic data set is a group of its own: one call computes all
        group = f"set{run}"
        for i in range(4):  # few participants: a z interval would cover only about 86 %
            pid = f"{group}-p{i}"
            skill = rng.normal(0.3, 0.05)
            rows.append(_rows(group, pid, "pre-test", 0, 0, "ng", skill + rng.normal(0, 0.03), 0.0))
            rows.append(_rows(group, pid, "training", 0, 1, "dg", 0.1, 1.0))
            rows.append(_rows(group, pid, "retention", 0, 2, "ng", skill - 0.08 + rng.normal(0, 0.03), 1.0))
    found = effects(pd.DataFrame(rows), metrics=("impact_velocity_m_s",))
    retention = found[found["effect"] == "retention"]
    assert len(retention) == runs and set(retention["n"]) == {4}
    covered = int(((retention["ci95_low"] <= -0.08) & (-0.08 <= retention["ci95_high"])).sum())
    # binomial(120, 0.95): at least 107 covered is 3 standard deviations below the mean
    assert 107 <= covered <= 119


def test_learning_curves_average_participants_per_block() -> None:
    curves = learning_curves(_table())
    rate = curves[(curves["metric"] == "capture_rate") & (curves["group"] == "fading-dg")]
    assert list(rate["step"]) == [0, 1, 2, 3, 4]
    assert list(rate["phase"]) == ["pre-test", "training", "training", "retention", "transfer"]
    assert list(rate["mean"]) == [0.0, 1.0, 1.0, 1.0, 0.0]
    assert set(rate["n"]) == {5}
    impact = curves[(curves["metric"] == "impact_velocity_m_s") & (curves["group"] == "ng")
                    & (curves["phase"] == "retention")].iloc[0]
    assert impact["mean"] == pytest.approx(0.30, abs=1e-12)
    training = curves[(curves["group"] == "fixed-dg") & (curves["phase"] == "training")]
    assert set(training["authority_mean"]) == {1.0}
    assert reference_group(_table()) == "ng"


def test_welch_interval_by_hand_and_degenerate_cases() -> None:
    # a = (1, 2, 3), b = (2, 4, 6, 8): d = -3; va = 1/3, vb = 20/3 / 4 = 5/3; se = sqrt(2)
    # dof = (2)^2 / ((1/3)^2 / 2 + (5/3)^2 / 3) = 4 / (1/18 + 25/27) = 4.0754...
    difference, low, high = welch_interval([1, 2, 3], [2, 4, 6, 8])
    dof = 4.0 / ((1 / 3) ** 2 / 2 + (5 / 3) ** 2 / 3)
    from scipy import stats

    half = stats.t.ppf(0.975, dof) * math.sqrt(2.0)
    assert difference == pytest.approx(-3.0)
    assert (low, high) == pytest.approx((-3.0 - half, -3.0 + half))
    assert math.isnan(welch_interval([1.0], [1.0, 2.0])[1])
    assert math.isnan(welch_interval([], [1.0, 2.0])[0])
