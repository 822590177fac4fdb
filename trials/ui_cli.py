"""`capture-trainer train` (the trainee's window) and `session` (an experimenter's protocol)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trials.ui.window import AttemptResult, WindowConfig

from capture_trainer.catalog import CONDITIONS, DEVICE_BACKENDS, PARTICIPANT_KINDS


def _window_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device", choices=DEVICE_BACKENDS, default="simulated",
        help="simulated: watch a simulated participant; mouse: the pointer is the stylus "
        "(forces drawn, not felt); openhaptics: a Touch-class device",
    )
    parser.add_argument(
        "--participant-kind", choices=PARTICIPANT_KINDS, default="novice",
        help="the simulated participant's kind with --device simulated",
    )
    parser.add_argument(
        "--view", choices=("window", "pybullet"), default="window",
        help="pybullet: also PyBullet's 3-D view of the attempt (a viewer process; needs a display)",
    )
    parser.add_argument("--fps", type=float, default=60.0, help="display rate [Hz]")
    parser.add_argument("--stop-after", type=float, metavar="S",
                        help="abort every attempt after S seconds of trial time")
    parser.add_argument("--screenshot", type=Path, metavar="PNG",
                        help="save the window once an attempt reaches --screenshot-at")
    parser.add_argument("--screenshot-at", type=float, default=1.0, metavar="S")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    train = subparsers.add_parser(
        "train",
        help="the trainer window: practise with guidance, test without, see your progress",
        description="Open the trainer window. Enter your name, practise captures with dynamic "
        "guidance (DG), test yourself without guidance (NG); after each attempt a score card "
        "compares it with your earlier attempts; the progress view shows every session. "
        "History is kept in an SQLite database beside the trial files.",
    )
    _window_options(train)
    train.add_argument("--scenario", default="paper-2019", help="built-in name or .toml path")
    train.add_argument("--out", type=Path, default=Path("runs/trainer"),
                       help="trial files go to OUT/trials; the database is OUT/trainees.sqlite")
    train.add_argument("--db", type=Path, help="the trainee database (default OUT/trainees.sqlite)")
    train.add_argument("--trainee", help="skip the name screen")
    train.add_argument(
        "--auto", metavar="CONDITIONS",
        help=f"comma-separated conditions ({', '.join(CONDITIONS)}) to run one after another "
        "without key presses (demos; combine with --quit-when-done)",
    )
    train.add_argument("--quit-when-done", action="store_true",
                       help="close the window after the --auto attempts")
    train.set_defaults(handler=_train)

    session = subparsers.add_parser(
        "session",
        help="run a study protocol with one participant (the experimenter's window)",
        description="Run the participant's trials of PROTOCOL in its counterbalanced order, "
        "with instructions before and a pause after every trial, writing the same study "
        "directory (study.json + trials/*.parquet) as `capture-trainer study`, so the same "
        "analysis applies. Stopped sessions resume with the first incomplete trial.",
    )
    session.add_argument("protocol", help="built-in protocol name (see `protocols`) or .toml path")
    session.add_argument("--participant", required=True, help="the participant's id")
    session.add_argument("--out", type=Path, help="study directory (default runs/sessions/PROTOCOL)")
    _window_options(session)
    session.add_argument("--auto-trials", type=int, default=0, metavar="N",
                         help="run N pending trials without key presses, then close")
    session.set_defaults(handler=_session)


def _config(args: argparse.Namespace, **extra: Any) -> WindowConfig:
    from trials.ui.window import WindowConfig

    return WindowConfig(
        device=args.device,
        participant_kind=args.participant_kind,
        view=args.view,
        fps=args.fps,
        stop_after_s=args.stop_after,
        screenshot=args.screenshot,
        screenshot_at_s=args.screenshot_at,
        **extra,
    )


def _train(args: argparse.Namespace) -> int:
    from capture_trainer.errors import TrialError
    from trials.ui.window import run_trainer

    auto = tuple(c.strip() for c in args.auto.split(",") if c.strip()) if args.auto else ()
    unknown = [c for c in auto if c not in CONDITIONS]
    if unknown:
        raise TrialError(f"--auto: unknown condition(s) {unknown}; expected {list(CONDITIONS)}")
    results = run_trainer(_config(
        args, scenario=args.scenario, out_dir=args.out, db_path=args.db, trainee=args.trainee,
        auto=auto, quit_when_done=args.quit_when_done,
    ))
    _print_results(results)
    return 0


def _session(args: argparse.Namespace) -> int:
    from trials.ui.window import SessionConfig, run_session

    out = args.out or Path("runs/sessions") / Path(args.protocol).stem
    results = run_session(SessionConfig(
        protocol=args.protocol, participant=args.participant, out_dir=out,
        window=_config(args), auto_trials=args.auto_trials,
    ))
    _print_results(results)
    print(f"study directory: {out}")
    return 0


def _print_results(results: list[AttemptResult]) -> None:
    for result in results:
        if result.status == "error":
            print(f"{result.spec.trial_id}: error: {result.message}")
            continue
        timing = result.timing
        print(
            f"{result.summary.get('trial_id', result.spec.trial_id)}: {result.status}, "
            f"servo {timing.get('rate_hz', float('nan')):.1f} Hz, "
            f"p99 {timing.get('p99_period_ms', float('nan')):.3f} ms, "
            f"overruns {timing.get('overruns', '?')}, "
            f"worst {timing.get('max_period_ms', float('nan')):.2f} ms, "
            f"file {result.summary.get('path', '-')}"
        )
