"""Load and validate scenario TOML files into :class:`scenarios.schema.Scenario`.

Every problem of a file is reported at once: one
:class:`~scenarios.toml_in.ProblemsError` (a :class:`~capture_trainer.errors.ScenarioError`)
whose message has one line per problem, each naming the file, the field, what was
expected and what was found, e.g.::

    paper.toml: target.radius_m: expected a number > 0 and <= 1, got -0.01

(with a first line ``3 problems in paper.toml:`` when there is more than one). Files are
read within bounds (size, nesting, text lengths, seeds, the trial's length:
:mod:`scenarios.toml_in`). Unknown keys are errors (a typo never silently falls back to
a default). The model and guidance-law names, the model's joint count and planarity and
each law's parameters come from the registries in the
:class:`~scenarios.schema.Vocabulary` the caller hands in
(``trials.vocabulary.load_scenario`` hands in ``robot``'s and ``guidance``'s); this
package imports neither.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import numpy as np

from capture_trainer.errors import ScenarioError
from capture_trainer.params import Param
from capture_trainer.registry import Lookup, Registry, packaged_files, suggestion
from scenarios.schema import (
    MOTION_KINDS,
    SATURATION_MODES,
    CaptureConfig,
    DebrisConfig,
    DelayTable,
    FixturesConfig,
    GuidanceConfig,
    LawFacts,
    MappingConfig,
    Mat3,
    RenderingConfig,
    RobotConfig,
    Scenario,
    TargetConfig,
    Vec3,
    Vocabulary,
)
from scenarios.toml_in import (
    MAX_REFERENCE_BYTES,
    MAX_SEED,
    Problems,
    file_reference,
    is_number,
    parse_toml,
    read_toml_file,
    text_problem,
)

MAX_SPEED_M_S = 1.0
MAX_START_DISTANCE_M = 5.0
#: Longest trial [s]: the recorder preallocates a row per servo tick (1 kHz) for it.
MAX_TIME_LIMIT_S = 600.0


class _Table:
    """One TOML table being read: typed getters that record named problems; tracks used keys.

    A getter records what is wrong with a value and returns None, so the reading goes on
    (every problem of the file is reported at once) and a check that needs the value is
    skipped rather than reported twice. A table that is missing or not a table is read
    ``quiet``: its own problem is reported once, not each of its required keys.
    """

    def __init__(self, problems: Problems, prefix: str, data: dict[str, Any], quiet: bool = False) -> None:
        self.problems = problems
        self.prefix = prefix
        self.data = data
        self.quiet = quiet
        self.used: set[str] = set()

    def field(self, key: str) -> str:
        shown = key if len(key) <= 80 else key[:77] + "..."
        return f"{self.prefix}{shown}"

    def fail(self, key: str, expected: str, value: object = ..., *, hint: str = "") -> None:
        """Record ``FIELD: expected EXPECTED, got VALUE`` (no "got" when ``value`` is not given)."""
        self.problems.expected(self.field(key), expected, value, hint=hint)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, required: bool, expected: str) -> Any:
        self.used.add(key)
        if key not in self.data:
            if required and not self.quiet:
                self.problems.add(self.field(key), f"missing (expected {expected})")
            return None
        return self.data[key]

    def number(
        self,
        key: str,
        default: float | None = None,
        *,
        minimum: float | None = None,
        strict: bool = False,
        maximum: float | None = None,
        required: bool = False,
    ) -> float | None:
        expected = "a number"
        if minimum is not None:
            expected += f" {'>' if strict else '>='} {minimum:g}"
        if maximum is not None:
            expected += f"{' and' if minimum is not None else ''} <= {maximum:g}"
        value = self.raw(key, required, expected)
        if value is None:
            return default
        if not is_number(value):
            self.fail(key, expected, value)
            return None
        number = float(value)
        too_low = minimum is not None and (number <= minimum if strict else number < minimum)
        if too_low or (maximum is not None and number > maximum):
            self.fail(key, expected, value)
            return None
        return number

    def integer(
        self, key: str, *, minimum: int = 0, maximum: int | None = None, required: bool = False, default: int = 0
    ) -> int | None:
        expected = f"an integer >= {minimum}" + (f" and <= {maximum}" if maximum is not None else "")
        value = self.raw(key, required, expected)
        if value is None:
            return None if required else default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(key, expected, value)
            return None
        if maximum is not None and value > maximum:
            self.fail(key, expected, value)
            return None
        return int(value)

    def string(
        self,
        key: str,
        default: str | None = None,
        *,
        choices: Iterable[str] | None = None,
        allow_empty: bool = True,
        single_line: bool = False,
    ) -> str | None:
        options = tuple(choices) if choices is not None else None
        expected = f"one of {', '.join(repr(c) for c in options)}" if options else "a string"
        value = self.raw(key, default is None, expected)
        if value is None:
            return default
        if not isinstance(value, str):
            self.fail(key, expected, value)
            return None
        if options is not None:
            if value not in options:
                close = suggestion(value, options)
                self.fail(key, expected, value, hint=f" (did you mean {close!r}?)" if close else "")
                return None
            return value
        wrong = text_problem(value, allow_empty=allow_empty, single_line=single_line)
        if wrong is not None:
            self.problems.add(self.field(key), f"expected {wrong}")
            return None
        return value

    def param(self, param: Param) -> float | None:
        """The declared parameter ``param`` (None when the file does not set it or it is wrong)."""
        value = self.raw(param.name, False, param.expected())
        if value is None:
            return None
        if not param.accepts(value):
            self.fail(param.name, param.expected(), value)
            return None
        return float(value)

    def boolean(self, key: str, default: bool) -> bool | None:
        value = self.raw(key, False, "true or false")
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, "true or false", value)
            return None
        return value

    def numbers(
        self, key: str, length: int | None, default: tuple[float, ...] | None = None, *, required: bool = False
    ) -> tuple[float, ...] | None:
        expected = f"a list of {length} numbers" if length is not None else "a list of numbers"
        value = self.raw(key, required, expected)
        if value is None:
            return default
        ok = isinstance(value, list) and (length is None or len(value) == length)
        if not (ok and all(is_number(v) for v in value)):
            numeric = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            self.fail(key, expected.replace(" numbers", " finite numbers") if numeric else expected, value)
            return None
        return tuple(float(v) for v in value)

    def vec3(self, key: str, default: Vec3 | None = None, *, required: bool = False) -> Vec3 | None:
        return self.numbers(key, 3, default, required=required)  # type: ignore[return-value]

    def matrix3(self, key: str, default: Mat3 | None = None) -> Mat3 | None:
        expected = "a 3x3 matrix (a list of three lists of three finite numbers)"
        value = self.raw(key, False, expected)
        if value is None:
            return default
        rows_ok = isinstance(value, list) and len(value) == 3 and all(isinstance(row, list) and len(row) == 3 for row in value)
        if not (rows_ok and all(is_number(v) for row in value for v in row)):
            self.fail(key, expected, value)
            return None
        return tuple(tuple(float(v) for v in row) for row in value)  # type: ignore[return-value]

    def table(self, key: str, required: bool = False) -> _Table:
        """The sub-table ``key``; read quietly when it is missing or not a table."""
        value = self.raw(key, required, "a table")
        if value is None:
            return _Table(self.problems, f"{self.field(key)}.", {}, quiet=required or self.quiet)
        if not isinstance(value, dict):
            self.fail(key, f"a table [{self.field(key)}]", value)
            return _Table(self.problems, f"{self.field(key)}.", {}, quiet=True)
        return _Table(self.problems, f"{self.field(key)}.", value, quiet=self.quiet)

    def finish(self) -> None:
        """Record every key that was never read (unknown keys)."""
        known = sorted(self.used)
        for key in self.data:
            if key not in self.used:
                close = suggestion(key, known)
                hint = f" (did you mean {close!r}?)" if close else ""
                self.problems.add(self.field(key), f"unknown key{hint}; expected one of {', '.join(known)}")


def _robot(root: _Table, vocabulary: Vocabulary) -> tuple[RobotConfig, bool | None]:
    """The robot table, and whether its model is planar (None: the model is not known)."""
    t = root.table("robot", required=True)
    model = t.string("model", choices=vocabulary.models.names())
    facts = vocabulary.models.get(model) if model is not None else None
    joints = t.numbers("initial_joints_rad", facts.n_joints if facts is not None else None)
    if joints is not None and any(abs(q) > 2.0 * math.pi for q in joints):
        t.fail("initial_joints_rad", "angles within [-2π, 2π] rad", joints)
    mass = t.number("base_mass_kg", None, minimum=0.0, strict=True, maximum=1e6)
    inertia = _inertia(t)
    t.finish()
    planar = None if facts is None else facts.task_dim == 2
    return RobotConfig(model, joints, mass, inertia), planar  # type: ignore[arg-type]


def _inertia(t: _Table) -> Mat3 | None:
    key = "base_inertia_kg_m2"
    expected = "3 positive principal moments or a symmetric positive-definite 3x3 matrix [kg m²]"
    value = t.data.get(key)
    if value is None:
        t.used.add(key)
        return None
    if not isinstance(value, list):
        t.fail(key, expected, value)
        t.used.add(key)
        return None
    if value and not isinstance(value[0], list):
        diag = t.numbers(key, 3)
        matrix = None if diag is None else np.diag(diag)
    else:
        rows = t.matrix3(key)
        matrix = None if rows is None else np.array(rows)
    if matrix is None:
        return None
    if not _positive_definite(matrix):
        t.fail(key, expected, value)
        return None
    return tuple(tuple(float(v) for v in row) for row in matrix)  # type: ignore[return-value]


def _positive_definite(matrix: np.ndarray) -> bool:
    """Symmetric with positive eigenvalues (False also when huge entries overflow)."""
    with np.errstate(all="ignore"):
        try:
            return bool(np.allclose(matrix, matrix.T) and np.all(np.linalg.eigvalsh(matrix) > 0.0))
        except np.linalg.LinAlgError:
            return False


def _target(root: _Table, planar: bool | None) -> TargetConfig:
    t = root.table("target", required=True)
    radius = t.number("radius_m", minimum=0.0, strict=True, maximum=1.0, required=True)
    offset = t.vec3("start_offset_m", required=True)
    velocity = t.vec3("velocity_m_s", required=True)
    motion = t.string("motion", "linear", choices=MOTION_KINDS)
    if radius is not None and offset is not None:
        distance = math.dist(offset, (0.0, 0.0, 0.0))
        if not radius < distance <= MAX_START_DISTANCE_M:
            t.fail("start_offset_m", f"a start outside the target (|offset| > radius_m = {radius:g}) "
                   f"and at most {MAX_START_DISTANCE_M:g} m away", offset)
    if velocity is not None and math.dist(velocity, (0.0, 0.0, 0.0)) > MAX_SPEED_M_S:
        t.fail("velocity_m_s", f"a speed of at most {MAX_SPEED_M_S:g} m/s", velocity)
    only = {"curved": ("turn_rate_rad_s", "turn_axis"), "tumbling": ("angular_velocity_rad_s", "lever_arm_m")}
    for kind, keys in only.items():
        for key in keys:
            if motion is None:
                t.used.add(key)  # which motion it belongs to is unknown: motion's problem is enough
            elif kind != motion and t.has(key):
                t.fail(key, f"this field only with motion = {kind!r} (motion is {motion!r})")
                t.used.add(key)
    turn_rate: float | None = 0.0
    turn_axis: Vec3 | None = (0.0, 0.0, 1.0)
    omega: Vec3 | None = (0.0, 0.0, 0.0)
    lever: Vec3 | None = (0.0, 0.0, 0.0)
    if motion == "curved":
        turn_rate = t.number("turn_rate_rad_s", minimum=-5.0, maximum=5.0, required=True)
        turn_axis = t.vec3("turn_axis", (0.0, 0.0, 1.0))
        if turn_axis is not None and math.dist(turn_axis, (0.0, 0.0, 0.0)) < 1e-9:
            t.fail("turn_axis", "a non-zero axis", turn_axis)
    elif motion == "tumbling":
        omega = t.vec3("angular_velocity_rad_s", required=True)
        lever = t.vec3("lever_arm_m", required=True)
        if omega is not None and math.dist(omega, (0.0, 0.0, 0.0)) > 2.0 * math.pi:
            t.fail("angular_velocity_rad_s", "a rate of at most 2π rad/s", omega)
        if lever is not None and math.dist(lever, (0.0, 0.0, 0.0)) > 2.0:
            t.fail("lever_arm_m", "a lever arm of at most 2 m", lever)
    t.finish()
    if planar:
        in_plane = {"start_offset_m": offset, "velocity_m_s": velocity, "lever_arm_m": lever}
        for key, vec in in_plane.items():
            if vec is not None and vec[2] != 0.0:
                t.fail(key, "z = 0 for a planar model", vec)
        if motion == "curved" and turn_axis is not None and (turn_axis[0] != 0.0 or turn_axis[1] != 0.0):
            t.fail("turn_axis", "the z axis for a planar model", turn_axis)
        if omega is not None and (omega[0] != 0.0 or omega[1] != 0.0):
            t.fail("angular_velocity_rad_s", "rotation about z only for a planar model", omega)
    return TargetConfig(radius, offset, velocity, motion, turn_rate, turn_axis, omega, lever)  # type: ignore[arg-type]


def _capture(root: _Table) -> CaptureConfig:
    t = root.table("capture")
    values: dict[str, Any] = {  # a value is None when it has a problem (then no Scenario is returned)
        "tolerance_m": t.number("tolerance_m", 0.0, minimum=0.0, maximum=0.1),
        "post_capture_window_s": t.number("post_capture_window_s", 1.0, minimum=0.0, strict=True, maximum=60.0),
        "time_limit_s": t.number("time_limit_s", 10.0, minimum=0.0, strict=True, maximum=MAX_TIME_LIMIT_S),
        "capture_speed_m_s": t.number("capture_speed_m_s", 0.05, minimum=0.0, strict=True, maximum=MAX_SPEED_M_S),
        "hold_s": t.number("hold_s", 0.1, minimum=0.0, maximum=10.0),
        "hold_gap_m": t.number("hold_gap_m", 0.001, minimum=0.0, maximum=0.1),
    }
    t.finish()
    return CaptureConfig(**values)


def _delay(root: _Table, compensators: Lookup[object] | None = None) -> DelayTable:
    t = root.table("delay")
    values: dict[str, Any] = {
        "delay_s": t.number("delay_s", 0.0, minimum=0.0, maximum=60.0),
        "jitter_s": t.number("jitter_s", 0.0, minimum=0.0, maximum=10.0),
        "loss": t.number("loss", 0.0, minimum=0.0, maximum=0.99),
        "compensator": t.string("compensator", "none", allow_empty=False, single_line=True,
                                choices=None if compensators is None else compensators.names()),
    }
    t.finish()
    return DelayTable(**{k: v for k, v in values.items() if v is not None})


def _debris(root: _Table) -> DebrisConfig:
    t = root.table("debris")
    values: dict[str, Any] = {
        "mass_kg": t.number("mass_kg", 20.0, minimum=0.0, strict=True, maximum=1e5),
        "inertia_kg_m2": t.vec3("inertia_kg_m2"),
        "size_m": t.vec3("size_m", (0.2, 0.2, 0.2)),
        "contact_frequency_rad_s": t.number("contact_frequency_rad_s", 60.0, minimum=1.0, maximum=300.0),
        "contact_damping_ratio": t.number("contact_damping_ratio", 0.5, minimum=0.0, maximum=0.95),
        "friction": t.number("friction", 0.3, minimum=0.0, maximum=2.0),
    }
    inertia, size = values["inertia_kg_m2"], values["size_m"]
    if inertia is not None and not (all(v > 0.0 for v in inertia) and max(inertia) <= 1e6):
        t.fail("inertia_kg_m2", "3 positive principal moments of at most 1e6 kg m²", inertia)
        values["inertia_kg_m2"] = None
    elif inertia is not None and 2.0 * max(inertia) > sum(inertia) * (1.0 + 1e-9):
        t.fail("inertia_kg_m2", "principal moments that satisfy the triangle inequality (a rigid body)", inertia)
    if size is not None and not all(0.0 < v <= 20.0 for v in size):
        t.fail("size_m", "3 edge lengths > 0 and <= 20 m", size)
    t.finish()
    return DebrisConfig(**{k: v for k, v in values.items() if v is not None or k == "inertia_kg_m2"})


def _guidance(root: _Table, laws: Lookup[LawFacts]) -> GuidanceConfig:
    """``[guidance.<law>]`` tables: registered laws only, each law's declared parameters only."""
    t = root.table("guidance")
    per_law = []
    for law in laws.names():
        sub = t.table(law)  # a law the file does not mention reads as an empty table
        pairs = []
        for param in laws.get(law).PARAMS:
            value = sub.param(param)
            if value is not None:
                pairs.append((param.name, value))
        sub.finish()
        if pairs:
            per_law.append((law, tuple(pairs)))
    t.finish()
    return GuidanceConfig(tuple(per_law))


