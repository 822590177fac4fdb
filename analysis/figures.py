"""Figures of one trial (the paper's set) and of a study (Figs. 16 to 21 and trajectories).

Every function returns a :class:`matplotlib.figure.Figure` bound to an Agg canvas (set
explicitly per figure, never through ``matplotlib.use`` or ``pyplot``), so nothing leaks
into global state and a figure is freed when it is dropped. :func:`png_bytes` renders one.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Circle
from numpy.typing import NDArray

from analysis.metrics import (
    PAPER_METRICS,
    first_reach,
    relative_position_m,
    relative_velocity_m_s,
    surface_distance_m,
)
from analysis.stats import describe, ordered_conditions
from analysis.study import TrialTrace
from analysis.trial import Trial
from capture_trainer import trial_log

AXES = ("x", "y", "z")
AXIS_COLOURS = ("tab:blue", "tab:orange", "tab:green")
CONDITION_COLOURS = {"dg": "tab:blue", "ng": "tab:red", "apf": "tab:orange", "as": "tab:green"}
CONDITION_LABELS = {
    "dg": "DG (dynamic guidance)",
    "ng": "NG (no guidance)",
    "apf": "APF (potential field)",
    "as": "AS (automatic)",
}
#: Metrics drawn as bar charts for a study: the paper's, then ours.
STUDY_BAR_METRICS: tuple[str, ...] = PAPER_METRICS + (
    "impact_normal_velocity_m_s",
    "mse_centre_position_m2",
    "peak_base_torque_n_m",
    "peak_force_actuated_n",
)
DPI = 100


def new_figure(width_in: float = 7.0, height_in: float = 3.2) -> Figure:
    """A figure with its own Agg canvas and constrained layout."""
    figure = Figure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def png_bytes(figure: Figure, dpi: int = DPI) -> bytes:
    """The figure rendered as PNG."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def condition_colour(condition: str) -> str:
    """A stable colour per condition."""
    return CONDITION_COLOURS.get(condition, "tab:gray")


def _trial_time(trial: Trial) -> NDArray[np.float64]:
    time_s = trial.time_s()
    return time_s - time_s[0] if time_s.size else time_s


def _mark_reach(axes: Axes, trial: Trial) -> None:
    """Dashed line at first reach and the post-capture window shaded."""
    time_s = trial.time_s()
    if time_s.size == 0:
        return
    reach = first_reach(time_s, relative_position_m(trial), trial.target_radius_m)
    if reach is None:
        return
    t_r = reach.time_s - time_s[0]
    axes.axvline(t_r, color="k", linestyle="--", linewidth=0.8)
    axes.axvspan(t_r, t_r + trial.post_capture_window_s, color="0.85", zorder=0)


def _time_series_figure(
    trial: Trial,
    values: NDArray[np.float64],
    labels: Sequence[str],
    ylabel: str,
    title: str,
    total: tuple[str, NDArray[np.float64]] | None = None,
) -> Figure:
    """One column of ``values`` per label against time, optionally a bold black total."""
    figure = new_figure()
    axes = figure.add_subplot()
    time_s = _trial_time(trial)
    for column, label in enumerate(labels):
        axes.plot(time_s, values[:, column], linewidth=1.0, label=label)
    if total is not None:
        axes.plot(time_s, total[1], color="k", linewidth=1.2, label=total[0])
    axes.set_xlabel("time [s]")
    axes.set_ylabel(ylabel)
    axes.grid(True, linewidth=0.3)
    _mark_reach(axes, trial)
    axes.legend(loc="upper right", fontsize=8, ncols=min(len(labels) + 1, 8))
    axes.set_title(f"{trial.trial_id}: {title}")
    return figure


def velocity_error_figure(trial: Trial) -> Figure:
    """Relative velocity (end effector minus debris) per axis and its norm [m/s]."""
    velocity = relative_velocity_m_s(trial)
    norm = np.linalg.norm(velocity, axis=1)
    return _time_series_figure(
        trial, velocity, AXES, "velocity error [m/s]", "velocity error (task frame)", ("|v|", norm)
    )


def position_error_figure(trial: Trial) -> Figure:
    """Relative position per axis [m] and the surface distance ``|p| - r`` [m]."""
    relative = relative_position_m(trial)
    gap = surface_distance_m(relative, trial.target_radius_m)
    figure = _time_series_figure(
        trial, relative, AXES, "position error [m]", "position error (task frame)", ("|p| - r", gap)
    )
    figure.axes[0].axhline(0.0, color="0.4", linewidth=0.6)
    return figure


def base_torque_figure(trial: Trial) -> Figure:
    """Reaction torque on the base about its centre of mass [N m], task frame."""
    torque = trial.vectors(trial_log.BASE_TORQUE)
    return _time_series_figure(trial, torque, AXES, "base torque [N m]", "base reaction torque")


def joint_angles_figure(trial: Trial) -> Figure:
    """Joint angles [rad]."""
    labels = [f"q{joint}" for joint in range(trial.n_joints)]
    return _time_series_figure(trial, trial.joint_angles_rad(), labels, "joint angle [rad]", "joint angles")


