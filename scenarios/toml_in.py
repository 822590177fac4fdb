"""Reading input TOML files within bounds, and reporting every problem of a file at once.

Scenario and protocol files (:mod:`scenarios.loader`, :mod:`trials.protocol`) are read
here: a file larger than :data:`MAX_FILE_BYTES` is refused before it is parsed, a file
nested deeper than :data:`MAX_DEPTH` tables and arrays is refused (so is one that
``tomllib`` cannot parse without running out of stack), and the loaders collect the
problems they find in a :class:`Problems` rather than stopping at the first, so one
:class:`ProblemsError` lists them all, one line each::

    3 problems in my.toml:
    my.toml: seed: expected an integer >= 0 and <= 4294967295, got -1
    my.toml: target.radius_m: expected a number > 0 and <= 1, got -0.01
    my.toml: capture.time_limit_s: expected a number > 0 and <= 600, got 3600

A file with a single problem gives that one line alone. Every line names the file and
the field, says what was expected and what was found.
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from capture_trainer.errors import ScenarioError
from capture_trainer.trial_log import MAX_TEXT_BYTES

#: Largest scenario or protocol file [bytes]; larger ones are refused before parsing.
MAX_FILE_BYTES = 1024 * 1024
#: Deepest nesting of tables and arrays (a scenario needs 3: ``mapping.rotation`` rows).
MAX_DEPTH = 8
#: Longest name, description or other text in a file [UTF-8 bytes]: such texts go into
#: every trial file's metadata, which bounds each string to this
#: (:data:`capture_trainer.trial_log.MAX_TEXT_BYTES`).
MAX_TEXT = MAX_TEXT_BYTES
#: Seeds are 32-bit: ``0 <= seed <= MAX_SEED``.
MAX_SEED = 2**32 - 1
#: Longest reference to another file (a path or a built-in name) [UTF-8 bytes]: PATH_MAX.
MAX_REFERENCE_BYTES = 4096
#: An error lists at most this many problems (then how many more there are).
MAX_PROBLEMS_SHOWN = 50


class ProblemsError(ScenarioError):
    """One or more problems in one input file (or command), one line each.

    Attributes:
        source: the file the problems are in (a path, ``builtin:NAME``, ...).
        problems: one line per problem, each ``SOURCE: FIELD: expected ..., got ...``.
    """

    def __init__(self, source: str, problems: tuple[str, ...]) -> None:
        self.source = source
        self.problems = problems
        if len(problems) == 1:
            message = problems[0]
        else:
            shown = list(problems[:MAX_PROBLEMS_SHOWN])
            hidden = len(problems) - len(shown)
            tail = [f"... and {hidden} more"] if hidden else []
            message = "\n".join([one_line(f"{len(problems)} problems in {source}:"), *shown, *tail])
        super().__init__(message)


def problem_lines(error: ScenarioError) -> tuple[str, ...]:
    """The problem lines of ``error`` (one for an error that is not a :class:`ProblemsError`)."""
    if isinstance(error, ProblemsError):
        return error.problems
    return tuple(line for line in str(error).splitlines() if line) or (str(error),)


class Problems:
    """The problems found so far in one file; :meth:`check` raises them all at once.

    Args:
        source: the file's name as messages show it.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: list[str] = []

    def add(self, field: str, message: str) -> None:
        """Record one problem of ``field`` (``target.radius_m``; empty for the whole file)."""
        where = f"{self.source}: {field}: " if field else f"{self.source}: "
        self.lines.append(one_line(where + message))

    def expected(self, field: str, expected: str, got: object = ..., *, hint: str = "") -> None:
        """Record ``FIELD: expected EXPECTED, got GOT`` (without ``got`` when not given)."""
        found = "" if got is ... else f", got {describe(got)}"
        self.add(field, f"expected {expected}{found}{hint}")

    def extend(self, field: str, error: ScenarioError) -> None:
        """Record the problems of another file (a protocol's scenario), under ``field``."""
        for line in problem_lines(error):
            self.add(field, line)

    def check(self) -> None:
        """Raise one :class:`ProblemsError` listing every problem, if there is any."""
        if self.lines:
            raise ProblemsError(self.source, tuple(self.lines))


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters shown escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def describe(value: object) -> str:
    """The offending value as the file wrote it (TOML spelling for booleans), shortened."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and len(value) > 200:
        value = value[:200]  # keep repr() cheap on huge strings
    text = one_line(repr(value))
    return text if len(text) <= 60 else text[:57] + "..."


def text_problem(value: object, *, max_bytes: int = MAX_TEXT, allow_empty: bool = True,
                 single_line: bool = False) -> str | None:
    """What is wrong with ``value`` as a text field (None: nothing)."""
    what = "a" + (" non-empty" if not allow_empty else "") + (" one-line" if single_line else "") + " string"
    expected = f"{what} of at most {max_bytes} bytes (UTF-8)"
    if not isinstance(value, str):
        return f"{expected}, got {describe(value)}"
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return f"{expected}, got a string of {size} bytes"
    if not allow_empty and not value.strip():
        return f"{expected}, got {value!r}"
    if single_line and not value.isprintable():
        return f"{expected} without line breaks or control characters, got {describe(value)}"
    return None


def is_number(value: object) -> bool:
    """A finite TOML number (not a boolean)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def read_toml_file(path: Path, source: str) -> dict[str, Any]:
    """Read and parse the TOML file ``path`` within bounds.

    Raises:
        ScenarioError: (one line) not a readable regular file, larger than
            :data:`MAX_FILE_BYTES`, not UTF-8, not TOML, or nested too deeply.
    """
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise ScenarioError(f"{source}: cannot read: not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise ScenarioError(f"{source}: file too large: {info.st_size} bytes, at most {MAX_FILE_BYTES} allowed")
        with path.open("rb") as stream:
            raw = stream.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ScenarioError(f"{source}: cannot read: {error.strerror or error}") from None
    except ValueError as error:  # an embedded NUL in the path
        raise ScenarioError(f"{source}: cannot read: {error}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(f"{source}: file too large: more than {MAX_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ScenarioError(f"{source}: not valid TOML: not UTF-8 text (byte {error.start})") from None
    return parse_toml(text, source)


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """Parse TOML ``text`` within bounds (see :func:`read_toml_file`)."""
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise ScenarioError(f"{source}: file too large: more than {MAX_FILE_BYTES} bytes")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(f"{source}: not valid TOML: {one_line(str(error))}") from None
    except RecursionError:
        raise ScenarioError(
            f"{source}: {_deep_line(text)}: expected at most {MAX_DEPTH} levels of nested tables and arrays, "
            "got far more"
        ) from None
    deep = _too_deep(data, "", 0)
    if deep is not None:
        raise ScenarioError(f"{source}: {deep or '(top level)'}: expected at most {MAX_DEPTH} levels of "
                            "nested tables and arrays, got more")
    return data


def _deep_line(text: str) -> str:
    """Where brackets first nest deeper than :data:`MAX_DEPTH`: ``KEY (line N)``.

    Approximate (brackets inside strings count too): it only places a message, for a
    file ``tomllib`` could not parse at all.
    """
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        for char in line:
            depth += 1 if char in "[{" else -1 if char in "]}" else 0
            if depth > MAX_DEPTH:
                key = line.split("=", 1)[0].strip() if "=" in line else ""
                key = key if len(key) <= 80 else key[:77] + "..."
                return f"{key} (line {number})" if key else f"line {number}"
    return "(top level)"


def _too_deep(value: object, where: str, depth: int) -> str | None:
    """The first field nested deeper than :data:`MAX_DEPTH` (None: none)."""
    if depth > MAX_DEPTH:
        return where
    if isinstance(value, dict):
        items: Any = ((f"{where}.{key}" if where else str(key), item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((f"{where}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for name, item in items:
        found = _too_deep(item, name, depth + 1)
        if found is not None:
            return found if len(found) <= 80 else found[:77] + "..."
    return None


def file_reference(reference: str) -> Path | None:
    """``reference`` as a file path when it names one (a ``.toml`` suffix, a separator, or an
    existing file), None when it is a built-in name."""
    path = Path(reference)
    if path.suffix == ".toml" or os.sep in reference or "/" in reference:
        return path
    try:
        return path if path.exists() else None
    except (OSError, ValueError):
        return path
