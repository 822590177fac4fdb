"""Per-scenario statistics and outcomes, against hand computations on a two-scenario study.

The study (``scenario_study_dir``, :class:`conftest.ScenarioStudy`): scenario ``alpha`` has
logs without ``outcome`` (provisional outcomes), scenario ``beta`` logs with it.
"""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
from scipy import stats as scipy_stats

from analysis.outcomes import capture_value, provisional_outcome, trial_outcome
from analysis.report import build_report
from analysis.stats import (
    PAIRED_TEST,
    SCENARIO_METRICS,
    SCENARIO_TEST_METRICS,
    SUMMARY_METRICS,
    condition_summary,
    json_summary,
    wilson_interval,
)
from analysis.study import load_study, open_study

#: Two-sided 97.5 % quantiles of Student's t (tables), by degrees of freedom.
T_975 = {5: 2.5705818366147395, 6: 2.4469118511449692, 7: 2.3646242510102993}
Z_975 = 1.959963984540054
STAT_KEYS = {"mean", "std", "n", "ci95_low", "ci95_high"}
RADIUS_M = 0.0044


@pytest.fixture(scope="module")
def table(scenario_study_dir):
    return load_study(scenario_study_dir)


@pytest.fixture(scope="module")
def summary(table):
    """json_summary through a strict JSON round trip (what `analyze --json` prints)."""
    return json.loads(json.dumps(json_summary(table), allow_nan=False))


def hand_wilson(k: int, n: int) -> tuple[float, float]:
    q = k / n
    centre = (q + Z_975**2 / (2 * n)) / (1 + Z_975**2 / n)
    half = Z_975 / (1 + Z_975**2 / n) * math.sqrt(q * (1 - q) / n + Z_975**2 / (4 * n * n))
    return centre - half, centre + half


