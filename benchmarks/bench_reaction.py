"""`capture-trainer bench reaction`: the reactionless IK against the pseudoinverse on the plant.

Runs the automatic capture (trials.capture, through the servo tick; 6 s: approach, reach, 1 s tracking, then
holding on the target) twice, with the LSE solver (eq. 6) and with the minimum-norm
pseudoinverse, and reports the base reaction torque *measured on the simulated plant*
(from the rate of change of the base's angular momentum), the base attitude drift and the
reaction-singularity gauge. ``post_capture`` repeats the capture with the debris as a
body of ``--payload-ratio`` times the arm's mass that the tool closes on, and compares
the solvers over the post-capture window (the payload coasting; LSE with and without
base feedback, ``ratio_rms_post_capture`` and ``ratio_rms_post_capture_eq6``). Prints one
JSON object with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from trials.capture import AutoCaptureResult


def add_bench(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench reaction``."""
    from robot.models import MODELS

    parser = subparsers.add_parser("reaction", help="base reaction torque of LSE vs pseudoinverse (automatic capture)")
    parser.add_argument("--model", choices=MODELS.names(), default=MODELS.names()[0])
    parser.add_argument("--duration", type=float, default=6.0, help="simulated seconds (default 6)")
    parser.add_argument("--payload-ratio", type=float, default=10.0,
                        help="debris mass as a multiple of the arm's for the post-capture comparison (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def _rms(values: NDArray[np.float64]) -> float:
    import numpy as np

    return float(np.sqrt(np.mean(np.square(values)))) if len(values) else math.nan


#: The post-capture window starts this long after the tool closed [s]: the closing tick's
#: impulse (the debris' last relative velocity taken up by the arm, the same for both
#: solvers) is reported on its own.
CLOSING_SETTLE_S = 0.002


def post_capture(model_name: str, payload_ratio: float, duration_s: float) -> dict[str, object]:
    """LSE against pinv after the tool closes on a debris ``payload_ratio`` times the
    arm's mass (contact physics, the payload coasting), with and without base feedback."""
    import numpy as np

    from robot.ik import IKSettings
    from robot.models import get_model
    from trials.capture import POST_CAPTURE_WINDOW_S, run_automatic_capture

    model = get_model(model_name)
    rows = model.arrays.reaction_rows
    mass = payload_ratio * sum(link.mass_kg for link in model.links)
    runs = {name: run_automatic_capture(model_name, solver, duration_s=duration_s, debris_mass_kg=mass,
                                        settings=settings)
            for name, solver, settings in (("lse", "lse", None), ("pinv", "pinv", None),
                                           ("lse_eq6", "lse", IKSettings(base_feedback=False)))}
    captured_at = runs["lse"].captured_at_s

    def window_rms(result: AutoCaptureResult, start_s: float, end_s: float) -> float:
        t = result.t_s
        mask = (t > start_s) & (t <= end_s)
        return _rms(np.linalg.norm(result.base_torque_n_m[mask][:, rows], axis=1))

    def closing_peak(result: AutoCaptureResult) -> float:
        t = result.t_s
        mask = (t > result.captured_at_s) & (t <= result.captured_at_s + CLOSING_SETTLE_S)
        return float(np.max(np.linalg.norm(result.base_torque_n_m[mask][:, rows], axis=1))) if mask.any() else math.nan

    out: dict[str, object] = {"payload_mass_kg": mass, "payload_ratio": payload_ratio,
                              "captured": {name: r.captured for name, r in runs.items()},
                              "captured_at_s": captured_at, "post_capture_settle_s": CLOSING_SETTLE_S}
    if not all(r.captured for r in runs.values()):
        return out
    rms = {name: window_rms(r, r.captured_at_s + CLOSING_SETTLE_S, r.captured_at_s + POST_CAPTURE_WINDOW_S)
           for name, r in runs.items()}
    out.update({
        "post_capture_window_s": [captured_at + CLOSING_SETTLE_S, captured_at + POST_CAPTURE_WINDOW_S],
        "lse_rms_base_torque_post_capture": rms["lse"],
        "pinv_rms_base_torque_post_capture": rms["pinv"],
        "lse_eq6_rms_base_torque_post_capture": rms["lse_eq6"],
        "ratio_rms_post_capture": rms["lse"] / rms["pinv"] if rms["pinv"] > 0 else math.nan,
        "ratio_rms_post_capture_eq6": rms["lse_eq6"] / rms["pinv"] if rms["pinv"] > 0 else math.nan,
        "closing_peak_base_torque": {name: closing_peak(r) for name, r in runs.items()},
        "lse_base_attitude_drift_rad_with_payload": runs["lse"].base_attitude_drift_rad,
        "pinv_base_attitude_drift_rad_with_payload": runs["pinv"].base_attitude_drift_rad,
        "lse_sigma_ratio_min_with_payload": runs["lse"].sigma_ratio_min,
    })
    return out


def measure(model_name: str, duration_s: float = 6.0, payload_ratio: float | None = None) -> dict[str, object]:
    """Both captures and the comparison, as plain data (the JSON of ``bench reaction``)."""
    import numpy as np

    from trials.capture import POST_CAPTURE_WINDOW_S, run_automatic_capture
    from robot.models import get_model

    model = get_model(model_name)
    rows = model.arrays.reaction_rows
    wall = time.perf_counter()
    lse = run_automatic_capture(model_name, "lse", duration_s=duration_s)
    pinv = run_automatic_capture(model_name, "pinv", duration_s=duration_s)
    wall = time.perf_counter() - wall
    t_reach = lse.first_reach_time_s if math.isfinite(lse.first_reach_time_s) else duration_s
    window = lse.t_s <= t_reach + POST_CAPTURE_WINDOW_S

    def torque_norm(result: AutoCaptureResult, mask: NDArray[np.bool_] | None = None) -> NDArray[np.float64]:
        tau: NDArray[np.float64] = np.linalg.norm(result.base_torque_n_m[:, rows], axis=1)
        return tau if mask is None else tau[mask]

    lse_rms, pinv_rms = _rms(torque_norm(lse)), _rms(torque_norm(pinv))
    lse_rms_c, pinv_rms_c = _rms(torque_norm(lse, window)), _rms(torque_norm(pinv, window))
    prediction_error = float(np.max(np.abs(lse.base_torque_n_m - lse.base_torque_predicted_n_m)))
    return {
        "model": model_name,
        "duration_s": duration_s,
        "lse_rms_base_torque": lse_rms,
        "pinv_rms_base_torque": pinv_rms,
        "lse_peak_base_torque": lse.peak_base_torque_n_m,
        "pinv_peak_base_torque": pinv.peak_base_torque_n_m,
        "lse_base_attitude_drift_rad": lse.base_attitude_drift_rad,
        "pinv_base_attitude_drift_rad": pinv.base_attitude_drift_rad,
        "ratio_rms": lse_rms / pinv_rms if pinv_rms > 0 else math.nan,
        "ratio_rms_capture": lse_rms_c / pinv_rms_c if pinv_rms_c > 0 else math.nan,
        "capture_window_s": [0.0, float(t_reach + POST_CAPTURE_WINDOW_S)],
        "singularity_detected": lse.singularity_detected,
        "singular_fraction": float(np.mean(lse.singular)),
        "sigma_ratio_min": lse.sigma_ratio_min,
        "peak_joint_rate": lse.peak_joint_rate_rad_s,
        "peak_joint_rate_fraction_of_limit": lse.peak_joint_rate_fraction,
        "limited_fraction": float(np.mean(lse.limited)),
        "captured": lse.captured,
        "first_reach_time_s": lse.first_reach_time_s,
        "impact_velocity": lse.impact_velocity_m_s,
        "final_distance_m": lse.final_distance_m,
        "max_distance_after_capture_m": lse.max_tracking_error_after_capture_m,
        "pinv_captured": pinv.captured,
        "lse_torque_prediction_max_error_n_m": prediction_error,
        "faults": lse.fault_count + pinv.fault_count,
        "wall_seconds": wall,
        **({"post_capture": post_capture(model_name, payload_ratio, duration_s)} if payload_ratio else {}),
    }


def run(args: argparse.Namespace) -> int:
    """Handler of ``bench reaction``."""
    result = measure(args.model, args.duration, args.payload_ratio)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:40s} {value}")
    return 0
