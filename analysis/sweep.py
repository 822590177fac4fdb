"""A sweep's results: the study table joined to the design, and its response curves.

A sweep folder (``capture-trainer sweep``) is a study folder plus ``sweep.json``: which
scenario variant is which design point. :func:`sweep_table` adds one column per swept
field (``sweep:<dotted path>``) to the per-trial table; :func:`sweep_figure` draws, for
each swept field, the mean impact velocity, capture rate and time to reach per condition
over the field's values (response curves; other fields averaged over).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from analysis.figures import condition_colour, new_figure, png_bytes
from analysis.study import export_table, load_study
from capture_trainer.errors import AnalysisError

SWEEP_FILE = "sweep.json"
#: The metrics the response curves show, with their axis labels.
CURVE_METRICS: tuple[tuple[str, str], ...] = (
    ("impact_velocity_m_s", "impact velocity [m/s]"),
    ("capture_rate", "capture rate"),
    ("time_to_reach_s", "time to reach [s]"),
)


def read_sweep_design(root: str | os.PathLike[str]) -> dict[str, Any]:
    """``sweep.json`` of a sweep folder.

    Raises:
        AnalysisError: not a sweep folder, or an unreadable design.
    """
    path = Path(root) / SWEEP_FILE
    try:
        design: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AnalysisError(f"{root}: not a sweep folder (no {SWEEP_FILE})") from None
    except (OSError, ValueError) as error:
        raise AnalysisError(f"{path}: unreadable sweep design: {error}") from None
    if not isinstance(design.get("points"), list) or not isinstance(design.get("parameters"), list):
        raise AnalysisError(f"{path}: a sweep design needs 'parameters' and 'points'")
    return design


def _columns(values: dict[str, Any]) -> dict[str, Any]:
    """A point's values as table columns: ``sweep:<field>``, a vector field as one column
    per component, ``sweep:<field>[i]``."""
    columns: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, list):
            columns.update({f"sweep:{key}[{i}]": item for i, item in enumerate(value)})
        else:
            columns[f"sweep:{key}"] = value
    return columns


def sweep_table(root: str | os.PathLike[str], table: pd.DataFrame | None = None) -> pd.DataFrame:
    """The per-trial table of a sweep with one ``sweep:<field>`` column per swept field
    (one per component of a vector field, ``sweep:<field>[i]``; and ``capture_rate``, 1 or
    0 per trial, for the response curves). A swept ``condition`` is the table's own
    ``condition`` column already."""
    design = read_sweep_design(root)
    trials = load_study(root) if table is None else table
    values = pd.DataFrame([{"scenario": p["scenario"], **_columns(p["values"])} for p in design["points"]])
    table = trials.merge(values, on="scenario", how="left")
    if "captured" in table.columns and "capture_rate" not in table.columns:
        table["capture_rate"] = table["captured"].astype(float)  # the unit of a mean capture rate
    return table


def curve_parameters(table: pd.DataFrame) -> list[str]:
    """The swept fields the response curves show: every ``sweep:`` column that takes more
    than one value (a vector field's varying components), without the prefix."""
    return [column[len("sweep:"):] for column in table.columns
            if column.startswith("sweep:") and column != "sweep:condition" and table[column].nunique() > 1]


def _positions(values: pd.Index) -> tuple[list[float], list[str] | None]:
    """x positions of a swept field's values: the numbers themselves, or 0, 1, 2 ... with
    labels for text values (a compensator's name)."""
    try:
        return [float(v) for v in values], None
    except (TypeError, ValueError):
        return [float(i) for i in range(len(values))], [str(v) for v in values]


def sweep_figure(table: pd.DataFrame, parameters: list[str]) -> Figure:
    """Response curves: one row per swept field, one column per metric."""
    rows = max(len(parameters), 1)
    figure = new_figure(10.0, 2.6 * rows)
    for row, parameter in enumerate(parameters):
        column = f"sweep:{parameter}"
        for col, (metric, label) in enumerate(CURVE_METRICS):
            axes = figure.add_subplot(rows, len(CURVE_METRICS), row * len(CURVE_METRICS) + col + 1)
            if metric not in table.columns or column not in table.columns:
                axes.set_axis_off()
                continue
            order = list(pd.unique(table[column].dropna()))
            x_all, labels = _positions(pd.Index(order))
            where = dict(zip(order, x_all))
            for condition, group in table.groupby("condition"):
                means = group.groupby(column)[metric].mean()
                if means.notna().any():
                    axes.plot([where[v] for v in means.index], means.to_numpy(dtype=float), "o-",
                              color=condition_colour(str(condition)), label=str(condition).upper())
            if labels is not None:
                axes.set_xticks(x_all, labels)
            axes.set_xlabel(parameter)
            axes.set_ylabel(label)
            axes.grid(True, alpha=0.3)
            if row == 0 and col == 0 and axes.get_legend_handles_labels()[0]:
                axes.legend(fontsize=7)
    return figure


def write_sweep_results(root: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``sweep-results.parquet`` (the table) and ``sweep.png`` (the curves) in ``root``."""
    root = Path(root)
    design = read_sweep_design(root)
    table = sweep_table(root)
    table_path = export_table(table, root / "sweep-results.parquet")  # marked: not read back as a trial
    figure_path = root / "sweep.png"
    figure_path.write_bytes(png_bytes(sweep_figure(table, curve_parameters(table))))
    from analysis import delay_study

    if delay_study.is_delay_study(design):  # the delay study's figures and findings too
        delay_study.write_delay_results(table, root)
    return table_path, figure_path


__all__ = ["curve_parameters", "read_sweep_design", "sweep_figure", "sweep_table", "write_sweep_results"]
