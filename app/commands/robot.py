"""`capture-trainer robot ...`: inspect the models and run the automatic capture headless."""

from __future__ import annotations

import argparse
import json

from app.commands import arguments


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register ``robot models``, ``robot urdf`` and ``robot capture``."""
    from robot.models import MODELS

    parser = subparsers.add_parser("robot", help="manipulator models and the automatic capture")
    commands = parser.add_subparsers(dest="robot_command", metavar="ROBOT_COMMAND", required=True)
    models = commands.add_parser("models", help="list the manipulator models")
    models.set_defaults(handler=_models)
    urdf = commands.add_parser("urdf", help="print the URDF generated from a model")
    urdf.add_argument("--model", choices=MODELS.names(), required=True)
    urdf.set_defaults(handler=_urdf)
    capture = commands.add_parser("capture", help="automatic capture (AS) on the PyBullet plant, headless")
    capture.add_argument("--model", choices=MODELS.names(), default=MODELS.names()[0])
    capture.add_argument("--solver", choices=("lse", "pinv"), default="lse")
    capture.add_argument("--duration", type=arguments.number(0.0, arguments.MAX_DURATION_S, strict=True), default=6.0,
                         help=f"simulated seconds (at most {arguments.MAX_DURATION_S:g})")
    capture.add_argument("--from", dest="approach", choices=("+x", "+y", "+z"), default="+x",
                         help="side the debris comes from (0.28 m away, 0.1 m/s toward the end effector)")
    capture.add_argument("--json", action="store_true", help="print one JSON object")
    capture.set_defaults(handler=_capture)


def _models(args: argparse.Namespace) -> int:
    from robot.models import MODELS

    for model in MODELS.values():
        print(f"{model.name:14s} {model.n_joints} joints, task {model.task_dim}-D: {model.description}")
    return 0


def _urdf(args: argparse.Namespace) -> int:
    from robot.models import get_model
    from robot.urdf import model_urdf

    print(model_urdf(get_model(args.model)), end="")
    return 0


def _capture(args: argparse.Namespace) -> int:
    from trials.capture import run_automatic_capture
    from trials.pose_search import APPROACHES

    offset, velocity = APPROACHES[args.approach]
    result = run_automatic_capture(args.model, args.solver, duration_s=args.duration, target_offset_m=offset,
                                   target_velocity_m_s=velocity)
    summary = {
        "model": result.model,
        "solver": result.solver,
        "approach": args.approach,
        "captured": result.captured,
        "first_reach_time_s": result.first_reach_time_s,
        "impact_velocity_m_s": result.impact_velocity_m_s,
        "final_distance_m": result.final_distance_m,
        "rms_base_torque_n_m": result.rms_base_torque_n_m,
        "peak_base_torque_n_m": result.peak_base_torque_n_m,
        "base_attitude_drift_rad": result.base_attitude_drift_rad,
        "sigma_ratio_min": result.sigma_ratio_min,
        "singularity_detected": result.singularity_detected,
        "peak_joint_rate_fraction": result.peak_joint_rate_fraction,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key:26s} {value}")
    return 0
