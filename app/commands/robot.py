"""`capture-trainer robot ...`: inspect the models and run the automatic capture headless."""

from __future__ import annotations

import argparse
import json

from app.commands import arguments

#: Largest grid of ``robot workspace`` (cells per axis) and most approach axes.
MAX_RESOLUTION = 201
MAX_DIRECTIONS = 360


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register ``robot models``, ``robot urdf``, ``robot capture`` and ``robot workspace``."""
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
    workspace = commands.add_parser(
        "workspace", help="map the reactionless workspace: where, and along which axes, the arm tracks a target "
                          "reactionless")
    workspace.add_argument("model", choices=MODELS.names(), help="manipulator model")
    workspace.add_argument("--resolution", type=arguments.integer(1, MAX_RESOLUTION), default=None,
                           help="grid cells per axis (default 41 planar, 21 spatial)")
    workspace.add_argument("--directions", type=arguments.integer(1, MAX_DIRECTIONS), default=None,
                           help="approach axes per point, each tested both ways (default 16 planar, 13 spatial)")
    workspace.add_argument("--workers", type=arguments.workers, default=None,
                           help="threads (default: one per CPU)")
    workspace.add_argument("--figure", type=arguments.output_file, default=None, metavar="FILE.png",
                           help="draw the map into a PNG file")
    workspace.add_argument("--json", action="store_true", help="print one JSON object (SI units)")
    workspace.set_defaults(handler=_workspace)


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


def _workspace(args: argparse.Namespace) -> int:
    from robot.models import get_model
    from robot.workspace import map_workspace

    model = get_model(args.model)
    wmap = map_workspace(model, args.resolution, args.directions, workers=args.workers)
    summary = wmap.summary()
    if args.figure is not None:
        from app.workspace_figure import save_workspace_figure

        args.figure.parent.mkdir(parents=True, exist_ok=True)
        save_workspace_figure(wmap, model, str(args.figure))
    if args.json:
        print(json.dumps(summary))
        return 0
    for line in _workspace_lines(summary):
        print(line)
    if args.figure is not None:
        print(f"figure written to {args.figure}")
    return 0


def _workspace_lines(summary: dict) -> list[str]:
    """The human summary of ``WorkspaceMap.summary()``."""
    unit = summary["size_unit"].replace("^2", "²").replace("^3", "³")
    region = "disc" if summary["task_dim"] == 2 else "ball"
    s = summary["settings"]
    n = summary["resolution"]
    grid = " x ".join([str(n)] * summary["task_dim"])
    start = ", ".join(f"{v:.3f}" for v in summary["start_ee_m"][: summary["task_dim"]])
    shoulder = ", ".join(f"{v:.3f}" for v in summary["shoulder_m"][: summary["task_dim"]])
    lines = [
        f"reactionless workspace of {summary['model']}: {grid} cells of {summary['cell_size_m']:.3f} m, "
        f"{summary['directions']} approach axes, each a ±{s['half_length_m']:g} m pass at {s['speed_m_s']:g} m/s "
        f"after a straight approach from the start pose",
        f"  reach {summary['reach_m']:.3f} m from the shoulder ({shoulder}) m: {region} of "
        f"{summary['reach_size']:.3f} {unit}; {summary['cells_simulated']} cells simulated "
        f"(the others beyond the reach or in the base)",
        f"  workspace (>= {summary['fraction_threshold']:.0%} of the axes trackable): "
        f"{summary['workspace_size']:.4g} {unit} = {summary['coverage']:.1%} of the reach {region} "
        f"({summary['cells_in_workspace']} cells)",
        f"  weighted by the trackable fraction:   {summary['workspace_size_weighted']:.4g} {unit} = "
        f"{summary['coverage_weighted']:.1%}",
        f"  at the start end effector ({start}) m: {summary['start_fraction']:.0%} of the axes trackable, "
        f"sigma_ratio {summary['start_sigma_ratio']:.3g}",
        f"  trackable (point, axis) pairs: {summary['pairs_trackable']} of {summary['pairs_simulated']}; "
        f"largest base attitude change on them {summary['max_attitude_change_trackable_rad'] or 0.0:.2g} rad",
        "  failed pairs by criterion: " + ", ".join(f"{k} {v}" for k, v in summary["failures"].items()),
        "  points whose approach failed: " + ", ".join(f"{k} {v}" for k, v in summary["approach_failures"].items()),
        f"  runtime {summary['runtime_s']:.1f} s",
    ]
    return lines
