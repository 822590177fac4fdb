"""The post-capture phase of trials: behaviours, task states, wrench and base disturbance.

Reads only the trial log (``capture_trainer.trial_log``, format version 3): the
``post_capture`` metadata (the task, its machine's outcome, one result per behaviour
run with its figures) and the per-tick columns ``state_index``, ``behaviour_index``,
``attractor_*``, ``wrench_force_*``, ``wrench_torque_*``, ``wrench_limit_n``. Older logs
(versions 1 and 2) and trials without a task have no post-capture phase: the functions
return empty results for them. Outside a running task the columns hold
``trial_log.POST_CAPTURE_IDLE`` (state -1, no limit).

* :func:`behaviour_rows`: one row per behaviour run (state, behaviour, result, reason,
  time, peak contact force against its limit, base attitude change, reaction-singularity
  ticks);
* :func:`behaviour_summary`: per behaviour kind: runs, successes, results, peak force over
  limit, base attitude change;
* :func:`state_times`: time per task state [s], from the per-tick state column;
* :func:`state_timeline_figure`: the state timeline over the contact force, its limit and
  the base attitude change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.trial import Trial
from capture_trainer import trial_log

#: Columns of :func:`behaviour_rows`.
BEHAVIOUR_COLUMNS = ("trial_id", "task", "state", "behaviour", "result", "reason", "started_s", "duration_s",
                     "peak_force_n", "limit_n", "peak_over_limit", "final_force_n", "pose_error_m",
                     "base_attitude_change_rad", "peak_base_attitude_change_rad", "min_sigma_ratio",
                     "singular_ticks", "limited_ticks")


def post_capture(metadata: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``post_capture`` metadata object, or None (no task, or a log older than v3)."""
    value = metadata.get("post_capture")
    return value if isinstance(value, Mapping) else None


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def behaviour_rows(trials: Iterable[tuple[str, Mapping[str, Any]]]) -> pd.DataFrame:
    """One row per behaviour run of every trial (``(trial_id, metadata)`` pairs).

    ``peak_over_limit`` is the peak contact force over the behaviour's wrench limit
    (NaN for a behaviour without one, RWE); a behaviour that stopped on its limit has
    it just above 1.
    """
    rows = []
    for trial_id, metadata in trials:
        phase = post_capture(metadata)
        if phase is None:
            continue
        task = (phase.get("task") or {}).get("name")
        for result in phase.get("results") or []:
            limit, peak = _number(result.get("limit_n")), _number(result.get("peak_force_n"))
            rows.append({
                "trial_id": trial_id, "task": task, "state": result.get("state"),
                "behaviour": result.get("behaviour"), "result": result.get("result"),
                "reason": result.get("reason"), "started_s": _number(result.get("started_s")),
                "duration_s": _number(result.get("duration_s")), "peak_force_n": peak, "limit_n": limit,
                "peak_over_limit": peak / limit if math.isfinite(limit) and limit > 0.0 else math.nan,
                "final_force_n": _number(result.get("final_force_n")),
                "pose_error_m": _number(result.get("pose_error_m")),
                "base_attitude_change_rad": _number(result.get("base_attitude_change_rad")),
                "peak_base_attitude_change_rad": _number(result.get("peak_base_attitude_change_rad")),
                "min_sigma_ratio": _number(result.get("min_sigma_ratio")),
                "singular_ticks": int(result.get("singular_ticks") or 0),
                "limited_ticks": int(result.get("limited_ticks") or 0),
            })
    return pd.DataFrame(rows, columns=list(BEHAVIOUR_COLUMNS))


def behaviour_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per behaviour kind: runs, succeeded, the count of each other result, the success
    rate, the largest peak force over limit, the mean and largest base attitude change
    [rad], the mean duration [s], ticks at a reaction singularity."""
    out = []
    for kind, group in rows.groupby("behaviour", sort=False):
        results = group["result"].value_counts()
        out.append({
            "behaviour": kind, "runs": len(group), "succeeded": int(results.get("succeeded", 0)),
            "wrench_limit": int(results.get("wrench_limit", 0)), "timeout": int(results.get("timeout", 0)),
            "watchdog": int(results.get("watchdog", 0)), "aborted": int(results.get("aborted", 0)),
            "success_rate": float(results.get("succeeded", 0)) / len(group),
            "max_peak_over_limit": float(group["peak_over_limit"].max()),
            "mean_duration_s": float(group["duration_s"].mean()),
            "mean_base_attitude_change_rad": float(group["base_attitude_change_rad"].mean()),
            "max_base_attitude_change_rad": float(group["peak_base_attitude_change_rad"].max()),
            "singular_ticks": int(group["singular_ticks"].sum()),
        })
    return pd.DataFrame(out)


def state_times(trial: Trial) -> dict[str, float]:
    """Time spent in each task state [s] (ticks with that ``state_index`` times the
    servo period), in the task's state order; empty without a post-capture phase."""
    phase = post_capture(trial.metadata)
    if phase is None or trial_log.STATE_INDEX not in trial.frame.columns:
        return {}
    names = list(phase.get("states") or [])
    dt = float(trial.metadata.get("dt_s", 1e-3))
    index = trial.frame[trial_log.STATE_INDEX].to_numpy(dtype=float)
    return {name: float(np.count_nonzero(index == i)) * dt for i, name in enumerate(names)}


