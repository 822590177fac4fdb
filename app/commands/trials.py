"""`capture-trainer run`, `study`, `protocols` and `demo`."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from typing import TYPE_CHECKING, Any

from app.commands import arguments
from capture_trainer.errors import TrialError
from haptics.backends import BACKENDS
from haptics.participants import PARTICIPANT_PRESETS
from trials.conditions import CONDITIONS

if TYPE_CHECKING:
    from trials.study import StudyInterrupted


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
    run.add_argument("--condition", choices=CONDITIONS.names(), default="dg")
    run.add_argument(
        "--participant",
        default="novice",
        type=arguments.person_id,
        help=f"simulated kind ({', '.join(PARTICIPANT_PRESETS.names())}) or, with a real device, "
        "the person's id",
    )
    run.add_argument("--seed", type=arguments.seed, default=0, help="the run's seed, 0 to 2**32 - 1")
    run.add_argument("--out", type=arguments.output_dir, default="runs/trials", help="folder for the trial file")
    run.add_argument("--device", choices=BACKENDS.names(), default="simulated")
    run.add_argument(
        "--paced", action="store_true", help="run the simulated device in real time (1 kHz)"
    )
    run.add_argument("--solver", choices=("lse", "pinv"), default="lse")
    run.add_argument("--contact", choices=("auto", "physics", "proximity"), default="auto",
                     help="contact physics with the debris as a body (auto: when the arm's world can "
                     "simulate it, i.e. not over --arm) or the paper's proximity test")
    arguments.delay_options(run)
    arguments.compensator_options(run)
    run.add_argument("--task", metavar="TASK",
                     help="the behaviours after the capture (docs/behaviours.md): a built-in task "
                     "(`capture-trainer tasks`), a task .toml path, or none; default: the built-in task "
                     "that names the scenario, if any")
    run.add_argument("--json", action="store_true", help="print the trial summary as JSON")
    arguments.arm_options(run)
    run.set_defaults(handler=_run)

    study = subparsers.add_parser(
        "study",
        help="run (or resume) a study protocol headless",
        description="Run every trial of a protocol (built-in name or .toml file) with "
        "simulated participants, counterbalanced, in parallel worker processes. An "
        "interrupted study resumes where it stopped when run again with the same --out "
        "(trials whose plan fingerprint matches are kept). A folder holding trials of a "
        "different plan is refused unless --force.",
    )
    study.add_argument("protocol", help="built-in protocol name (see `protocols`) or .toml path; a sweep "
                       "(a protocol with a [grid] or [random] table, e.g. the built-in `delay`) runs as `sweep` does")
    study.add_argument("--out", type=arguments.output_dir, required=True, help="the study folder")
    study.add_argument("--workers", type=arguments.workers, default=1,
                       help=f"parallel worker processes, 1 to {arguments.MAX_WORKERS}")
    study.add_argument(
        "--force", action="store_true",
        help="replace trials of a different plan in --out (they are deleted and run again)",
    )
    _executor_options(study)
    arguments.arm_options(study)
    arguments.delay_options(study)
    arguments.compensator_options(study)
    study.set_defaults(handler=_study)

    sweep = subparsers.add_parser(
        "sweep",
        help="run a sweep: a protocol plus a [grid] or [random] design over scenario fields",
        description="Expand a sweep file (a study protocol plus a [grid] table of dotted scenario fields "
        "and value lists, and/or a [random] table of ranges and a sample count) into scenario variants, "
        "validate every one, and run them as one resumable study in --out; then write "
        "sweep-results.parquet (one row per trial, the swept values as columns) and sweep.png "
        "(response curves). A killed sweep resumes when run again.",
    )
    sweep.add_argument("file", help="the sweep .toml file, or a built-in sweep's name (see `protocols`)")
    sweep.add_argument("--out", type=arguments.output_dir, required=True, help="the sweep folder")
    sweep.add_argument("--workers", type=arguments.workers, default=1,
                       help=f"parallel worker processes, 1 to {arguments.MAX_WORKERS}")
    _executor_options(sweep)
    sweep.add_argument("--force", action="store_true", help="replace trials of a changed plan")
    sweep.set_defaults(handler=_sweep)

    protocols = subparsers.add_parser("protocols", help="list the built-in study protocols")
    protocols.add_argument("name", nargs="?", help="show this protocol")
    protocols.set_defaults(handler=_protocols)

    tasks = subparsers.add_parser("tasks", help="list the built-in post-capture tasks and the behaviours",
                                  description="The task state machines `run --task` takes (docs/behaviours.md).")
    tasks.add_argument("name", nargs="?", help="show this task (built-in name or .toml path) as JSON")
    tasks.set_defaults(handler=_tasks)

    warm = subparsers.add_parser(
        "warm-up",
        help="compile the kernels into numba's cache now (make setup runs it), not in a first trial",
        description="Run short headless trials of both arm models, every condition, the staged "
        "path, a capture and the delay compensators, so that numba compiles and caches every hot "
        "kernel now rather than in the first trial (where a paced trial on a device would stall). "
        "Seconds once cached.",
    )
    warm.set_defaults(handler=_warm_up)

    demo = subparsers.add_parser(
        "demo",
        help="the main job: the paper-2019 study headless, then its report",
    )
    demo.add_argument("--out", type=arguments.output_dir, default="runs/demo", help="the study folder")
    demo.add_argument("--workers", type=arguments.workers, default=2,
                      help=f"parallel worker processes, 1 to {arguments.MAX_WORKERS}")
    demo.add_argument("--force", action="store_true", help="replace trials of a different plan in --out")
    demo.set_defaults(handler=_demo)


def _warm_up(args: argparse.Namespace) -> int:
    from trials.warm_up import warm_up_kernels

    def progress(index: int, count: int, label: str) -> None:
        print(f"[{index:2d}/{count}] {label}", file=sys.stderr, flush=True)

    result = warm_up_kernels(progress)
    print(f"warm-up: {result['trials']} short trials in {result['wall_s']:.1f} s; the kernels are cached",
          file=sys.stderr)
    return 0


def _run(args: argparse.Namespace) -> int:
    from trials.vocabulary import load_scenario

    load_scenario(args.scenario)  # every problem of the scenario, before the simulation is loaded
    if args.task not in (None, "none"):
        from trials.behaviours.machine import load_task

        load_task(args.task)  # every problem of the task file, too
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
            arm=args.arm,
            arm_keys=args.keys,
            contact=args.contact,
            task=args.task,
            **arguments.delay_request(args),
            **arguments.compensator_request(args),
        ),
        args.out,
    )
    if args.json:
        print(json.dumps(summary, default=str))
    else:
        print(f"trial written to {summary['path']}")
        print(f"  outcome: {summary.get('outcome')} ({summary.get('outcome_reason')})")
        if summary.get("task"):
            print(f"  task {summary['task']}: {summary.get('task_outcome')} ({summary.get('task_reason')})")
        for key in ("end_reason", "time_to_reach_s", "impact_velocity_m_s", "wall_s"):
            print(f"  {key}: {summary.get(key)}")
    return 0


def _executor_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--executor", choices=("local", "dask-local", "dask"), default="local",
                        help="where the trials run: local (a process pool, default), dask-local (a Dask "
                        "LocalCluster of --workers processes) or dask (the scheduler at --scheduler)")
    parser.add_argument("--scheduler", metavar="ADDR",
                        help="the Dask scheduler with --executor dask: tcp://127.0.0.1:8786 on this machine, "
                        "tls://HOST:PORT off it (Dask's TLS configuration)")
    parser.add_argument("--chunk-size", type=arguments.integer(1, 10_000), default=None, metavar="N",
                        help="trials handed to a worker at a time (default: 1 on the local pool; on Dask up to 4, "
                        "keeping at least 32 tasks per worker)")


def _study(args: argparse.Namespace) -> int:
    from analysis.study import prime_trial
    from trials.protocol import load_protocol
    from trials.study import StudyInterrupted, run_study, run_trial_spec
    from trials.sweep import is_sweep_reference

    if is_sweep_reference(args.protocol):  # a sweep (a built-in such as `delay`, or a file): run it as one
        return _sweep(args)

    trial_function = None
    if args.arm is not None:
        if args.workers != 1:
            raise TrialError("--arm: an arm server runs one session at a time; use --workers 1")
    overrides: dict[str, Any] = {**arguments.delay_request(args), **arguments.compensator_request(args)}
    link = {key: value for key, value in overrides.items() if value is not None}
    if args.arm is not None or link:
        trial_function = functools.partial(run_trial_spec, arm=args.arm, arm_keys=args.keys, on_written=prime_trial,
                                           **link)
    try:
        if args.arm is not None and args.executor != "local":
            raise TrialError("--arm: an arm server runs one session at a time; use the local executor")
        if args.executor == "dask":
            from trials.study import check_scheduler

            check_scheduler(args.scheduler)
        result = run_study(load_protocol(args.protocol), args.out, workers=args.workers, force=args.force,
                           run_trial=trial_function, executor=args.executor, scheduler=args.scheduler,
                           chunk_size=args.chunk_size, on_trial_written=prime_trial)
    except StudyInterrupted as stop:
        return _stopped(stop, args)
    replaced = f", {result.replaced} replaced" if result.replaced else ""
    print(
        f"study in {result.out_dir}: {result.planned} trials planned, {result.skipped} already "
        f"done, {result.ran} run, {len(result.failed)} failed{replaced}, {result.wall_s:.1f} s"
    )
    return 1 if result.failed else 0


def _sweep(args: argparse.Namespace) -> int:
    from analysis.study import prime_trial
    from analysis.sweep import write_sweep_results
    from trials.study import StudyInterrupted
    from trials.sweep import prepare_sweep, run_sweep

    reference = getattr(args, "file", None) or args.protocol
    if args.executor == "dask":
        from trials.study import check_scheduler

        check_scheduler(args.scheduler)  # before anything is written
    if getattr(args, "arm", None) is not None:
        raise TrialError("--arm: a sweep runs on the simulated arm; run its trials one by one with `run --arm`")
    if hasattr(args, "delay_ms") and any(value is not None for value in {
            **arguments.delay_request(args), **arguments.compensator_request(args)}.values()):
        raise TrialError("--delay-ms, --jitter-ms, --loss, --compensator, --contact-feedback: a sweep sets its "
                         "trials' fields in its design; put them in its [set] or [grid] table")
    prepared = prepare_sweep(reference, args.out)  # every problem before the study starts
    print(f"sweep {prepared[0].name}: {len(prepared[1])} scenario variants", file=sys.stderr)
    try:
        result, _ = run_sweep(reference, args.out, prepared, workers=args.workers, force=args.force, executor=args.executor,
                              scheduler=args.scheduler, chunk_size=args.chunk_size, on_trial_written=prime_trial)
    except StudyInterrupted as stop:
        return _stopped(stop, args)
    table, figure = write_sweep_results(args.out)
    print(f"sweep in {result.out_dir}: {result.planned} trials planned, {result.skipped} already done, "
          f"{result.ran} run, {len(result.failed)} failed, {result.wall_s:.1f} s; results {table}, curves {figure}")
    return 1 if result.failed else 0


def _stopped(stop: StudyInterrupted, args: argparse.Namespace) -> int:
    """A study stopped by a signal (``trials.study.StudyInterrupted``): one line, 128 + signal."""
    print(f"capture-trainer: study {stop}; its workers are stopped and the completed trials kept "
          f"in {args.out}; run the same command to resume", file=sys.stderr)
    return 128 + stop.signum


def _protocols(args: argparse.Namespace) -> int:
    from trials.protocol import builtin_protocol_names, load_protocol

    from trials.sweep import is_sweep_reference, read_sweep_file

    if args.name is None:
        width = max(16, *(len(name) for name in builtin_protocol_names()))
        for name in builtin_protocol_names():
            if is_sweep_reference(name):
                data = read_sweep_file(name)[0]
                swept = ", ".join(key for table in ("grid", "random") for key in data.get(table, {})
                                  if key not in ("samples", "seed"))
                print(f"{name:<{width}} {data.get('description', '')} (a sweep over {swept})")
            else:
                print(f"{name:<{width}} {load_protocol(name).description}")
        return 0
    if is_sweep_reference(args.name):
        print(json.dumps(read_sweep_file(args.name)[0], indent=2))
        return 0
    print(json.dumps(load_protocol(args.name).as_dict(), indent=2))
    return 0


def _tasks(args: argparse.Namespace) -> int:
    from trials.behaviours import BEHAVIOURS
    from trials.behaviours.machine import TASKS, load_task

    if args.name is not None:
        print(json.dumps(load_task(args.name).as_dict(), indent=2, default=str))
        return 0
    for name in TASKS.names():
        task = load_task(name)
        after = f" (after {', '.join(task.scenarios)})" if task.scenarios else ""
        print(f"{name:<16} {task.description}{after}")
    print(f"behaviours: {', '.join(BEHAVIOURS.names())}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from analysis.report import report_study
    from analysis.study import prime_trial
    from trials.protocol import load_protocol
    from trials.study import StudyInterrupted, run_study

    try:
        result = run_study(load_protocol("paper-2019"), args.out, workers=args.workers, force=args.force,
                           on_trial_written=prime_trial)
    except StudyInterrupted as stop:
        return _stopped(stop, args)
    print(
        f"study: {result.planned} trials ({result.skipped} resumed, {result.ran} run, "
        f"{len(result.failed)} failed) in {result.wall_s:.1f} s",
        file=sys.stderr,
    )
    report = report_study(args.out)
    print(f"report written to {report}")
    return 1 if result.failed else 0
