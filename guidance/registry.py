"""Guidance laws by name, so scenarios, protocols and the CLI refer to them by string."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from capture_trainer.errors import CaptureTrainerError
from guidance.dynamic import DynamicGuidance
from guidance.law import GuidanceLaw, NoGuidance
from guidance.potential import PotentialField


class GuidanceConfigError(CaptureTrainerError, ValueError):
    """An unknown law name or bad law parameters (a user error: one clear line)."""


#: Law constructors by condition name (``capture_trainer.catalog.CONDITIONS`` minus ``as``,
#: the automatic controller, which is not a guidance law).
LAWS: dict[str, Callable[..., GuidanceLaw]] = {
    "dg": DynamicGuidance,
    "apf": PotentialField,
    "ng": NoGuidance,
}
LAW_NAMES: tuple[str, ...] = tuple(LAWS)


def make_law(name: str, **params: object) -> GuidanceLaw:
    """Build the law registered as ``name`` with keyword ``params``.

    Raises:
        GuidanceConfigError: unknown name (with a suggestion) or invalid parameters.
    """
    try:
        factory = LAWS[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), LAW_NAMES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise GuidanceConfigError(
            f"unknown guidance law {name!r}{hint}; available: {', '.join(LAW_NAMES)}"
        ) from None
    try:
        return factory(**params)
    except (TypeError, ValueError) as error:
        raise GuidanceConfigError(f"guidance law {name!r}: {error}") from None
