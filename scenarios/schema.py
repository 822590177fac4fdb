"""The scenario schema: frozen dataclasses, SI units, task frame unless named otherwise.

A scenario is everything an experimenter varies between trials without editing code.
Files are TOML (see :mod:`scenarios.loader` and ``docs/file-formats.md``).

The names a scenario uses (its manipulator model, its guidance laws) belong to the
registries of ``robot`` and ``guidance``, which this package does not import: the
loader is handed them as a :class:`Vocabulary` (``trials.vocabulary`` builds it), and
checks a file's guidance parameters with each law's own declared ``PARAMS``.

The seed: ``Scenario.seed`` (required in every file) seeds every random draw of a trial
of the scenario, together with the participant, the repetition and the run's seed
(:func:`scenarios.seeding.trial_seed`); the target's motion is deterministic.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

from capture_trainer.params import Param
from capture_trainer.registry import Lookup
from scenarios.motion import CurvedMotion, LinearMotion, TargetMotion, TumblingMotion

Vec3 = tuple[float, float, float]
Mat3 = tuple[Vec3, Vec3, Vec3]

MOTION_KINDS: tuple[str, ...] = ("linear", "curved", "tumbling")
SATURATION_MODES: tuple[str, ...] = ("norm", "axis")
IDENTITY: Mat3 = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


class ModelFacts(Protocol):
    """What the loader needs of a manipulator model (``robot.models.ManipulatorModel``)."""

    @property
    def n_joints(self) -> int:
        """Number of joints (the length of ``initial_joints_rad``)."""
        ...

    @property
    def task_dim(self) -> int:
        """2 for a planar model (every z must then be 0), 3 for a spatial one."""
        ...


class LawFacts(Protocol):
    """What the loader needs of a guidance law (a class in ``guidance.registry.LAWS``)."""

    @property
    def PARAMS(self) -> tuple[Param, ...]:  # noqa: N802 - the law classes' attribute
        """The law's numeric keyword arguments with unit and range."""
        ...


@dataclass(frozen=True)
class Vocabulary:
    """The registries whose names a scenario file may use, handed to the loader.

    Attributes:
        models: manipulator models by name (``robot.models.MODELS``).
        laws: guidance laws by name (``guidance.registry.LAWS``); a file's
            ``[guidance.<law>]`` table may set the law's declared ``PARAMS``.
    """

    models: Lookup[ModelFacts]
    laws: Lookup[LawFacts]
    #: delay compensators by name (``trials.compensators.COMPENSATORS``); None: any name
    #: is accepted here and checked when a trial is built.
    compensators: Lookup[object] | None = None
    #: post-capture contact modes by name (``trials.contact_modes.CONTACT_MODES``); None:
    #: any name is accepted here and checked when a trial is built.
    contact_modes: Lookup[object] | None = None


@dataclass(frozen=True)
class RobotConfig:
    """The manipulator and its spacecraft base.

    Attributes:
        model: a manipulator model's name (``robot.models.MODELS``).
        initial_joints_rad: start joint angles [rad]; ``None``: the model's default pose.
        base_mass_kg: base mass override [kg]; ``None``: the model's value.
        base_inertia_kg_m2: base inertia about its centre of mass, base frame [kg m²]
            (3x3, symmetric positive definite); ``None``: the model's value.
    """

    model: str
    initial_joints_rad: tuple[float, ...] | None = None
    base_mass_kg: float | None = None
    base_inertia_kg_m2: Mat3 | None = None


