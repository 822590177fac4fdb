"""The `capture-trainer` command line.

Each command group is a small module of :mod:`app.commands` exposing
``add_commands(subparsers)``; this module only assembles them, sets up logging and turns
the project's errors into one clear line and a non-zero exit code. Command modules import
nothing heavy at import time: the work is imported inside the handlers.

Every error a user can cause ends the same way: one line per problem on stderr, starting
``capture-trainer...: error:``, no traceback, exit code 2. That holds for argument errors
(the parser's own, and the checks of :mod:`app.commands.arguments`), for the project's
errors (:class:`~capture_trainer.errors.CaptureTrainerError`: a file with three problems
gives a summary line and three lines) and for the operating system's (a folder that cannot
be written). Anything else is a bug: one line saying so, the traceback with ``--verbose``,
exit code 70.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

# Before numpy loads: one BLAS thread per process (ours are small matrices; the BLAS
# pool's threads only spin, taking a core from the next study worker).
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

from app.commands import analysis, arm, bench, devices, robot, scenarios, trials, window
from capture_trainer import __version__
from capture_trainer.errors import CaptureTrainerError

#: The command groups (modules of :mod:`app.commands`, not the packages they drive), in
#: the order ``--help`` lists them.
COMMAND_MODULES: tuple[ModuleType, ...] = (trials, scenarios, devices, robot, arm, analysis, window, bench)

EXIT_ERROR = 2
#: An unexpected exception (a bug): sysexits' EX_SOFTWARE.
EXIT_BUG = 70

log = logging.getLogger(__name__)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block), exit code 2.

    Sub-command parsers are made of the parent's class, so every command has it.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every command group registered."""
    parser = _Parser(
        prog="capture-trainer",
        description="Haptic-guidance trainer for capturing moving space debris.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.add_commands(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version, or an argument error already printed
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else EXIT_ERROR)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.handler(args) or 0)
    except CaptureTrainerError as error:
        print(f"capture-trainer: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as error:
        print(f"capture-trainer: error: {_os_error(error)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("capture-trainer: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - a bug: one line here, the traceback with --verbose
        log.debug("unexpected error", exc_info=True)
        detail = " ".join(str(error).split())[:300]
        hint = "" if args.verbose else "; run with --verbose for the traceback"
        print(f"capture-trainer: internal error: {type(error).__name__}: {detail} (a bug{hint})", file=sys.stderr)
        return EXIT_BUG


def _os_error(error: OSError) -> str:
    """``PATH: reason`` of an operating-system error, on one line."""
    reason = error.strerror or " ".join(str(error).split())
    names = [str(name) for name in (error.filename, error.filename2) if name is not None]
    return f"{' -> '.join(names)}: {reason}" if names else reason


if __name__ == "__main__":
    raise SystemExit(main())
