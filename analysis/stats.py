"""Statistics of a study table: per-condition summaries and paired comparisons.

- **Summary** per condition and metric, over trials (as the paper does: mean and
  standard deviation of the repetitions): n (finite values), mean, standard deviation
  (ddof = 1), standard error and the 95 % confidence interval of the mean from the
  t-distribution with n - 1 degrees of freedom. Booleans (``reached``, ``captured``) are
  summarised as rates. With several participants the trials are not independent; the
  paired tests below are the inference to trust.
- **Paired comparisons** per participant: each participant's mean per condition (NaN
  metric values, e.g. of unreached trials, are left out of that mean); the Friedman test
  across the conditions that at least ``MIN_PARTICIPANTS`` participants completed (with
  Kendall's W), and pairwise Wilcoxon signed-rank tests (two-sided, exact for small n)
  on the participants who did both conditions, Holm-corrected within each metric, with
  the matched-pairs rank-biserial correlation and Cohen's d_z as effect sizes. Fewer
  than ``MIN_PARTICIPANTS`` pairs gives a row with the note "n too small", not an error.
- **Per scenario** (:func:`scenario_json`): the same summary for each scenario's trials,
  with Wilson intervals for rates (``reached``, ``captured``, ``capture_rate``) and the
  outcome counts (:mod:`analysis.outcomes`), and the same paired tests on
  :data:`SCENARIO_TEST_METRICS`, Holm-corrected over all of the scenario's comparisons.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any, cast

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import stats as scipy_stats

from analysis.metrics import METRIC_NAMES, PAPER_METRICS
from analysis.outcomes import capture_value, ordered_outcomes

#: Metrics summarised per condition (every metric but the data-quality flag).
SUMMARY_METRICS: tuple[str, ...] = tuple(name for name in METRIC_NAMES if name != "complete")
#: Metrics compared across conditions by default.
TEST_METRICS: tuple[str, ...] = PAPER_METRICS + ("impact_normal_velocity_m_s", "peak_base_torque_n_m")
#: Fewest participants (pairs) for a test to be computed.
MIN_PARTICIPANTS = 3
CONFIDENCE = 0.95
#: Per-trial capture (1 or 0) from the logged outcome, or provisionally the kinematic
#: ``captured`` metric (:func:`analysis.outcomes.capture_value`); its mean is the capture rate.
CAPTURE_RATE = "capture_rate"
#: Metrics that are rates of a yes/no per trial (Wilson intervals in the per-scenario summary).
RATE_METRICS: frozenset[str] = frozenset({"reached", "captured", CAPTURE_RATE})
#: Metrics summarised per scenario and condition.
SCENARIO_METRICS: tuple[str, ...] = SUMMARY_METRICS + (CAPTURE_RATE,)
#: Metrics compared between conditions within each scenario (paired per participant).
SCENARIO_TEST_METRICS: tuple[str, ...] = (
    "impact_velocity_m_s",
    "time_to_reach_s",
    "mse_velocity_m2_s2",
    CAPTURE_RATE,
)
#: The paired test of :func:`pairwise_tests`, as named in the JSON comparisons.
PAIRED_TEST = "wilcoxon_signed_rank"

SUMMARY_COLUMNS = ("condition", "metric", "n", "mean", "std", "sem", "ci95_low", "ci95_high")
FRIEDMAN_COLUMNS = ("metric", "conditions", "n", "statistic", "p", "kendall_w", "note")
PAIRWISE_COLUMNS = (
    "metric",
    "condition_a",
    "condition_b",
    "n",
    "median_difference",
    "statistic",
    "p",
    "p_holm",
    "rank_biserial",
    "cohen_dz",
    "note",
)


#: The order in which the paper presents its conditions (DG, NG, APF, then AS), used
#: for tables and figures when the study does not give its own. Only an order: any
#: condition name found in the logs is analysed (the names belong to the trials'
#: condition registry, which analysis does not import; the logs carry them).
PAPER_ORDER: tuple[str, ...] = ("dg", "ng", "apf", "as")


def study_condition_order(design: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The conditions in the order the study's ``study.json`` gives them: its protocol's
    participant conditions, then its controller conditions (empty without a design)."""
    if not design:
        return ()
    protocol = design.get("protocol")
    source = protocol if isinstance(protocol, Mapping) else design
    order: list[str] = []
    for key in ("conditions", "controller_conditions"):
        values = source.get(key) or ()
        order += [str(value) for value in values if isinstance(value, str) and str(value) not in order]
    return tuple(order)