@dataclass(frozen=True)
class TargetConfig:
    """The debris' capture point and how it moves (task frame).

    Attributes:
        radius_m: target radius [m]; subtracted from the distance ("reached" at ≤ 0).
        start_offset_m: capture point at ``t = 0`` relative to the end effector's initial
            position [m] (the trial resolves it with the model's forward kinematics).
        velocity_m_s: capture-point velocity at ``t = 0`` (linear, curved) or velocity of
            the debris' centre (tumbling) [m/s].
        motion: ``linear`` | ``curved`` | ``tumbling``.
        turn_rate_rad_s, turn_axis: curved motion: the velocity turns at this rate
            [rad/s] about this axis.
        angular_velocity_rad_s, lever_arm_m: tumbling: the debris' angular velocity
            [rad/s] and the capture point relative to the debris' centre at ``t = 0`` [m].
    """

    radius_m: float
    start_offset_m: Vec3
    velocity_m_s: Vec3
    motion: str = "linear"
    turn_rate_rad_s: float = 0.0
    turn_axis: Vec3 = (0.0, 0.0, 1.0)
    angular_velocity_rad_s: Vec3 = (0.0, 0.0, 0.0)
    lever_arm_m: Vec3 = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class CaptureConfig:
    """When a capture counts and how long a trial runs.

    Attributes:
        tolerance_m: reached while ``distance − radius ≤ tolerance_m`` [m] (the
            analysis' kinematic contact intervals).
        post_capture_window_s: window after the first reach for the MSE metrics, and how
            long a trial goes on after the capture or the first contact [s].
        time_limit_s: the trial ends after this [s].
        capture_speed_m_s: the tool may close only while the relative speed of debris
            and end effector is at most this, in a contact whose closing speed was at
            most this [m/s] (``trials.capture_event``).
        hold_s: how long the capture conditions must hold before the tool closes [s].
        hold_gap_m: largest surface gap between tool and fixture that still counts as
            touching during the hold [m].
    """

    tolerance_m: float = 0.0
    post_capture_window_s: float = 1.0
    time_limit_s: float = 10.0
    capture_speed_m_s: float = 0.05
    hold_s: float = 0.1
    hold_gap_m: float = 0.001


@dataclass(frozen=True)
class DelayTable:
    """Communication delay between the operator's side and the arm's side (each way).

    Attributes:
        delay_s: constant one-way delay [s] (ISS to ground about 0.4 s each way).
        jitter_s: SD of the half-normal extra delay per sample [s].
        loss: probability that a sample is lost, [0, 1).
        compensator: what the operator's side makes of the delay
            (``trials.compensators``: ``none`` | ``predictive`` | ``passivity``).
    """

    delay_s: float = 0.0
    jitter_s: float = 0.0
    loss: float = 0.0
    compensator: str = "none"


@dataclass(frozen=True)
class DebrisConfig:
    """The debris as a body (``robot.debris``): its grapple fixture is the target sphere.

    Attributes:
        mass_kg: [kg] (a few kg of fragment up to the 500-4500 kg payloads of Yang & Konno).
        inertia_kg_m2: principal moments about the centre of mass, along the task axes
            at ``t = 0`` [kg m²]; ``None``: a solid box of ``size_m`` and ``mass_kg``.
        size_m: the drawn body around the centre of mass [m] (visual only).
        contact_frequency_rad_s: natural frequency of the spring-damper contact [rad/s].
        contact_damping_ratio: its damping ratio (restitution ``exp(−ζπ/sqrt(1−ζ²))``).
        friction: Coulomb friction coefficient between tool and fixture.
    """

    mass_kg: float = 20.0
    inertia_kg_m2: Vec3 | None = None
    size_m: Vec3 = (0.2, 0.2, 0.2)
    contact_frequency_rad_s: float = 60.0
    contact_damping_ratio: float = 0.5
    friction: float = 0.3

    def principal_inertia_kg_m2(self) -> Vec3:
        """The inertia's principal moments [kg m²] (the box's when not given)."""
        if self.inertia_kg_m2 is not None:
            return self.inertia_kg_m2
        a, b, c = self.size_m
        m = self.mass_kg
        return (m * (b * b + c * c) / 12.0, m * (a * a + c * c) / 12.0, m * (a * a + b * b) / 12.0)


@dataclass(frozen=True)
class GuidanceConfig:
    """Guidance parameters per law (only those the file sets; the law has defaults).

    Attributes:
        laws: ``(law, ((parameter, value), ...))`` in file order, one entry per law the
            file sets parameters of; each parameter is one of the law's ``PARAMS``.
    """

    laws: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()

    def params(self, law: str) -> dict[str, float]:
        """Keyword arguments for ``guidance.registry.make_law(law, ...)`` (empty when unset)."""
        return next((dict(pairs) for name, pairs in self.laws if name == law), {})

    def as_dict(self) -> dict[str, dict[str, float]]:
        """``{law: {parameter: value}}``."""
        return {name: dict(pairs) for name, pairs in self.laws}


@dataclass(frozen=True)
class FixturesConfig:
    """Which forbidden-region fixtures are rendered in every condition with guidance
    (``reaction_boundary``: the edge of the reactionless workspace, ``guidance.fixtures``)."""

    workspace_walls: bool = True
    reach_limit: bool = True
    joint_limits: bool = True
    reaction_boundary: bool = True


