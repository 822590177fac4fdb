"""Guidance schedules: how much of the guidance force a trainee feels, attempt by attempt.

The **guidance authority** ``g`` multiplies the condition's guidance force
(:class:`guidance.law.Scaled`: ``f = g f_law``, task frame, newtons; the forbidden-region
fixtures are never scaled). ``g = 1`` is the law as designed, ``g = 0`` no guidance, a
negative ``g`` pushes the hand *away* from the optimum capture path (error
augmentation). Whatever ``g`` is, the safety layer of the device clamps the force to
the device's limits afterwards.

A schedule is a pure rule over trials ``k = 0, 1, ...``: it holds a state, the *assist
level* ``a(k)``, gives the authority ``g(k)`` of trial ``k`` from it, and after the trial
updates it with the trial's measured error ``e(k)``. Schedules are frozen and registered
by name (:data:`SCHEDULES`), so protocols (``[schedule.<name>]`` tables) and trainee
sessions refer to them by string.

- ``fixed``: ``g(k) = a(k) = authority`` (default 1), whatever the errors.
- ``fading``: assist-as-needed after Emken, Benitez & Reinkensmeyer (JNER 4:8, 2007),
  an error-based update with a forgetting factor::

      a(k+1) = clip(f a(k) + c e(k), 0, g_max)                        (S1)
      g(k)   = a(k)                                                    (S2)

  The assistance decays by ``f`` per trial and grows with the error, so it is withdrawn
  as the errors shrink (``a`` is ``c`` times an exponentially weighted sum of the recent
  errors: an estimate of the trainee's current error). **Error augmentation** (optional,
  ``augment_below``, after Milot, Marchal-Crespo, Reinkensmeyer et al., Exp Brain Res
  201:119, 2010: amplifying errors helped the skilled, guidance the less skilled): once
  the assist level has fallen below ``augment_below`` (errors consistently small: a
  skilled trainee), the applied authority is negative::

      g(k) = −augment_authority   if a(k) < augment_below,  else  a(k)   (S2')

  (``a`` keeps following (S1), so the trainee returns to positive guidance when the
  errors grow again).
- ``experimenter``: a set sequence ``g(k) = sequence[min(k, len − 1)]`` (the last value
  holds after the end); errors are ignored.

The error ``e`` (:func:`normalised_error`): the closing speed at the first contact (the
impact velocity along the contact normal, metadata ``first_contact.normal_speed_m_s``)
divided by the scenario's soft-contact band ``capture_speed_m_s`` (a contact at or below
the band is soft, :mod:`trials.capture_event`), capped at :data:`MAX_ERROR`; a trial that
never touched the debris counts :data:`MAX_ERROR`. So ``e = 1`` is a contact right at the
edge of the soft band, ``e < 1`` a soft one.

Defaults of ``fading`` (ours, not Emken's numbers, which belong to a walking task with
errors in metres): ``f = 0.8`` (a forgetting half-life of ``ln 0.5 / ln 0.8 ≈ 3.1``
trials), ``c = 0.2`` (so the steady-state authority ``c e / (1 − f)`` equals the error:
full guidance while contacts are at the edge of the soft band, half at half of it),
``initial = 1`` (start with full guidance), ``g_max = 1`` (never more than the law as
designed), error augmentation off; with it on, ``augment_below = 0.2`` and
``augment_authority = 0.3`` are suggested starting points (the Milot study amplified
errors by a fixed gain; the value here is a guess to be tuned).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from capture_trainer.errors import CaptureTrainerError
from capture_trainer.registry import Registry

#: The largest normalised error one trial contributes (and what a trial without contact counts).
MAX_ERROR = 2.0
#: Largest magnitude of any authority a schedule may give (a sanity bound; the device's
#: force limits bound the force itself).
MAX_AUTHORITY = 2.0


class ScheduleConfigError(CaptureTrainerError, ValueError):
    """An unknown schedule name or bad schedule parameters (one clear line)."""


def normalised_error(closing_speed_m_s: float | None, soft_speed_m_s: float) -> float:
    """The trial error ``e`` of the schedules: closing speed at first contact over the
    soft band, capped at :data:`MAX_ERROR`; no contact (None or not finite) is the cap.

    Args:
        closing_speed_m_s: closing speed along the contact normal at the first contact
            [m/s] (``first_contact.normal_speed_m_s``), None when never touched.
        soft_speed_m_s: the soft-contact band ``capture_speed_m_s`` [m/s], > 0.

    Raises:
        ScheduleConfigError: a soft band that is not a positive number.
    """
    if not (isinstance(soft_speed_m_s, (int, float)) and soft_speed_m_s > 0.0 and math.isfinite(soft_speed_m_s)):
        raise ScheduleConfigError(f"the soft band must be a positive speed [m/s], got {soft_speed_m_s!r}")
    if closing_speed_m_s is None or not math.isfinite(closing_speed_m_s):
        return MAX_ERROR
    return min(abs(float(closing_speed_m_s)) / float(soft_speed_m_s), MAX_ERROR)


@runtime_checkable
class GuidanceSchedule(Protocol):
    """A schedule of guidance authority over trials (pure; the state is passed in)."""

    name: ClassVar[str]

    def start(self) -> float:
        """The assist level ``a(0)`` before the first trial."""
        ...

    def authority(self, assist: float, index: int) -> float:
        """The authority ``g(k)`` applied in trial ``index`` at assist level ``assist``."""
        ...

    def update(self, assist: float, error: float, index: int) -> float:
        """The assist level ``a(k+1)`` after trial ``index`` with normalised error ``error``."""
        ...

    def params(self) -> dict[str, Any]:
        """The schedule's parameters as plain data (recorded with the trial)."""
        ...