def hand_holm(pvalues: list[float]) -> list[float]:
    """Holm by the textbook recipe: sort, multiply the i-th smallest by m - i, running max."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [0.0] * len(pvalues)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[index]))
        adjusted[index] = running
    return adjusted


def comparison(summary, scenario: str, metric: str, a: str, b: str) -> dict:
    rows = [
        row for row in summary["scenarios"][scenario]["comparisons"]
        if (row["metric"], row["a"], row["b"]) == (metric, a, b)
    ]
    assert len(rows) == 1, (scenario, metric, a, b)
    return rows[0]


def test_provisional_outcome_rules_and_logged_outcomes_win():
    assert provisional_outcome("capture_window_done", reached=True, complete=True) == "reached"
    assert provisional_outcome("time_limit", reached=False, complete=True) == "timeout"
    assert provisional_outcome("", reached=False, complete=True) == "missed"
    assert provisional_outcome("capture_window_done", reached=True, complete=False) == "aborted"
    for reason in ("fault", "write_failed", "aborted"):
        assert provisional_outcome(reason, reached=True, complete=True) == "aborted"
    assert trial_outcome({"end_reason": "time_limit"}, reached=True, complete=True) == ("reached", True)
    logged = {"end_reason": "capture_window_done", "outcome": "pushed_away"}
    assert trial_outcome(logged, reached=True, complete=True) == ("pushed_away", False)
    # a logged outcome counts as a capture only if it says so; a provisional one uses the kinematic test
    assert capture_value("captured", False, kinematic_captured=False) == 1.0
    assert capture_value("contact_lost", False, kinematic_captured=True) == 0.0
    assert capture_value("reached", True, kinematic_captured=True) == 1.0


def test_study_table_carries_outcomes(table):
    rows = table.set_index("trial_id")
    assert rows.loc["alpha-dg-a0-r0", ["outcome", "outcome_provisional"]].tolist() == ["reached", True]
    assert rows.loc["alpha-ng-a0-r1", "outcome"] == "timeout"
    assert rows.loc["alpha-dg-a1-r1", "outcome"] == "aborted"
    assert rows.loc["beta-apf-b0-r1", ["outcome", "outcome_provisional"]].tolist() == ["pushed_away", False]


def test_schema_of_the_scenarios_object(summary, synth):
    assert set(summary) >= {"conditions", "trials", "unreached", "incomplete", "scenarios"}
    assert summary["trials"] == 31 and summary["provisional_outcomes"] == 14
    assert list(summary["scenarios"]) == ["alpha", "beta"]
    for name, scenario in summary["scenarios"].items():
        assert set(scenario) == {"trials", "conditions", "comparisons"}
        assert list(scenario["conditions"]) == ["dg", "ng", "apf", "as"]
        for condition, entry in scenario["conditions"].items():
            assert set(entry) == set(SCENARIO_METRICS) | {"outcomes"}, (name, condition)
            for metric in SCENARIO_METRICS:
                assert set(entry[metric]) == STAT_KEYS, (name, condition, metric)
            assert all(isinstance(count, int) for count in entry["outcomes"].values())
        for row in scenario["comparisons"]:
            assert set(row) >= {"metric", "a", "b", "test", "p", "p_holm", "effect_size"}
            assert row["test"] in (PAIRED_TEST, None)
        assert {row["metric"] for row in scenario["comparisons"]} == set(SCENARIO_TEST_METRICS)
    assert summary["scenarios"]["alpha"]["trials"] == 14 and summary["scenarios"]["beta"]["trials"] == 17
    # a condition not run in a scenario is present with n = 0 and null statistics
    empty = summary["scenarios"]["alpha"]["conditions"]["apf"]["impact_velocity_m_s"]
    assert empty == {"mean": None, "std": None, "n": 0, "ci95_low": None, "ci95_high": None}


def test_means_n_and_t_intervals_per_scenario_match_hand_values(summary, synth):
    known = synth.ScenarioStudy
    # alpha dg: a0..a5 plus a1's crashed repetition (same speed)
    dg = [known.alpha_speed("dg", i) for i in range(6)] + [known.alpha_speed("dg", 1)]
    stats = summary["scenarios"]["alpha"]["conditions"]["dg"]["impact_velocity_m_s"]
    half = T_975[6] * statistics.stdev(dg) / math.sqrt(7)
    assert stats["n"] == 7
    assert stats["mean"] == pytest.approx(statistics.fmean(dg))
    assert stats["std"] == pytest.approx(statistics.stdev(dg))
    assert (stats["ci95_low"], stats["ci95_high"]) == (
        pytest.approx(statistics.fmean(dg) - half), pytest.approx(statistics.fmean(dg) + half)
    )
    # alpha ng: a0's second trial never reached, so 6 defined values
    ng_times = [(known.alpha_gap("ng", i) - RADIUS_M) / known.alpha_speed("ng", i) for i in range(6)]
    stats = summary["scenarios"]["alpha"]["conditions"]["ng"]["time_to_reach_s"]
    assert stats["n"] == 6 and stats["mean"] == pytest.approx(statistics.fmean(ng_times))
    assert stats["ci95_high"] - stats["mean"] == pytest.approx(T_975[5] * statistics.stdev(ng_times) / math.sqrt(6))
    # beta apf: two repetitions of one speed per participant
    apf = [known.beta_speed("apf", i, r) for i in range(4) for r in (0, 1)]
    stats = summary["scenarios"]["beta"]["conditions"]["apf"]["impact_velocity_m_s"]
    assert stats["n"] == 8 and stats["mean"] == pytest.approx(statistics.fmean(apf))
    assert stats["ci95_low"] == pytest.approx(statistics.fmean(apf) - T_975[7] * statistics.stdev(apf) / math.sqrt(8))
    # one trial: a mean, no spread, no interval
    single = summary["scenarios"]["beta"]["conditions"]["as"]["impact_velocity_m_s"]
    assert single == {"mean": pytest.approx(0.15), "std": None, "n": 1, "ci95_low": None, "ci95_high": None}


def test_rates_have_wilson_intervals_and_outcomes_are_counted(summary):
    beta = summary["scenarios"]["beta"]["conditions"]
    # dg: 7 of 8 logged "captured"
    rate = beta["dg"]["capture_rate"]
    assert (rate["n"], rate["mean"]) == (8, pytest.approx(7 / 8))
    assert (rate["ci95_low"], rate["ci95_high"]) == tuple(pytest.approx(x) for x in hand_wilson(7, 8))
    assert beta["apf"]["capture_rate"]["mean"] == pytest.approx(2 / 8)
    # the controller's single capture: Wilson still gives an interval, ending at 1
    assert beta["as"]["capture_rate"]["ci95_low"] == pytest.approx(hand_wilson(1, 1)[0])
    assert beta["as"]["capture_rate"]["ci95_high"] == 1.0
    alpha = summary["scenarios"]["alpha"]["conditions"]
    reached = alpha["ng"]["reached"]
    assert (reached["n"], reached["mean"]) == (7, pytest.approx(6 / 7))
    assert (reached["ci95_low"], reached["ci95_high"]) == tuple(pytest.approx(x) for x in hand_wilson(6, 7))
    # provisional outcomes: no kinematic capture in alpha (the approach passes through the target)
    assert alpha["dg"]["capture_rate"]["mean"] == 0.0 and alpha["dg"]["capture_rate"]["ci95_low"] == 0.0
    assert alpha["dg"]["outcomes"] == {"reached": 6, "timeout": 0, "aborted": 1}
    assert alpha["ng"]["outcomes"] == {"reached": 6, "timeout": 1, "aborted": 0}
    assert beta["apf"]["outcomes"] == {"captured": 2, "contact_lost": 3, "pushed_away": 3}
    assert beta["ng"]["outcomes"] == {"captured": 0, "contact_lost": 0, "pushed_away": 0}
    assert wilson_interval(0, 0) != wilson_interval(0, 0)  # NaN for no trials


def test_paired_p_values_match_scipy_on_hand_built_pairs_and_holm_by_hand(summary, synth):
    known = synth.ScenarioStudy
    # alpha: one trial per participant and condition (a1's crashed repetition repeats its speed)
    dg_v = [known.alpha_speed("dg", i) for i in range(6)]
    ng_v = [known.alpha_speed("ng", i) for i in range(6)]
    dg_t = [(known.GAP_M - RADIUS_M) / v for v in dg_v]
    ng_t = [(known.alpha_gap("ng", i) - RADIUS_M) / v for i, v in enumerate(ng_v)]
    expected = {
        "impact_velocity_m_s": scipy_stats.wilcoxon(dg_v, ng_v).pvalue,
        "time_to_reach_s": scipy_stats.wilcoxon(dg_t, ng_t).pvalue,
        "mse_velocity_m2_s2": scipy_stats.wilcoxon(np.square(dg_v), np.square(ng_v)).pvalue,
    }
    assert len(set(np.round(list(expected.values()), 12))) == 2  # distinct p-values: Holm is not trivial
    holm = dict(zip(expected, hand_holm(list(expected.values())), strict=True))
    for metric, p in expected.items():
        row = comparison(summary, "alpha", metric, "dg", "ng")
        assert row["test"] == PAIRED_TEST and row["n"] == 6
        assert row["p"] == pytest.approx(p, rel=1e-9)
        assert row["p_holm"] == pytest.approx(holm[metric], rel=1e-9)
    assert comparison(summary, "alpha", "impact_velocity_m_s", "dg", "ng")["effect_size"] == pytest.approx(-1.0)
    # every capture rate is 0 in both conditions: no test, no p, not counted by Holm
    flat = comparison(summary, "alpha", "capture_rate", "dg", "ng")
    assert flat["p"] is None and flat["p_holm"] is None and flat["note"] == "all differences zero"

    # beta: each participant's mean over two repetitions is the paired unit
    dg_v = [statistics.fmean(known.beta_speed("dg", i, r) for r in (0, 1)) for i in range(4)]
    apf_v = [known.beta_speed("apf", i, 0) for i in range(4)]
    rates = {
        condition: [statistics.fmean(o == "captured" for o in known.BETA_OUTCOMES[(i, condition)]) for i in range(4)]
        for condition in ("dg", "apf")
    }
    assert rates == {"dg": [1.0, 1.0, 0.5, 1.0], "apf": [0.0, 0.5, 0.0, 0.5]}
    beta_p = {
        "impact_velocity_m_s": scipy_stats.wilcoxon(dg_v, apf_v).pvalue,
        "capture_rate": scipy_stats.wilcoxon(rates["dg"], rates["apf"]).pvalue,
    }
    for metric, p in beta_p.items():
        assert comparison(summary, "beta", metric, "dg", "apf")["p"] == pytest.approx(p, rel=1e-9)
    # Holm over the scenario's four computed p-values (one per metric for dg-apf)
    tested = [row for row in summary["scenarios"]["beta"]["comparisons"] if row["p"] is not None]
    assert [(row["a"], row["b"]) for row in tested] == [("dg", "apf")] * 4
    for row, adjusted in zip(tested, hand_holm([row["p"] for row in tested]), strict=True):
        assert row["p_holm"] == pytest.approx(adjusted)
    rate_row = comparison(summary, "beta", "capture_rate", "dg", "apf")
    assert rate_row["effect_size"] == pytest.approx(1.0)  # every participant captured more with dg
    # the controller shares no participant with anyone: listed, not tested
    unpaired = comparison(summary, "beta", "capture_rate", "dg", "as")
    assert unpaired["test"] is None and unpaired["p"] is None and unpaired["n"] == 0


def test_pooled_conditions_object_is_unchanged(table, summary):
    pooled = summary["conditions"]
    assert list(pooled) == ["dg", "ng", "apf", "as"]
    for entry in pooled.values():
        assert list(entry) == list(SUMMARY_METRICS)  # no capture_rate, no outcomes
    # rebuilt independently from the pooled condition summary over every scenario
    reference = condition_summary(table, SUMMARY_METRICS).set_index(["condition", "metric"])
    for condition in ("dg", "ng", "apf", "as"):
        for metric in SUMMARY_METRICS:
            row = reference.loc[(condition, metric)]
            for key in STAT_KEYS:
                value = row[key]
                expected = None if isinstance(value, float) and math.isnan(value) else value
                assert pooled[condition][metric][key] == pytest.approx(expected), (condition, metric, key)
    # and the pooled object does not depend on the outcome columns at all
    without = json_summary(table.drop(columns=["outcome", "outcome_provisional"]))
    assert "scenarios" not in without
    assert json.loads(json.dumps(without["conditions"], allow_nan=False)) == pooled


def test_report_has_one_section_per_scenario(scenario_study_dir):
    html_text = build_report(open_study(scenario_study_dir))
    section = html_text.split("<h2>By scenario</h2>", 1)[1].split("<h2>", 1)[0]
    alpha = section.split("<h3>Scenario alpha: 14 trials</h3>", 1)[1].split("<h3>", 1)[0]
    beta = section.split("<h3>Scenario beta: 17 trials</h3>", 1)[1]
    assert "reached*" in alpha and "timeout*" in alpha  # provisional outcomes are marked
    assert "pushed_away" in beta and "pushed_away*" not in beta
    for part in (alpha, beta):
        assert "capture_rate" in part and "impact_velocity_m_s" in part and "p_holm" in part
        assert part.count("<img ") == 1
    assert "No participant in common (not compared): APF–AS, DG–AS." in beta