def _fixtures(root: _Table) -> FixturesConfig:
    t = root.table("fixtures")
    values: dict[str, Any] = {key: t.boolean(key, True) for key in ("workspace_walls", "reach_limit", "joint_limits",
                                                                   "reaction_boundary")}
    t.finish()
    return FixturesConfig(**values)


def _mapping(root: _Table) -> MappingConfig:
    t = root.table("mapping")
    position_scale = t.number("position_scale", 1.75, minimum=0.0, strict=True, maximum=100.0)
    force_scale = t.number("force_scale", 1.0, minimum=0.0, strict=True, maximum=100.0)
    rotation = t.matrix3("rotation_task_from_device", MappingConfig.rotation_task_from_device)
    if rotation is not None:
        r = np.array(rotation)
        with np.errstate(all="ignore"):  # huge entries overflow to inf: simply not a rotation
            proper = bool(np.allclose(r @ r.T, np.eye(3), atol=1e-6) and abs(np.linalg.det(r) - 1.0) < 1e-6)
        if not proper:
            t.fail("rotation_task_from_device", "a proper rotation matrix (RᵀR = I, det R = +1)", rotation)
    t.finish()
    return MappingConfig(position_scale, force_scale, rotation)  # type: ignore[arg-type]


def _rendering(root: _Table, contact_modes: Lookup[object] | None = None) -> RenderingConfig:
    t = root.table("rendering")
    values: dict[str, Any] = {
        "max_force_n": t.number("max_force_n", 3.0, minimum=0.0, strict=True, maximum=50.0),
        "saturation": t.string("saturation", "norm", choices=SATURATION_MODES),
        "ramp_time_s": t.number("ramp_time_s", 0.5, minimum=0.0, maximum=10.0),
        "max_rate_n_s": t.number("max_rate_n_s", 1000.0, minimum=0.0, strict=True),
        "contact_feedback": t.boolean("contact_feedback", False),
        "contact_force_scale": t.number("contact_force_scale", 0.02, minimum=0.0, maximum=10.0),
        "contact_mode": t.string("contact_mode", "contact", allow_empty=False, single_line=True,
                                 choices=None if contact_modes is None else contact_modes.names()),
        "contact_time_constant_s": t.number("contact_time_constant_s", 0.5, minimum=0.0, strict=True, maximum=60.0),
        "coupling_share": t.number("coupling_share", 0.5, minimum=0.0, strict=True, maximum=1.0),
    }
    t.finish()
    return RenderingConfig(**values)