def _number(name: str, value: object, low: float, high: float, *, strict_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ScheduleConfigError(f"{name}: expected a number, got {value!r}")
    if value < low or value > high or (strict_low and value == low):
        bound = ">" if strict_low else ">="
        raise ScheduleConfigError(f"{name}: expected a number {bound} {low:g} and <= {high:g}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class FixedSchedule:
    """The same authority in every trial (``authority`` in [−MAX_AUTHORITY, MAX_AUTHORITY])."""

    name: ClassVar[str] = "fixed"
    authority_value: float = 1.0

    def __post_init__(self) -> None:
        _number("authority", self.authority_value, -MAX_AUTHORITY, MAX_AUTHORITY)

    def start(self) -> float:
        return self.authority_value

    def authority(self, assist: float, index: int) -> float:
        return self.authority_value

    def update(self, assist: float, error: float, index: int) -> float:
        return self.authority_value

    def params(self) -> dict[str, Any]:
        return {"schedule": self.name, "authority": self.authority_value}


@dataclass(frozen=True)
class FadingSchedule:
    """Assist-as-needed (eqs. S1, S2, S2' of the module docstring).

    Attributes:
        forgetting: ``f`` in [0, 1): the share of the assistance kept per trial.
        gain: ``c`` >= 0: assistance added per unit of normalised error.
        initial: ``a(0)`` in [0, g_max].
        g_max: largest authority, in (0, MAX_AUTHORITY].
        augment_below: error augmentation when ``a(k)`` is below this (None: off).
        augment_authority: the magnitude of the negative authority then, in (0, 1].
    """

    name: ClassVar[str] = "fading"
    forgetting: float = 0.8
    gain: float = 0.2
    initial: float = 1.0
    g_max: float = 1.0
    augment_below: float | None = None
    augment_authority: float = 0.3

    def __post_init__(self) -> None:
        _number("forgetting", self.forgetting, 0.0, 1.0)
        if self.forgetting >= 1.0:
            raise ScheduleConfigError(f"forgetting: expected a number >= 0 and < 1, got {self.forgetting!r}")
        _number("gain", self.gain, 0.0, 100.0)
        _number("g_max", self.g_max, 0.0, MAX_AUTHORITY, strict_low=True)
        _number("initial", self.initial, 0.0, self.g_max)
        if self.augment_below is not None:
            _number("augment_below", self.augment_below, 0.0, self.g_max, strict_low=True)
        _number("augment_authority", self.augment_authority, 0.0, 1.0, strict_low=True)

    def start(self) -> float:
        return self.initial

    def authority(self, assist: float, index: int) -> float:
        if self.augment_below is not None and assist < self.augment_below:
            return -self.augment_authority
        return assist

    def update(self, assist: float, error: float, index: int) -> float:
        value = self.forgetting * assist + self.gain * error
        return min(max(value, 0.0), self.g_max)

    def params(self) -> dict[str, Any]:
        return {"schedule": self.name, **asdict(self)}


@dataclass(frozen=True)
class ExperimenterSchedule:
    """A sequence set by the experimenter; after its end the last value holds."""

    name: ClassVar[str] = "experimenter"
    sequence: tuple[float, ...] = field(default=(1.0,))

    def __post_init__(self) -> None:
        if not isinstance(self.sequence, (tuple, list)) or not self.sequence:
            raise ScheduleConfigError(f"sequence: expected a non-empty list of authorities, got {self.sequence!r}")
        for i, value in enumerate(self.sequence):
            _number(f"sequence[{i}]", value, -MAX_AUTHORITY, MAX_AUTHORITY)
        object.__setattr__(self, "sequence", tuple(float(v) for v in self.sequence))

    def start(self) -> float:
        return self.sequence[0]

    def authority(self, assist: float, index: int) -> float:
        return self.sequence[min(max(index, 0), len(self.sequence) - 1)]

    def update(self, assist: float, error: float, index: int) -> float:
        return self.sequence[min(index + 1, len(self.sequence) - 1)]

    def params(self) -> dict[str, Any]:
        return {"schedule": self.name, "sequence": list(self.sequence)}


#: Schedule classes by name (the one list of schedule names).
SCHEDULES: Registry[type[FixedSchedule] | type[FadingSchedule] | type[ExperimenterSchedule]] = Registry(
    "guidance schedule", error=ScheduleConfigError)
for _schedule in (FixedSchedule, FadingSchedule, ExperimenterSchedule):
    SCHEDULES.register(_schedule.name, _schedule)

#: Parameter names as written in a file (``[schedule.fixed] authority = 0.5``) per schedule.
_FILE_NAMES = {"fixed": {"authority": "authority_value"}}


def make_schedule(name: str, **params: Any) -> GuidanceSchedule:
    """The schedule registered as ``name`` with keyword ``params`` (as written in a
    protocol's ``[schedule.<name>]`` table: ``fixed``: ``authority``; ``fading``:
    ``forgetting``, ``gain``, ``initial``, ``g_max``, ``augment_below``,
    ``augment_authority``; ``experimenter``: ``sequence``).

    Raises:
        ScheduleConfigError: unknown name (with a suggestion) or invalid parameters.
    """
    factory = SCHEDULES.get(name)
    renamed = {_FILE_NAMES.get(name, {}).get(key, key): value for key, value in params.items()}
    if "sequence" in renamed and isinstance(renamed["sequence"], list):
        renamed["sequence"] = tuple(renamed["sequence"])
    try:
        schedule: GuidanceSchedule = factory(**renamed)
    except TypeError as error:
        raise ScheduleConfigError(f"guidance schedule {name!r}: {error}") from None
    except ScheduleConfigError as error:
        raise ScheduleConfigError(f"guidance schedule {name!r}: {error}") from None
    return schedule


def adapts(schedule: GuidanceSchedule) -> bool:
    """True when the schedule's authorities depend on measured errors (so its trials must
    run in order, each after the one before)."""
    return isinstance(schedule, FadingSchedule)


@dataclass(frozen=True)
class ScheduleStep:
    """One trial of a schedule's history.

    Attributes:
        index: ``k``, the trial's position in the schedule (0-based).
        assist: ``a(k)`` before the trial.
        authority: ``g(k)`` applied in the trial.
        error: ``e(k)`` measured after it (None while not measured).
    """

    index: int
    assist: float
    authority: float
    error: float | None = None


def replay(schedule: GuidanceSchedule, errors: Sequence[float]) -> list[ScheduleStep]:
    """The schedule's steps for trials ``0 .. len(errors)``: the measured trials, each with
    its error, and the next trial (error None), from ``a(0)`` by (S1).

    Raises:
        ScheduleConfigError: an error that is not a finite number >= 0.
    """
    steps: list[ScheduleStep] = []
    assist = schedule.start()
    for index, error in enumerate(errors):
        value = _number(f"error[{index}]", error, 0.0, math.inf)
        steps.append(ScheduleStep(index, assist, schedule.authority(assist, index), value))
        assist = schedule.update(assist, value, index)
    index = len(errors)
    steps.append(ScheduleStep(index, assist, schedule.authority(assist, index)))
    return steps


def next_authority(schedule: GuidanceSchedule, errors: Sequence[float]) -> float:
    """The authority of the trial after those with ``errors`` (``replay``'s last step)."""
    return replay(schedule, errors)[-1].authority