def force_figure(trial: Trial) -> Figure:
    """Calculated (dashed) and actuated (solid) guidance force per axis [N], device frame."""
    figure = new_figure(7.0, 5.0)
    calculated = trial.vectors(trial_log.DEVICE_FORCE_CALCULATED)
    actuated = trial.vectors(trial_log.DEVICE_FORCE_ACTUATED)
    time_s = _trial_time(trial)
    device = trial.metadata.get("device")
    limit = device.get("max_force_n") if isinstance(device, Mapping) else None
    axes_list = figure.subplots(3, 1, sharex=True)
    for column, (axes, name, colour) in enumerate(zip(axes_list, "xyz", AXIS_COLOURS, strict=True)):
        axes.plot(time_s, calculated[:, column], color=colour, linestyle="--", linewidth=1.0, label="calculated")
        axes.plot(time_s, actuated[:, column], color=colour, linewidth=1.2, label="actuated")
        if isinstance(limit, (int, float)):
            for sign in (-1.0, 1.0):
                axes.axhline(sign * float(limit), color="0.5", linewidth=0.6, linestyle=":")
        axes.set_ylabel(f"F{name} [N]")
        axes.grid(True, linewidth=0.3)
        _mark_reach(axes, trial)
    axes_list[0].legend(loc="upper right", fontsize=8, ncols=2)
    axes_list[0].set_title(f"{trial.trial_id}: guidance force (device frame)")
    axes_list[-1].set_xlabel("time [s]")
    return figure


def trial_figures(trial: Trial) -> dict[str, Figure]:
    """The paper's per-trial set, by caption."""
    return {
        "Velocity error": velocity_error_figure(trial),
        "Position error": position_error_figure(trial),
        "Base reaction torque": base_torque_figure(trial),
        "Joint angles": joint_angles_figure(trial),
        "Calculated and actuated force": force_figure(trial),
    }


def metric_bar_figure(table: pd.DataFrame, metric: str) -> Figure:
    """Mean per condition with standard-deviation error bars and every trial as a dot."""
    figure = new_figure(4.6, 3.4)
    axes = figure.add_subplot()
    conditions = ordered_conditions(table["condition"])
    rng = np.random.default_rng(0)
    labels: list[str] = []
    for position, condition in enumerate(conditions):
        column = pd.to_numeric(table.loc[table["condition"] == condition, metric], errors="coerce")
        values = column.astype(float).to_numpy()
        stats = describe(values)
        colour = condition_colour(condition)
        std = stats["std"] if np.isfinite(stats["std"]) else 0.0
        axes.bar(position, stats["mean"], yerr=std, capsize=5, color=colour, alpha=0.55, edgecolor=colour)
        finite = values[np.isfinite(values)]
        jitter = rng.uniform(-0.15, 0.15, finite.size)
        axes.plot(position + jitter, finite, "o", color="k", markersize=3)
        missing = values.size - finite.size
        labels.append(f"{condition.upper()}\nn={stats['n']}" + (f" ({missing} n/a)" if missing else ""))
    axes.set_xticks(range(len(conditions)), labels, fontsize=8)
    axes.set_ylabel(metric)
    axes.grid(True, axis="y", linewidth=0.3)
    axes.set_title(f"{metric}: mean ± std by condition", fontsize=9)
    return figure


def study_bar_figures(table: pd.DataFrame, metrics: Sequence[str] = STUDY_BAR_METRICS) -> dict[str, Figure]:
    """One bar chart per metric (paper Figs. 16 to 21), by metric name."""
    return {metric: metric_bar_figure(table, metric) for metric in metrics}


def trajectory_figure(traces: Sequence[TrialTrace]) -> Figure:
    """End-effector paths relative to the debris centre (x-y), one panel per condition.

    Each path starts at a hollow circle and ends where the trial ended; a cross marks the
    first reach; the debris' radius is drawn at the origin.
    """
    conditions = ordered_conditions(trace.condition for trace in traces)
    columns = max(1, len(conditions))
    figure = new_figure(3.2 * columns, 3.4)
    axes_list = np.atleast_1d(figure.subplots(1, columns, squeeze=False)[0])
    for axes, condition in zip(axes_list, conditions, strict=False):
        colour = condition_colour(condition)
        radius = 0.0
        for trace in (t for t in traces if t.condition == condition):
            radius = trace.radius_m
            path = trace.relative_m
            if path.size == 0:
                continue
            axes.plot(path[:, 0], path[:, 1], color=colour, linewidth=0.9, alpha=0.8)
            axes.plot(path[0, 0], path[0, 1], "o", markerfacecolor="none", color=colour, markersize=4)
            if trace.reach_m is not None:
                axes.plot(trace.reach_m[0], trace.reach_m[1], "x", color="k", markersize=5)
        axes.add_patch(Circle((0.0, 0.0), radius, fill=False, color="k", linewidth=0.8))
        axes.set_aspect("equal", adjustable="datalim")
        axes.set_title(CONDITION_LABELS.get(condition, condition), fontsize=9)
        axes.set_xlabel("x_ee - x_target [m]")
        axes.grid(True, linewidth=0.3)
    axes_list[0].set_ylabel("y_ee - y_target [m]")
    return figure