def scenario_from_dict(data: dict[str, Any], source: str, default_name: str, *, vocabulary: Vocabulary) -> Scenario:
    """Validate parsed TOML ``data`` (from ``source``) into a :class:`Scenario`, with the
    model and law names (and their facts) from ``vocabulary``.

    Raises:
        ProblemsError: every problem of the file, one line each.
    """
    problems = Problems(source)
    root = _Table(problems, "", data)
    name = root.string("name", default_name, allow_empty=False, single_line=True)
    description = root.string("description", "")
    seed = root.integer("seed", required=True, maximum=MAX_SEED)
    robot, planar = _robot(root, vocabulary)
    scenario = Scenario(
        name=name,  # type: ignore[arg-type]
        seed=seed,  # type: ignore[arg-type]
        robot=robot,
        target=_target(root, planar),
        description=description,  # type: ignore[arg-type]
        capture=_capture(root),
        debris=_debris(root),
        delay=_delay(root, vocabulary.compensators),
        guidance=_guidance(root, vocabulary.laws),
        fixtures=_fixtures(root),
        mapping=_mapping(root),
        rendering=_rendering(root, vocabulary.contact_modes),
        source=source,
    )
    root.finish()
    problems.check()
    return scenario


def loads_scenario(
    text: str, source: str = "<string>", default_name: str = "unnamed", *, vocabulary: Vocabulary
) -> Scenario:
    """Parse and validate scenario TOML ``text``; ``source`` names it in error messages."""
    return scenario_from_dict(parse_toml(text, source), source, default_name, vocabulary=vocabulary)