def _intervals(time_s: np.ndarray, index: np.ndarray) -> list[tuple[int, float, float]]:
    """``(state index, start, end)`` runs of equal state index (>= 0: a state runs)."""
    out: list[tuple[int, float, float]] = []
    start = None
    for k in range(len(index)):
        value = index[k]
        if start is not None and (not value >= 0 or value != index[start]):
            out.append((int(index[start]), float(time_s[start]), float(time_s[k - 1])))
            start = None
        if start is None and value >= 0:
            start = k
    if start is not None:
        out.append((int(index[start]), float(time_s[start]), float(time_s[-1])))
    return out


def state_timeline_figure(trial: Trial) -> Figure | None:
    """The task's state timeline (top) over the contact force on the payload, the
    running behaviour's wrench limit and the base attitude change since the capture
    (bottom); None without a post-capture phase."""
    phase = post_capture(trial.metadata)
    frame = trial.frame
    if phase is None or trial_log.STATE_INDEX not in frame.columns:
        return None
    names = list(phase.get("states") or [])
    time_s = frame[trial_log.TIME].to_numpy(dtype=float)
    index = frame[trial_log.STATE_INDEX].to_numpy(dtype=float)
    active = index >= 0
    figure = Figure(figsize=(8.0, 4.6))
    top, bottom = figure.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1, 2]})
    colours = {"succeeded": "tab:green", "wrench_limit": "tab:orange", "timeout": "tab:purple",
               "watchdog": "tab:red", "aborted": "tab:gray"}
    results = list(phase.get("results") or [])
    for state, start, end in _intervals(time_s, index):
        # the run of that state that started closest to the interval (rows are stamped t + dt)
        runs = [r for r in results if state < len(names) and r.get("state") == names[state]]
        run = min(runs, key=lambda r: abs(_number(r.get("started_s")) - start), default=None)
        result = "" if run is None else str(run.get("result"))
        top.broken_barh([(start, max(end - start, 1e-3))], (state - 0.4, 0.8),
                        facecolors=colours.get(result, "tab:blue"))
    top.set_yticks(range(len(names)), names)
    top.set_title(f"task {(phase.get('task') or {}).get('name')}: {phase.get('outcome')}", fontsize=10)
    top.invert_yaxis()
    force = np.linalg.norm(frame[list(trial_log.WRENCH_FORCE)].to_numpy(dtype=float), axis=1)
    limit = frame[trial_log.WRENCH_LIMIT].to_numpy(dtype=float)
    bottom.plot(time_s, np.where(active | (force > 0), force, np.nan), label="contact force |F| [N]")
    bottom.plot(time_s, np.where(np.isfinite(limit), limit, np.nan), "k--", lw=1, label="wrench limit [N]")
    bottom.set_xlabel("t [s]")
    bottom.set_ylabel("force [N]")
    attitude = frame[list(trial_log.BASE_ATTITUDE)].to_numpy(dtype=float)
    first = int(np.argmax(active)) if active.any() else 0
    change = np.linalg.norm(attitude - attitude[first], axis=1)
    twin = bottom.twinx()
    twin.plot(time_s, np.where(time_s >= time_s[first], change * 1e3, np.nan), color="tab:green", lw=1,
              label="base attitude change [mrad]")
    twin.set_ylabel("base attitude change [mrad]")
    lines = bottom.get_lines() + twin.get_lines()
    bottom.legend(lines, [line.get_label() for line in lines], fontsize=8, loc="upper left")
    if active.any():
        bottom.set_xlim(time_s[first] - 0.1, time_s[-1])
    figure.tight_layout()
    return figure


def _plain(value: Any) -> Any:
    """A JSON-safe scalar: non-finite floats as None, numpy scalars as Python ones."""
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def post_capture_json(trials: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, Any] | None:
    """``analyze --json``'s ``post_capture`` object: per behaviour kind (the
    :func:`behaviour_summary` columns), every run (:data:`BEHAVIOUR_COLUMNS`) and each
    trial's task outcome; None when no trial ran a task. Non-finite numbers are null."""
    trials = list(trials)
    rows = behaviour_rows(trials)
    if rows.empty:
        return None
    tasks = {}
    for trial_id, metadata in trials:
        phase = post_capture(metadata)
        if phase is not None:
            tasks[trial_id] = {"task": (phase.get("task") or {}).get("name"), "outcome": phase.get("outcome"),
                               "reason": phase.get("reason")}
    summary = behaviour_summary(rows)
    return {
        "by_behaviour": [{k: _plain(v) for k, v in record.items()} for record in summary.to_dict("records")],
        "runs": [{k: _plain(v) for k, v in record.items()} for record in rows.to_dict("records")],
        "tasks": tasks,
    }
