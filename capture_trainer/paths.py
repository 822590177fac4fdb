"""File names made from names, and files that cannot land outside their folder.

Scenario names, participant and trainee ids, protocol references, conditions and trial
ids all end up in file names. :func:`safe_component` turns any such name into one safe
file-name component (no separator, no ``..``, no control character, no leading dot,
bounded length), leaving readable names (``S01_paper-2019_dg_r1``, ``Zoë``) unchanged so
that existing trial ids stay the same. :func:`resolve_inside` is the check made wherever
a file path is built under an output folder: the resolved path (symbolic links followed)
must lie inside the resolved folder, or the write is refused with a one-line
:class:`~capture_trainer.errors.TrialError`.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from pathlib import Path

from capture_trainer.errors import TrialError

#: Upper bound of one name's component in a file name [bytes of UTF-8].
MAX_COMPONENT_BYTES = 100
#: Upper bound of a file's stem [bytes of UTF-8]: with ``.parquet`` and the writer's
#: temporary name (``.<name>.tmp``) it stays under the usual 255-byte limit of a file name.
MAX_STEM_BYTES = 200
#: Suffix of a trial file (the trial log, ``capture_trainer.trial_log``).
TRIAL_SUFFIX = ".parquet"

#: ASCII punctuation kept in names; anything else that is not a letter, digit or mark
#: (separators, ``:``, quotes, shell and glob characters, control characters) becomes ``_``.
_ASCII_KEPT = frozenset("-_.+@=,~() ")
_HASH_CHARS = 8
#: Device names Windows refuses as a file stem, whatever the extension.
_RESERVED_STEMS = frozenset(
    {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}
)


def _kept(char: str) -> bool:
    if char.isascii():
        return char.isalnum() or char in _ASCII_KEPT
    return unicodedata.category(char)[0] in "LNM"  # letters, numbers, combining marks


def _truncate_utf8(text: str, max_bytes: int) -> str:
    return text.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")


def safe_component(name: str, max_bytes: int = MAX_COMPONENT_BYTES) -> str:
    """``name`` as one safe file-name component.

    NFC-normalised; characters other than letters, digits, combining marks and
    ``- _ . + @ = , ~ ( )`` and inner spaces become ``_``; runs of dots, a leading dot or
    space and a trailing dot or space become ``_``. When anything had to change (or the
    result would be longer than ``max_bytes``), the first 8 hex digits of the SHA-256 of
    the NFC name are appended after ``-``, so two different names never share a
    component by accident. Idempotent: a safe component is returned unchanged.

    Args:
        name: any text (a participant id, a scenario name, a trial id, ...).
        max_bytes: bound of the result in bytes of UTF-8 (at least 16).

    Returns:
        A non-empty component without path separators, ``..``, control characters or a
        leading dot; ``name`` itself when it already is one.
    """
    if max_bytes < 16:
        raise ValueError(f"max_bytes must be at least 16, got {max_bytes}")
    text = unicodedata.normalize("NFC", str(name))
    slug = "".join(char if _kept(char) else "_" for char in text)
    slug = re.sub(r"\.{2,}", "_", slug)
    slug = re.sub(r"^[. ]|[. ]$", "_", slug)
    if slug.split(".", 1)[0].upper() in _RESERVED_STEMS:
        slug = f"_{slug}"
    if slug == text and slug and len(slug.encode("utf-8")) <= max_bytes:
        return slug
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    head = _truncate_utf8(slug or "_", max_bytes - _HASH_CHARS - 1)
    return f"{head}-{digest}"


def resolve_inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """``path``, after checking that it resolves inside the folder ``root``.

    Both are resolved (symbolic links followed, ``..`` removed; neither has to exist
    yet), so neither a crafted name nor a link placed in the folder can send a write
    elsewhere.

    Returns:
        ``path`` as given (a :class:`~pathlib.Path`).

    Raises:
        TrialError: ``path`` resolves outside ``root`` (one line naming both).
    """
    root_resolved = Path(root).resolve()
    resolved = Path(path).resolve()
    if resolved != root_resolved and not resolved.is_relative_to(root_resolved):
        raise TrialError(
            f"refusing to write {os.fspath(path)!r}: it resolves to {str(resolved)!r}, outside the "
            f"output folder {str(root_resolved)!r}"
        )
    return Path(path)


def file_inside(root: str | os.PathLike[str], name: str, suffix: str = "") -> Path:
    """The file ``root/<safe name><suffix>``, checked to resolve inside ``root``.

    Args:
        root: the output folder.
        name: the file's stem as a name (made safe with :func:`safe_component`, bounded
            to :data:`MAX_STEM_BYTES`).
        suffix: appended as is (``.parquet``); a constant of the caller, not a name.

    Raises:
        TrialError: the file would resolve outside ``root`` (a symbolic link in it).
    """
    return resolve_inside(root, Path(root) / f"{safe_component(name, MAX_STEM_BYTES)}{suffix}")


def trial_file(out_dir: str | os.PathLike[str], trial_id: str) -> Path:
    """The trial file of ``trial_id`` in ``out_dir`` (``<out_dir>/<safe id>.parquet``)."""
    return file_inside(out_dir, trial_id, TRIAL_SUFFIX)
