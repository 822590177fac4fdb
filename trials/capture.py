"""Automatic capture (the paper's "AS" condition) through the servo tick, in memory.

The controller alone captures the debris: the target (debris centre) starts at
``ee0 + target_offset_m`` and moves at the constant ``target_velocity_m_s`` (task frame);
the slave is commanded with the target's own position, velocity and acceleration
(:class:`trials.commanders.ControllerCommander`), so eq. 10 drives position and velocity
errors to zero together (the "free-shape-trajectory reactionless capture"). It runs
through the same :class:`trials.tick.ServoTick` as every trial, with a recorder that
keeps the rows in memory (no file) and also the torque eq. 2 predicted. "Reached" means
``|ee − target| − radius <= 0`` with the end effector measured on the plant. Used by
``capture-trainer robot capture``, ``capture-trainer bench reaction`` and the start-pose
search (:mod:`trials.pose_search`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import cast

import numpy as np
from numpy.typing import NDArray

from capture_trainer import trial_log
from guidance.law import NoGuidance
from robot.backends import ARM_BACKENDS
from robot.debris import CaptureScene, DebrisSpec, SimulatesDebris
from robot.ik import IKSettings
from robot.models import ManipulatorModel, box_inertia, get_model
from robot.slave import SlaveController
from scenarios.motion import LinearMotion, TargetMotion
from trials.clocks import HeadlessClock
from trials.commanders import ControllerCommander
from trials.tick import ServoTick, TickLimits, TrialParts

POST_CAPTURE_WINDOW_S = 1.0


class MemoryRecorder:
    """A :class:`trials.tick.TickRecorder` that keeps every row in a preallocated array.

    Args:
        n_joints: the arm's joints (the ``trial_log`` float columns depend on it).
        capacity: most rows.
        extra: a (3,) array copied beside each row (the slave's predicted base torque).
    """

    def __init__(self, n_joints: int, capacity: int, extra: NDArray[np.float64]) -> None:
        self.columns = trial_log.float_columns(n_joints)
        self.flag_columns = trial_log.FLAGS
        self.row = np.zeros(len(self.columns))
        self.flag_bits = 0
        self.write_error: str | None = None
        self.rows = np.zeros((capacity, len(self.columns)))
        self.extra_rows = np.zeros((capacity, 3))
        self.bits = np.zeros(capacity, dtype=np.int64)
        self._extra = extra
        self.count = 0

    def append_row(self) -> None:
        self.rows[self.count] = self.row
        self.extra_rows[self.count] = self._extra
        self.bits[self.count] = self.flag_bits
        self.count += 1

    def flag_rows(self, name: str) -> NDArray[np.bool_]:
        """(count,) the named ``trial_log.FLAGS`` flag of every recorded row."""
        flagged: NDArray[np.bool_] = (self.bits[: self.count] & (1 << trial_log.FLAGS.index(name))) != 0
        return flagged

    def column(self, *names: str) -> NDArray[np.float64]:
        """The recorded rows of the named columns, (count,) for one name else (count, k)."""
        index = [self.columns.index(name) for name in names]
        values = self.rows[: self.count, index]
        return values[:, 0] if len(names) == 1 else values


@dataclass(frozen=True)
class AutoCaptureResult:
    """Time series (one row per servo tick, after the tick's plant step) and summary.

    Arrays (task frame, SI): ``t_s`` (T,), ``ee_position_m`` / ``ee_velocity_m_s`` (T, 3)
    measured on the plant, ``target_position_m`` / ``target_velocity_m_s`` (T, 3),
    ``distance_m`` (T,) = |ee − target| − radius, ``base_torque_n_m`` (T, 3) measured on
    the plant from the base's angular momentum, ``base_torque_predicted_n_m`` (T, 3) eq. 2
    as the solver predicted it, ``base_attitude_rad`` (T, 3), ``base_angular_velocity_rad_s``
    (T, 3), ``q_rad`` / ``qd_rad_s`` (T, n), ``sigma_ratio`` (T,), ``singular`` /
    ``limited`` (T,) bool.

    Summary: ``captured`` (reached, and within ``hold_tolerance_m`` of the surface for the
    1 s after the first reach), ``first_reach_time_s`` (NaN if never),
    ``impact_velocity_m_s`` (|ee velocity − target velocity| at the first reach, NaN if
    never), ``final_distance_m``, ``rms_base_torque_n_m`` / ``peak_base_torque_n_m`` (norm
    of the constrained torque components, measured), ``base_attitude_drift_rad`` (largest
    |attitude| seen), ``sigma_ratio_min``, ``singularity_detected``, ``peak_joint_rate_rad_s``,
    ``peak_joint_rate_fraction`` (largest |q̇_i| / q̇_max,i), ``max_tracking_error_after_capture_m``.
    With a debris body: ``captured`` is the tool closing, at ``captured_at_s``, carrying
    ``payload_mass_kg``.
    """

    model: str
    solver: str
    dt_s: float
    t_s: NDArray[np.float64]
    ee_position_m: NDArray[np.float64]
    ee_velocity_m_s: NDArray[np.float64]
    target_position_m: NDArray[np.float64]
    target_velocity_m_s: NDArray[np.float64]
    distance_m: NDArray[np.float64]
    base_torque_n_m: NDArray[np.float64]
    base_torque_predicted_n_m: NDArray[np.float64]
    base_attitude_rad: NDArray[np.float64]
    base_angular_velocity_rad_s: NDArray[np.float64]
    q_rad: NDArray[np.float64]
    qd_rad_s: NDArray[np.float64]
    sigma_ratio: NDArray[np.float64]
    singular: NDArray[np.bool_]
    limited: NDArray[np.bool_]
    captured: bool
    first_reach_time_s: float
    impact_velocity_m_s: float
    final_distance_m: float
    rms_base_torque_n_m: float
    peak_base_torque_n_m: float
    base_attitude_drift_rad: float
    sigma_ratio_min: float
    singularity_detected: bool
    peak_joint_rate_rad_s: float
    peak_joint_rate_fraction: float
    max_tracking_error_after_capture_m: float
    fault_count: int
    captured_at_s: float = math.nan
    payload_mass_kg: float = 0.0

    def window(self, end_s: float) -> slice:
        """Rows with ``t_s <= end_s``."""
        return slice(0, int(np.searchsorted(self.t_s, end_s, side="right")))


def run_automatic_capture(model_name: str, solver: str = "lse", duration_s: float = 6.0,
                          target_offset_m: tuple[float, float, float] = (0.28, 0.0, 0.0),
                          target_velocity_m_s: tuple[float, float, float] = (-0.1, 0.0, 0.0),
                          target_radius_m: float = 0.0044, dt_s: float = 1e-3, k_p: float = 7.7, k_d: float = 5.0,
                          q0_rad: NDArray[np.float64] | None = None, settings: IKSettings | None = None,
                          hold_tolerance_m: float = 0.005,
                          model: ManipulatorModel | None = None,
                          debris_mass_kg: float | None = None) -> AutoCaptureResult:
    """Run the automatic capture headless on the PyBullet plant, through the servo tick.

    Args:
        model_name: a registered model name (``planar-3r`` or ``spatial-7dof``).
        solver: ``lse`` or ``pinv``.
        duration_s: simulated time [s] (the capture does not end early).
        target_offset_m: target start relative to the initial end effector [m], task frame.
        target_velocity_m_s: constant target velocity [m/s], task frame.
        target_radius_m: debris radius [m] subtracted from the distance.
        dt_s: servo and plant period [s]; k_p, k_d: gains of eq. 10.
        q0_rad: start pose (the model's when None).
        settings: IK settings (defaults when None).
        hold_tolerance_m: how far beyond the surface the end effector may be during the
            1 s after the first reach and still count as captured [m].
        model: a ManipulatorModel overriding the registry (e.g. ``with_base``); its name
            must still be ``model_name``'s.
        debris_mass_kg: simulate the debris as a body of this mass (a 0.2 m cube, the
            target radius its fixture) with contact physics; the tool closes on it
            (``trials.capture_event``) and the arm carries it to rest. None: the paper's
            kinematic target, nothing closes.
    """
    model = model or get_model(model_name)
    steps = int(round(duration_s / dt_s))
    arm = ARM_BACKENDS.get("pybullet")(model, q0_rad=q0_rad, dt_s=dt_s)
    try:
        slave = SlaveController(model, arm, solver=solver, k_p=k_p, k_d=k_d, dt_s=dt_s, settings=settings)
        start = arm.measure().ee_position_m.copy()
        fixture0 = start + np.asarray(target_offset_m, dtype=float)
        target: TargetMotion = LinearMotion(fixture0, target_velocity_m_s)
        scene: CaptureScene | None = None
        commander = ControllerCommander(target)
        radius = target_radius_m
        if debris_mass_kg is not None:
            size = (0.2, 0.2, 0.2)
            inertia = box_inertia(debris_mass_kg, size)
            spec = DebrisSpec(debris_mass_kg, ((inertia[0], 0.0, 0.0), (0.0, inertia[1], 0.0), (0.0, 0.0, inertia[2])),
                              target_radius_m, (float(fixture0[0]), float(fixture0[1]), float(fixture0[2])),
                              velocity_m_s=(float(target_velocity_m_s[0]), float(target_velocity_m_s[1]),
                                            float(target_velocity_m_s[2])), size_m=size)
            scene = cast(SimulatesDebris, arm).add_debris(spec, target)
            target, radius = scene, scene.contact_radius_m
            commander = ControllerCommander(scene, scene.contact_radius_m, scene.reading)
        recorder = MemoryRecorder(model.n_joints, steps, slave.status.base_torque_predicted_n_m)
        parts = TrialParts(commander, slave, arm, target, NoGuidance(), recorder, scene)
        tick = ServoTick(parts, TickLimits(dt_s, steps, radius, math.inf))
        HeadlessClock(dt_s).run(tick, steps)
    finally:
        arm.close()
    result = summarise(model_name, solver, dt_s, _arrays(recorder, model, radius), hold_tolerance_m,
                       model.arrays.reaction_rows, model.qd_max_rad_s, slave.fault_count)
    if scene is None:
        return result
    return replace(result, captured=tick.monitor.captured, captured_at_s=tick.monitor.captured_at_s,
                   payload_mass_kg=float(debris_mass_kg or 0.0))


def _arrays(recorder: MemoryRecorder, model: ManipulatorModel, radius_m: float) -> dict[str, NDArray]:
    """The recorded columns under the names :func:`summarise` reads (planar: distance in x-y)."""
    col = recorder.column
    n = model.n_joints
    ee, tp = col(*trial_log.EE_POSITION), col(*trial_log.TARGET_POSITION)
    diff = ee - tp
    if model.task_dim == 2:
        diff[:, 2] = 0.0
    return {
        "t": col(trial_log.TIME), "ee": ee, "eev": col(*trial_log.EE_VELOCITY), "tp": tp,
        "tv": col(*trial_log.TARGET_VELOCITY), "dist": np.linalg.norm(diff, axis=1) - radius_m,
        "tau": col(*trial_log.BASE_TORQUE), "tau_pred": recorder.extra_rows[: recorder.count],
        "att": col(*trial_log.BASE_ATTITUDE), "w": col(*trial_log.BASE_ANGULAR_VELOCITY),
        "q": col(*(trial_log.joint_position_column(i) for i in range(n))),
        "qd": col(*(trial_log.joint_velocity_column(i) for i in range(n))),
        "sigma": col(trial_log.SIGMA_RATIO), "sing": recorder.flag_rows(trial_log.FLAG_SINGULAR),
        "lim": recorder.flag_rows(trial_log.FLAG_LIMITED),
    }


def summarise(model_name: str, solver: str, dt_s: float, rec: dict[str, NDArray], hold_tolerance_m: float,
              reaction_rows: NDArray[np.int64], qd_max: tuple[float, ...], faults: int) -> AutoCaptureResult:
    """Build the result and its summary from the recorded arrays."""
    t = rec["t"]
    dist = rec["dist"]
    reached = np.flatnonzero(dist <= 0.0)
    tau_norm = np.linalg.norm(rec["tau"][:, reaction_rows], axis=1)
    if reached.size:
        k0 = int(reached[0])
        t_reach = float(t[k0])
        impact = float(np.linalg.norm(rec["eev"][k0] - rec["tv"][k0]))
        window = (t >= t_reach) & (t <= t_reach + POST_CAPTURE_WINDOW_S)
        max_err = float(np.max(dist[window]))
        captured = bool(max_err <= hold_tolerance_m and t[-1] >= t_reach + POST_CAPTURE_WINDOW_S - 0.5 * dt_s)
    else:
        t_reach = impact = max_err = math.nan
        captured = False
    qd_frac = float(np.max(np.abs(rec["qd"]) / np.asarray(qd_max)[None, :]))
    return AutoCaptureResult(
        model=model_name, solver=solver, dt_s=dt_s, t_s=t, ee_position_m=rec["ee"], ee_velocity_m_s=rec["eev"],
        target_position_m=rec["tp"], target_velocity_m_s=rec["tv"], distance_m=dist, base_torque_n_m=rec["tau"],
        base_torque_predicted_n_m=rec["tau_pred"], base_attitude_rad=rec["att"],
        base_angular_velocity_rad_s=rec["w"], q_rad=rec["q"], qd_rad_s=rec["qd"], sigma_ratio=rec["sigma"],
        singular=rec["sing"], limited=rec["lim"], captured=captured, first_reach_time_s=t_reach,
        impact_velocity_m_s=impact, final_distance_m=float(dist[-1]),
        rms_base_torque_n_m=float(np.sqrt(np.mean(tau_norm**2))), peak_base_torque_n_m=float(np.max(tau_norm)),
        base_attitude_drift_rad=float(np.max(np.linalg.norm(rec["att"], axis=1))),
        sigma_ratio_min=float(np.min(rec["sigma"])), singularity_detected=bool(np.any(rec["sing"])),
        peak_joint_rate_rad_s=float(np.max(np.abs(rec["qd"]))), peak_joint_rate_fraction=qd_frac,
        max_tracking_error_after_capture_m=max_err, fault_count=faults,
    )