@dataclass(frozen=True)
class MappingConfig:
    """Device-to-task mapping: ``x_task = x_ee0 + s R (x_dev − x_dev0)``, ``F_dev = k_f Rᵀ F_task``.

    The offset is not a field: the trial anchors the stylus position at the start
    ``x_dev0`` to the end effector's initial position ``x_ee0``, so nothing jumps.

    Attributes:
        position_scale: task metres per device metre ``s``.
        force_scale: device newtons per task newton ``k_f``.
        rotation_task_from_device: ``R``, device-frame vectors to the task frame.
    """

    position_scale: float = 1.75
    force_scale: float = 1.0
    rotation_task_from_device: Mat3 = IDENTITY


@dataclass(frozen=True)
class RenderingConfig:
    """Force rendering limits (``guidance.rendering.ForceRenderer``), device frame.

    Attributes:
        max_force_n: saturation [N]; saturation: ``norm`` | ``axis``;
        ramp_time_s: ramp-in time [s]; max_rate_n_s: force-rate limit [N/s].
        contact_feedback: render the tool's contact force to the hand, on top of guidance
            (``trials.compensators``); contact_force_scale: hand newtons per newton of
            contact force, task frame (the mapping's force scale and the safety layer
            come after).
        contact_mode: what the hand feels after the capture
            (``trials.contact_modes.CONTACT_MODES``: ``contact``, ``free-body``,
            ``viscous``, ``damper``); contact_time_constant_s: the viscous body's ``τ``
            [s]; coupling_share: the share of the device's passive-stiffness bound the
            virtual coupling renders.
    """

    max_force_n: float = 3.0
    saturation: str = "norm"
    ramp_time_s: float = 0.5
    max_rate_n_s: float = 1000.0
    contact_feedback: bool = False
    contact_force_scale: float = 0.02
    contact_mode: str = "contact"
    contact_time_constant_s: float = 0.5
    coupling_share: float = 0.5


@dataclass(frozen=True)
class Scenario:
    """One capture task. Built by :func:`scenarios.loader.load_scenario`.

    Attributes:
        name: scenario name (the file stem unless the file says otherwise).
        description: one line for ``scenarios list``.
        seed: seeds every random draw of a trial of this scenario, with the participant,
            the repetition and the run's seed (:func:`scenarios.seeding.trial_seed`).
        source: where it was loaded from (path or ``builtin:NAME``); not compared.
    """

    name: str
    seed: int
    robot: RobotConfig
    target: TargetConfig
    description: str = ""
    capture: CaptureConfig = field(default_factory=CaptureConfig)
    debris: DebrisConfig = field(default_factory=DebrisConfig)
    delay: DelayTable = field(default_factory=DelayTable)
    guidance: GuidanceConfig = field(default_factory=GuidanceConfig)
    fixtures: FixturesConfig = field(default_factory=FixturesConfig)
    mapping: MappingConfig = field(default_factory=MappingConfig)
    rendering: RenderingConfig = field(default_factory=RenderingConfig)
    source: str = field(default="", compare=False)

    def target_motion(self, ee0_m: ArrayLike) -> TargetMotion:
        """The capture point's motion, given the end effector's initial position ``ee0_m`` [m].

        Args:
            ee0_m: (3,) end-effector position at ``t = 0`` [m], task frame.
        """
        target = self.target
        p0 = np.asarray(ee0_m, dtype=float).reshape(3) + np.asarray(target.start_offset_m)
        if target.motion == "curved":
            return CurvedMotion(p0, target.velocity_m_s, target.turn_rate_rad_s, target.turn_axis)
        if target.motion == "tumbling":
            return TumblingMotion(p0, target.velocity_m_s, target.angular_velocity_rad_s, target.lever_arm_m)
        return LinearMotion(p0, target.velocity_m_s)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (the trial log's ``scenario_config``); ``None`` fields omitted."""
        data = asdict(self)
        del data["source"]
        data["guidance"] = self.guidance.as_dict()
        data["robot"] = {k: v for k, v in data["robot"].items() if v is not None}
        data["debris"] = {k: v for k, v in data["debris"].items() if v is not None}
        plain: dict[str, Any] = _lists(data)
        return plain


def _lists(value: Any) -> Any:
    """Tuples to lists, recursively (TOML/JSON friendly)."""
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value
