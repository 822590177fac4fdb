"""Load and validate scenario TOML files into :class:`scenarios.schema.Scenario`.

Every problem raises one :class:`~capture_trainer.errors.ScenarioError` whose message
names the file, the field and what was expected, e.g.::

    paper.toml: target.radius_m: expected a number > 0, got -0.01

Unknown keys are errors (a typo never silently falls back to a default).
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from capture_trainer.catalog import MODEL_NAMES
from capture_trainer.errors import ScenarioError
from scenarios.schema import (
    GUIDANCE_PARAMS,
    MOTION_KINDS,
    SATURATION_MODES,
    CaptureConfig,
    FixturesConfig,
    GuidanceConfig,
    MappingConfig,
    Mat3,
    RenderingConfig,
    RobotConfig,
    Scenario,
    TargetConfig,
    Vec3,
)

#: Joint count of each model, from its name (``planar-3r``: 3, ``spatial-7dof``: 7).
MODEL_JOINTS: dict[str, int] = {"planar-3r": 3, "spatial-7dof": 7}
PLANAR_MODELS: frozenset[str] = frozenset({"planar-3r"})
MAX_SPEED_M_S = 1.0
MAX_START_DISTANCE_M = 5.0


def _describe(value: object) -> str:
    """The offending value as the file wrote it (TOML spelling for booleans)."""
    text = ("true" if value else "false") if isinstance(value, bool) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Table:
    """One TOML table being read: typed getters that raise named errors; tracks used keys."""

    def __init__(self, source: str, prefix: str, data: dict[str, Any]) -> None:
        self.source = source
        self.prefix = prefix
        self.data = data
        self.used: set[str] = set()

    def field(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def fail(self, key: str, expected: str, value: object = None, show: bool = True) -> ScenarioError:
        got = f", got {_describe(value)}" if show else ""
        return ScenarioError(f"{self.source}: {self.field(key)}: expected {expected}{got}")

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, required: bool, expected: str) -> Any:
        self.used.add(key)
        if key not in self.data:
            if required:
                raise ScenarioError(f"{self.source}: {self.field(key)}: missing (expected {expected})")
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
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(key, expected, value)
        value = float(value)
        too_low = minimum is not None and (value <= minimum if strict else value < minimum)
        if too_low or (maximum is not None and value > maximum):
            raise self.fail(key, expected, value)
        return value

    def integer(self, key: str, *, minimum: int = 0, required: bool = False, default: int = 0) -> int:
        expected = f"an integer >= {minimum}"
        value = self.raw(key, required, expected)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(key, expected, value)
        return value

    def string(self, key: str, default: str | None = None, *, choices: Iterable[str] | None = None) -> str:
        options = tuple(choices) if choices is not None else None
        expected = f"one of {', '.join(repr(c) for c in options)}" if options else "a string"
        value = self.raw(key, default is None, expected)
        if value is None:
            return default  # type: ignore[return-value]
        if not isinstance(value, str):
            raise self.fail(key, expected, value)
        if options is not None and value not in options:
            close = difflib.get_close_matches(value, options, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ScenarioError(f"{self.source}: {self.field(key)}: expected {expected}, got {value!r}{hint}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw(key, False, "true or false")
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, "true or false", value)
        return value

    def numbers(self, key: str, length: int | None, default: Any = None, *, required: bool = False) -> tuple[float, ...] | None:
        expected = f"a list of {length} numbers" if length is not None else "a list of numbers"
        value = self.raw(key, required, expected)
        if value is None:
            return default
        ok = isinstance(value, list) and (length is None or len(value) == length)
        ok = ok and all(not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) for v in value)
        if not ok:
            raise self.fail(key, expected, value)
        return tuple(float(v) for v in value)

    def vec3(self, key: str, default: Vec3 | None = None, *, required: bool = False) -> Vec3:
        return self.numbers(key, 3, default, required=required)  # type: ignore[return-value]

    def matrix3(self, key: str, default: Mat3 | None = None) -> Mat3 | None:
        expected = "a 3x3 matrix (a list of three lists of three numbers)"
        value = self.raw(key, False, expected)
        if value is None:
            return default
        if not (isinstance(value, list) and len(value) == 3):
            raise self.fail(key, expected, value)
        rows = []
        for row in value:
            if not (isinstance(row, list) and len(row) == 3):
                raise self.fail(key, expected, value)
            if not all(not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) for v in row):
                raise self.fail(key, expected, value)
            rows.append(tuple(float(v) for v in row))
        return tuple(rows)  # type: ignore[return-value]

    def table(self, key: str, required: bool = False) -> _Table:
        value = self.raw(key, required, "a table")
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.fail(key, f"a table [{self.field(key)}]", value)
        return _Table(self.source, f"{self.field(key)}.", value)

    def finish(self) -> None:
        """Raise on the first key that was never read (unknown key)."""
        for key in self.data:
            if key not in self.used:
                known = sorted(self.used)
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ScenarioError(
                    f"{self.source}: {self.field(key)}: unknown key{hint}; expected one of {', '.join(known)}"
                )


def _robot(root: _Table) -> RobotConfig:
    t = root.table("robot", required=True)
    model = t.string("model", choices=MODEL_NAMES)
    n_joints = MODEL_JOINTS.get(model)
    joints = t.numbers("initial_joints_rad", n_joints)
    if joints is not None and any(abs(q) > 2.0 * math.pi for q in joints):
        raise t.fail("initial_joints_rad", "angles within [-2π, 2π] rad", joints)
    mass = t.number("base_mass_kg", None, minimum=0.0, strict=True, maximum=1e6)
    inertia = _inertia(t)
    t.finish()
    return RobotConfig(model, joints, mass, inertia)


def _inertia(t: _Table) -> Mat3 | None:
    key = "base_inertia_kg_m2"
    expected = "3 positive principal moments or a symmetric positive-definite 3x3 matrix [kg m²]"
    value = t.data.get(key)
    if value is None:
        t.used.add(key)
        return None
    if not isinstance(value, list):
        raise t.fail(key, expected, value)
    if value and not isinstance(value[0], list):
        diag = t.numbers(key, 3)
        matrix = np.diag(diag)
    else:
        matrix = np.array(t.matrix3(key))
    ok = np.allclose(matrix, matrix.T) and bool(np.all(np.linalg.eigvalsh(matrix) > 0.0))
    if not ok:
        raise t.fail(key, expected, value)
    return tuple(tuple(float(v) for v in row) for row in matrix)  # type: ignore[return-value]


def _target(root: _Table, planar: bool) -> TargetConfig:
    t = root.table("target", required=True)
    radius = t.number("radius_m", minimum=0.0, strict=True, maximum=1.0, required=True)
    offset = t.vec3("start_offset_m", required=True)
    velocity = t.vec3("velocity_m_s", required=True)
    motion = t.string("motion", "linear", choices=MOTION_KINDS)
    distance = math.dist(offset, (0.0, 0.0, 0.0))
    if not radius < distance <= MAX_START_DISTANCE_M:  # type: ignore[operator]
        raise t.fail("start_offset_m", f"a start outside the target (|offset| > radius_m = {radius:g}) and at most {MAX_START_DISTANCE_M:g} m away", offset)
    if math.dist(velocity, (0.0, 0.0, 0.0)) > MAX_SPEED_M_S:
        raise t.fail("velocity_m_s", f"a speed of at most {MAX_SPEED_M_S:g} m/s", velocity)
    only = {"curved": ("turn_rate_rad_s", "turn_axis"), "tumbling": ("angular_velocity_rad_s", "lever_arm_m")}
    for kind, keys in only.items():
        for key in keys:
            if kind != motion and t.has(key):
                raise t.fail(key, f"this field only with motion = {kind!r} (motion is {motion!r})", show=False)
    turn_rate, turn_axis = 0.0, (0.0, 0.0, 1.0)
    omega, lever = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    if motion == "curved":
        turn_rate = t.number("turn_rate_rad_s", minimum=-5.0, maximum=5.0, required=True)
        turn_axis = t.vec3("turn_axis", (0.0, 0.0, 1.0))
        if math.dist(turn_axis, (0.0, 0.0, 0.0)) < 1e-9:
            raise t.fail("turn_axis", "a non-zero axis", turn_axis)
    elif motion == "tumbling":
        omega = t.vec3("angular_velocity_rad_s", required=True)
        lever = t.vec3("lever_arm_m", required=True)
        if math.dist(omega, (0.0, 0.0, 0.0)) > 2.0 * math.pi:
            raise t.fail("angular_velocity_rad_s", "a rate of at most 2π rad/s", omega)
        if math.dist(lever, (0.0, 0.0, 0.0)) > 2.0:
            raise t.fail("lever_arm_m", "a lever arm of at most 2 m", lever)
    t.finish()
    if planar:
        in_plane = {"start_offset_m": offset, "velocity_m_s": velocity, "lever_arm_m": lever}
        for key, vec in in_plane.items():
            if vec[2] != 0.0:
                raise t.fail(key, "z = 0 for a planar model", vec)
        if motion == "curved" and (turn_axis[0] != 0.0 or turn_axis[1] != 0.0):
            raise t.fail("turn_axis", "the z axis for a planar model", turn_axis)
        if omega[0] != 0.0 or omega[1] != 0.0:
            raise t.fail("angular_velocity_rad_s", "rotation about z only for a planar model", omega)
    return TargetConfig(radius, offset, velocity, motion, turn_rate, turn_axis, omega, lever)  # type: ignore[arg-type]


def _capture(root: _Table) -> CaptureConfig:
    t = root.table("capture")
    config = CaptureConfig(
        tolerance_m=t.number("tolerance_m", 0.0, minimum=0.0, maximum=0.1),
        post_capture_window_s=t.number("post_capture_window_s", 1.0, minimum=0.0, strict=True, maximum=60.0),
        time_limit_s=t.number("time_limit_s", 10.0, minimum=0.0, strict=True, maximum=3600.0),
    )
    t.finish()
    return config  # type: ignore[arg-type]


def _guidance(root: _Table) -> GuidanceConfig:
    t = root.table("guidance")
    per_law: dict[str, tuple[tuple[str, float], ...]] = {}
    for law, bounds in GUIDANCE_PARAMS.items():
        sub = t.table(law)
        pairs = []
        for key, (minimum, strict) in bounds.items():
            value = sub.number(key, None, minimum=minimum, strict=strict)
            if value is not None:
                pairs.append((key, value))
        sub.finish()
        per_law[law] = tuple(pairs)
    t.finish()
    return GuidanceConfig(**per_law)


def _fixtures(root: _Table) -> FixturesConfig:
    t = root.table("fixtures")
    config = FixturesConfig(
        workspace_walls=t.boolean("workspace_walls", True),
        reach_limit=t.boolean("reach_limit", True),
        joint_limits=t.boolean("joint_limits", True),
    )
    t.finish()
    return config


def _mapping(root: _Table) -> MappingConfig:
    t = root.table("mapping")
    position_scale = t.number("position_scale", 1.75, minimum=0.0, strict=True, maximum=100.0)
    force_scale = t.number("force_scale", 1.0, minimum=0.0, strict=True, maximum=100.0)
    rotation = t.matrix3("rotation_task_from_device", MappingConfig.rotation_task_from_device)
    r = np.array(rotation)
    if not (np.allclose(r @ r.T, np.eye(3), atol=1e-6) and abs(np.linalg.det(r) - 1.0) < 1e-6):
        raise t.fail("rotation_task_from_device", "a proper rotation matrix (RᵀR = I, det R = +1)", rotation)
    t.finish()
    return MappingConfig(position_scale, force_scale, rotation)  # type: ignore[arg-type]


def _rendering(root: _Table) -> RenderingConfig:
    t = root.table("rendering")
    config = RenderingConfig(
        max_force_n=t.number("max_force_n", 3.0, minimum=0.0, strict=True, maximum=50.0),
        saturation=t.string("saturation", "norm", choices=SATURATION_MODES),
        ramp_time_s=t.number("ramp_time_s", 0.5, minimum=0.0, maximum=10.0),
        max_rate_n_s=t.number("max_rate_n_s", 1000.0, minimum=0.0, strict=True),
    )
    t.finish()
    return config  # type: ignore[arg-type]


def scenario_from_dict(data: dict[str, Any], source: str, default_name: str) -> Scenario:
    """Validate parsed TOML ``data`` (from ``source``) into a :class:`Scenario`."""
    root = _Table(source, "", data)
    name = root.string("name", default_name)
    description = root.string("description", "")
    seed = root.integer("seed", required=True)
    robot = _robot(root)
    scenario = Scenario(
        name=name,
        seed=seed,
        robot=robot,
        target=_target(root, robot.model in PLANAR_MODELS),
        description=description,
        capture=_capture(root),
        guidance=_guidance(root),
        fixtures=_fixtures(root),
        mapping=_mapping(root),
        rendering=_rendering(root),
        source=source,
    )
    root.finish()
    return scenario


def loads_scenario(text: str, source: str = "<string>", default_name: str = "unnamed") -> Scenario:
    """Parse and validate scenario TOML ``text``; ``source`` names it in error messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(f"{source}: not valid TOML: {error}") from None
    return scenario_from_dict(data, source, default_name)


