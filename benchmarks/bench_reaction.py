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
from typing import TYPE_CHECKING, Any

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
    parser.add_argument("--family", type=int, default=0, metavar="N",
                        help="instead: N members of the documented scenario family (scenarios.generator."
                             "family_scenario), AS and DG, LSE against pinv, as a distribution")
    parser.add_argument("--family-seed", type=int, default=0, help="seed of the family's first member (default 0)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes for --family (default 1)")
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


#: A family member is reactionless when, over its capture window, the base turns less than
#: this [rad] and the LSE/pinv RMS base-torque ratio stays under :data:`FAMILY_RATIO_MAX`.
FAMILY_ATTITUDE_MAX_RAD = math.radians(1.0)
FAMILY_RATIO_MAX = 1e-3
FAMILY_CONDITIONS = ("as", "dg")


def _family_member(model_name: str, seed: int, folder: str) -> dict[str, object]:
    """One family member: AS and DG (novice), LSE and pinv, measured over the approach
    ``[0, first contact]`` (the whole trial without a contact): what the IK puts on the
    base. From the contact on, the contact and the closing impulse act on the base with
    either solver; their part is reported as ``contact_peak_attitude_rad``."""
    import numpy as np

    from capture_trainer.trial_log import BASE_ATTITUDE, BASE_TORQUE, read_trial_log
    from robot.models import MODELS
    from scenarios.generator import family_scenario
    from scenarios.toml_out import to_toml
    from trials.runner import TrialRequest, run_trial

    scenario = family_scenario(seed, model_name, models=MODELS)
    path = f"{folder}/{scenario.name}.toml"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(to_toml(scenario))
    rows = MODELS.get(model_name).arrays.reaction_rows
    member: dict[str, object] = {"seed": seed, "scenario": scenario.name, "description": scenario.description}
    for condition in FAMILY_CONDITIONS:
        runs: dict[str, dict[str, float]] = {}
        outcomes: dict[str, str] = {}
        for solver in ("lse", "pinv"):
            summary = run_trial(TrialRequest(scenario=path, condition=condition, solver=solver,
                                             trial_id=f"{scenario.name}-{condition}-{solver}"), folder)
            table, metadata = read_trial_log(summary["path"])
            frame = table.to_pandas()
            first = (metadata.get("first_contact") or {}).get("t_s")
            end = float(first) if first is not None else float(frame["t_s"].iloc[-1])
            window = frame[frame["t_s"] <= end]
            after = np.linalg.norm(frame[list(BASE_ATTITUDE)].to_numpy(), axis=1)
            torque = np.linalg.norm(window[list(BASE_TORQUE)].to_numpy()[:, rows], axis=1)
            attitude = np.linalg.norm(window[list(BASE_ATTITUDE)].to_numpy(), axis=1)
            runs[solver] = {"rms_torque": float(np.sqrt(np.mean(torque ** 2))), "peak_attitude_rad": float(attitude.max()),
                            "trial_peak_attitude_rad": float(after.max()),
                            "singular_fraction": float(np.mean(window["singular"]))}
            outcomes[solver] = str(summary.get("outcome"))
        ratio = runs["lse"]["rms_torque"] / runs["pinv"]["rms_torque"] if runs["pinv"]["rms_torque"] > 0 else math.nan
        member[condition] = {"lse_peak_attitude_rad": runs["lse"]["peak_attitude_rad"],
                             "pinv_peak_attitude_rad": runs["pinv"]["peak_attitude_rad"],
                             "lse_rms_base_torque": runs["lse"]["rms_torque"],
                             "pinv_rms_base_torque": runs["pinv"]["rms_torque"], "ratio_rms": ratio,
                             "lse_singular_fraction": runs["lse"]["singular_fraction"],
                             "contact_peak_attitude_rad": runs["lse"]["trial_peak_attitude_rad"],
                             "outcome": outcomes["lse"],
                             "reactionless": bool(runs["lse"]["peak_attitude_rad"] < FAMILY_ATTITUDE_MAX_RAD
                                                  and ratio < FAMILY_RATIO_MAX)}
    return member


def measure_family(model_name: str, count: int, first_seed: int = 0, workers: int = 1) -> dict[str, object]:
    """The family's distribution (the JSON of ``bench reaction --family N``)."""
    import sys
    import tempfile
    from concurrent.futures import ProcessPoolExecutor

    import numpy as np

    wall = time.perf_counter()
    seeds = list(range(first_seed, first_seed + count))
    with tempfile.TemporaryDirectory(prefix="family-") as folder:
        if workers > 1:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(_family_member, model_name, seed, folder) for seed in seeds]
                members = []
                for done, future in enumerate(futures, start=1):
                    members.append(future.result())
                    print(f"family member {done}/{count}", file=sys.stderr, flush=True)
        else:
            members = []
            for done, seed in enumerate(seeds, start=1):
                members.append(_family_member(model_name, seed, folder))
                print(f"family member {done}/{count}", file=sys.stderr, flush=True)
    summary: dict[str, object] = {}
    for condition in FAMILY_CONDITIONS:
        rows: list[Any] = [m[condition] for m in members]
        attitude = np.array([r["lse_peak_attitude_rad"] for r in rows])
        ratio = np.array([r["ratio_rms"] for r in rows])
        summary[condition] = {
            "reactionless_fraction": float(np.mean([r["reactionless"] for r in rows])),
            "attitude_within_1deg_fraction": float(np.mean(attitude < FAMILY_ATTITUDE_MAX_RAD)),
            "ratio_within_1e-3_fraction": float(np.mean(ratio < FAMILY_RATIO_MAX)),
            "lse_peak_attitude_deg_quantiles": np.degrees(np.quantile(attitude, [0.5, 0.9, 1.0])).tolist(),
            "ratio_rms_quantiles": np.quantile(ratio, [0.5, 0.9, 1.0]).tolist(),
            "outcomes": {o: sum(r["outcome"] == o for r in rows) for o in sorted({str(r["outcome"]) for r in rows})},
        }
    return {"model": model_name, "family": count, "first_seed": first_seed,
            "criteria": {"peak_attitude_rad": FAMILY_ATTITUDE_MAX_RAD, "ratio_rms": FAMILY_RATIO_MAX,
                         "window": "the approach: from the start to the first contact"},
            "summary": summary, "members": members, "wall_seconds": time.perf_counter() - wall}


def run(args: argparse.Namespace) -> int:
    """Handler of ``bench reaction``."""
    if args.family:
        result = measure_family(args.model, args.family, args.family_seed, args.workers)
        if args.json:
            print(json.dumps(result))
        else:
            for condition, figures in result["summary"].items():  # type: ignore[attr-defined]
                print(f"{condition}: {figures}")
        return 0
    result = measure(args.model, args.duration, args.payload_ratio)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:40s} {value}")
    return 0