def ordered_conditions(conditions: Iterable[str], order: Sequence[str] = ()) -> list[str]:
    """The conditions present, in ``order`` (e.g. :func:`study_condition_order`), then in
    :data:`PAPER_ORDER`, then the rest sorted."""
    present = set(conditions)
    ranked = list(dict.fromkeys([*order, *PAPER_ORDER]))
    known = [name for name in ranked if name in present]
    return known + sorted(present - set(ranked))


def describe(values: ArrayLike) -> dict[str, float | int]:
    """n, mean, std (ddof 1), sem and the t-based 95 % CI of the finite values.

    std, sem and the CI are NaN for n < 2; everything but n is NaN for n = 0.
    """
    data = np.asarray(values, dtype=float)
    data = data[np.isfinite(data)]
    n = int(data.size)
    nan = float("nan")
    mean = float(data.mean()) if n else nan
    if n < 2:
        return {"n": n, "mean": mean, "std": nan, "sem": nan, "ci95_low": nan, "ci95_high": nan}
    std = float(data.std(ddof=1))
    sem = std / math.sqrt(n)
    half = float(scipy_stats.t.ppf(0.5 + CONFIDENCE / 2.0, n - 1)) * sem
    return {
        "n": n,
        "mean": mean,
        "std": std,
        "sem": sem,
        "ci95_low": mean - half,
        "ci95_high": mean + half,
    }


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a proportion ``successes / n`` (NaN, NaN for n = 0).

    With ``z`` the two-sided normal quantile and ``q = successes / n``:
    centre ``(q + z^2 / 2n) / (1 + z^2 / n)``, half-width
    ``z / (1 + z^2 / n) * sqrt(q (1 - q) / n + z^2 / 4n^2)``.
    """
    if n <= 0:
        return float("nan"), float("nan")
    z = float(scipy_stats.norm.ppf(0.5 + confidence / 2.0))
    q = successes / n
    denominator = 1.0 + z * z / n
    centre = (q + z * z / (2.0 * n)) / denominator
    half = z / denominator * math.sqrt(q * (1.0 - q) / n + z * z / (4.0 * n * n))
    # at q = 0 or 1 a bound is exactly 0 or 1; the formula leaves a rounding residue
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high


def describe_rate(values: ArrayLike) -> dict[str, float | int]:
    """:func:`describe` of yes/no values (1/0, NaN left out) with the Wilson 95 % interval."""
    data = np.asarray(values, dtype=float)
    data = data[np.isfinite(data)]
    result = describe(data)
    result["ci95_low"], result["ci95_high"] = wilson_interval(int(np.count_nonzero(data)), int(data.size))
    return result


def with_capture_rate(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of the study table with the :data:`CAPTURE_RATE` column (1.0 or 0.0 per trial)."""
    result = table.copy()
    result[CAPTURE_RATE] = [
        capture_value(str(outcome), bool(provisional), bool(captured))
        for outcome, provisional, captured in zip(
            table["outcome"], table["outcome_provisional"], table["captured"], strict=True
        )
    ]
    result[CAPTURE_RATE] = result[CAPTURE_RATE].astype(float)
    return result


def condition_summary(table: pd.DataFrame, metrics: Sequence[str] = SUMMARY_METRICS) -> pd.DataFrame:
    """Long table: one row per (condition, metric) with :func:`describe`'s columns."""
    rows: list[dict[str, Any]] = []
    for condition in ordered_conditions(table["condition"]):
        subset = table[table["condition"] == condition]
        for metric in metrics:
            rows.append({"condition": condition, "metric": metric, **describe(_numeric(subset[metric]))})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def _numeric(column: pd.Series) -> NDArray[np.float64]:
    return cast(NDArray[np.float64], pd.to_numeric(column, errors="coerce").astype(float).to_numpy())