@functools.cache
def builtin_scenarios() -> Registry[Traversable]:
    """The built-in scenario files (``scenarios/builtin/*.toml``) by name, sorted: the one
    list of built-in scenario names."""
    return packaged_files("built-in scenario", "scenarios.builtin", ".toml", error=ScenarioError,
                          hint="or give the path of a .toml file")


def builtin_names() -> tuple[str, ...]:
    """Names of the built-in scenarios, sorted."""
    return builtin_scenarios().names()


def load_scenario(path_or_name: str | Path, *, vocabulary: Vocabulary) -> Scenario:
    """Load a scenario from a ``.toml`` path or a built-in name (``paper-2019``).

    Args:
        path_or_name: a path, or a name in :func:`builtin_scenarios`.
        vocabulary: the model and guidance-law registries the file's names refer to.

    Raises:
        ScenarioError: unreadable, too large, malformed or out-of-range file (a
            :class:`~scenarios.toml_in.ProblemsError` listing every problem), or unknown name.
    """
    text_name = str(path_or_name)
    wrong = text_problem(text_name, max_bytes=MAX_REFERENCE_BYTES, allow_empty=False, single_line=True)
    if wrong is not None:
        raise ScenarioError(f"scenario: expected a built-in name or the path of a .toml file: {wrong}")
    path = file_reference(text_name)
    if path is not None:
        data = read_toml_file(path, text_name)
        return scenario_from_dict(data, text_name, path.stem, vocabulary=vocabulary)
    resource = builtin_scenarios().get(text_name)
    return loads_scenario(
        resource.read_text(encoding="utf-8"), f"builtin:{text_name}", text_name, vocabulary=vocabulary
    )
