"""The delay study: capture against the one-way delay, per compensator and guidance.

A sweep (``trials.sweep``; the built-in ``delay``) over ``delay.delay_s`` (and usually
``delay.compensator``) is a delay study. Per guidance condition, compensator and delay
(and pooled over the conditions, ``"all"``) this module gives the mean and 95 %
confidence interval of

- ``impact_velocity_m_s``: at the first reach, over the trials that reached (t interval);
- ``capture_rate``: captured trials / trials (Wilson interval);
- ``mse_slave_force_n2``: Yang & Konno's slave force MSE (their eq. 11) over the window
  from the first contact, over the trials with a contact (t interval);
- ``felt_force_mse_n2``: the MSE of the contact force the hand was given (in the slave's
  newtons) against the slave's, over the same window (``analysis.metrics``);

and says which compensator wins at which delay: the best mean (lowest, highest for the
capture rate), compensators within a relative 1e-9 of it tied with it, and whether its
interval is clear of the runner-up's. Everything is computed from the per-trial table
(``analysis.sweep.sweep_table``); the figures draw one line per compensator against the
delay, one panel per guidance condition and one pooled.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.figures import condition_colour, new_figure, png_bytes
from analysis.stats import describe, describe_rate

DELAY_KEY = "delay.delay_s"
COMPENSATOR_KEY = "delay.compensator"
#: The pooled "condition" (every guidance condition together).
POOLED = "all"
#: (metric, label, better): what the study compares and which way is better.
DELAY_METRICS: tuple[tuple[str, str, str], ...] = (
    ("impact_velocity_m_s", "impact velocity [m/s]", "lower"),
    ("capture_rate", "capture rate", "higher"),
    ("mse_slave_force_n2", "slave force MSE (eq. 11) [N²]", "lower"),
    ("felt_force_mse_n2", "felt-force error MSE [N²]", "lower"),
)
#: Relative difference below which two means are a tie.
TIE_TOLERANCE = 1e-9
COMPENSATOR_COLOURS = {"none": "tab:red", "predictive": "tab:blue", "passivity": "tab:green"}
#: Files ``write_delay_results`` writes into the sweep folder.
FINDINGS_FILE = "delay-findings.txt"


def is_delay_study(design: Mapping[str, Any] | None) -> bool:
    """A sweep design (``sweep.json``) that sweeps the delay."""
    return bool(design) and DELAY_KEY in (design or {}).get("parameters", ())


def delay_table(swept: pd.DataFrame) -> pd.DataFrame:
    """The sweep table (``analysis.sweep.sweep_table``) with ``delay_s`` and
    ``compensator`` columns (a compensator that is not swept is ``none`` unless the
    column says otherwise) and ``capture_rate`` (1 or 0 per trial)."""
    table = swept.copy()
    table["delay_s"] = table[f"sweep:{DELAY_KEY}"].astype(float)
    column = f"sweep:{COMPENSATOR_KEY}"
    table["compensator"] = table[column].astype(str) if column in table.columns else "none"
    if "capture_rate" not in table.columns:
        table["capture_rate"] = table["captured"].astype(float)
    return table


def _ordered(values: Iterable[str]) -> list[str]:
    known = list(COMPENSATOR_COLOURS)
    present = list(dict.fromkeys(values))
    return [name for name in known if name in present] + sorted(set(present) - set(known))


def cell_stats(cells: pd.DataFrame, metrics: Sequence[tuple[str, str, str]] = DELAY_METRICS) -> pd.DataFrame:
    """One row per (condition, compensator, delay, metric): n, mean, ci95_low, ci95_high
    (conditions as in the table, plus :data:`POOLED`)."""
    rows: list[dict[str, Any]] = []
    pooled = cells.assign(condition=POOLED)
    for frame in (cells, pooled):
        for (condition, compensator, delay), group in frame.groupby(["condition", "compensator", "delay_s"]):
            for metric, _, _ in metrics:
                if metric not in group.columns:
                    continue
                values = group[metric].to_numpy(dtype=float)
                described = describe_rate(values) if metric == "capture_rate" else describe(values)
                rows.append({"condition": str(condition), "compensator": str(compensator), "delay_s": float(str(delay)),
                             "metric": metric, "n": int(described["n"]), "mean": float(described["mean"]),
                             "ci95_low": float(described["ci95_low"]), "ci95_high": float(described["ci95_high"])})
    return pd.DataFrame(rows, columns=["condition", "compensator", "delay_s", "metric", "n", "mean", "ci95_low",
                                       "ci95_high"])


@dataclass(frozen=True)
class Win:
    """Which compensator wins one (metric, condition, delay) cell.

    Attributes:
        best: the winner, or the winners tied on the best mean (every compensator with a
            mean: all equal); empty when no compensator has a mean (e.g. none reached).
        means, n: per compensator, its mean and sample size (means NaN left out).
        clear: the winner's 95 % interval does not overlap the runner-up's (False for a
            tie, and when there is no runner-up or an interval is undefined).
    """

    metric: str
    condition: str
    delay_s: float
    best: tuple[str, ...]
    means: dict[str, float]
    n: dict[str, int]
    clear: bool


def _tied(a: float, b: float) -> bool:
    return abs(a - b) <= TIE_TOLERANCE * max(1.0, abs(a), abs(b))


def winners(stats: pd.DataFrame, metrics: Sequence[tuple[str, str, str]] = DELAY_METRICS) -> list[Win]:
    """The winner of every (metric, condition, delay) cell of :func:`cell_stats`."""
    wins: list[Win] = []
    for metric, _, better in metrics:
        sign = 1.0 if better == "lower" else -1.0
        of_metric = stats[stats["metric"] == metric]
        for (condition, delay), cell in of_metric.groupby(["condition", "delay_s"]):
            cell = cell[np.isfinite(cell["mean"].to_numpy(dtype=float))]
            ranked = sorted(cell.itertuples(index=False), key=lambda row: (sign * row.mean, row.compensator))
            means = {row.compensator: float(row.mean) for row in ranked}
            counts = {row.compensator: int(row.n) for row in ranked}
            if not ranked:
                wins.append(Win(metric, str(condition), float(str(delay)), (), means, counts, False))
                continue
            top = ranked[0]
            best = tuple(row.compensator for row in ranked if _tied(float(row.mean), float(top.mean)))
            rest = [row for row in ranked if row.compensator not in best]
            clear = False
            if len(best) == 1 and rest:
                runner = rest[0]
                bounds = (top.ci95_low, top.ci95_high, runner.ci95_low, runner.ci95_high)
                if all(math.isfinite(b) for b in bounds):
                    clear = top.ci95_high < runner.ci95_low if sign > 0 else top.ci95_low > runner.ci95_high
            wins.append(Win(metric, str(condition), float(str(delay)), best, means, counts, clear))
    return wins


def _number(value: float) -> str:
    return "0" if abs(value) < 1e-12 else f"{value:.3g}"


def _delays(values: Iterable[float]) -> str:
    items = [f"{value:g}" for value in values]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _verdict(win: Win, everyone: int) -> str:
    """The winner's words: a name, ``a = b`` (tied), ``all equal``, ``only a`` (the only
    compensator with data, e.g. the only one that reached) or ``no data``."""
    if not win.best:
        return "no data"
    if len(win.best) > 1:
        return "all equal" if len(win.best) == everyone else " = ".join(win.best)
    return f"only {win.best[0]}" if len(win.means) == 1 and everyone > 1 else win.best[0]


def findings(wins: Sequence[Win], condition: str = POOLED,
             metrics: Sequence[tuple[str, str, str]] = DELAY_METRICS) -> list[str]:
    """One sentence per metric for ``condition`` (default: pooled): which compensator wins
    at which delays, then every delay's means (the winner first; ``(CI not clear of the
    runner-up's)`` when its 95 % interval overlaps the runner-up's or one is undefined)."""
    lines: list[str] = []
    for metric, label, better in metrics:
        found = _winners(wins, metric, condition)
        if found is None:  # no data at any delay (e.g. no contact feedback)
            continue
        cells, summary = found
        details = []
        for win in cells:
            shown = [name for name in win.best] + [name for name in win.means if name not in win.best]
            numbers = ", ".join(f"{name} {_number(win.means[name])} (n={win.n[name]})" for name in shown)
            overlap = "" if win.clear or len(win.best) != 1 or len(win.means) < 2 else " (CI not clear of the " \
                "runner-up's)"
            details.append(f"{win.delay_s:g} s: {numbers or 'no data'}{overlap}")
        lines.append(f"{label}, {better} is better: {summary}. Per delay: {'; '.join(details)}.")
    return lines


def condition_findings(wins: Sequence[Win], metrics: Sequence[tuple[str, str, str]] = DELAY_METRICS) -> list[str]:
    """Per guidance condition and metric, only which compensator wins at which delays."""
    lines: list[str] = []
    conditions = sorted({w.condition for w in wins} - {POOLED})
    for condition in conditions:
        for metric, label, _ in metrics:
            found = _winners(wins, metric, condition)
            if found is not None:
                lines.append(f"{condition.upper()}, {label}: {found[1]}.")
    return lines


def _winners(wins: Sequence[Win], metric: str, condition: str) -> tuple[list[Win], str] | None:
    """``condition``'s cells of ``metric`` by delay and which compensator wins at which
    delays (``"predictive at 1 and 2 s; all equal at 0 s"``); None: no data at any delay."""
    cells = sorted((w for w in wins if w.metric == metric and w.condition == condition), key=lambda w: w.delay_s)
    if not any(w.best for w in cells):
        return None
    everyone = len({name for w in wins if w.metric == metric for name in w.n}) or 1
    verdicts: dict[str, list[float]] = {}
    for win in cells:
        verdicts.setdefault(_verdict(win, everyone), []).append(win.delay_s)
    return cells, "; ".join(f"{verdict} at {_delays(delays)} s" for verdict, delays in verdicts.items())


def delay_figure(stats: pd.DataFrame, metric: str) -> Figure:
    """``metric`` against the delay: one panel per guidance condition and one pooled, one
    line per compensator with its 95 % interval (delays equally spaced, labelled)."""
    label = next((text for name, text, _ in DELAY_METRICS if name == metric), metric)
    of_metric = stats[stats["metric"] == metric]
    conditions = [c for c in dict.fromkeys(of_metric["condition"]) if c != POOLED] + [POOLED]
    delays = sorted(set(of_metric["delay_s"]))
    position = {delay: float(i) for i, delay in enumerate(delays)}
    compensators = _ordered(of_metric["compensator"])
    figure = new_figure(3.0 * len(conditions), 3.0)
    shared = None
    for index, condition in enumerate(conditions):
        axes = figure.add_subplot(1, len(conditions), index + 1, sharey=shared)
        shared = shared or axes
        for k, compensator in enumerate(compensators):
            rows = of_metric[(of_metric["condition"] == condition) & (of_metric["compensator"] == compensator)]
            rows = rows.sort_values("delay_s")
            offset = (k - (len(compensators) - 1) / 2.0) * 0.08
            x = np.array([position[d] for d in rows["delay_s"]]) + offset
            mean = rows["mean"].to_numpy(dtype=float)
            low = mean - rows["ci95_low"].to_numpy(dtype=float)
            high = rows["ci95_high"].to_numpy(dtype=float) - mean
            error = np.nan_to_num(np.vstack([low, high]), nan=0.0)
            axes.errorbar(x, mean, yerr=error, marker="o", capsize=2, linewidth=1.2,
                          color=COMPENSATOR_COLOURS.get(compensator, "tab:gray"), label=compensator)
        axes.set_ylim(bottom=0.0, top=1.05 if metric == "capture_rate" else None)  # every metric is >= 0
        axes.set_xticks([position[d] for d in delays], [f"{d:g}" for d in delays])
        axes.set_xlabel("one-way delay [s]")
        title = "pooled" if condition == POOLED else condition.upper()
        axes.set_title(title, fontsize=9, color=condition_colour(condition) if condition != POOLED else "black")
        axes.grid(True, alpha=0.3)
        if index == 0:
            axes.set_ylabel(label)
            axes.legend(fontsize=7)
    return figure


def delay_json(swept: pd.DataFrame) -> dict[str, Any]:
    """The study as plain data: per-cell statistics, the winners and the findings."""
    stats = cell_stats(delay_table(swept))
    wins = winners(stats)

    def plain(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    cells = [{key: plain(value) for key, value in row.items()} for row in stats.to_dict(orient="records")]
    return {"cells": cells,
            "winners": [{**asdict(w), "best": list(w.best),
                         "means": {k: plain(v) for k, v in w.means.items()}} for w in wins],
            "findings": findings(wins), "by_condition": condition_findings(wins)}


def write_delay_results(swept: pd.DataFrame, root: str | os.PathLike[str]) -> list[Path]:
    """``delay-<metric>.png`` per metric and :data:`FINDINGS_FILE` (the findings, pooled
    and per condition) in ``root``; returns the paths."""
    root = Path(root)
    stats = cell_stats(delay_table(swept))
    wins = winners(stats)
    paths = []
    for metric, _, _ in DELAY_METRICS:
        path = root / f"delay-{metric}.png"
        path.write_bytes(png_bytes(delay_figure(stats, metric)))
        paths.append(path)
    text = "\n".join(findings(wins)) + "\n\n" + "\n".join(condition_findings(wins)) + "\n"
    (root / FINDINGS_FILE).write_text(text, encoding="utf-8")
    paths.append(root / FINDINGS_FILE)
    return paths


__all__ = ["DELAY_METRICS", "Win", "cell_stats", "condition_findings", "delay_figure", "delay_json", "delay_table",
           "findings", "is_delay_study", "winners", "write_delay_results"]
