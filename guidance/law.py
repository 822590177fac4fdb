"""The guidance-law seam, the trivial law and the sum of laws.

Sign convention (every law): ``force(state)`` returns the force applied **to the hand**
[N], task frame, pointing where the law wants the end effector to go. The force renderer
(:mod:`guidance.rendering`) maps it to the device frame and limits it.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from capture_trainer.params import Param
from guidance.state import GuidanceState


@runtime_checkable
class GuidanceLaw(Protocol):
    """A guidance force law: pure, cheap, no I/O; called once per servo tick.

    Attributes:
        replanned: True when the last ``force`` call recomputed the capture path.
        replan_count: re-plans since the last ``reset`` (the initial plan not counted).
    """

    replanned: bool
    replan_count: int

    def force(self, state: GuidanceState) -> NDArray[np.float64]:
        """(3,) force on the hand [N], task frame; an owned buffer valid until the next call."""
        ...

    def reset(self) -> None:
        """Forget everything learnt during a trial (paths, timers, counters)."""
        ...

    def params(self) -> dict[str, object]:
        """The law's parameters as plain data (recorded as the trial's ``gains``)."""
        ...


class StatelessLaw:
    """Plumbing shared by the laws that remember nothing: an owned (3,) output, no re-plans."""

    name = "stateless"

    def __init__(self) -> None:
        self._out = np.zeros(3)
        self.replanned = False
        self.replan_count = 0

    def reset(self) -> None:
        """Nothing to forget."""


class NoGuidance(StatelessLaw):
    """No guidance force (the paper's NG condition): always zero."""

    name = "ng"
    PARAMS: ClassVar[tuple[Param, ...]] = ()

    def force(self, state: GuidanceState) -> NDArray[np.float64]:
        """Zero force [N], task frame."""
        return self._out

    def params(self) -> dict[str, object]:
        """No parameters."""
        return {"law": self.name}


class Sum:
    """The sum of several laws (e.g. a guidance law plus forbidden-region fixtures).

    Chosen before the loop, never switched by flags inside it. ``replanned`` is true when
    any member re-planned; ``replan_count`` is the members' total.
    """

    def __init__(self, *laws: GuidanceLaw) -> None:
        if not laws:
            raise ValueError("Sum needs at least one law")
        self.laws = tuple(laws)
        self._replanners = tuple(law for law in self.laws if not isinstance(law, StatelessLaw))
        self._out = np.zeros(3)
        self.replanned = False
        self.replan_count = 0

    def force(self, state: GuidanceState) -> NDArray[np.float64]:
        """Sum of the members' forces [N], task frame."""
        fx = fy = fz = 0.0
        for law in self.laws:
            x, y, z = law.force(state).tolist()  # plain floats: cheaper than numpy += per term
            fx += x
            fy += y
            fz += z
        # Only members that can re-plan are asked (a StatelessLaw never does).
        replanned = False
        count = 0
        for law in self._replanners:
            replanned = replanned or law.replanned
            count += law.replan_count
        self.replanned = replanned
        self.replan_count = count
        out = self._out
        out[0] = fx
        out[1] = fy
        out[2] = fz
        return out

    def reset(self) -> None:
        """Reset every member."""
        for law in self.laws:
            law.reset()
        self.replanned = False
        self.replan_count = 0

    def params(self) -> dict[str, object]:
        """The members' parameters, in order."""
        return {"law": "sum", "terms": [law.params() for law in self.laws]}


class Scaled:
    """A law's force times a guidance authority ``g`` (:mod:`guidance.schedule`):
    ``f = g f_law`` [N], task frame.

    ``g = 1`` is the law as designed, ``0`` no force, a negative ``g`` pushes away from
    where the law pulls (error augmentation). Chosen before the loop like :class:`Sum`;
    the safety layer clamps the result to the device's limits, as any law's force.
    """

    def __init__(self, law: GuidanceLaw, authority: float) -> None:
        authority = float(authority)
        if authority != authority or authority in (float("inf"), float("-inf")):
            raise ValueError(f"the guidance authority must be finite, got {authority}")
        self.law = law
        self.authority = authority
        self._out = np.zeros(3)
        self.replanned = False
        self.replan_count = 0

    def force(self, state: GuidanceState) -> NDArray[np.float64]:
        """``g`` times the law's force [N], task frame."""
        x, y, z = self.law.force(state).tolist()
        g = self.authority
        out = self._out
        out[0] = g * x
        out[1] = g * y
        out[2] = g * z
        self.replanned = self.law.replanned
        self.replan_count = self.law.replan_count
        return out

    def reset(self) -> None:
        """Reset the law."""
        self.law.reset()
        self.replanned = False
        self.replan_count = 0

    def params(self) -> dict[str, object]:
        """The law's parameters with the authority added (same shape as the law's own)."""
        return {**self.law.params(), "authority": self.authority}
