"""`capture-trainer train` (the trainee's window) and `session` (an experimenter's protocol)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.ui.window import AttemptResult, WindowConfig

from app.commands import arguments
from app.ui.data import DATA_ENV, absolute_path
from capture_trainer.paths import safe_component
from haptics.backends import BACKENDS
from haptics.participants import PARTICIPANT_PRESETS
from trials.conditions import CONDITIONS

#: The simulated participant's kind when ``--participant-kind`` is not given.
DEFAULT_KIND = "novice"


def _window_options(parser: argparse.ArgumentParser, device_required: bool = False) -> None:
    device_help = ("simulated: watch a simulated participant; mouse: the pointer is the stylus "
                   "(forces drawn, not felt); openhaptics: a Touch-class device")
    if device_required:
        parser.add_argument(
            "--device", choices=BACKENDS.names(), required=True,
            help=device_help + "; required, so that a simulated session is never taken for a "
            "person's (a person: mouse or openhaptics; simulated: recorded as a simulated kind)",
        )
    else:
        parser.add_argument(
            "--device", choices=BACKENDS.names(), default=None,
            help=device_help + "; default: openhaptics when a Touch answers, else mouse (a device "
            "you drive yourself; the simulated device moves by itself, for watching)",
        )
    parser.add_argument(
        "--participant-kind", choices=PARTICIPANT_PRESETS.names(),
        help=f"the simulated participant's kind, only with --device simulated (default {DEFAULT_KIND})",
    )
    parser.add_argument(
        "--data-dir", type=absolute_path, metavar="DIR",
        help=f"the data folder (default ${DATA_ENV}, else $XDG_DATA_HOME/capture-trainer, "
        "else ~/.local/share/capture-trainer)",
    )
    parser.add_argument(
        "--view", choices=("window", "pybullet"), default="window",
        help="pybullet: also PyBullet's 3-D view of the attempt (a viewer process; needs a display)",
    )
    parser.add_argument("--fps", type=arguments.number(1.0, 1000.0), default=60.0, help="display rate [Hz]")
    parser.add_argument("--stop-after", type=arguments.number(0.0, arguments.MAX_DURATION_S, strict=True),
                        metavar="S", help="abort every attempt after S seconds of trial time")
    parser.add_argument("--screenshot", type=arguments.output_file, metavar="PNG",
                        help="save the window once an attempt reaches --screenshot-at")
    parser.add_argument("--screenshot-at", type=arguments.number(0.0, arguments.MAX_DURATION_S), default=1.0,
                        metavar="S")
    parser.add_argument("--experimenter", action="store_true",
                        help="start in the experimenter's view (servo rate, overruns, base "
                        "disturbance, data-quality flags per trial); the E key toggles it")
    parser.add_argument("--countdown", type=arguments.number(0.0, 60.0), metavar="S",
                        help="countdown before each attempt [s] (default 3, none with --auto)")
    arguments.arm_options(parser)
    arguments.delay_options(parser)
    arguments.compensator_options(parser)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    train = subparsers.add_parser(
        "train",
        help="the trainer window: practise with guidance, test without, see your progress",
        description="Open the trainer window. Enter your name, practise captures with dynamic "
        "guidance (DG), test yourself without guidance (NG); after each attempt a score card "
        "compares it with your earlier attempts; the progress view shows every session. "
        "History is kept in an SQLite database beside the trial files, in the data folder "
        "(see --data-dir) whichever directory the trainer starts from.",
    )
    _window_options(train)
    train.add_argument("--scenario", default="paper-2019", help="built-in name or .toml path")
    train.add_argument("--out", type=absolute_path,
                       help="trial files go to OUT/trials; the database is OUT/trainees.sqlite "
                       "(default DATA/trainer)")
    train.add_argument("--db", type=absolute_path, help="the trainee database (default OUT/trainees.sqlite)")
    train.add_argument("--trainee", type=arguments.person_id, help="skip the name screen")
    train.add_argument(
        "--auto", metavar="CONDITIONS",
        help=f"comma-separated conditions ({', '.join(CONDITIONS.names())}) to run one after another "
        "without key presses (demos; combine with --quit-when-done)",
    )
    train.add_argument("--quit-when-done", action="store_true",
                       help="close the window after the --auto attempts")
    from guidance.schedule import SCHEDULES

    train.add_argument("--schedule", choices=SCHEDULES.names(),
                       help="the trainee's guidance schedule (kept in the trainee database): the share of the "
                       "guidance force felt in guided attempts; fading withdraws it as the captures get softer "
                       "(see docs/guidance.md)")
    train.add_argument("--task", metavar="TASK",
                       help="the behaviours after the capture, triggered with keys 1-9, R, J (docs/behaviours.md): "
                       "a built-in task (`capture-trainer tasks`), a task .toml path, or none; default: the "
                       "built-in task that names the scenario, if any")
    train.set_defaults(handler=_train)

    session = subparsers.add_parser(
        "session",
        help="run a study protocol with one participant (the experimenter's window)",
        description="Run the participant's trials of PROTOCOL in a counterbalanced order (a "
        "balanced Latin square row: the participant's position in the protocol's ids, else "
        "the number of participants already in the study directory), "
        "with instructions before and a pause after every trial, writing the same study "
        "directory (study.json + trials/*.parquet) as `capture-trainer study`, so the same "
        "analysis applies. Stopped sessions resume with the first incomplete trial.",
    )
    session.add_argument("protocol", help="built-in protocol name (see `protocols`) or .toml path")
    session.add_argument("--participant", type=arguments.person_id, required=True, help="the participant's id")
    session.add_argument("--out", type=absolute_path,
                         help="study directory (default DATA/sessions/PROTOCOL)")
    _window_options(session, device_required=True)
    session.add_argument("--auto-trials", type=arguments.integer(0, 100_000), default=0, metavar="N",
                         help="run N pending trials without key presses, then close")
    session.set_defaults(handler=_session)


def default_device() -> str:
    """The trainee's device when ``--device`` is not given: a Touch when one answers
    (``haptics.backends.probe``), else the mouse: practice is something the trainee drives,
    not a simulated participant to watch (``--device simulated`` stays selectable)."""
    from haptics.backends import probe

    available, _ = probe("openhaptics")
    return "openhaptics" if available else "mouse"


def _device(args: argparse.Namespace) -> str:
    device: str | None = args.device
    if device is None:
        # asking for a simulated participant's kind is asking for the simulated device
        device = "simulated" if args.participant_kind is not None else default_device()
        args.device = device
    return device


def _kind(args: argparse.Namespace) -> str:
    """The simulated participant's kind; refused with a device a person holds."""
    from capture_trainer.errors import TrialError

    if args.participant_kind is not None and args.device != "simulated":
        raise TrialError(
            f"--participant-kind {args.participant_kind} describes a simulated participant; "
            f"with --device {args.device} the participant is a person (drop the option, or "
            "use --device simulated)"
        )
    return str(args.participant_kind or DEFAULT_KIND)


