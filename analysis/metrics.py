"""Per-trial metrics: the paper's four (Li & Yan 2019, section 5) and what goes beyond them.

Notation (task frame): ``p(t) = ee(t) - target(t)`` the relative position of the end
effector with respect to the debris centre [m], ``v(t) = ee_v(t) - target_v(t)`` the
relative velocity [m/s], ``r`` the debris radius [m] and

    d(t) = |p(t)| - r                                    surface distance [m]

as in the paper, which subtracts the radius so that "reached" means ``d <= 0``.

Definitions (times are measured from the trial's first sample):

- **first reach** ``t_r``: the first time ``d(t) <= 0``. Between two samples the relative
  position is interpolated linearly and the crossing of the sphere ``|p| = r`` is solved
  exactly (a quadratic), so a constant relative velocity gives the exact reach time
  whatever the approach direction. A trial whose first sample is already inside reaches
  at that sample.
- **distance travelled** [m]: the end effector's path length (sum of the chord lengths
  between samples) from the first sample to ``t_r``.
- **impact velocity** [m/s]: ``|v(t_r)|`` with ``v`` interpolated linearly at ``t_r``, and its
  signed components; the **normal impact velocity** is the closing speed
  ``-v(t_r) . p(t_r) / |p(t_r)|`` along the line of centres.
- **post-capture window**: ``[t_r, t_r + W]`` with ``W`` the metadata's
  ``post_capture_window_s`` (1 s). Mean squares are time averages (trapezoidal rule on the
  samples, signals interpolated linearly at the window's ends) over the part of the window
  the log covers (``post_capture_observed_s``; less than ``W`` only for a trial that ended
  early):

  - ``mse_position_m2``: mean of ``max(d, 0)^2``, the squared gap between the end effector
    and the debris' surface. Being on or inside the surface is no error, consistent with
    "reached" meaning ``d <= 0``.
  - ``mse_centre_position_m2``: mean of ``|p|^2``, the capture law's own error ``e`` of
    eq. (10) (drives the end effector to the debris centre); reported for comparison.
  - ``mse_velocity_m2_s2``: mean of ``|v|^2``, the relative velocity ``de/dt`` of eq. (10).

- **contact**: begins when ``d`` crosses to ``<= 0`` and lasts while ``d <= tol`` (the
  metadata's ``capture_tolerance_m``); ``n_contacts`` counts them (a bounce adds one).
  The target is **captured** when a contact lasts for a whole window ``W``; the
  ``capture_time_s`` is the end of that window (``t_r + W`` when the first contact holds).

Beyond the paper: peak and RMS (time average over the whole trial) of the base reaction
torque's norm, base attitude drift (final and peak norm of the rotation vector), peak
norms of the calculated and actuated device forces (device frame), the share of ticks
saturated, re-plans (rising edges of the ``replan`` flag; a flag already set on the first
tick counts as one), and the number of ticks with the fault, watchdog, singular and
limited flags.

Contact physics (logs of format version 2, which carry the tool's contact force, the
``contact`` and ``captured`` flags and the outcome metadata; NaN for older logs):

- ``captured`` and ``capture_time_s`` are the logged capture event (the tool closed,
  ``trials.capture_event``), no longer the kinematic contact test above, which older logs
  keep.
- ``contact_normal_speed_m_s`` / ``contact_tangential_speed_m_s``: the tool's velocity
  relative to the debris at the first contact point, along the contact normal (closing
  speed) and across it, as the tick measured it (metadata ``first_contact``). The paper's
  impact velocity keeps its definition above (at the first reach of the contact radius).
- ``peak_contact_force_n``: largest norm of the contact force [N]; ``contact_impulse_n_s``:
  norm of its time integral ``|∫F dt|`` over the trial [N s] (the debris' momentum change
  from the contact).
- ``mse_slave_force_n2``: Yang & Konno's metric (their eq. 11, the mean square of the
  slave's force), the time mean of ``|F|²`` of the contact force over ``[t_f, t_f + W]``
  from the first contact ``t_f`` (the part the log covers) [N²]; NaN without contact.
  A trial whose task ran their mixed command (behaviour ``mixed``) reports instead the
  time mean of ``|F|²`` of the fixtures' wrench on the payload over that behaviour's
  first run (the slave's force of their eq. 3).
- ``felt_force_mse_n2``: how far the contact force the hand is given is from the one the
  slave has, with contact feedback on (``[rendering] contact_feedback``; NaN without it or
  without contact). The contact part of the force the hand is given, task frame, is
  ``f_h = R F_calc / k_f − F_guide`` (``F_calc`` the calculated device force before the
  device's limits, ``R``, ``k_f`` the mapping's rotation and force scale; zero while
  clutched); divided by the contact force scale ``−s`` it is the force on the debris the
  operator's side renders, ``F̂ = −f_h / s``: the slave's ``F`` as it arrived over the
  delayed state path, shaped by the compensator. The metric is the time mean of
  ``|F̂ − F|²`` over the window of ``mse_slave_force_n2`` [N²]: 0 when the hand is given
  the slave's force as it is, equal to ``mse_slave_force_n2`` when the hand feels nothing
  of it (a delay longer than the window), more when what it feels is out of step with it.
- Post-capture, over ``[t_c, t_c + W]`` from the capture ``t_c``:
  ``residual_base_angular_velocity_rad_s`` and ``residual_debris_angular_velocity_rad_s``
  (norms at the window's end; once captured the debris turns with the tool link),
  ``post_capture_attitude_drift_rad`` (norm of the base's rotation-vector change over the
  window).

A trial that never reaches the target is a result: ``reached`` is False, every metric
that depends on the reach is NaN, the rest are computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from analysis.trial import Trial, make_trial, read_trial
from capture_trainer import trial_log
from capture_trainer.errors import AnalysisError

NAN = float("nan")


@dataclass(frozen=True)
class TrialMetrics:
    """Metrics of one trial (see the module docstring for the exact definitions).

    Times in seconds from the trial's first sample; task frame unless noted.
    """

    reached: bool
    time_to_reach_s: float
    distance_travelled_m: float
    impact_velocity_m_s: float
    impact_velocity_x_m_s: float
    impact_velocity_y_m_s: float
    impact_velocity_z_m_s: float
    impact_normal_velocity_m_s: float
    mse_position_m2: float
    mse_centre_position_m2: float
    mse_velocity_m2_s2: float
    post_capture_observed_s: float
    captured: bool
    capture_time_s: float
    n_contacts: int
    min_surface_distance_m: float
    peak_base_torque_n_m: float
    rms_base_torque_n_m: float
    final_base_attitude_rad: float
    peak_base_attitude_rad: float
    peak_force_calculated_n: float
    peak_force_actuated_n: float
    saturated_fraction: float
    n_replans: int
    n_fault_ticks: int
    n_watchdog_ticks: int
    n_singular_ticks: int
    n_limited_ticks: int
    min_sigma_ratio: float
    near_reaction_boundary_s: float
    base_rate_bounded_s: float
    contact_normal_speed_m_s: float
    contact_tangential_speed_m_s: float
    peak_contact_force_n: float
    contact_impulse_n_s: float
    mse_slave_force_n2: float
    felt_force_mse_n2: float
    residual_base_angular_velocity_rad_s: float
    residual_debris_angular_velocity_rad_s: float
    post_capture_attitude_drift_rad: float
    duration_s: float
    n_ticks: int
    complete: bool

    def as_dict(self) -> dict[str, Any]:
        """Plain ``{name: value}`` (bool, int or float; NaN where undefined)."""
        return asdict(self)


#: Every metric name, in declaration order.
METRIC_NAMES: tuple[str, ...] = tuple(field.name for field in fields(TrialMetrics))

#: One line per metric, for reports.
METRIC_DESCRIPTIONS: dict[str, str] = {
    "reached": "the surface distance |p| - r reached 0 at least once",
    "time_to_reach_s": "time from the first sample to the first reach (crossing interpolated)",
    "distance_travelled_m": "end-effector path length before the first reach",
    "impact_velocity_m_s": "|v_ee - v_target| at the first reach",
    "impact_velocity_x_m_s": "x component of the relative velocity at the first reach",
    "impact_velocity_y_m_s": "y component of the relative velocity at the first reach",
    "impact_velocity_z_m_s": "z component of the relative velocity at the first reach",
    "impact_normal_velocity_m_s": "closing speed along the line of centres at the first reach",
    "mse_position_m2": "time mean of max(|p| - r, 0)^2 over the post-capture window",
    "mse_centre_position_m2": "time mean of |p|^2 (error e of eq. 10) over the post-capture window",
    "mse_velocity_m2_s2": "time mean of |v_ee - v_target|^2 over the post-capture window",
    "post_capture_observed_s": "part of the post-capture window covered by the log",
    "captured": "the tool closed on the debris (older logs: a contact lasted a whole post-capture window)",
    "capture_time_s": "when the tool closed, from the first sample (older logs: end of the held window)",
    "n_contacts": "contacts begun (a bounce starts a new one)",
    "min_surface_distance_m": "smallest |p| - r over the trial",
    "peak_base_torque_n_m": "largest norm of the base reaction torque",
    "rms_base_torque_n_m": "root of the time mean of |base torque|^2 over the trial",
    "final_base_attitude_rad": "norm of the base rotation vector at the end",
    "peak_base_attitude_rad": "largest norm of the base rotation vector",
    "peak_force_calculated_n": "largest norm of the calculated device force (device frame)",
    "peak_force_actuated_n": "largest norm of the actuated device force (device frame)",
    "saturated_fraction": "share of ticks with the actuated force limited",
    "n_replans": "rising edges of the replan flag",
    "n_fault_ticks": "ticks with the fault flag",
    "n_watchdog_ticks": "ticks with the watchdog ramping force down",
    "n_singular_ticks": "ticks with a (reaction) singularity reported by the IK",
    "n_limited_ticks": "ticks with a joint limit clipped by the IK",
    "min_sigma_ratio": "smallest reaction-singularity gauge",
    "near_reaction_boundary_s": "time with the reaction-singularity gauge below 0.03 (the reaction-boundary fixture's margin)",
    "base_rate_bounded_s": "time the slave's base-rate bound scaled the task down (the base would have turned "
                           "faster than the bound; 0 for logs without the record)",
    "contact_normal_speed_m_s": "closing speed of tool on debris at the first contact point",
    "contact_tangential_speed_m_s": "tangential slip of tool on debris at the first contact point",
    "peak_contact_force_n": "largest norm of the tool's contact force on the debris",
    "contact_impulse_n_s": "norm of the contact force's time integral over the trial",
    "mse_slave_force_n2": "time mean of |contact force|^2 over the post-capture window from the first contact "
                          "(Yang & Konno eq. 11)",
    "felt_force_mse_n2": "time mean of |contact force rendered to the hand (in slave newtons) - contact force at the "
                         "slave|^2 over the same window (contact feedback on)",
    "residual_base_angular_velocity_rad_s": "|base angular velocity| at the end of the post-capture window",
    "residual_debris_angular_velocity_rad_s": "|debris angular velocity| at the end of the post-capture window",
    "post_capture_attitude_drift_rad": "base rotation over the post-capture window (from the capture)",
    "duration_s": "time from the first to the last sample",
    "n_ticks": "rows (servo ticks) in the log",
    "complete": "the writer finished the file (false: crashed or still running)",
}

#: Metrics that are undefined (NaN) when the target is never reached.
REACH_METRICS: tuple[str, ...] = (
    "time_to_reach_s",
    "distance_travelled_m",
    "impact_velocity_m_s",
    "impact_velocity_x_m_s",
    "impact_velocity_y_m_s",
    "impact_velocity_z_m_s",
    "impact_normal_velocity_m_s",
    "mse_position_m2",
    "mse_centre_position_m2",
    "mse_velocity_m2_s2",
    "post_capture_observed_s",
)

#: The paper's metrics (Figs. 16 to 21), in the paper's order.
PAPER_METRICS: tuple[str, ...] = (
    "time_to_reach_s",
    "distance_travelled_m",
    "impact_velocity_m_s",
    "mse_position_m2",
    "mse_velocity_m2_s2",
)


@dataclass(frozen=True)
class Reach:
    """Where a sphere crossing happens: between samples ``index - 1`` and ``index``.

    Attributes:
        index: first sample with ``d <= 0``.
        fraction: position of the crossing between sample ``index - 1`` (0) and
            ``index`` (1); 1.0 when ``index`` is 0.
        time_s: the crossing time [s] (absolute, as in ``t_s``).
    """

    index: int
    fraction: float
    time_s: float


def trial_metrics(
    path_or_frame: str | Path | pd.DataFrame | Trial, metadata: Mapping[str, Any] | None = None
) -> TrialMetrics:
    """Compute every metric of one trial.

    Args:
        path_or_frame: a trial's Parquet file, a :class:`~analysis.trial.Trial`, or a frame
            with the trial log's columns (then ``metadata`` is required).
        metadata: the trial's metadata; overrides the file's when given with a path.

    Returns:
        The trial's metrics (a trial that never reaches the target is a normal result).

    Raises:
        AnalysisError: the input is not a valid trial log.
    """
    trial = _as_trial(path_or_frame, metadata)
    return compute_metrics(trial)


def _as_trial(
    source: str | Path | pd.DataFrame | Trial, metadata: Mapping[str, Any] | None
) -> Trial:
    if isinstance(source, Trial):
        return source if metadata is None else make_trial(source.frame, metadata, source.path)
    if isinstance(source, pd.DataFrame):
        if metadata is None:
            raise AnalysisError("a trial frame needs its metadata (target_radius_m, n_joints, ...)")
        return make_trial(source, metadata)
    trial = read_trial(source)
    return trial if metadata is None else make_trial(trial.frame, metadata, trial.path)


def relative_position_m(trial: Trial) -> NDArray[np.float64]:
    """(n, 3) end effector minus debris centre [m], task frame."""
    return trial.vectors(trial_log.EE_POSITION) - trial.vectors(trial_log.TARGET_POSITION)


def relative_velocity_m_s(trial: Trial) -> NDArray[np.float64]:
    """(n, 3) end-effector velocity minus debris velocity [m/s], task frame."""
    return trial.vectors(trial_log.EE_VELOCITY) - trial.vectors(trial_log.TARGET_VELOCITY)


def surface_distance_m(relative_m: NDArray[np.float64], radius_m: float) -> NDArray[np.float64]:
    """``|p| - r`` per sample [m]: negative inside the debris' radius."""
    distance_m: NDArray[np.float64] = np.linalg.norm(relative_m, axis=1)
    return distance_m - radius_m


