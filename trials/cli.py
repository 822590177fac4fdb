"""The `capture-trainer` command line.

Each package contributes its own sub-commands from a small `<package>/cli.py` module
exposing ``add_commands(subparsers)``; this module only assembles them, sets up logging
and turns the project's errors into one clear line and a non-zero exit code. Command
modules import nothing heavy at import time: the work is imported inside the handlers.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys
from collections.abc import Sequence

from capture_trainer import __version__
from capture_trainer.errors import CaptureTrainerError

COMMAND_MODULES: tuple[str, ...] = (
    "trials.commands",
    "scenarios.cli",
    "haptics.cli",
    "robot.cli",
    "analysis.cli",
    "trials.ui_cli",
    "benchmarks.cli",
)

EXIT_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every package's sub-commands registered."""
    parser = argparse.ArgumentParser(
        prog="capture-trainer",
        description="Haptic-guidance trainer for capturing moving space debris.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        if importlib.util.find_spec(module_name) is None:
            continue
        importlib.import_module(module_name).add_commands(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.handler(args) or 0)
    except CaptureTrainerError as error:
        print(f"capture-trainer: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("capture-trainer: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
