"""`capture-trainer scenarios list | show NAME | validate FILE | generate`."""

from __future__ import annotations

import argparse


def _list(args: argparse.Namespace) -> int:
    from scenarios.loader import builtin_names, load_scenario

    for name in builtin_names():
        scenario = load_scenario(name)
        print(f"{name:<16} {scenario.robot.model:<13} {scenario.description}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from scenarios.loader import load_scenario
    from scenarios.toml_out import to_toml

    print(to_toml(load_scenario(args.name)), end="")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from scenarios.loader import load_scenario

    for path in args.files:
        scenario = load_scenario(path)
        print(f"ok: {path} ({scenario.name}, {scenario.robot.model}, {scenario.target.motion})")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from capture_trainer.errors import ScenarioError
    from scenarios.generator import random_scenario
    from scenarios.toml_out import to_toml

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
    from capture_trainer.catalog import MODEL_NAMES

    parser = subparsers.add_parser("scenarios", help="list, show, validate and generate capture scenarios")
    commands = parser.add_subparsers(dest="scenarios_command", metavar="SUBCOMMAND", required=True)

    listing = commands.add_parser("list", help="list the built-in scenarios")
    listing.set_defaults(handler=_list)

    show = commands.add_parser("show", help="print a scenario (built-in name or .toml path) with every field resolved")
    show.add_argument("name", metavar="NAME", help="built-in name (e.g. paper-2019) or path to a .toml file")
    show.set_defaults(handler=_show)

    validate = commands.add_parser("validate", help="check scenario files; exit 2 with one clear message on the first error")
    validate.add_argument("files", metavar="FILE", nargs="+", help="scenario .toml file(s)")
    validate.set_defaults(handler=_validate)

    generate = commands.add_parser("generate", help="write a seeded random scenario as TOML")
    generate.add_argument("--seed", type=int, required=True, help="random seed (>= 0), also stored in the scenario")
    generate.add_argument("--model", choices=MODEL_NAMES, default=MODEL_NAMES[0], help="manipulator model")
    generate.add_argument("--out", default=None, help="output file (default: print to stdout)")
    generate.set_defaults(handler=_generate)
