"""Guidance laws by name, so scenarios, protocols and the CLI refer to them by string.

:data:`LAWS` is the one list of law names. Each registered class declares its numeric
parameters (``PARAMS``: name, unit, range); the class checks its arguments with them,
and a scenario loader handed this registry checks a file's ``[guidance.<law>]`` table
with the same declarations.
"""

from __future__ import annotations

from typing import Any, Protocol

from capture_trainer.errors import CaptureTrainerError
from capture_trainer.params import Param
from capture_trainer.registry import Registry
from guidance.dynamic import DynamicGuidance
from guidance.fixtures import ReactionBoundary
from guidance.law import GuidanceLaw, NoGuidance
from guidance.potential import PotentialField


class GuidanceConfigError(CaptureTrainerError, ValueError):
    """An unknown law name or bad law parameters (a user error: one clear line)."""


class LawClass(Protocol):
    """A registered law: a class whose keyword arguments are its declared ``PARAMS``
    (plus, for some, non-numeric ones such as APF's obstacles)."""

    @property
    def PARAMS(self) -> tuple[Param, ...]:  # noqa: N802 - the law classes' attribute
        """The numeric keyword arguments with unit and range."""
        ...

    def __call__(self, *args: Any, **params: Any) -> GuidanceLaw: ...


#: Law classes by name (each class's own ``name``).
LAWS: Registry[LawClass] = Registry("guidance law", error=GuidanceConfigError)
for _law in (DynamicGuidance, PotentialField, NoGuidance, ReactionBoundary):
    LAWS.register(_law.name, _law)


def make_law(name: str, **params: object) -> GuidanceLaw:
    """Build the law registered as ``name`` with keyword ``params``.

    Raises:
        GuidanceConfigError: unknown name (with a suggestion) or invalid parameters.
    """
    factory = LAWS.get(name)
    try:
        return factory(**params)
    except (TypeError, ValueError) as error:
        raise GuidanceConfigError(f"guidance law {name!r}: {error}") from None
