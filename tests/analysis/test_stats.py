"""Statistics: summaries against hand computations, tests against exact distributions."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pandas as pd
import pytest

from analysis.stats import (
    cohen_dz,
    condition_summary,
    describe,
    friedman_tests,
    holm,
    json_summary,
    pairwise_tests,
    rank_biserial,
    wilcoxon_signed_rank,
)
from analysis.study import load_study

#: Two-sided 97.5 % quantiles of Student's t (tables).
T_975 = {2: 4.302652729911275, 5: 2.5705818366147395, 6: 2.4469118511449692}


def test_describe_matches_hand_computation():
    values = [1.0, 2.0, 4.0, float("nan")]
    result = describe(values)
    mean = 7.0 / 3.0
    std = math.sqrt(((1 - mean) ** 2 + (2 - mean) ** 2 + (4 - mean) ** 2) / 2)
    assert result["n"] == 3
    assert result["mean"] == pytest.approx(mean)
    assert result["std"] == pytest.approx(std)
    half = T_975[2] * std / math.sqrt(3)
    assert (result["ci95_low"], result["ci95_high"]) == (pytest.approx(mean - half), pytest.approx(mean + half))
    single = describe([5.0])
    assert single["n"] == 1 and single["mean"] == 5.0 and math.isnan(single["std"]) and math.isnan(single["ci95_low"])
    assert describe([])["n"] == 0 and math.isnan(describe([])["mean"])


def test_study_summary_per_condition_matches_hand_values(study_dir, synth):
    table = load_study(study_dir)
    summary = condition_summary(table, ["impact_velocity_m_s", "reached"]).set_index(["condition", "metric"])
    # dg: p0..p5 plus p2's crashed repetition (same speed)
    dg = [synth.study_closing_speed("dg", i) for i in range(6)] + [synth.study_closing_speed("dg", 2)]
    row = summary.loc[("dg", "impact_velocity_m_s")]
    assert row["n"] == 7
    assert row["mean"] == pytest.approx(statistics.fmean(dg))
    assert row["std"] == pytest.approx(statistics.stdev(dg))
    assert row["ci95_high"] - row["mean"] == pytest.approx(T_975[6] * statistics.stdev(dg) / math.sqrt(7))
    # ng: the unreached trial is not a number, so n = 6 of 7 trials; reached rate 6/7
    assert summary.loc[("ng", "impact_velocity_m_s"), "n"] == 6
    assert summary.loc[("ng", "reached"), "mean"] == pytest.approx(6 / 7)
    assert list(dict.fromkeys(summary.index.get_level_values(0))) == ["dg", "ng", "apf", "as"]


def test_holm_on_known_p_values():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, max(1*0.04, 0.06)
    adjusted = holm([0.01, 0.04, 0.03, 0.005, float("nan")])
    np.testing.assert_allclose(adjusted[:4], [0.03, 0.06, 0.06, 0.02])
    assert math.isnan(adjusted[4])
    np.testing.assert_allclose(holm([0.5, 0.9]), [1.0, 1.0])
    assert holm([]).size == 0


def test_effect_sizes_closed_form():
    d = np.array([1.0, 2.0, -0.5, 3.0])
    # ranks of |d|: 0.5 -> 1, 1 -> 2, 2 -> 3, 3 -> 4; T+ = 9, T- = 1
    assert rank_biserial(d) == pytest.approx((9 - 1) / 10)
    assert rank_biserial([0.0, 0.0]) != rank_biserial([0.0, 0.0])  # NaN
    assert cohen_dz(d) == pytest.approx(d.mean() / statistics.stdev(d.tolist()))


def test_paired_tests_on_the_study_match_exact_distributions(study_dir):
    table = load_study(study_dir)
    friedman = friedman_tests(table, ["impact_velocity_m_s"]).iloc[0]
    # every participant ranks dg < apf < ng: chi2 = 12/(n k (k+1)) sum R^2 - 3 n (k+1) = 12
    assert friedman["conditions"] == "dg,ng,apf"  # "as" has a single participant
    assert friedman["n"] == 6
    assert friedman["statistic"] == pytest.approx(12.0)
    assert friedman["p"] == pytest.approx(math.exp(-6.0))  # chi-square, 2 degrees of freedom
    assert friedman["kendall_w"] == pytest.approx(1.0)
    pairs = pairwise_tests(table, ["impact_velocity_m_s"]).set_index(["condition_a", "condition_b"])
    dg_ng = pairs.loc[("dg", "ng")]
    # six differences of one sign: exact two-sided p = 2 / 2^6
    assert dg_ng["n"] == 6
    assert dg_ng["p"] == pytest.approx(2 / 64)
    assert dg_ng["p_holm"] == pytest.approx(3 * 2 / 64)  # three equal p-values
    assert dg_ng["rank_biserial"] == pytest.approx(-1.0)
    diffs = [-(0.10 + 0.01 * i) for i in range(6)]  # dg - ng = -(0.1 + 0.01 i)
    assert dg_ng["cohen_dz"] == pytest.approx(statistics.fmean(diffs) / statistics.stdev(diffs))
    assert dg_ng["median_difference"] == pytest.approx(statistics.median(diffs))
    assert pairs.loc[("dg", "as"), "note"].startswith("n too small")


def test_too_few_participants_gives_notes_not_errors():
    table = pd.DataFrame(
        {
            "participant_id": ["a", "a", "b", "b"],
            "condition": ["dg", "ng", "dg", "ng"],
            "impact_velocity_m_s": [0.1, 0.2, 0.1, 0.3],
        }
    )
    friedman = friedman_tests(table, ["impact_velocity_m_s"]).iloc[0]
    assert math.isnan(friedman["p"]) and "needs >= 3 conditions" in friedman["note"]
    pair = pairwise_tests(table, ["impact_velocity_m_s"]).iloc[0]
    assert math.isnan(pair["p"]) and pair["note"].startswith("n too small")
    assert pair["median_difference"] == pytest.approx(-0.15)


def test_json_summary_is_strict_json_with_every_condition(study_dir):
    import json

    table = load_study(study_dir)
    summary = json_summary(table)
    text = json.dumps(summary, allow_nan=False)
    assert json.loads(text)["conditions"]["as"]["impact_velocity_m_s"]["std"] is None  # n = 1
    assert summary["trials"] == 21 and summary["unreached"] == 1 and summary["incomplete"] == 1
    assert set(summary["conditions"]) == {"dg", "ng", "apf", "as"}


def test_signed_rank_with_ties_by_hand():
    # d = a - b = [1, 2, 2, -3]: ranks of |d| 1, 2.5, 2.5, 4; R+ = 6, R- = 4. The 16 sign
    # patterns give R+ = 0, 1, 2.5, 2.5, 3.5, 3.5, 4, 5, 5, 6, 6.5, 6.5, 7.5, 7.5, 9, 10:
    # P(R+ <= 6) = 10/16, P(R+ >= 6) = 7/16, p = 2 * 7/16.
    statistic, p = wilcoxon_signed_rank([1.0, 2.0, 2.0, 0.0], [0.0, 0.0, 0.0, 3.0])
    assert (statistic, p) == (4.0, 0.875)
    # a zero difference changes nothing but the pattern count: the same test
    assert wilcoxon_signed_rank([1.0, 2.0, 2.0, 0.0, 5.0], [0.0, 0.0, 0.0, 3.0, 5.0]) == (4.0, 0.875)


def test_signed_rank_is_scipys_test():
    """The same statistic and p-value as scipy.stats.wilcoxon, to the bit, on small
    samples with ties and zeros (its permutation path, enumerated here at once; SciPy
    takes 0.2 s for each of those) and on samples it computes itself (no ties; more than
    13 pairs)."""
    import warnings

    from scipy import stats as scipy_stats

    rng = np.random.default_rng(7)
    for case in range(16):
        n = int(rng.integers(1, 18))
        a, b = (rng.integers(0, 4, n).astype(float) if case % 2 else np.round(rng.normal(size=n), 1)
                for _ in range(2))
        if not np.any(a != b):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = scipy_stats.wilcoxon(a, b)
        assert wilcoxon_signed_rank(a, b) == (float(expected.statistic), float(expected.pvalue)), (a, b)