def sphere_crossing(
    time_s: NDArray[np.float64], relative_m: NDArray[np.float64], radius_m: float, index: int
) -> Reach:
    """Exact crossing of ``|p| = r`` between samples ``index - 1`` (outside) and ``index``.

    The relative position is taken as linear between the two samples,
    ``p(a) = p0 + a (p1 - p0)``, and ``|p(a)|^2 = r^2`` is solved for the smaller root
    ``a`` in [0, 1] (written as ``2c / (-b + sqrt(b^2 - 4ac))`` to avoid cancellation).
    """
    if index == 0:
        return Reach(0, 1.0, float(time_s[0]))
    p0 = relative_m[index - 1]
    step = relative_m[index] - p0
    a = float(step @ step)
    b = 2.0 * float(p0 @ step)
    c = float(p0 @ p0) - radius_m * radius_m
    root = math.sqrt(max(b * b - 4.0 * a * c, 0.0))
    denominator = -b + root
    fraction = 2.0 * c / denominator if denominator > 0.0 else 1.0
    fraction = min(max(fraction, 0.0), 1.0)
    t0, t1 = float(time_s[index - 1]), float(time_s[index])
    return Reach(index, fraction, t0 + fraction * (t1 - t0))


def _interpolate_rows(
    time_s: NDArray[np.float64], values: NDArray[np.float64], at_s: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Linear interpolation of each column of ``values`` at the times ``at_s``."""
    return np.column_stack([np.interp(at_s, time_s, values[:, j]) for j in range(values.shape[1])])


def window_nodes(time_s: NDArray[np.float64], start_s: float, end_s: float) -> NDArray[np.float64]:
    """Sample times strictly inside ``(start_s, end_s)`` with both ends added.

    ``end_s`` is cut to the last sample: a log that ends inside the window is averaged
    over the part it covers.
    """
    end_s = min(end_s, float(time_s[-1]))
    inner = time_s[(time_s > start_s) & (time_s < end_s)]
    return np.concatenate(([start_s], inner, [end_s])) if end_s > start_s else np.array([start_s])


def time_average(time_s: NDArray[np.float64], values: NDArray[np.float64]) -> float:
    """Trapezoidal time average of ``values`` over ``time_s`` (the value if one sample)."""
    if values.size == 0:
        return NAN
    if values.size == 1:
        return float(values[0])
    duration = float(time_s[-1] - time_s[0])
    return float(np.trapezoid(values, time_s) / duration)


def _nanmax(values: NDArray[np.float64]) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else NAN


def _nanmin(values: NDArray[np.float64]) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.min()) if finite.size else NAN


def first_reach(
    time_s: NDArray[np.float64], relative_m: NDArray[np.float64], radius_m: float
) -> Reach | None:
    """The first reach (``d <= 0``), or None if the trial never reaches the target.

    The relative position is taken as linear between samples, so a path that grazes the
    sphere between two samples (a chord shorter than one sample's travel) is a reach too.
    """
    inside = np.flatnonzero(surface_distance_m(relative_m, radius_m) <= 0.0)
    first_inside = int(inside[0]) if inside.size else relative_m.shape[0]
    if first_inside == 0:
        return sphere_crossing(time_s, relative_m, radius_m, 0)
    start = relative_m[:first_inside - 1] if inside.size else relative_m[:-1]
    step = relative_m[1 : start.shape[0] + 1] - start
    length2 = np.einsum("ij,ij->i", step, step)
    along = np.clip(-np.einsum("ij,ij->i", start, step) / np.where(length2 > 0.0, length2, 1.0), 0.0, 1.0)
    closest = start + along[:, None] * step
    grazing = np.flatnonzero(np.einsum("ij,ij->i", closest, closest) <= radius_m * radius_m)
    if grazing.size:
        return sphere_crossing(time_s, relative_m, radius_m, int(grazing[0]) + 1)
    if not inside.size:
        return None
    return sphere_crossing(time_s, relative_m, radius_m, first_inside)


def contacts(
    time_s: NDArray[np.float64], relative_m: NDArray[np.float64], radius_m: float, tolerance_m: float
) -> list[tuple[float, float | None]]:
    """Contact intervals ``(start_s, end_s)``; ``end_s`` None while still in contact at the end.

    A contact starts at a crossing to ``d <= 0`` (see :func:`sphere_crossing`) and ends
    when ``d`` exceeds ``tolerance_m``, at the time where the linearly interpolated ``d``
    crosses it.
    """
    distance = surface_distance_m(relative_m, radius_m)
    inside = distance <= 0.0
    outside = distance > tolerance_m
    intervals: list[tuple[float, float | None]] = []
    index = 0
    n = distance.size
    while index < n:
        hits = np.flatnonzero(inside[index:])
        if hits.size == 0:
            break
        start = index + int(hits[0])
        start_s = sphere_crossing(time_s, relative_m, radius_m, start).time_s
        leaves = np.flatnonzero(outside[start:])
        if leaves.size == 0:
            intervals.append((start_s, None))
            break
        leave = start + int(leaves[0])
        d0, d1 = float(distance[leave - 1]), float(distance[leave])
        fraction = (tolerance_m - d0) / (d1 - d0) if d1 != d0 else 1.0
        t0, t1 = float(time_s[leave - 1]), float(time_s[leave])
        intervals.append((start_s, t0 + fraction * (t1 - t0)))
        index = leave
    return intervals


def _rising_edges(flag: NDArray[np.bool_]) -> int:
    if flag.size == 0:
        return 0
    return int(flag[0]) + int(np.count_nonzero(flag[1:] & ~flag[:-1]))


def compute_metrics(trial: Trial) -> TrialMetrics:
    """Every metric of a validated trial (see the module docstring)."""
    time_s = trial.time_s()
    n = time_s.size
    if n == 0:
        return _empty_metrics(trial)
    radius = trial.target_radius_m
    window_s = trial.post_capture_window_s
    rel_p = relative_position_m(trial)
    rel_v = relative_velocity_m_s(trial)
    distance = surface_distance_m(rel_p, radius)
    t0 = float(time_s[0])

    reach = first_reach(time_s, rel_p, radius)
    reach_values = _reach_metrics(trial, time_s, rel_p, rel_v, radius, window_s, reach)

    contact_intervals = contacts(time_s, rel_p, radius, trial.capture_tolerance_m)
    capture_time = NAN
    for start_s, end_s in contact_intervals:
        window_end = start_s + window_s
        held_to = float(time_s[-1]) if end_s is None else end_s
        if held_to >= window_end - 1e-12:
            capture_time = window_end - t0
            break

    contact_values = _contact_metrics(trial, time_s, window_s)
    if _logs_contact(trial):
        capture = trial.metadata.get("capture") or {}
        captured_at = float(capture.get("t_s", NAN)) if trial.metadata.get("outcome") == "captured" else NAN
        capture_time = captured_at - t0 if math.isfinite(captured_at) else NAN
    torque = np.linalg.norm(trial.vectors(trial_log.BASE_TORQUE), axis=1)
    attitude = np.linalg.norm(trial.vectors(trial_log.BASE_ATTITUDE), axis=1)
    finite_torque = np.isfinite(torque)
    return TrialMetrics(
        reached=reach is not None,
        **reach_values,
        captured=not math.isnan(capture_time),
        capture_time_s=capture_time,
        n_contacts=len(contact_intervals),
        min_surface_distance_m=_nanmin(distance),
        peak_base_torque_n_m=_nanmax(torque),
        rms_base_torque_n_m=(
            math.sqrt(time_average(time_s[finite_torque], torque[finite_torque] ** 2))
            if finite_torque.any()
            else NAN
        ),
        final_base_attitude_rad=float(attitude[-1]),
        peak_base_attitude_rad=_nanmax(attitude),
        peak_force_calculated_n=_nanmax(
            np.linalg.norm(trial.vectors(trial_log.DEVICE_FORCE_CALCULATED), axis=1)
        ),
        peak_force_actuated_n=_nanmax(
            np.linalg.norm(trial.vectors(trial_log.DEVICE_FORCE_ACTUATED), axis=1)
        ),
        saturated_fraction=float(np.mean(trial.flag(trial_log.FLAG_SATURATED))),
        n_replans=_rising_edges(trial.flag(trial_log.FLAG_REPLAN)),
        n_fault_ticks=int(np.count_nonzero(trial.flag(trial_log.FLAG_FAULT))),
        n_watchdog_ticks=int(np.count_nonzero(trial.flag(trial_log.FLAG_WATCHDOG))),
        n_singular_ticks=int(np.count_nonzero(trial.flag(trial_log.FLAG_SINGULAR))),
        n_limited_ticks=int(np.count_nonzero(trial.flag(trial_log.FLAG_LIMITED))),
        min_sigma_ratio=_nanmin(trial.frame[trial_log.SIGMA_RATIO].to_numpy(dtype=float)),
        near_reaction_boundary_s=_time_below(time_s, trial.frame[trial_log.SIGMA_RATIO].to_numpy(dtype=float),
                                             REACTION_BOUNDARY_MARGIN),
        base_rate_bounded_s=_rate_bounded_s(trial, time_s),
        **contact_values,
        duration_s=float(time_s[-1]) - t0,
        n_ticks=n,
        complete=trial.complete,
    )


#: The reaction-singularity gauge below which a tick counts as near the edge of the
#: reactionless workspace (the default margin of ``guidance.fixtures.ReactionBoundary``).
REACTION_BOUNDARY_MARGIN = 0.03


def _time_below(time_s: NDArray[np.float64], values: NDArray[np.float64], limit: float) -> float:
    """Time [s] the sampled ``values`` spend below ``limit`` (each sample stands for the
    period before it)."""
    if time_s.size < 2:
        return 0.0
    period = float(np.median(np.diff(time_s)))
    return float(np.count_nonzero(values < limit)) * period


def _rate_bounded_s(trial: Trial, time_s: NDArray[np.float64]) -> float:
    """Time [s] the slave's base-rate bound engaged (metadata ``base_rate_bound``: its
    ticks times the period; 0 without the record)."""
    record = trial.metadata.get("base_rate_bound") or {}
    ticks = int(record.get("ticks") or 0)
    if ticks == 0 or time_s.size < 2:
        return 0.0
    return ticks * float(np.median(np.diff(time_s)))


def _logs_contact(trial: Trial) -> bool:
    """The log carries contact physics and an outcome (format version 2 or later)."""
    return all(name in trial.frame.columns for name in trial_log.CONTACT_FORCE) and "outcome" in trial.metadata


CONTACT_METRICS: tuple[str, ...] = (
    "contact_normal_speed_m_s", "contact_tangential_speed_m_s", "peak_contact_force_n", "contact_impulse_n_s",
    "mse_slave_force_n2", "felt_force_mse_n2",
    "residual_base_angular_velocity_rad_s", "residual_debris_angular_velocity_rad_s",
    "post_capture_attitude_drift_rad",
)


def _contact_metrics(trial: Trial, time_s: NDArray[np.float64], window_s: float) -> dict[str, float]:
    """The contact-physics metrics (NaN for logs without them; see the module docstring)."""
    values = {name: NAN for name in CONTACT_METRICS}
    if not _logs_contact(trial):
        return values
    first = trial.metadata.get("first_contact") or {}
    values["contact_normal_speed_m_s"] = float(first.get("normal_speed_m_s", NAN))
    values["contact_tangential_speed_m_s"] = float(first.get("tangential_speed_m_s", NAN))
    force = trial.vectors(trial_log.CONTACT_FORCE)
    values["peak_contact_force_n"] = _nanmax(np.linalg.norm(force, axis=1)) if len(force) else NAN
    dt = np.diff(time_s, prepend=time_s[0] - (time_s[1] - time_s[0] if len(time_s) > 1 else 0.0))
    values["contact_impulse_n_s"] = float(np.linalg.norm((force * dt[:, None]).sum(axis=0)))
    values["mse_slave_force_n2"] = _force_mse(time_s, force, float(first.get("t_s", NAN)), window_s)
    rendered = rendered_contact_force(trial)
    if rendered is not None:
        values["felt_force_mse_n2"] = _force_mse(time_s, rendered - force, float(first.get("t_s", NAN)), window_s)
    mixed = _mixed_run(trial)
    if mixed is not None and all(name in trial.frame.columns for name in trial_log.WRENCH_FORCE):
        start, end = mixed
        values["mse_slave_force_n2"] = _force_mse(time_s, trial.vectors(trial_log.WRENCH_FORCE), start, end - start)
    capture = trial.metadata.get("capture") or {}
    captured_at = float(capture.get("t_s", NAN)) if trial.metadata.get("outcome") == "captured" else NAN
    if math.isfinite(captured_at):
        end = min(captured_at + window_s, float(time_s[-1]))
        at = np.array([captured_at, end])
        attitude = _interpolate_rows(time_s, trial.vectors(trial_log.BASE_ATTITUDE), at)
        base_w = _interpolate_rows(time_s, trial.vectors(trial_log.BASE_ANGULAR_VELOCITY), at[1:])
        debris_w = _interpolate_rows(time_s, trial.vectors(trial_log.DEBRIS_ANGULAR_VELOCITY), at[1:])
        values["post_capture_attitude_drift_rad"] = float(np.linalg.norm(attitude[1] - attitude[0]))
        values["residual_base_angular_velocity_rad_s"] = float(np.linalg.norm(base_w[0]))
        values["residual_debris_angular_velocity_rad_s"] = float(np.linalg.norm(debris_w[0]))
    return values


def rendered_contact_force(trial: Trial) -> NDArray[np.float64] | None:
    """The contact force on the debris as the operator's side rendered it to the hand, per
    row [N], task frame, in the slave's newtons: ``F̂ = −(R F_calc / k_f − F_guide) / s``
    (zero while clutched); None without contact feedback or without the mapping in the
    metadata (see the module docstring, ``felt_force_mse_n2``)."""
    compensator = trial.metadata.get("compensator") or {}
    mapping = (trial.metadata.get("gains") or {}).get("mapping") or {}
    scale = float(compensator.get("contact_force_scale") or 0.0) if isinstance(compensator, dict) else 0.0
    if not (isinstance(compensator, dict) and compensator.get("contact_feedback") and scale > 0.0
            and math.isfinite(scale) and "rotation_task_from_device" in mapping and mapping.get("force_scale")):
        return None
    rotation = np.asarray(mapping["rotation_task_from_device"], dtype=float)
    calculated = trial.vectors(trial_log.DEVICE_FORCE_CALCULATED)
    hand = calculated @ rotation.T / float(mapping["force_scale"]) - trial.vectors(trial_log.GUIDANCE_FORCE)
    if trial_log.FLAG_CLUTCH in trial.frame.columns:
        hand[trial.flag(trial_log.FLAG_CLUTCH)] = 0.0
    rendered: NDArray[np.float64] = -hand / scale
    return rendered


def _mixed_run(trial: Trial) -> tuple[float, float] | None:
    """Start and end [s] of the first run of the ``mixed`` behaviour (None: none ran)."""
    post = trial.metadata.get("post_capture") or {}
    for run in post.get("results") or ():
        if run.get("behaviour") == "mixed" and run.get("started_s") is not None and run.get("ended_s") is not None:
            return float(run["started_s"]), float(run["ended_s"])
    return None


def _force_mse(time_s: NDArray[np.float64], force: NDArray[np.float64], start_s: float, window_s: float) -> float:
    """Time mean of ``|F|²`` over ``[start_s, start_s + window_s]`` (NaN for a NaN start
    or a window the log does not cover)."""
    if not math.isfinite(start_s) or time_s.size < 2:
        return NAN
    nodes = window_nodes(time_s, start_s, start_s + window_s)
    if nodes.size < 2 or nodes[-1] <= nodes[0]:
        return NAN
    window = _interpolate_rows(time_s, force, nodes)
    return time_average(nodes, np.einsum("ij,ij->i", window, window))


def _reach_metrics(
    trial: Trial,
    time_s: NDArray[np.float64],
    rel_p: NDArray[np.float64],
    rel_v: NDArray[np.float64],
    radius: float,
    window_s: float,
    reach: Reach | None,
) -> dict[str, float]:
    """The metrics of :data:`REACH_METRICS` (all NaN if the target is never reached)."""
    if reach is None:
        return {name: NAN for name in REACH_METRICS}
    ee = trial.vectors(trial_log.EE_POSITION)
    k, a = reach.index, reach.fraction
    chords = np.linalg.norm(np.diff(ee[: k + 1], axis=0), axis=1)
    travelled = float(chords[:-1].sum() + a * chords[-1]) if k > 0 else 0.0
    at = np.array([reach.time_s])
    v_reach = _interpolate_rows(time_s, rel_v, at)[0]
    p_reach = _interpolate_rows(time_s, rel_p, at)[0]
    p_norm = float(np.linalg.norm(p_reach))
    normal = -float(v_reach @ p_reach) / p_norm if p_norm > 0.0 else float(np.linalg.norm(v_reach))

    nodes = window_nodes(time_s, reach.time_s, reach.time_s + window_s)
    p_window = _interpolate_rows(time_s, rel_p, nodes)
    v_window = _interpolate_rows(time_s, rel_v, nodes)
    centre_sq = np.einsum("ij,ij->i", p_window, p_window)
    gap_sq = np.maximum(np.sqrt(centre_sq) - radius, 0.0) ** 2
    velocity_sq = np.einsum("ij,ij->i", v_window, v_window)
    observed = float(nodes[-1] - nodes[0])
    if observed <= 0.0:
        mse_gap = mse_centre = mse_velocity = NAN
    else:
        mse_gap = time_average(nodes, gap_sq)
        mse_centre = time_average(nodes, centre_sq)
        mse_velocity = time_average(nodes, velocity_sq)
    return {
        "time_to_reach_s": reach.time_s - float(time_s[0]),
        "distance_travelled_m": travelled,
        "impact_velocity_m_s": float(np.linalg.norm(v_reach)),
        "impact_velocity_x_m_s": float(v_reach[0]),
        "impact_velocity_y_m_s": float(v_reach[1]),
        "impact_velocity_z_m_s": float(v_reach[2]),
        "impact_normal_velocity_m_s": normal,
        "mse_position_m2": mse_gap,
        "mse_centre_position_m2": mse_centre,
        "mse_velocity_m2_s2": mse_velocity,
        "post_capture_observed_s": observed,
    }


def _empty_metrics(trial: Trial) -> TrialMetrics:
    """Metrics of a log without a single row (a trial that crashed at once)."""
    values: dict[str, Any] = {name: NAN for name in METRIC_NAMES}
    values.update(
        reached=False,
        captured=False,
        n_contacts=0,
        saturated_fraction=NAN,
        n_replans=0,
        n_fault_ticks=0,
        n_watchdog_ticks=0,
        n_singular_ticks=0,
        n_limited_ticks=0,
        near_reaction_boundary_s=0.0,
        base_rate_bounded_s=0.0,
        n_ticks=0,
        complete=trial.complete,
    )
    return TrialMetrics(**values)
