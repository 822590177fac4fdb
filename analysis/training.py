"""Training and transfer: learning curves, retention and transfer effects, per group.

For a study of a phased design (``study.json``'s protocol has ``phases``: e.g. the
built-in ``training-transfer``): each trial's phase, block and group come from the
study's plan (``study.json`` ``trials``), its guidance authority from its metadata
(``guidance_authority``).

The unit of analysis is the **participant** (groups are between subjects):

- **Learning curves** (:func:`learning_curves`): per group and per block of each phase,
  each participant's mean impact velocity (its reached trials) and capture rate, then
  the mean over the group's participants with the 95 % confidence interval of that mean
  from the t-distribution with n − 1 degrees of freedom (``analysis.stats.describe``).
- **Retention effect** (:func:`effects`): per participant, mean in the retention phase
  minus mean in the pre-test (both unguided, the same scenarios); per group the mean
  difference with its t interval (a paired design: the interval of the mean
  within-participant difference).
- **Transfer effect**: transfer scenarios differ from the pre-test's, so the transfer
  phase is compared *between groups* (over all its scenarios, and per scenario when it
  has several: ``transfer: <scenario>``): per group the mean transfer score, and its
  difference from the reference group (the group without guidance, else the first)
  with Welch's t interval (unequal variances, Welch–Satterthwaite degrees of freedom).
  The retention effect is compared with the reference group the same way.

All intervals are t intervals (not bootstrap); with few participants per group they are
wide, and say so. A capture rate's interval is clipped to what a rate (``[0, 1]``) or a
difference of rates (``[-1, 1]``) can be. For impact velocity lower is better; for the capture rate higher.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from numpy.typing import ArrayLike
from scipy import stats as scipy_stats

from analysis.figures import new_figure
from analysis.stats import CAPTURE_RATE, CONFIDENCE, describe, with_capture_rate
from analysis.study import Study, trial_metadata

#: The metrics of the learning curves and effects (lower and higher is better).
TRAINING_METRICS: tuple[str, ...] = ("impact_velocity_m_s", CAPTURE_RATE)
#: Phase names the effects look for (``trials/protocols/training-transfer.toml``).
PRE_TEST, RETENTION, TRANSFER = "pre-test", "retention", "transfer"
CURVE_COLUMNS = ("group", "phase", "block", "step", "metric", "n", "mean", "ci95_low", "ci95_high",
                 "authority_mean")
EFFECT_COLUMNS = ("effect", "group", "metric", "n", "mean", "ci95_low", "ci95_high", "vs", "difference",
                  "diff_ci95_low", "diff_ci95_high", "method")


def is_training_design(design: Mapping[str, Any] | None) -> bool:
    """True when ``study.json`` describes a phased design (it has ``protocol.phases``)."""
    protocol = (design or {}).get("protocol")
    return isinstance(protocol, Mapping) and bool(protocol.get("phases"))


def simulated(table: pd.DataFrame) -> bool:
    """True when any participant of the table is simulated (not ``human``)."""
    kinds = set(table.loc[table["participant_id"] != "controller", "participant_kind"].astype(str))
    return bool(kinds - {"human"})


def training_table(study: Study) -> pd.DataFrame:
    """The study table of the participants' trials with ``phase``, ``block``, ``group``,
    ``step`` (the block's position over all phases, 0-based), ``guidance_authority`` and
    the capture rate column; controller trials and trials not in the plan are left out.
    """
    design = study.design or {}
    planned = {str(t.get("trial_id")): t for t in design.get("trials", []) if isinstance(t, Mapping)}
    phase_rows = [p for p in (design.get("protocol") or {}).get("phases", []) if isinstance(p, Mapping)]
    phases = [str(p.get("name")) for p in phase_rows]
    table = with_capture_rate(study.table)
    table = table[table["trial_id"].isin(planned) & (table["participant_id"] != "controller")].copy()
    table["phase"] = [str(planned[t].get("phase", "")) for t in table["trial_id"]]
    table["block"] = [int(planned[t].get("block", 0)) for t in table["trial_id"]]
    table["group"] = [str(planned[t].get("group", "")) for t in table["trial_id"]]
    table = table[table["phase"] != ""]
    offsets: dict[str, int] = {}
    total = 0
    for row in phase_rows:  # a phase's first block comes after every block of the phases before
        offsets[str(row.get("name"))] = total
        total += int(row.get("blocks", 1))
    table["step"] = [offsets.get(p, total) + b for p, b in zip(table["phase"], table["block"], strict=True)]
    authority = []
    for trial_id in table["trial_id"]:
        value = trial_metadata(study, trial_id).get("guidance_authority") if trial_id in study.paths else None
        authority.append(float(value) if isinstance(value, (int, float)) else math.nan)
    table["guidance_authority"] = authority
    table["phase_order"] = [phases.index(p) if p in phases else len(phases) for p in table["phase"]]
    return table.sort_values(["phase_order", "block", "participant_id", "trial_id"]).reset_index(drop=True)


def _participant_means(table: pd.DataFrame, metric: str, by: Sequence[str]) -> pd.DataFrame:
    """Each participant's mean of ``metric`` per ``by`` (NaN values left out)."""
    values = table[["participant_id", *by]].copy()
    values["value"] = pd.to_numeric(table[metric], errors="coerce").astype(float)
    means = values.groupby(["participant_id", *by], as_index=False, sort=False)["value"].mean()
    return cast(pd.DataFrame, means)


def learning_curves(table: pd.DataFrame, metrics: Sequence[str] = TRAINING_METRICS) -> pd.DataFrame:
    """Long table (:data:`CURVE_COLUMNS`): per group, phase, block and metric, the mean
    over the group's participants of their block means, with the t 95 % interval;
    ``authority_mean`` is the mean guidance authority of the block's trials (NaN for
    blocks without guidance)."""
    rows: list[dict[str, Any]] = []
    for metric in metrics:
        means = _participant_means(table, metric, ("group", "phase", "block", "step"))
        for (group, phase, block, step), subset in means.groupby(["group", "phase", "block", "step"], sort=False):
            trials = table[(table["group"] == group) & (table["phase"] == phase) & (table["block"] == block)]
            authority = trials["guidance_authority"].to_numpy(dtype=float)
            finite = authority[np.isfinite(authority)]
            stats = _clipped(describe(subset["value"].to_numpy(dtype=float)), metric, False)
            rows.append({"group": group, "phase": phase, "block": int(cast(int, block)),
                         "step": int(cast(int, step)), "metric": metric,
                         "n": stats["n"], "mean": stats["mean"], "ci95_low": stats["ci95_low"],
                         "ci95_high": stats["ci95_high"],
                         "authority_mean": float(finite.mean()) if finite.size else math.nan})
    curves = pd.DataFrame(rows, columns=list(CURVE_COLUMNS))
    return curves.sort_values(["metric", "group", "step"]).reset_index(drop=True)


def welch_interval(a: ArrayLike, b: ArrayLike, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """Mean of ``a`` minus mean of ``b`` with Welch's t interval (finite values only):
    ``d ± t_{ν} sqrt(s_a²/n_a + s_b²/n_b)``, ``ν`` by Welch–Satterthwaite. NaN bounds
    when a side has fewer than 2 values (or both have no spread)."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if not x.size or not y.size:
        return math.nan, math.nan, math.nan
    difference = float(x.mean() - y.mean())
    if x.size < 2 or y.size < 2:
        return difference, math.nan, math.nan
    va, vb = float(x.var(ddof=1)) / x.size, float(y.var(ddof=1)) / y.size
    se = math.sqrt(va + vb)
    if se == 0.0:
        return difference, difference, difference
    dof = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2.0, dof)) * se
    return difference, difference - half, difference + half


def reference_group(table: pd.DataFrame) -> str:
    """The group the others are compared with: the one whose training is unguided (its
    trials in the non-test phases are all ``ng``), else the first group."""
    groups = list(dict.fromkeys(table["group"]))
    training = table[~table["phase"].isin((PRE_TEST, RETENTION, TRANSFER))]
    for group in groups:
        conditions = set(training.loc[training["group"] == group, "condition"])
        if conditions == {"ng"}:
            return str(group)
    return str(groups[0]) if groups else ""


def effects(table: pd.DataFrame, metrics: Sequence[str] = TRAINING_METRICS) -> pd.DataFrame:
    """Retention (retention − pre-test, per participant) and transfer (the transfer
    phase's mean) per group and metric, each with its t 95 % interval, and the difference
    from the reference group with Welch's interval (:data:`EFFECT_COLUMNS`)."""
    reference = reference_group(table)
    rows: list[dict[str, Any]] = []
    for metric in metrics:
        means = _participant_means(table, metric, ("group", "phase"))
        pivot = means.pivot_table(index=["participant_id", "group"], columns="phase", values="value",
                                  aggfunc="mean").reset_index()
        per_group: dict[str, dict[str, np.ndarray]] = {}
        for group, subset in pivot.groupby("group", sort=False):
            values: dict[str, np.ndarray] = {}
            if PRE_TEST in subset and RETENTION in subset:
                values["retention"] = (subset[RETENTION] - subset[PRE_TEST]).to_numpy(dtype=float)
            if TRANSFER in subset:
                values["transfer"] = subset[TRANSFER].to_numpy(dtype=float)
            per_group[str(group)] = values
        names = ["retention", "transfer"]
        for scenario in _transfer_scenarios(table):  # each unseen scenario on its own too
            name = f"transfer: {scenario}"
            names.append(name)
            subset = table[(table["phase"] == TRANSFER) & (table["scenario"] == scenario)]
            for group, rows_of in _participant_means(subset, metric, ("group",)).groupby("group", sort=False):
                per_group.setdefault(str(group), {})[name] = rows_of["value"].to_numpy(dtype=float)
        for effect in names:
            for group, values in per_group.items():
                if effect not in values:
                    continue
                stats = _clipped(describe(values[effect]), metric, effect == "retention")
                row: dict[str, Any] = {"effect": effect, "group": group, "metric": metric, "n": stats["n"],
                                       "mean": stats["mean"], "ci95_low": stats["ci95_low"],
                                       "ci95_high": stats["ci95_high"], "vs": "", "difference": math.nan,
                                       "diff_ci95_low": math.nan, "diff_ci95_high": math.nan,
                                       "method": "t (paired: within-participant differences)"
                                       if effect == "retention" else "t (participants' means)"}
                if group != reference and effect in per_group.get(reference, {}):
                    difference, low, high = welch_interval(values[effect], per_group[reference][effect])
                    if metric == CAPTURE_RATE:  # a difference of rates lies in [-1, 1]
                        low, high = max(low, -1.0), min(high, 1.0)
                    row.update(vs=reference, difference=difference, diff_ci95_low=low, diff_ci95_high=high)
                    row["method"] += "; difference: Welch t"
                rows.append(row)
    return pd.DataFrame(rows, columns=list(EFFECT_COLUMNS))


def _clipped(stats: dict[str, Any], metric: str, difference: bool) -> dict[str, Any]:
    """A rate's interval clipped to what a rate (``[0, 1]``) or a difference of rates
    (``[-1, 1]``) can be; other metrics unchanged."""
    if metric != CAPTURE_RATE:
        return stats
    low = -1.0 if difference else 0.0
    return {**stats, "ci95_low": max(stats["ci95_low"], low), "ci95_high": min(stats["ci95_high"], 1.0)}


def _transfer_scenarios(table: pd.DataFrame) -> list[str]:
    """The transfer phase's scenarios, when there are several (else none: the phase's
    effect is the scenario's)."""
    if "scenario" not in table:
        return []
    scenarios = list(dict.fromkeys(table.loc[table["phase"] == TRANSFER, "scenario"].astype(str)))
    return scenarios if len(scenarios) > 1 else []


#: Axis labels of the learning-curve panels.
_LABELS = {"impact_velocity_m_s": "impact velocity [m/s] (lower is better)",
           CAPTURE_RATE: "capture rate (higher is better)"}


def learning_curve_figure(curves: pd.DataFrame, table: pd.DataFrame, simulated_participants: bool) -> Figure:
    """One panel per metric: each group's mean per block over all phases with its 95 %
    interval (error bars), phases separated by dotted lines and named on the x axis."""
    metrics = list(dict.fromkeys(curves["metric"]))
    figure = new_figure(4.2 * max(1, len(metrics)), 3.6)
    groups = list(dict.fromkeys(table["group"]))
    colours = dict(zip(groups, ("tab:blue", "tab:purple", "tab:red", "tab:green", "tab:orange", "tab:gray") * 2))
    steps = table[["step", "phase", "block"]].drop_duplicates().sort_values("step")
    for index, metric in enumerate(metrics):
        axes = figure.add_subplot(1, len(metrics), index + 1)
        for offset, group in enumerate(groups):
            rows = curves[(curves["metric"] == metric) & (curves["group"] == group)].sort_values("step")
            x = rows["step"].to_numpy(dtype=float) + 0.08 * (offset - (len(groups) - 1) / 2)
            mean = rows["mean"].to_numpy(dtype=float)
            low = mean - rows["ci95_low"].to_numpy(dtype=float)
            high = rows["ci95_high"].to_numpy(dtype=float) - mean
            error = np.nan_to_num(np.vstack([low, high]), nan=0.0)
            for phase in dict.fromkeys(rows["phase"]):
                mask = (rows["phase"] == phase).to_numpy()
                axes.errorbar(x[mask], mean[mask], yerr=error[:, mask], marker="o", markersize=4, capsize=3,
                              color=colours[group], label=group if phase == rows["phase"].iloc[0] else None)
        previous = None
        for step, phase in zip(steps["step"], steps["phase"], strict=True):
            if previous is not None and phase != previous:
                axes.axvline(step - 0.5, color="0.6", linestyle=":", linewidth=0.8)
            previous = phase
        labels = [f"{p}\n{b + 1}" for p, b in zip(steps["phase"], steps["block"], strict=True)]
        axes.set_xticks(steps["step"].tolist(), labels, fontsize=6)
        axes.set_ylabel(_LABELS.get(metric, metric), fontsize=8)
        axes.grid(True, axis="y", linewidth=0.3)
        if metric == CAPTURE_RATE:
            axes.set_ylim(-0.05, 1.05)
        axes.legend(fontsize=7)
    who = "simulated participants (the model's behaviour)" if simulated_participants else "participants"
    figure.suptitle(f"Learning curves per group: mean over {who} per block, 95 % t interval", fontsize=9)
    return figure


def training_json(table: pd.DataFrame) -> dict[str, Any]:
    """Curves and effects as plain JSON values (NaN as None)."""
    def clean(frame: pd.DataFrame) -> list[dict[str, Any]]:
        records = cast(list[dict[str, Any]], frame.astype(object).to_dict("records"))
        def plain(value: Any) -> Any:
            value = value.item() if isinstance(value, np.generic) else value
            return None if isinstance(value, float) and not math.isfinite(value) else value

        return [{k: plain(v) for k, v in r.items()} for r in records]

    return {"simulated": simulated(table), "reference_group": reference_group(table),
            "learning_curves": clean(learning_curves(table)), "effects": clean(effects(table))}