def participant_means(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Participants x conditions: each participant's mean of ``metric`` per condition."""
    values = table[["participant_id", "condition"]].copy()
    values["value"] = _numeric(table[metric])
    pivot = values.pivot_table(index="participant_id", columns="condition", values="value", aggfunc="mean")
    return pivot.reindex(columns=ordered_conditions(pivot.columns))


def holm(pvalues: ArrayLike) -> NDArray[np.float64]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1; NaN kept).

    With the m finite p-values sorted ascending, ``p_(i)`` becomes
    ``max_{j <= i} min(1, (m - j + 1) p_(j))``.
    """
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = finite.size
    if m == 0:
        return adjusted
    order = finite[np.argsort(p[finite], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def rank_biserial(differences: ArrayLike) -> float:
    """Matched-pairs rank-biserial correlation ``(T+ - T-) / (T+ + T-)`` of nonzero differences.

    +1 when every pair is higher in the first condition, -1 when every pair is lower.
    """
    d = np.asarray(differences, dtype=float)
    d = d[np.isfinite(d) & (d != 0.0)]
    if d.size == 0:
        return float("nan")
    ranks = scipy_stats.rankdata(np.abs(d))
    positive = float(ranks[d > 0].sum())
    negative = float(ranks[d < 0].sum())
    return (positive - negative) / (positive + negative)


def cohen_dz(differences: ArrayLike) -> float:
    """Cohen's d_z: mean of the paired differences over their standard deviation (ddof 1)."""
    d = np.asarray(differences, dtype=float)
    d = d[np.isfinite(d)]
    if d.size < 2:
        return float("nan")
    std = float(d.std(ddof=1))
    if std == 0.0:
        return float("nan") if float(d.mean()) == 0.0 else math.copysign(math.inf, float(d.mean()))
    return float(d.mean()) / std


#: Up to this many pairs, a signed-rank test with ties or zeros takes its exact
#: permutation distribution (all 2^n sign flips), as SciPy's ``wilcoxon`` does.
EXACT_SIGNED_RANK_MAX_N = 13


