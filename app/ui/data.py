"""Where the trainer keeps its data, and how people's names are compared.

One data folder holds the trainee database and every trial file the window writes, so
the history is the same whichever directory the trainer is started from:

1. ``--data-dir DIR`` on the command line, else
2. the environment variable :data:`DATA_ENV` (``CAPTURE_TRAINER_DATA``), else
3. ``$XDG_DATA_HOME/capture-trainer``, else ``~/.local/share/capture-trainer``.

Inside it: ``trainer/`` (``trainees.sqlite`` and ``trials/``) for ``train`` and
``sessions/PROTOCOL/`` (a study directory) for ``session``. ``--out`` and ``--db`` still
choose other places; every path is made absolute when it is read, so the database never
stores a path relative to the directory the trainer happened to start in.

Names (trainees, participants) are compared in Unicode normal form C, so that "Zoë"
typed with a combining diaeresis and with the precomposed letter is one person.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping
from pathlib import Path

#: Environment variable naming the data folder (overridden by ``--data-dir``).
DATA_ENV = "CAPTURE_TRAINER_DATA"
#: The data folder's name under ``$XDG_DATA_HOME`` (or ``~/.local/share``).
APP_DIR = "capture-trainer"


def absolute_path(value: str | os.PathLike[str]) -> Path:
    """``value`` with ``~`` expanded, made absolute against the current directory.

    Used as an ``argparse`` type, so a relative ``--out``/``--db`` is anchored once, when
    the command line is read.
    """
    return Path(os.path.abspath(Path(value).expanduser()))


def data_dir(explicit: str | os.PathLike[str] | None = None,
             environ: Mapping[str, str] | None = None) -> Path:
    """The data folder (absolute; not created here), by the order in the module docstring.

    Args:
        explicit: ``--data-dir``, when given.
        environ: the environment to read (default ``os.environ``).
    """
    env = os.environ if environ is None else environ
    if explicit is not None:
        return absolute_path(explicit)
    if env.get(DATA_ENV):
        return absolute_path(env[DATA_ENV])
    xdg = env.get("XDG_DATA_HOME", "")
    # The XDG spec ignores a relative XDG_DATA_HOME.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return absolute_path(base / APP_DIR)


def normalise_name(name: str) -> str:
    """A person's name as stored and compared: NFC, surrounding white space removed."""
    return unicodedata.normalize("NFC", name).strip()
