"""`capture-trainer scenarios list | show NAME | validate FILE | check FILE|NAME | generate`."""

from __future__ import annotations

import argparse
import json

from app.commands import arguments


def _list(args: argparse.Namespace) -> int:
    from scenarios.loader import builtin_names
    from trials.vocabulary import load_scenario

    for name in builtin_names():
        scenario = load_scenario(name)
        print(f"{name:<16} {scenario.robot.model:<13} {scenario.description}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from scenarios.toml_out import to_toml
    from trials.vocabulary import load_scenario

    print(to_toml(load_scenario(args.name)), end="")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from capture_trainer.errors import ScenarioError
    from scenarios.toml_in import ProblemsError, problem_lines
    from trials.vocabulary import load_scenario

    problems: list[str] = []
    failed: list[str] = []
    for path in args.files:
        try:
            scenario = load_scenario(path)
        except ScenarioError as error:
            problems.extend(problem_lines(error))
            failed.append(path)
            continue
        print(f"ok: {path} ({scenario.name}, {scenario.robot.model}, {scenario.target.motion})")
    if problems:
        raise ProblemsError(failed[0] if len(failed) == 1 else f"{len(failed)} files", tuple(problems))
    return 0


def _check(args: argparse.Namespace) -> int:
    from app.scenario_check import check_scenario

    check = check_scenario(args.reference, solver=args.solver)
    if args.json:
        print(json.dumps(check.as_dict(), allow_nan=False))
        return 0
    print(f"{check.scenario} ({check.model}, solver {check.solver}, automatic capture, "
          f"{check.duration_s:.2f} s simulated, ended: {check.end_reason})")
    for line in check.verdict:
        print(f"  {line}")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from capture_trainer.errors import ScenarioError
    from scenarios.toml_out import to_toml
    from trials.vocabulary import random_scenario

    text = to_toml(random_scenario(args.seed, args.model))
    if args.out is None:
        print(text, end="")
        return 0
    try:
        Path(args.out).write_text(text, encoding="utf-8")
    except OSError as error:
        raise ScenarioError(f"{args.out}: cannot write: {error.strerror or error}") from None
    print(f"wrote {args.out}")
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register the ``scenarios`` command group."""
    from robot.models import MODELS

    parser = subparsers.add_parser("scenarios", help="list, show, validate and generate capture scenarios")
    commands = parser.add_subparsers(dest="scenarios_command", metavar="SUBCOMMAND", required=True)

    listing = commands.add_parser("list", help="list the built-in scenarios")
    listing.set_defaults(handler=_list)

    show = commands.add_parser("show", help="print a scenario (built-in name or .toml path) with every field resolved")
    show.add_argument("name", metavar="NAME", help="built-in name (e.g. paper-2019) or path to a .toml file")
    show.set_defaults(handler=_show)

    validate = commands.add_parser(
        "validate", help="check scenario files; exit 2 with one line per problem, every problem of every file"
    )
    validate.add_argument("files", metavar="FILE", nargs="+", help="scenario .toml file(s)")
    validate.set_defaults(handler=_validate)

    check = commands.add_parser(
        "check",
        help="run the automatic capture on a scenario: reachable, capturable, joint-limit and "
        "singularity margins, base disturbance (runs the simulation; validate does not)",
    )
    check.add_argument("reference", metavar="FILE|NAME", help="scenario .toml file or built-in name")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument("--solver", choices=("lse", "pinv"), default="lse",
                       help="IK solver: lse (reactionless, default) or pinv (minimum norm)")
    check.set_defaults(handler=_check)

    generate = commands.add_parser("generate", help="write a seeded random scenario as TOML")
    generate.add_argument("--seed", type=arguments.seed, required=True,
                          help="random seed (0 to 2**32 - 1), also stored in the scenario")
    generate.add_argument("--model", choices=MODELS.names(), default=MODELS.names()[0], help="manipulator model")
    generate.add_argument("--out", type=arguments.output_file, default=None,
                          help="output file (default: print to stdout)")
    generate.set_defaults(handler=_generate)
