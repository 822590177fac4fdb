"""`capture-trainer run`, `study`, `protocols` and `demo`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from capture_trainer.catalog import CONDITIONS, DEVICE_BACKENDS, PARTICIPANT_KINDS


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser(
        "run",
        help="run one trial and write its Parquet log",
        description="Run one capture trial. With --device simulated (default) a simulated "
        "participant holds a simulated device and the trial runs headless as fast as "
        "possible; with --device openhaptics the person on the stylus is the participant "
        "and the device's 1 kHz scheduler drives the loop (no window needed).",
    )
    run.add_argument("--scenario", default="paper-2019", help="built-in name or .toml path")
    run.add_argument("--condition", choices=CONDITIONS, default="dg")
    run.add_argument(
        "--participant",
        default="novice",
        help=f"simulated kind ({', '.join(PARTICIPANT_KINDS)}) or, with a real device, "
        "the person's id",
    )
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", type=Path, default=Path("runs/trials"))
    run.add_argument("--device", choices=DEVICE_BACKENDS, default="simulated")
    run.add_argument(
        "--paced", action="store_true", help="run the simulated device in real time (1 kHz)"
    )
    run.add_argument("--solver", choices=("lse", "pinv"), default="lse")
    run.add_argument("--json", action="store_true", help="print the trial summary as JSON")
    run.set_defaults(handler=_run)

    study = subparsers.add_parser(
        "study",
        help="run (or resume) a study protocol headless",
        description="Run every trial of a protocol (built-in name or .toml file) with "
        "simulated participants, counterbalanced, in parallel worker processes. An "
        "interrupted study resumes where it stopped when run again with the same --out.",
    )
    study.add_argument("protocol", help="built-in protocol name (see `protocols`) or .toml path")
    study.add_argument("--out", type=Path, required=True)
    study.add_argument("--workers", type=int, default=1)
    study.set_defaults(handler=_study)

    protocols = subparsers.add_parser("protocols", help="list the built-in study protocols")
    protocols.add_argument("name", nargs="?", help="show this protocol")
    protocols.set_defaults(handler=_protocols)

    demo = subparsers.add_parser(
        "demo",
        help="the main job: the paper-2019 study headless, then its report",
    )
    demo.add_argument("--out", type=Path, default=Path("runs/demo"))
    demo.add_argument("--workers", type=int, default=2)
    demo.set_defaults(handler=_demo)


def _run(args: argparse.Namespace) -> int:
    from trials.runner import TrialRequest, run_trial

    summary = run_trial(
        TrialRequest(
            scenario=args.scenario,
            condition=args.condition,
            participant=args.participant,
            seed=args.seed,
            device=args.device,
            paced=args.paced,
            solver=args.solver,
        ),
        args.out,
    )
    if args.json:
        print(json.dumps(summary, default=str))
    else:
        print(f"trial written to {summary['path']}")
        for key in ("end_reason", "time_to_reach_s", "impact_velocity_m_s", "wall_s"):
            print(f"  {key}: {summary.get(key)}")
    return 0


def _study(args: argparse.Namespace) -> int:
    from trials.protocol import load_protocol
    from trials.study import run_study

    result = run_study(load_protocol(args.protocol), args.out, workers=args.workers)
    print(
        f"study in {result.out_dir}: {result.planned} trials planned, {result.skipped} already "
        f"done, {result.ran} run, {len(result.failed)} failed, {result.wall_s:.1f} s"
    )
    return 1 if result.failed else 0


def _protocols(args: argparse.Namespace) -> int:
    from trials.protocol import builtin_protocol_names, load_protocol

    if args.name is None:
        for name in builtin_protocol_names():
            print(f"{name:<16} {load_protocol(name).description}")
        return 0
    print(json.dumps(load_protocol(args.name).as_dict(), indent=2))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from analysis.report import report_study
    from trials.protocol import load_protocol
    from trials.study import run_study

    result = run_study(load_protocol("paper-2019"), args.out, workers=args.workers)
    print(
        f"study: {result.planned} trials ({result.skipped} resumed, {result.ran} run, "
        f"{len(result.failed)} failed) in {result.wall_s:.1f} s",
        file=sys.stderr,
    )
    report = report_study(args.out)
    print(f"report written to {report}")
    return 1 if result.failed else 0
