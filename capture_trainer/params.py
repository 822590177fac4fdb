"""Declared numeric parameters: a name, a unit and a range, checked in one place.

A registered thing that files may configure (a guidance law) declares its parameters as
a tuple of :class:`Param`; its constructor checks its arguments with them, and a file
loader that is handed the registry checks a file's values with the very same
declarations, so a range is written once::

    PARAMS = (Param("m_kg", "kg", minimum=0.0, strict=True), Param("c_n_s_m", "N s/m", minimum=0.0))
    m_kg = PARAMS[0].check(m_kg)   # ValueError: m_kg: expected a number > 0 [kg], got -1.0
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    """One finite numeric parameter.

    Attributes:
        name: the keyword argument (and the file's key), unit-suffixed.
        unit: SI unit for messages ("kg", "N s/m", "1/s^2").
        minimum: lowest allowed value, or None for no lower bound.
        strict: the minimum itself is not allowed (``> minimum`` rather than ``>=``).
        maximum: highest allowed value (inclusive), or None.
        optional: None is an allowed value (the law's "off", e.g. no saturation).
    """

    name: str
    unit: str
    minimum: float | None = None
    strict: bool = False
    maximum: float | None = None
    optional: bool = False

    def expected(self) -> str:
        """What a valid value is, for messages: ``a number > 0 [kg]``."""
        text = "a number"
        if self.minimum is not None:
            text += f" {'>' if self.strict else '>='} {self.minimum:g}"
        if self.maximum is not None:
            text += f"{' and' if self.minimum is not None else ''} <= {self.maximum:g}"
        return f"{text} [{self.unit}]" if self.unit else text

    def accepts(self, value: object) -> bool:
        """Whether ``value`` is a finite number in range (or None when optional)."""
        if value is None:
            return self.optional
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        number = float(value)
        if not math.isfinite(number):
            return False
        if self.minimum is not None and (number <= self.minimum if self.strict else number < self.minimum):
            return False
        return self.maximum is None or number <= self.maximum

    def check(self, value: object) -> float:
        """``value`` as a float.

        Raises:
            ValueError: not a finite number in range; the message names the parameter.
        """
        if value is None or not self.accepts(value):
            raise ValueError(f"{self.name}: expected {self.expected()}, got {value!r}")
        return float(value)  # type: ignore[arg-type]

    def check_optional(self, value: object) -> float | None:
        """Like :meth:`check`, with None passed through when the parameter is optional."""
        if value is None and self.optional:
            return None
        return self.check(value)
