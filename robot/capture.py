"""Automatic capture (the paper's "AS" condition): the controller alone captures the debris.

The target (debris centre) starts at ``ee0 + target_offset_m`` and moves at the constant
``target_velocity_m_s`` (task frame); the slave controller is commanded with the
target's own position, velocity and acceleration, so eq. 10 drives position and
velocity errors to zero together (the "free-shape-trajectory reactionless capture").
"Reached" means ``|ee − target| − radius <= 0`` with the end effector measured on the
plant. Used by the tests, ``capture-trainer bench reaction`` and ``make demo``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from robot.ik import IKSettings
from robot.models import ManipulatorModel, get_model
from robot.pybullet_arm import PyBulletArm
from robot.slave import SlaveController

POST_CAPTURE_WINDOW_S = 1.0


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

    def window(self, end_s: float) -> slice:
        """Rows with ``t_s <= end_s``."""
        return slice(0, int(np.searchsorted(self.t_s, end_s, side="right")))


def run_automatic_capture(model_name: str, solver: str = "lse", duration_s: float = 6.0,
                          target_offset_m: tuple[float, float, float] = (0.28, 0.0, 0.0),
                          target_velocity_m_s: tuple[float, float, float] = (-0.1, 0.0, 0.0),
                          target_radius_m: float = 0.0044, dt_s: float = 1e-3, k_p: float = 7.7, k_d: float = 5.0,
                          q0_rad: NDArray[np.float64] | None = None, settings: IKSettings | None = None,
                          hold_tolerance_m: float = 0.005,
                          model: ManipulatorModel | None = None) -> AutoCaptureResult:
    """Run the automatic capture headless on the PyBullet plant.

    Args:
        model_name: a registered model name (``planar-3r`` or ``spatial-7dof``).
        solver: ``lse`` or ``pinv``.
        duration_s: simulated time [s].
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
    """
    model = model or get_model(model_name)
    steps = int(round(duration_s / dt_s))
    n = model.n_joints
    offset = np.asarray(target_offset_m, dtype=float)
    vel = np.asarray(target_velocity_m_s, dtype=float)
    rec = {
        "t": np.zeros(steps), "ee": np.zeros((steps, 3)), "eev": np.zeros((steps, 3)), "tp": np.zeros((steps, 3)),
        "tv": np.zeros((steps, 3)), "dist": np.zeros(steps), "tau": np.zeros((steps, 3)),
        "tau_pred": np.zeros((steps, 3)), "att": np.zeros((steps, 3)), "w": np.zeros((steps, 3)),
        "q": np.zeros((steps, n)), "qd": np.zeros((steps, n)), "sigma": np.zeros(steps),
        "sing": np.zeros(steps, dtype=bool), "lim": np.zeros(steps, dtype=bool),
    }
    with PyBulletArm(model, q0_rad=q0_rad, dt_s=dt_s) as arm:
        slave = SlaveController(model, arm, solver=solver, k_p=k_p, k_d=k_d, dt_s=dt_s, settings=settings)
        start = arm.measure().ee_position_m.copy()
        x_cmd = np.empty(3)
        v_cmd = vel.copy()
        a_cmd = np.zeros(3)
        planar = model.task_dim == 2
        for k in range(steps):
            t = k * dt_s
            x_cmd[:] = start + offset + vel * t
            status = slave.step(t, x_cmd, v_cmd, a_cmd)
            rec["tau_pred"][k] = status.base_torque_predicted_n_m
            rec["sigma"][k] = status.sigma_ratio
            rec["sing"][k] = status.singular
            rec["lim"][k] = status.limited
            arm.step()
            meas = arm.measure()
            t1 = t + dt_s
            rec["t"][k] = t1
            target = start + offset + vel * t1
            rec["tp"][k] = target
            rec["tv"][k] = vel
            rec["ee"][k] = meas.ee_position_m
            rec["eev"][k] = meas.ee_velocity_m_s
            diff = meas.ee_position_m - target
            if planar:
                diff[2] = 0.0
            rec["dist"][k] = math.sqrt(float(diff @ diff)) - target_radius_m
            rec["tau"][k] = meas.base_torque_n_m
            rec["att"][k] = meas.base_attitude_rad
            rec["w"][k] = meas.base_angular_velocity_rad_s
            rec["q"][k] = meas.q_rad
            rec["qd"][k] = meas.qd_rad_s
        faults = slave.fault_count
    return summarise(model_name, solver, dt_s, rec, hold_tolerance_m, model.arrays.reaction_rows, model.qd_max_rad_s,
                     faults)


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
