"""Argument types for the command groups: every value is checked when it is parsed.

Not a command group (it has no ``add_commands``). Each function is an ``argparse``
``type=``: it returns the converted value or raises ``argparse.ArgumentTypeError`` with
what was expected and what was given, which the parser prints as one line and exit
code 2 (``app.cli``)::

    capture-trainer run: error: argument --seed: expected an integer >= 0 and <= 4294967295, got '-1'

Output paths are checked before any work starts: the nearest existing folder on the
way to ``--out`` must be a folder this process can create files in.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from capture_trainer.trial_log import MAX_TEXT_BYTES
from scenarios.toml_in import MAX_SEED, describe

#: Most worker processes of a study.
MAX_WORKERS = 64
#: Longest trial a command may ask for [s] (``scenarios.loader.MAX_TIME_LIMIT_S``).
MAX_DURATION_S = 600.0
#: Longest id of a person (``--participant``, ``--trainee``) [UTF-8 bytes]: it becomes
#: part of trial file names (``trials.protocol.MAX_ID_BYTES``).
MAX_ID_BYTES = 64


def _refuse(expected: str, text: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"expected {expected}, got {describe(text)}")


def integer(minimum: int, maximum: int) -> Callable[[str], int]:
    """An integer in ``[minimum, maximum]``."""
    expected = f"an integer >= {minimum} and <= {maximum}"

    def convert(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise _refuse(expected, text) from None
        if not minimum <= value <= maximum:
            raise _refuse(expected, text)
        return value

    convert.__name__ = "integer"
    return convert


def number(minimum: float, maximum: float, *, strict: bool = False) -> Callable[[str], float]:
    """A finite number in ``[minimum, maximum]`` (``(minimum, maximum]`` when ``strict``)."""
    expected = f"a number {'>' if strict else '>='} {minimum:g} and <= {maximum:g}"

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise _refuse(expected, text) from None
        too_low = value <= minimum if strict else value < minimum
        if not math.isfinite(value) or too_low or value > maximum:
            raise _refuse(expected, text)
        return value

    convert.__name__ = "number"
    return convert


#: ``--seed``: 32 bits, like every seed in scenario and protocol files.
seed = integer(0, MAX_SEED)
#: ``--workers``: parallel worker processes.
workers = integer(1, MAX_WORKERS)


def text(max_bytes: int = MAX_TEXT_BYTES) -> Callable[[str], str]:
    """A non-empty one-line text of at most ``max_bytes`` UTF-8 bytes."""
    expected = f"a non-empty one-line text of at most {max_bytes} bytes"

    def convert(value: str) -> str:
        size = len(value.encode("utf-8", "surrogateescape"))
        if not value.strip() or not value.isprintable() or size > max_bytes:
            raise _refuse(expected, value)
        return value

    convert.__name__ = "text"
    return convert


#: ``--participant``, ``--trainee``: a person's id or a simulated kind.
person_id = text(MAX_ID_BYTES)


def output_dir(value: str) -> Path:
    """A folder to write into: an existing folder, or one that can be created."""
    path = _path(value)
    if _exists(path, value) and not path.is_dir():
        raise argparse.ArgumentTypeError(f"expected a folder to write into, got {value!r}, which is a file")
    _check_writable(path, value)
    return path


def output_file(value: str) -> Path:
    """A file to write: not a folder, in a folder that exists or can be created."""
    path = _path(value)
    if _exists(path, value) and path.is_dir():
        raise argparse.ArgumentTypeError(f"expected a file to write, got {value!r}, which is a folder")
    _check_writable(path.parent, value)
    return path


def _path(value: str) -> Path:
    if not value or not value.isprintable() or len(os.fsencode(value)) > 4096:
        raise _refuse("a path of at most 4096 bytes without control characters", value)
    return Path(value)


def _exists(path: Path, value: str) -> bool:
    try:
        return path.exists()
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot use {value!r}: {error.strerror or error}") from None


def _check_writable(path: Path, value: str) -> None:
    """Refuse ``path`` unless its nearest existing folder lets this process create files."""
    absolute = Path(os.path.abspath(path))
    existing = next((p for p in (absolute, *absolute.parents) if _exists(p, value)), Path("/"))
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write to {value!r}: {existing} is not a folder")
    # os.access alone passes for root and on some special file systems (/proc): create a
    # nameless temporary file to be sure; it disappears when closed.
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        raise argparse.ArgumentTypeError(f"cannot write to {value!r}: {existing} is not writable ({reason})") from None


def arm_options(parser: argparse.ArgumentParser) -> None:
    """``--arm ADDR`` and ``--keys DIR``: drive an arm server over the link."""
    parser.add_argument("--arm", metavar="ADDR",
                        help="drive the arm of an arm server (HOST:PORT of `capture-trainer arm serve` or a real "
                        "arm's) over the link instead of the in-process plant")
    parser.add_argument("--keys", metavar="DIR", help="the link's CURVE keys (`capture-trainer arm keys DIR`); "
                        "required off loopback")


def delay_options(parser: argparse.ArgumentParser) -> None:
    """``--delay-ms``, ``--jitter-ms``, ``--loss``: the delayed link between the
    operator's side and the arm's side (read back in SI by :func:`delay_request`)."""
    parser.add_argument("--delay-ms", type=number(0.0, 60_000.0), metavar="MS",
                        help="one-way delay between the operator's side and the arm's side [ms] (overrides the "
                        "scenario's [delay])")
    parser.add_argument("--jitter-ms", type=number(0.0, 10_000.0), metavar="MS",
                        help="SD of the extra, half-normal delay per sample [ms]")
    parser.add_argument("--loss", type=number(0.0, 0.99), metavar="P", help="probability of a lost sample")


class DelayFields(TypedDict):
    """The ``TrialRequest`` fields of the delay options."""

    delay_s: float | None
    jitter_s: float | None
    loss: float | None


def delay_request(args: argparse.Namespace) -> DelayFields:
    """The delay options as ``TrialRequest`` fields, SI (None: the scenario's)."""
    return {"delay_s": None if args.delay_ms is None else args.delay_ms * 1e-3,
            "jitter_s": None if args.jitter_ms is None else args.jitter_ms * 1e-3,
            "loss": args.loss}


#: ``--contact-feedback`` values.
ON_OFF = {"on": True, "off": False}


def contact_feedback_choices() -> tuple[str, ...]:
    """``--contact-feedback`` values: ``on``, ``off`` and the post-capture contact modes
    of ``trials.contact_modes.CONTACT_MODES`` (``contact`` is what ``on`` means)."""
    from trials.contact_modes import CONTACT_MODES

    return tuple(ON_OFF) + tuple(name for name in CONTACT_MODES.names() if name != "contact")


def compensator_options(parser: argparse.ArgumentParser) -> None:
    """``--compensator`` and ``--contact-feedback``: what the operator's side makes of the
    delay and whether (and how, after the capture) the hand feels the contact (read back
    by :func:`compensator_request`)."""
    from trials.compensators import COMPENSATORS

    parser.add_argument("--compensator", choices=COMPENSATORS.names(),
                        help="delay compensator (overrides the scenario's [delay] compensator; docs/delay.md)")
    parser.add_argument("--contact-feedback", choices=contact_feedback_choices(),
                        help="render the tool's contact force to the hand on top of guidance; free-body, viscous "
                        "or damper: on, and after the capture the hand feels the payload as that body through a "
                        "virtual coupling (overrides the scenario's [rendering] contact_feedback and contact_mode)")


class CompensatorFields(TypedDict):
    """The ``TrialRequest`` fields of the compensator options."""

    compensator: str | None
    contact_feedback: bool | None
    contact_mode: str | None


def compensator_request(args: argparse.Namespace) -> CompensatorFields:
    """The compensator options as ``TrialRequest`` fields (None: the scenario's)."""
    value = args.contact_feedback
    return {"compensator": args.compensator,
            "contact_feedback": None if value is None else ON_OFF.get(value, True),
            "contact_mode": None if value is None or value in ON_OFF else value}