def wilcoxon_signed_rank(a: ArrayLike, b: ArrayLike) -> tuple[float, float]:
    """The two-sided Wilcoxon signed-rank test of the paired samples ``a`` and ``b``:
    ``(statistic, p)`` as ``scipy.stats.wilcoxon(a, b)`` gives them (zeros dropped, ties
    averaged; the statistic ``min(R+, R-)``).

    SciPy takes the exact null distribution of ``R+`` for up to
    :data:`EXACT_SIGNED_RANK_MAX_N` pairs with ties or zero differences through its
    generic permutation test, one Python call per sign pattern: 0.44 s a test for 10
    pairs, 16 of the 18 s of ``analyze --json`` on a 1,080-trial sweep. Here the same
    distribution is enumerated at once (``R+`` of every pattern of signs of the non-zero
    differences, each as likely; the zeros' flips only repeat it) with SciPy's p-value
    rule (two-sided: twice the smaller tail, at most 1). Other samples go to SciPy.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    d = x - y
    nonzero = d[d != 0.0]
    magnitudes = np.abs(nonzero)
    ties_or_zeros = nonzero.size < d.size or np.unique(magnitudes).size < magnitudes.size
    if not (ties_or_zeros and nonzero.size > 0 and d.size <= EXACT_SIGNED_RANK_MAX_N):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", UserWarning)
            result = scipy_stats.wilcoxon(x, y, alternative="two-sided")
        return float(result.statistic), float(result.pvalue)
    ranks = scipy_stats.rankdata(magnitudes)  # average ranks of |d| over the non-zero differences
    r_plus = float(ranks[nonzero > 0.0].sum())
    r_minus = float(ranks[nonzero < 0.0].sum())
    patterns = (np.arange(2 ** nonzero.size)[:, None] >> np.arange(nonzero.size)) & 1
    null = patterns @ ranks  # R+ of every sign pattern (sums of halves: exact in floats)
    gamma = abs(np.finfo(float).eps * 100 * r_plus)
    lower = np.count_nonzero(null <= r_plus + gamma) / null.size
    upper = np.count_nonzero(null >= r_plus - gamma) / null.size
    return min(r_plus, r_minus), min(1.0, 2.0 * min(lower, upper))


def friedman_tests(table: pd.DataFrame, metrics: Sequence[str] = TEST_METRICS) -> pd.DataFrame:
    """Friedman test per metric across the conditions with enough participants."""
    rows = []
    for metric in metrics:
        means = participant_means(table, metric)
        usable = [c for c in means.columns if means[c].notna().sum() >= MIN_PARTICIPANTS]
        complete = means[usable].dropna()
        row: dict[str, Any] = {
            "metric": metric,
            "conditions": ",".join(usable),
            "n": int(len(complete)),
            "statistic": float("nan"),
            "p": float("nan"),
            "kendall_w": float("nan"),
            "note": "",
        }
        if len(usable) < 3:
            row["note"] = f"needs >= 3 conditions with >= {MIN_PARTICIPANTS} participants"
        elif len(complete) < MIN_PARTICIPANTS:
            row["note"] = f"n too small ({len(complete)} < {MIN_PARTICIPANTS} participants)"
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                result = scipy_stats.friedmanchisquare(*(complete[c].to_numpy() for c in usable))
            statistic = float(result.statistic)
            row.update(
                statistic=statistic,
                p=float(result.pvalue),
                kendall_w=statistic / (len(complete) * (len(usable) - 1)),
            )
            if not math.isfinite(statistic):
                row["note"] = "all participants tied"
        rows.append(row)
    return pd.DataFrame(rows, columns=list(FRIEDMAN_COLUMNS))


def pairwise_tests(table: pd.DataFrame, metrics: Sequence[str] = TEST_METRICS) -> pd.DataFrame:
    """Wilcoxon signed-rank test for every pair of conditions, Holm-corrected per metric.

    Differences are ``condition_a - condition_b`` of the participants' means.
    """
    frames = []
    for metric in metrics:
        means = participant_means(table, metric)
        rows = [_pairwise_row(metric, means, a, b) for a, b in combinations(means.columns, 2)]
        frame = pd.DataFrame(rows, columns=list(PAIRWISE_COLUMNS))
        frame["p_holm"] = holm(frame["p"].to_numpy(dtype=float)) if len(frame) else []
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=list(PAIRWISE_COLUMNS))
    return pd.concat(frames, ignore_index=True)


def json_summary(table: pd.DataFrame, metrics: Sequence[str] = SUMMARY_METRICS) -> dict[str, Any]:
    """The study summary as a strictly JSON-serialisable dict (NaN and inf become None).

    Shape: ``{"conditions": {condition: {metric: {"mean", "std", "n", "ci95_low",
    "ci95_high"}}}, "trials": N, "unreached": N, "incomplete": N, "provisional_outcomes":
    N, "scenarios": ...}``; the paper's four conditions (:data:`PAPER_ORDER`) are always
    present (n = 0 when a condition has no trial), and any other condition found in the
    table after them. ``conditions`` pools every scenario; ``scenarios`` is
    :func:`scenario_json` (only for a study table, which has the outcome columns).
    """
    summary = condition_summary(table, metrics)
    conditions = ordered_conditions(list(PAPER_ORDER) + list(table["condition"]))
    result: dict[str, Any] = {condition: {} for condition in conditions}
    empty = describe([])
    for condition in conditions:
        for metric in metrics:
            match = summary[(summary["condition"] == condition) & (summary["metric"] == metric)]
            values = cast(dict[str, Any], match.iloc[0].to_dict()) if len(match) else {"metric": metric, **empty}
            result[condition][metric] = {
                key: _json_number(values[key]) for key in ("mean", "std", "n", "ci95_low", "ci95_high")
            }
    reached = table["reached"].astype(bool) if len(table) else pd.Series(dtype=bool)
    complete = table["complete"].astype(bool) if len(table) else pd.Series(dtype=bool)
    result_json: dict[str, Any] = {
        "conditions": result,
        "trials": int(len(table)),
        "unreached": int((~reached).sum()),
        "incomplete": int((~complete).sum()),
    }
    if "outcome" in table.columns:
        result_json["provisional_outcomes"] = int(table["outcome_provisional"].astype(bool).sum())
        result_json["scenarios"] = scenario_json(table)
    return result_json


def scenario_comparisons(table: pd.DataFrame, metrics: Sequence[str] = SCENARIO_TEST_METRICS) -> pd.DataFrame:
    """:func:`pairwise_tests` of one scenario's trials, Holm-corrected over all its rows.

    The table needs the :data:`CAPTURE_RATE` column if that metric is asked for (see
    :func:`with_capture_rate`); each participant's capture rate per condition is then
    the paired unit. Adds the column ``test``: :data:`PAIRED_TEST` where at least one
    participant did both conditions, empty where none did (not compared).
    """
    frame = pairwise_tests(table, metrics)
    frame["p_holm"] = holm(frame["p"].to_numpy(dtype=float)) if len(frame) else []
    frame["test"] = [PAIRED_TEST if n > 0 else "" for n in frame["n"]]
    frame.loc[frame["n"] == 0, "note"] = "no participant did both conditions (not paired)"
    return frame


def scenario_summaries(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per scenario (sorted by name): its trials with the :data:`CAPTURE_RATE` column."""
    table = with_capture_rate(table)
    return {str(name): table[table["scenario"] == name] for name in sorted(set(table["scenario"]))}


