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
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import stats as scipy_stats

from analysis.metrics import METRIC_NAMES, PAPER_METRICS
from capture_trainer.catalog import CONDITIONS

#: Metrics summarised per condition (every metric but the data-quality flag).
SUMMARY_METRICS: tuple[str, ...] = tuple(name for name in METRIC_NAMES if name != "complete")
#: Metrics compared across conditions by default.
TEST_METRICS: tuple[str, ...] = PAPER_METRICS + ("impact_normal_velocity_m_s", "peak_base_torque_n_m")
#: Fewest participants (pairs) for a test to be computed.
MIN_PARTICIPANTS = 3
CONFIDENCE = 0.95

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


def ordered_conditions(conditions: Iterable[str]) -> list[str]:
    """Conditions in the catalogue's order (dg, ng, apf, as), unknown ones after, sorted."""
    present = set(conditions)
    known = [name for name in CONDITIONS if name in present]
    return known + sorted(present - set(CONDITIONS))


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


def condition_summary(table: pd.DataFrame, metrics: Sequence[str] = SUMMARY_METRICS) -> pd.DataFrame:
    """Long table: one row per (condition, metric) with :func:`describe`'s columns."""
    rows: list[dict[str, Any]] = []
    for condition in ordered_conditions(table["condition"]):
        subset = table[table["condition"] == condition]
        for metric in metrics:
            rows.append({"condition": condition, "metric": metric, **describe(_numeric(subset[metric]))})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def _numeric(column: pd.Series) -> NDArray[np.float64]:
    return pd.to_numeric(column, errors="coerce").astype(float).to_numpy()


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
    "ci95_high"}}}, "trials": N, "unreached": N, "incomplete": N}``; the catalogue's four
    conditions are always present (n = 0 when a condition has no trial).
    """
    summary = condition_summary(table, metrics)
    conditions = ordered_conditions(list(CONDITIONS) + list(table["condition"]))
    result: dict[str, Any] = {condition: {} for condition in conditions}
    empty = describe([])
    for condition in conditions:
        for metric in metrics:
            match = summary[(summary["condition"] == condition) & (summary["metric"] == metric)]
            values = match.iloc[0].to_dict() if len(match) else {"metric": metric, **empty}
            result[condition][metric] = {
                key: _json_number(values[key]) for key in ("mean", "std", "n", "ci95_low", "ci95_high")
            }
    reached = table["reached"].astype(bool) if len(table) else pd.Series(dtype=bool)
    complete = table["complete"].astype(bool) if len(table) else pd.Series(dtype=bool)
    return {
        "conditions": result,
        "trials": int(len(table)),
        "unreached": int((~reached).sum()),
        "incomplete": int((~complete).sum()),
    }


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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (RuntimeWarning, UserWarning))
        result = scipy_stats.wilcoxon(pairs[a].to_numpy(), pairs[b].to_numpy(), alternative="two-sided")
    row.update(statistic=float(result.statistic), p=float(result.pvalue))
    return row