def _builtin_dir() -> Any:
    return resources.files("scenarios.builtin")


def builtin_names() -> list[str]:
    """Names of the built-in scenarios (``scenarios/builtin/*.toml``), sorted."""
    return sorted(p.name[: -len(".toml")] for p in _builtin_dir().iterdir() if p.name.endswith(".toml"))


def _read_file(path: Path, source: str) -> str:
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ScenarioError(f"{source}: cannot read: {error.strerror or error}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ScenarioError(f"{source}: not valid TOML: not UTF-8 text (byte {error.start})") from None


def load_scenario(path_or_name: str | Path) -> Scenario:
    """Load a scenario from a ``.toml`` path or a built-in name (``paper-2019``).

    Raises:
        ScenarioError: unreadable, malformed or out-of-range file, or unknown name.
    """
    text_name = str(path_or_name)
    path = Path(path_or_name)
    if path.suffix == ".toml" or path.exists() or "/" in text_name:
        return loads_scenario(_read_file(path, text_name), text_name, path.stem)
    names = builtin_names()
    if text_name not in names:
        close = difflib.get_close_matches(text_name, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ScenarioError(f"unknown scenario {text_name!r}{hint}; built-in: {', '.join(names)} (or give a .toml path)")
    resource = _builtin_dir() / f"{text_name}.toml"
    return loads_scenario(resource.read_text(encoding="utf-8"), f"builtin:{text_name}", text_name)
