"""`capture-trainer scenarios check`: is a scenario reachable and capturable, and at what cost?

:func:`check_scenario` runs one automatic-capture trial (condition ``as``: the slave
controller captures, no participant, no device) through the normal trial path
(``trials.runner.run_trial``), reads its log back and reduces it to a
:class:`ScenarioCheck`: whether the end effector reaches the debris and captures it, how
close the arm comes to its joint limits and to a reaction singularity, and what the base
feels. ``scenarios validate`` stays schema-only and fast; this runs the simulation.

It lives in the application because it needs both ``trials`` (to run) and ``analysis``
(to read the log), and neither of those packages may import the other
(docs/architecture.md).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: The trial file's stem inside the check's folder.
CHECK_TRIAL_ID = "scenario-check"


@dataclass(frozen=True)
class ScenarioCheck:
    """What one automatic capture of a scenario shows (SI units, times from the trial's start).

    Attributes:
        scenario: the scenario's name.
        model: the manipulator model.
        solver: the IK solver (``lse`` reactionless, ``pinv`` minimum norm).
        reachable: the end effector reached the debris' surface (``analysis.metrics``'
            ``reached``).
        capturable: the trial's logged outcome is ``captured``; for a log that records no
            outcome, a contact held for a whole post-capture window (the kinematic
            ``captured`` metric, as the analysis' capture rate counts it).
        outcome: the logged outcome word, or the provisional one (``analysis.outcomes``).
        outcome_provisional: ``outcome`` was derived, the log records none.
        end_reason: why the trial stopped (``capture_window_done``, ``time_limit``, ...).
        time_to_reach_s: first reach [s] (NaN if never reached).
        impact_velocity_m_s: relative speed at the first reach [m/s] (NaN if never reached).
        capture_time_s: end of the first held post-capture window [s] (NaN if none).
        duration_s: simulated length of the trial [s].
        min_joint_limit_margin_rad: smallest distance of any joint to its nearer position
            limit over the trial [rad] (negative: beyond the limit).
        worst_joint: 0-based index of that joint (column ``q<i>_rad`` of the log).
        worst_limit: ``lower`` or ``upper``: which of its limits it came closest to.
        n_limited_ticks: ticks on which the IK clipped a joint position, rate or
            acceleration limit (the log's ``limited`` flag).
        min_sigma_ratio: smallest reaction-singularity gauge σ_min(M P)/‖M‖ over the trial.
        sigma_threshold: the IK's threshold below which a tick is reported singular
            (``robot.ik.IKSettings().sigma_threshold``).
        n_singular_ticks: ticks flagged singular.
        singular_fraction: share of ticks flagged singular (0 to 1).
        peak_base_attitude_rad, final_base_attitude_rad: largest and final norm of the
            base's rotation vector from its start attitude [rad].
        peak_base_torque_n_m, rms_base_torque_n_m: largest and RMS norm of the reaction
            torque on the base [N m].
        n_ticks: servo ticks in the log.
        verdict: the human-readable summary, one line each.
    """

    scenario: str
    model: str
    solver: str
    reachable: bool
    capturable: bool
    outcome: str
    outcome_provisional: bool
    end_reason: str
    time_to_reach_s: float
    impact_velocity_m_s: float
    capture_time_s: float
    duration_s: float
    min_joint_limit_margin_rad: float
    worst_joint: int
    worst_limit: str
    n_limited_ticks: int
    min_sigma_ratio: float
    sigma_threshold: float
    n_singular_ticks: int
    singular_fraction: float
    peak_base_attitude_rad: float
    final_base_attitude_rad: float
    peak_base_torque_n_m: float
    rms_base_torque_n_m: float
    n_ticks: int
    verdict: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data: NaN becomes None, the verdict a list."""
        values = asdict(self)
        values["verdict"] = list(self.verdict)
        return {key: None if isinstance(value, float) and not math.isfinite(value) else value
                for key, value in values.items()}


def joint_limit_margin(q_rad: np.ndarray, q_min_rad: tuple[float, ...],
                       q_max_rad: tuple[float, ...]) -> tuple[float, int, str]:
    """``(margin [rad], joint, "lower"|"upper")``: the smallest distance of any joint to
    its nearer limit over the rows of ``q_rad`` (n, n_joints); rows with a non-finite angle
    are skipped. NaN, -1, "" when no row is finite."""
    q = np.asarray(q_rad, dtype=float)
    q = q[np.all(np.isfinite(q), axis=1)]
    if q.size == 0:
        return math.nan, -1, ""
    to_lower = q - np.asarray(q_min_rad, dtype=float)
    to_upper = np.asarray(q_max_rad, dtype=float) - q
    lower_min, upper_min = to_lower.min(axis=0), to_upper.min(axis=0)
    per_joint = np.minimum(lower_min, upper_min)
    joint = int(np.argmin(per_joint))
    side = "lower" if lower_min[joint] <= upper_min[joint] else "upper"
    return float(per_joint[joint]), joint, side


def check_scenario(reference: str, solver: str = "lse", out_dir: str | Path | None = None) -> ScenarioCheck:
    """Run the automatic capture on a scenario and summarise it.

    Args:
        reference: built-in scenario name or path of a scenario file.
        solver: ``lse`` or ``pinv``.
        out_dir: keep the trial log in this folder (default: a temporary folder, removed).

    Raises:
        ScenarioError: the scenario cannot be loaded (every problem, one line each).
        TrialError, AnalysisError: the trial cannot be run or its log read.
    """
    from trials.vocabulary import load_scenario

    load_scenario(reference)  # every problem of the file, before the simulation is loaded
    if out_dir is not None:
        return _run_and_read(reference, solver, Path(out_dir))
    with tempfile.TemporaryDirectory(prefix="capture-trainer-check-") as folder:
        return _run_and_read(reference, solver, Path(folder))


def _run_and_read(reference: str, solver: str, out_dir: Path) -> ScenarioCheck:
    from analysis.metrics import trial_metrics
    from analysis.outcomes import capture_value, trial_outcome
    from analysis.trial import read_trial
    from robot.ik import IKSettings
    from robot.models import get_model
    from trials.runner import TrialRequest, run_trial

    summary = run_trial(TrialRequest(scenario=reference, condition="as", solver=solver, trial_id=CHECK_TRIAL_ID),
                        out_dir)
    trial = read_trial(summary["path"])
    metadata = trial.metadata
    metrics = trial_metrics(trial)
    outcome, provisional = trial_outcome(metadata, metrics.reached, metrics.complete)
    capturable = bool(capture_value(outcome, provisional, metrics.captured))
    # A scenario overrides only the base's mass and inertia, never the joint limits.
    model = get_model(str(metadata["model"]))
    margin, joint, side = joint_limit_margin(trial.joint_angles_rad(), model.q_min_rad, model.q_max_rad)
    n_ticks = metrics.n_ticks
    values: dict[str, Any] = dict(
        scenario=str(metadata.get("scenario", reference)),
        model=model.name,
        solver=solver,
        reachable=metrics.reached,
        capturable=capturable,
        outcome=outcome,
        outcome_provisional=provisional,
        end_reason=str(metadata.get("end_reason", "")),
        time_to_reach_s=metrics.time_to_reach_s,
        impact_velocity_m_s=metrics.impact_velocity_m_s,
        capture_time_s=metrics.capture_time_s,
        duration_s=metrics.duration_s,
        min_joint_limit_margin_rad=margin,
        worst_joint=joint,
        worst_limit=side,
        n_limited_ticks=metrics.n_limited_ticks,
        min_sigma_ratio=metrics.min_sigma_ratio,
        sigma_threshold=IKSettings().sigma_threshold,
        n_singular_ticks=metrics.n_singular_ticks,
        singular_fraction=metrics.n_singular_ticks / n_ticks if n_ticks else math.nan,
        peak_base_attitude_rad=metrics.peak_base_attitude_rad,
        final_base_attitude_rad=metrics.final_base_attitude_rad,
        peak_base_torque_n_m=metrics.peak_base_torque_n_m,
        rms_base_torque_n_m=metrics.rms_base_torque_n_m,
        n_ticks=n_ticks,
    )
    return ScenarioCheck(**values, verdict=verdict_lines(values, float(trial.post_capture_window_s)))


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if math.isfinite(value) else "-"


def verdict_lines(v: dict[str, Any], window_s: float) -> tuple[str, ...]:
    """The human-readable verdict of a check's values (the fields of :class:`ScenarioCheck`)."""
    if v["reachable"]:
        reach = f"yes (first reach at {_seconds(v['time_to_reach_s'])}, {v['impact_velocity_m_s']:.3f} m/s relative)"
    else:
        reach = f"no (never within the debris' radius in {_seconds(v['duration_s'])})"
    if not v["outcome_provisional"]:
        at_s = v["capture_time_s"] if v["capturable"] and math.isfinite(v["capture_time_s"]) else v["duration_s"]
        capture = f"{_yes(v['capturable'])} ({v['outcome']} at {_seconds(at_s)})"
    elif v["capturable"]:
        capture = (f"yes (contact held {window_s:g} s, to {_seconds(v['capture_time_s'])}; "
                   f"outcome {v['outcome']!r} is provisional: the log records none)")
    else:
        capture = f"no ({v['outcome']} at {_seconds(v['duration_s'])}, provisional)"
    if v["worst_joint"] >= 0:
        limits = (f"closest joint limit: {v['min_joint_limit_margin_rad']:.3f} rad "
                  f"(joint {v['worst_joint']}, {v['worst_limit']} limit); "
                  f"the IK clipped a joint limit (position, rate or acceleration) on {v['n_limited_ticks']} ticks")
    else:
        limits = "closest joint limit: - (no joint angles logged)"
    sigma, threshold = v["min_sigma_ratio"], v["sigma_threshold"]
    below = math.isfinite(sigma) and sigma < threshold
    share = 100.0 * v["singular_fraction"] if math.isfinite(v["singular_fraction"]) else math.nan
    singularity = (f"reaction singularity: min sigma_ratio {sigma:.3g} {'<' if below else '>='} threshold "
                   f"{threshold:g}, flagged singular on {share:.1f} % of ticks")
    base = (f"base: peak attitude {math.degrees(v['peak_base_attitude_rad']):.3g}° "
            f"(final {math.degrees(v['final_base_attitude_rad']):.3g}°), "
            f"peak torque {v['peak_base_torque_n_m']:.3g} N m, RMS {v['rms_base_torque_n_m']:.3g} N m")
    return (f"reachable: {reach}, capturable: {capture}", limits, singularity, base)
