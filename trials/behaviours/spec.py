"""Behaviours as data: the PTWL seed's three compliant behaviours, frozen and registered.

A behaviour moves the admittance controller's virtual attractor
(:mod:`robot.admittance`) and ends with one result word (:data:`RESULTS`):

* :class:`Ptwl` (pose-target wrench-limit): the attractor moves at constant velocity by
  ``displacement_m`` (from where it is, or from the fixtures' seat pose with ``to =
  "seat"``) within ``duration_s``; the behaviour ends ``succeeded`` when the port is within
  ``pose_tolerance_m`` of the goal and slower than ``speed_tolerance_m_s`` (or, with
  ``seat_force_n > 0``, when every post presses on the pin with at least that force),
  ``wrench_limit`` on the first tick the contact force exceeds ``wrench_limit_n`` (or the
  torque ``torque_limit_n_m``), ``timeout`` when the goal is not met ``settle_s`` after the
  attractor arrived, ``watchdog`` when the slave could not track reactionlessly (a reaction
  singularity, a joint limit or a tracking error above ``max_tracking_error_m``) for
  ``watchdog_s`` in a row. Whatever the exit, the attractor freezes where it is.
* :class:`Rwe` (reset wrench equilibrium): on the chosen axes the attractor follows the
  port every tick, so the virtual spring's force is zero and the contact force alone
  moves the port until it relaxes; ``succeeded`` once the force on those axes has stayed
  within ``tolerance_n`` for ``hold_s``, ``timeout`` after ``duration_s``.
* :class:`Jiggle`: translational jiggle: the attractor circles (radius ``amplitude_m``,
  ``frequency_hz``) about ``axis`` while it is pushed ``push_m`` along it within
  ``duration_s``; ``succeeded`` once the port has advanced ``push_m − pose_tolerance_m``
  along the axis, ``wrench_limit`` / ``watchdog`` as PTWL, ``timeout`` after ``duration_s``.

* :class:`Open`: the tool opens (the debris leaves with the tool's motion, a free body
  again) and the attractor backs the tool ``retreat_m`` away from the payload within
  ``duration_s``; ``succeeded`` once the retreat is done and the tool is ``clearance_m``
  clear of the grapple fixture, ``timeout`` ``settle_s`` later, ``aborted`` when the
  scene cannot open the tool.

Every behaviour is validated when it is built (:func:`make_behaviour`): unknown keys,
wrong types and out-of-range values raise :class:`BehaviourError` naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Union

from capture_trainer.errors import ScenarioError
from capture_trainer.registry import Registry, suggestion

Vec3 = tuple[float, float, float]

#: The results a behaviour ends with, exactly one per run.
RESULTS: tuple[str, ...] = ("succeeded", "wrench_limit", "timeout", "watchdog", "aborted")
#: Axis names of :class:`Rwe`.
AXES: tuple[str, ...] = ("x", "y", "z")
#: Goals a PTWL displacement may be relative to: the attractor (``attractor``) or the
#: fixtures' seat pose (``seat``: where the pin touches the two posts).
PTWL_GOALS: tuple[str, ...] = ("attractor", "seat")
#: Jiggle modes. Torsional jiggle needs an orientation-controlled port; the slave's task
#: is the end-effector point, so only translational jiggle exists here.
JIGGLE_MODES: tuple[str, ...] = ("translational",)


class BehaviourError(ScenarioError):
    """A behaviour or task file is invalid (the message names the file and the field)."""


def check_number(where: str, name: str, value: Any, low: float = -math.inf, high: float = math.inf, *,
            strict_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)) \
            and not (value == math.inf and high == math.inf):
        raise BehaviourError(f"{where}: {name} must be a number, got {value!r}")
    number = float(value)
    if number < low or (strict_low and number == low) or number > high:
        bound = f"> {low:g}" if strict_low else f">= {low:g}"
        raise BehaviourError(f"{where}: {name} must be {bound}" + (f" and <= {high:g}" if high < math.inf else "")
                             + f", got {number:g}")
    return number


def check_vector(where: str, name: str, value: Any, low: float = -math.inf, *, strict_low: bool = False) -> Vec3:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value] * 3
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise BehaviourError(f"{where}: {name} must be 3 numbers (x, y, z), got {value!r}")
    return tuple(check_number(where, f"{name}[{i}]", v, low, strict_low=strict_low)  # type: ignore[return-value]
                 for i, v in enumerate(value))


@dataclass(frozen=True)
class _Behaviour:
    """Fields common to every behaviour.

    Attributes:
        stiffness_n_m: the attractor's spring ``K`` per task axis [N/m].
        damping_n_s_m: ``D`` per axis [N s/m]; None: critically damped, ``2 sqrt(K M)``.
        mass_kg: the virtual mass ``M`` per axis [kg].
        watchdog_s: how long the slave may fail to track reactionlessly in a row [s].
        max_tracking_error_m: the port command the arm may lag by before it counts as
            not tracking [m].
    """

    kind: ClassVar[str] = ""
    where: str = "behaviour"
    stiffness_n_m: Vec3 = (300.0, 300.0, 300.0)
    damping_n_s_m: Vec3 | None = None
    mass_kg: Vec3 = (2.0, 2.0, 2.0)
    watchdog_s: float = 0.5
    max_tracking_error_m: float = 0.02

    def _check_common(self) -> None:
        w = self.where
        object.__setattr__(self, "stiffness_n_m", check_vector(w, "stiffness_n_m", self.stiffness_n_m, 0.0))
        if self.damping_n_s_m is not None:
            object.__setattr__(self, "damping_n_s_m",
                               check_vector(w, "damping_n_s_m", self.damping_n_s_m, 0.0, strict_low=True))
        object.__setattr__(self, "mass_kg", check_vector(w, "mass_kg", self.mass_kg, 0.0, strict_low=True))
        object.__setattr__(self, "watchdog_s", check_number(w, "watchdog_s", self.watchdog_s, 0.0, strict_low=True))
        object.__setattr__(self, "max_tracking_error_m",
                           check_number(w, "max_tracking_error_m", self.max_tracking_error_m, 0.0, strict_low=True))

    def limit_n(self) -> float:
        """The wrench (force) limit [N] this behaviour stops on (inf: none)."""
        return math.inf

    def as_dict(self) -> dict[str, Any]:
        """The parameters (for the log's metadata)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "where"}


@dataclass(frozen=True)
class Ptwl(_Behaviour):
    """Pose-target wrench-limit (see the module docstring).

    Attributes:
        displacement_m: the attractor's move [m], task frame (from the attractor, or
            from the seat pose with ``to = "seat"``).
        to: ``attractor`` or ``seat``.
        duration_s: how long the attractor takes to get there [s] (> 0).
        wrench_limit_n: the contact force that stops it [N] (> 0).
        torque_limit_n_m: the contact torque about the port that stops it [N m].
        pose_tolerance_m: success radius about the goal [m].
        speed_tolerance_m_s: the port must also be slower than this [m/s].
        settle_s: after the attractor arrived, how long the port has to get there [s].
        seat_force_n: > 0: success is every post pressing with at least this [N].
    """

    kind: ClassVar[str] = "ptwl"
    displacement_m: Vec3 = (0.0, 0.0, 0.0)
    to: str = "attractor"
    duration_s: float = 1.0
    wrench_limit_n: float = 15.0
    torque_limit_n_m: float = math.inf
    pose_tolerance_m: float = 0.003
    speed_tolerance_m_s: float = 0.01
    settle_s: float = 1.0
    seat_force_n: float = 0.0

    def __post_init__(self) -> None:
        w = self.where
        self._check_common()
        object.__setattr__(self, "displacement_m", check_vector(w, "displacement_m", self.displacement_m))
        if self.to not in PTWL_GOALS:
            raise BehaviourError(f"{w}: to must be one of {', '.join(PTWL_GOALS)}, got {self.to!r}")
        object.__setattr__(self, "duration_s", check_number(w, "duration_s", self.duration_s, 0.0, strict_low=True))
        object.__setattr__(self, "wrench_limit_n", check_number(w, "wrench_limit_n", self.wrench_limit_n, 0.0,
                                                           strict_low=True))
        object.__setattr__(self, "torque_limit_n_m", check_number(w, "torque_limit_n_m", self.torque_limit_n_m, 0.0,
                                                             strict_low=True))
        object.__setattr__(self, "pose_tolerance_m", check_number(w, "pose_tolerance_m", self.pose_tolerance_m, 0.0,
                                                             strict_low=True))
        object.__setattr__(self, "speed_tolerance_m_s", check_number(w, "speed_tolerance_m_s", self.speed_tolerance_m_s,
                                                                0.0, strict_low=True))
        object.__setattr__(self, "settle_s", check_number(w, "settle_s", self.settle_s, 0.0))
        object.__setattr__(self, "seat_force_n", check_number(w, "seat_force_n", self.seat_force_n, 0.0))
        if self.seat_force_n >= self.wrench_limit_n:
            raise BehaviourError(f"{w}: seat_force_n ({self.seat_force_n:g}) must be below wrench_limit_n "
                                 f"({self.wrench_limit_n:g})")

    def limit_n(self) -> float:
        return self.wrench_limit_n


@dataclass(frozen=True)
class Rwe(_Behaviour):
    """Reset wrench equilibrium (see the module docstring).

    Attributes:
        axes: the axes whose virtual spring is released (``x``, ``y``, ``z``).
        duration_s: the longest it runs [s].
        tolerance_n: the contact force per released axis counted as zero [N].
        hold_s: how long it must stay there [s].
    """

    kind: ClassVar[str] = "rwe"
    axes: tuple[str, ...] = AXES
    duration_s: float = 1.0
    tolerance_n: float = 0.5
    hold_s: float = 0.05

    def __post_init__(self) -> None:
        w = self.where
        self._check_common()
        axes = self.axes
        if isinstance(axes, str) or not isinstance(axes, (list, tuple)) or not axes \
                or any(a not in AXES for a in axes) or len(set(axes)) != len(axes):
            raise BehaviourError(f"{w}: axes must be a non-empty list of distinct {', '.join(AXES)}, got {axes!r}")
        object.__setattr__(self, "axes", tuple(axes))
        object.__setattr__(self, "duration_s", check_number(w, "duration_s", self.duration_s, 0.0, strict_low=True))
        object.__setattr__(self, "tolerance_n", check_number(w, "tolerance_n", self.tolerance_n, 0.0, strict_low=True))
        object.__setattr__(self, "hold_s", check_number(w, "hold_s", self.hold_s, 0.0))


@dataclass(frozen=True)
class Jiggle(_Behaviour):
    """Translational jiggle (see the module docstring).

    Attributes:
        mode: ``translational``.
        axis: the push axis, task frame (normalised; not zero).
        amplitude_m: radius of the attractor's circle about the axis [m].
        frequency_hz: turns per second [Hz].
        push_m: how far along the axis the attractor goes [m] (reached at half the
            duration, then held while it keeps circling).
        duration_s: the longest it runs [s].
        wrench_limit_n: the contact force that stops it [N].
        pose_tolerance_m: the progress along the axis short of ``push_m`` that counts [m].
    """

    kind: ClassVar[str] = "jiggle"
    mode: str = "translational"
    axis: Vec3 = (0.0, -1.0, 0.0)
    amplitude_m: float = 0.01
    frequency_hz: float = 2.0
    push_m: float = 0.02
    duration_s: float = 3.0
    wrench_limit_n: float = 25.0
    pose_tolerance_m: float = 0.004

    def __post_init__(self) -> None:
        w = self.where
        self._check_common()
        if self.mode not in JIGGLE_MODES:
            hint = (" (torsional jiggle needs an orientation-controlled port; the slave's task is the "
                    "end-effector point)" if self.mode == "torsional" else "")
            raise BehaviourError(f"{w}: mode must be one of {', '.join(JIGGLE_MODES)}, got {self.mode!r}{hint}")
        axis = check_vector(w, "axis", self.axis)
        norm = math.sqrt(sum(v * v for v in axis))
        if norm == 0.0:
            raise BehaviourError(f"{w}: axis must not be zero")
        object.__setattr__(self, "axis", tuple(v / norm for v in axis))
        object.__setattr__(self, "amplitude_m", check_number(w, "amplitude_m", self.amplitude_m, 0.0, 0.5))
        object.__setattr__(self, "frequency_hz", check_number(w, "frequency_hz", self.frequency_hz, 0.0, 50.0,
                                                         strict_low=True))
        object.__setattr__(self, "push_m", check_number(w, "push_m", self.push_m, 0.0, 1.0))
        object.__setattr__(self, "duration_s", check_number(w, "duration_s", self.duration_s, 0.0, strict_low=True))
        object.__setattr__(self, "wrench_limit_n", check_number(w, "wrench_limit_n", self.wrench_limit_n, 0.0,
                                                           strict_low=True))
        object.__setattr__(self, "pose_tolerance_m", check_number(w, "pose_tolerance_m", self.pose_tolerance_m, 0.0,
                                                             strict_low=True))

    def limit_n(self) -> float:
        return self.wrench_limit_n


#: Schemes of :class:`Mixed`: ``virtual`` (eq. 3 in full, the operator on the ground's
#: virtual arm), ``direct`` (direct delayed commands: no virtual arm, no ``K_c`` term, the
#: operator on the delayed real force), ``auto`` (``virtual`` under the trial's
#: ``predictive`` compensator, ``direct`` otherwise).
MIXED_SCHEMES: tuple[str, ...] = ("auto", "virtual", "direct")
#: Where the ``mixed`` behaviour's master force ``f_m`` comes from.
MIXED_MASTERS: tuple[str, ...] = ("auto", "hand", "scripted")


@dataclass(frozen=True)
class Mixed(_Behaviour):
    """Yang & Konno's mixed force/motion command pressing the payload on the fixtures
    (:mod:`trials.behaviours.mixed`; gains of their Table 2 by default).

    Attributes:
        axis: the press direction, task frame (normalised; not zero).
        target_force_n: the slave force the operator aims for [N] (``G f_m`` held).
        approach_force_n: the operator's master force before they see the contact [N].
        contact_seen_n: the seen slave force at which the operator switches to
            ``target_force_n / G`` [N].
        scheme: one of :data:`MIXED_SCHEMES`.
        master: one of :data:`MIXED_MASTERS`: ``hand`` (the hand's force on the stylus
            along ``axis``, over the trial's delayed command path), ``scripted`` (the
            scripted operator below), ``auto`` (``hand`` when the trial measures a
            hand's force, ``scripted`` otherwise).
        delay_s: one-way delay of the scripted master side [s]; None: the trial's command
            delay (with ``hand`` the link's delay is the delay).
        duration_s: how long it runs [s]; then ``succeeded`` if the force is within
            ``tolerance_n`` of the target, else ``timeout``.
        tolerance_n: [N].
        wrench_limit_n: the contact force that stops it [N].
        force_gain_m_s_n, restraint_gain_1_s, damping, force_scale, servo_lag_s: eq. 3's
            ``K_s``, ``K_c``, ``D``, ``G``, the velocity servo's lag
            (:class:`robot.mixed_command.MixedCommandGains`).
        model_error: the ground model's relative error in the contact stiffness.
    """

    kind: ClassVar[str] = "mixed"
    axis: Vec3 = (-1.0, 0.0, 0.0)
    target_force_n: float = 10.0
    approach_force_n: float = 3.0
    contact_seen_n: float = 1.0
    scheme: str = "auto"
    master: str = "auto"
    delay_s: float | None = None
    duration_s: float = 6.0
    tolerance_n: float = 2.0
    wrench_limit_n: float = 200.0
    force_gain_m_s_n: float = 1.0 / 1400.0
    restraint_gain_1_s: float = 80.0 / 1000.0
    damping: float = 0.3
    force_scale: float = 10.0
    servo_lag_s: float = 0.02
    model_error: float = 0.2

    def __post_init__(self) -> None:
        w = self.where
        self._check_common()
        axis = check_vector(w, "axis", self.axis)
        norm = math.sqrt(sum(v * v for v in axis))
        if norm == 0.0:
            raise BehaviourError(f"{w}: axis must not be zero")
        object.__setattr__(self, "axis", tuple(v / norm for v in axis))
        if self.scheme not in MIXED_SCHEMES:
            raise BehaviourError(f"{w}: scheme must be one of {', '.join(MIXED_SCHEMES)}, got {self.scheme!r}")
        if self.master not in MIXED_MASTERS:
            raise BehaviourError(f"{w}: master must be one of {', '.join(MIXED_MASTERS)}, got {self.master!r}")
        if self.delay_s is not None:
            object.__setattr__(self, "delay_s", check_number(w, "delay_s", self.delay_s, 0.0, 30.0))
        for name in ("target_force_n", "approach_force_n", "contact_seen_n", "duration_s", "tolerance_n",
                     "wrench_limit_n", "force_gain_m_s_n", "force_scale", "servo_lag_s"):
            object.__setattr__(self, name, check_number(w, name, getattr(self, name), 0.0, strict_low=True))
        for name in ("restraint_gain_1_s", "damping"):
            object.__setattr__(self, name, check_number(w, name, getattr(self, name), 0.0))
        object.__setattr__(self, "model_error", check_number(w, "model_error", self.model_error, -0.9, 0.9))
        if self.target_force_n >= self.wrench_limit_n:
            raise BehaviourError(f"{w}: target_force_n ({self.target_force_n:g}) must be below wrench_limit_n "
                                 f"({self.wrench_limit_n:g})")

    def limit_n(self) -> float:
        return self.wrench_limit_n


@dataclass(frozen=True)
class Open(_Behaviour):
    """Open the tool: the arm lets go of the payload (the debris a free body again, with
    the tool's motion; the slave's mass model without it), then the attractor backs the
    tool away from the payload.

    Attributes:
        retreat_m: how far the attractor moves the tool away from the payload after it
            opened [m], along the line from the grapple fixture's centre to the end
            effector at the release (0: it holds still).
        duration_s: how long the retreat takes [s] (> 0).
        clearance_m: the surface gap between tool and fixture that counts as clear [m].
        settle_s: after the retreat, how long the gap has to reach ``clearance_m`` [s].
    """

    kind: ClassVar[str] = "open"
    retreat_m: float = 0.03
    duration_s: float = 1.0
    clearance_m: float = 0.01
    settle_s: float = 1.0

    def __post_init__(self) -> None:
        w = self.where
        self._check_common()
        object.__setattr__(self, "retreat_m", check_number(w, "retreat_m", self.retreat_m, 0.0, 0.5))
        object.__setattr__(self, "duration_s", check_number(w, "duration_s", self.duration_s, 0.0, strict_low=True))
        object.__setattr__(self, "clearance_m", check_number(w, "clearance_m", self.clearance_m, 0.0))
        object.__setattr__(self, "settle_s", check_number(w, "settle_s", self.settle_s, 0.0))
        if self.clearance_m > self.retreat_m:
            raise BehaviourError(f"{w}: clearance_m ({self.clearance_m:g}) must not exceed retreat_m "
                                 f"({self.retreat_m:g}): the tool would never be clear")


Behaviour = Union[Ptwl, Rwe, Jiggle, Mixed, Open]

#: The behaviour kinds by name: the single source of the names task files and the CLI use.
BEHAVIOURS: Registry[type[Ptwl] | type[Rwe] | type[Jiggle] | type[Mixed] | type[Open]] = Registry(
    "behaviour", error=BehaviourError)
for _kind in (Ptwl, Rwe, Jiggle, Mixed, Open):
    BEHAVIOURS.register(_kind.kind, _kind)


def make_behaviour(kind: str, params: dict[str, Any], where: str = "behaviour") -> Behaviour:
    """A validated behaviour of ``kind`` from a table of parameters (TOML).

    Raises:
        BehaviourError: an unknown kind or key (with the closest name), or a bad value
            (the message names ``where`` and the field).
    """
    if kind not in BEHAVIOURS:
        raise BehaviourError(f"{where}: {BEHAVIOURS.unknown_message(kind)}")
    cls = BEHAVIOURS.get(kind)
    allowed = [f.name for f in fields(cls) if f.name != "where"]
    for key in params:
        if key not in allowed:
            close = suggestion(key, allowed)
            hint = f"; did you mean {close!r}?" if close else ""
            raise BehaviourError(f"{where}: unknown {kind} parameter {key!r}{hint} (known: {', '.join(allowed)})")
    try:
        return cls(where=where, **params)
    except TypeError as error:
        raise BehaviourError(f"{where}: {error}") from None