def scenario_condition_stats(
    table: pd.DataFrame, condition: str, metrics: Sequence[str] = SCENARIO_METRICS
) -> dict[str, dict[str, Any]]:
    """:func:`describe` (or :func:`describe_rate` for :data:`RATE_METRICS`) of each metric
    over ``condition``'s trials of ``table``, keyed by metric."""
    subset = table[table["condition"] == condition]
    return {
        metric: (describe_rate if metric in RATE_METRICS else describe)(_numeric(subset[metric]))
        for metric in metrics
    }


def scenario_json(table: pd.DataFrame) -> dict[str, Any]:
    """The per-scenario part of :func:`json_summary` (strict JSON: NaN is None).

    Shape: ``{scenario: {"trials": N, "conditions": {condition: {metric: {"mean", "std",
    "n", "ci95_low", "ci95_high"}, ..., "outcomes": {outcome: count}}}, "comparisons":
    [{"metric", "a", "b", "test", "p", "p_holm", "effect_size", "n", "note"}]}}``. Every
    condition of the pooled summary is present in every scenario (n = 0 if not run
    there); the outcome counts list every outcome seen in the scenario (0 where a
    condition has none); ``effect_size`` is the matched-pairs rank-biserial correlation
    of a - b.
    """
    conditions = ordered_conditions(list(PAPER_ORDER) + list(table["condition"]))
    result: dict[str, Any] = {}
    for name, subset in scenario_summaries(table).items():
        outcomes = ordered_outcomes(subset["outcome"])
        per_condition: dict[str, Any] = {}
        for condition in conditions:
            stats = scenario_condition_stats(subset, condition)
            entry: dict[str, Any] = {
                metric: {key: _json_number(values[key]) for key in ("mean", "std", "n", "ci95_low", "ci95_high")}
                for metric, values in stats.items()
            }
            counts = subset.loc[subset["condition"] == condition, "outcome"].value_counts()
            entry["outcomes"] = {outcome: int(counts.get(outcome, 0)) for outcome in outcomes}
            per_condition[condition] = entry
        comparisons = [
            {
                "metric": row["metric"],
                "a": row["condition_a"],
                "b": row["condition_b"],
                "test": row["test"] or None,
                "p": _json_number(row["p"]),
                "p_holm": _json_number(row["p_holm"]),
                "effect_size": _json_number(row["rank_biserial"]),
                "n": int(row["n"]),
                "note": row["note"],
            }
            for row in cast(list[dict[str, Any]], scenario_comparisons(subset).to_dict("records"))
        ]
        result[name] = {"trials": int(len(subset)), "conditions": per_condition, "comparisons": comparisons}
    return result


def _json_number(value: Any) -> float | int | None:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    number = float(value)
    return number if math.isfinite(number) else None


def _pairwise_row(metric: str, means: pd.DataFrame, a: str, b: str) -> dict[str, Any]:
    pairs = means[[a, b]].dropna()
    differences = (pairs[a] - pairs[b]).to_numpy(dtype=float)
    nan = float("nan")
    row: dict[str, Any] = {
        "metric": metric,
        "condition_a": a,
        "condition_b": b,
        "n": int(differences.size),
        "median_difference": float(np.median(differences)) if differences.size else nan,
        "statistic": nan,
        "p": nan,
        "p_holm": nan,
        "rank_biserial": nan,
        "cohen_dz": nan,
        "note": "",
    }
    if differences.size < MIN_PARTICIPANTS:
        row["note"] = f"n too small ({differences.size} < {MIN_PARTICIPANTS} participants)"
        return row
    row.update(rank_biserial=rank_biserial(differences), cohen_dz=cohen_dz(differences))
    if not np.any(differences != 0.0):
        row["note"] = "all differences zero"
        return row
    statistic, p = wilcoxon_signed_rank(pairs[a].to_numpy(), pairs[b].to_numpy())
    row.update(statistic=statistic, p=p)
    return row