def _data_dir(args: argparse.Namespace) -> Path:
    from app.ui.data import data_dir

    return data_dir(args.data_dir)


def _config(args: argparse.Namespace, **extra: Any) -> WindowConfig:
    from app.ui.window import WindowConfig

    device = _device(args)
    return WindowConfig(
        device=device,
        participant_kind=_kind(args),
        experimenter=args.experimenter,
        view=args.view,
        fps=args.fps,
        stop_after_s=args.stop_after,
        screenshot=args.screenshot,
        screenshot_at_s=args.screenshot_at,
        arm=args.arm,
        arm_keys=args.keys,
        countdown_s=args.countdown,
        **arguments.delay_request(args),
        **arguments.compensator_request(args),
        **extra,
    )


def _train(args: argparse.Namespace) -> int:
    from capture_trainer.errors import TrialError
    from app.ui.window import run_trainer
    from trials.vocabulary import load_scenario

    load_scenario(args.scenario)  # a broken scenario is refused here, before the window opens

    auto = tuple(c.strip() for c in args.auto.split(",") if c.strip()) if args.auto else ()
    unknown = [c for c in auto if c not in CONDITIONS]
    if unknown:
        raise TrialError(f"--auto: unknown condition(s) {unknown}; expected {list(CONDITIONS.names())}")
    config = _config(
        args, scenario=args.scenario, out_dir=args.out or _data_dir(args) / "trainer",
        db_path=args.db, trainee=args.trainee,
        auto=auto, quit_when_done=args.quit_when_done, schedule=args.schedule, task=args.task,
    )
    results = run_trainer(config)
    _print_results(results)
    print(f"trainee database: {config.database}")
    return 0


def _session(args: argparse.Namespace) -> int:
    from app.ui.window import SessionConfig, run_session

    out = args.out or _data_dir(args) / "sessions" / safe_component(Path(args.protocol).stem)
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
        priority = "" if result.priority in ("realtime", "") else f"servo priority {result.priority}, "
        print(
            f"{result.summary.get('trial_id', result.spec.trial_id)}: {result.status}, {result.outcome.label}, "
            f"servo {timing.get('rate_hz', float('nan')):.1f} Hz, "
            f"p99 {timing.get('p99_period_ms', float('nan')):.3f} ms, "
            f"overruns {timing.get('overruns', '?')}, "
            f"worst {timing.get('max_period_ms', float('nan')):.2f} ms, "
            f"{priority}"
            f"file {result.summary.get('path', '-')}"
        )
