"""Scenario files: built-ins load, broken files give one clear message, the CLI exits non-zero."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from capture_trainer.errors import ScenarioError
from capture_trainer.params import Param
from capture_trainer.registry import Registry
from guidance.registry import LAWS, make_law
from robot.models import MODELS
from scenarios import loader
from scenarios.loader import builtin_names
from scenarios.schema import Vocabulary
from scenarios.toml_in import ProblemsError
from scenarios.toml_out import to_toml
from trials.vocabulary import load_scenario, loads_scenario, random_scenario

MINIMAL = """seed = 1
[robot]
model = "planar-3r"
[target]
radius_m = 0.0044
start_offset_m = [0.27, -0.099, 0.0]
velocity_m_s = [-0.1, 0.0, 0.0]
"""


def test_there_are_the_paper_and_at_least_five_more_builtins() -> None:
    names = builtin_names()
    assert "paper-2019" in names and len(names) >= 6


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_loads_and_round_trips(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.name == name and scenario.robot.model in MODELS
    assert scenario.description
    assert loads_scenario(to_toml(scenario), default_name="other") == scenario
    assert json.loads(json.dumps(scenario.as_dict()))["target"]["radius_m"] == scenario.target.radius_m


def test_builtins_vary_direction_speed_and_model() -> None:
    scenarios = [load_scenario(n) for n in builtin_names()]
    speeds = [float(np.linalg.norm(s.target.velocity_m_s)) for s in scenarios]
    assert min(speeds) <= 0.05 + 1e-9 and max(speeds) >= 0.3 - 1e-3
    directions = {tuple(np.round(np.array(s.target.velocity_m_s) / np.linalg.norm(s.target.velocity_m_s), 2)) for s in scenarios}
    assert len(directions) >= 4
    assert any(s.robot.model == "spatial-7dof" and s.target.motion == "tumbling" for s in scenarios)
    assert any(s.robot.model == "spatial-7dof" and s.target.start_offset_m[2] > 0.1 and s.target.velocity_m_s[2] < 0 for s in scenarios)


def test_paper_2019_is_the_papers_set_up() -> None:
    paper = load_scenario("paper-2019")
    assert paper.robot.model == "planar-3r"
    assert paper.target.radius_m == 0.0044
    assert paper.target.velocity_m_s == (-0.1, 0.0, 0.0) and paper.target.motion == "linear"
    surface_distance = math.dist(paper.target.start_offset_m, (0, 0, 0)) - paper.target.radius_m
    assert surface_distance == pytest.approx(0.28, abs=0.005)
    assert paper.capture.post_capture_window_s == 1.0
    assert paper.rendering.max_force_n == 3.0 and paper.rendering.saturation == "axis"
    assert paper.guidance.params("dg")["k_p"] == 7.7 and paper.guidance.params("dg")["k_d"] == 5.0


def test_defaults_and_target_motion_resolution() -> None:
    scenario = loads_scenario(MINIMAL, default_name="mini")
    assert scenario.name == "mini" and scenario.robot.initial_joints_rad is None
    assert scenario.capture.post_capture_window_s == 1.0 and scenario.rendering.saturation == "norm"
    pos, vel, acc = np.zeros(3), np.zeros(3), np.zeros(3)
    scenario.target_motion([1.0, 2.0, 0.0]).state(2.0, pos, vel, acc)
    np.testing.assert_allclose(pos, [1.0 + 0.27 - 0.2, 2.0 - 0.099, 0.0])
    np.testing.assert_allclose(vel, [-0.1, 0.0, 0.0])


@pytest.mark.parametrize("law", LAWS.names())
def test_a_file_may_set_every_declared_parameter_of_every_law(law: str) -> None:
    params = LAWS.get(law).PARAMS
    lines = [f"[guidance.{law}]", *(f"{param.name} = 0.5" for param in params)]
    scenario = loads_scenario(with_lines(*lines))
    assert scenario.guidance.params(law) == {param.name: 0.5 for param in params}
    assert make_law(law, **scenario.guidance.params(law)).params()["law"] == law
    assert loads_scenario(to_toml(scenario), default_name="unnamed") == scenario


class _Spring:
    """A law registered nowhere but in the test's own vocabulary."""

    PARAMS = (Param("k_n_m", "N/m", minimum=0.0, strict=True, maximum=100.0),)


def test_guidance_parameters_come_from_the_vocabulary_handed_in(tmp_path: Path) -> None:
    laws: Registry[_Spring] = Registry("guidance law")
    laws.register("spring", _Spring)
    vocabulary = Vocabulary(models=MODELS, laws=laws)
    path = tmp_path / "spring.toml"
    path.write_text(with_lines("[guidance.spring]", "k_n_m = 50"), encoding="utf-8")
    assert loader.load_scenario(path, vocabulary=vocabulary).guidance.params("spring") == {"k_n_m": 50.0}
    path.write_text(with_lines("[guidance.spring]", "k_n_m = 500"), encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"spring\.toml: guidance\.spring\.k_n_m: expected a number > 0 and <= 100 \[N/m\], got 500"):
        loader.load_scenario(path, vocabulary=vocabulary)
    path.write_text(with_lines("[guidance.dg]", "k_p = 7.7"), encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"guidance\.dg: unknown key"):
        loader.load_scenario(path, vocabulary=vocabulary)


def with_lines(*extra: str, drop: str | None = None) -> str:
    lines = [line for line in MINIMAL.splitlines() if drop is None or not line.startswith(drop)]
    return "\n".join(lines + list(extra)) + "\n"


BROKEN = {
    "not-toml": ("seed = = 1\n", ["not valid TOML"]),
    "missing-seed": (with_lines(drop="seed"), ["seed", "missing", "integer"]),
    "seed-type": (MINIMAL.replace("seed = 1", 'seed = "one"'), ["seed", "expected an integer", "'one'"]),
    "missing-robot": (MINIMAL.replace('[robot]\nmodel = "planar-3r"\n', ""), ["robot", "missing", "table"]),
    "unknown-model": (MINIMAL.replace("planar-3r", "scara"), ["robot.model", "'planar-3r'", "'scara'"]),
    "negative-radius": (MINIMAL.replace("0.0044", "-0.01"), ["target.radius_m", "> 0", "-0.01"]),
    "radius-type": (MINIMAL.replace("0.0044", '"small"'), ["target.radius_m", "a number"]),
    "missing-velocity": (with_lines(drop="velocity_m_s"), ["target.velocity_m_s", "missing", "3 numbers"]),
    "short-vector": (MINIMAL.replace("[-0.1, 0.0, 0.0]", "[-0.1, 0.0]"), ["target.velocity_m_s", "3 numbers"]),
    "too-fast": (MINIMAL.replace("[-0.1, 0.0, 0.0]", "[-3.0, 0.0, 0.0]"), ["target.velocity_m_s", "1 m/s"]),
    "start-inside": (MINIMAL.replace("[0.27, -0.099, 0.0]", "[0.001, 0.0, 0.0]"), ["target.start_offset_m", "outside"]),
    "planar-z": (MINIMAL.replace("[0.27, -0.099, 0.0]", "[0.27, -0.099, 0.1]"), ["target.start_offset_m", "z = 0"]),
    "unknown-key": (with_lines("colour = 'red'"), ["target.colour", "unknown key"]),
    "unknown-top-key": ("sead = 2\n" + MINIMAL, ["sead", "unknown key", "did you mean 'seed'"]),
    "unknown-motion": (with_lines('motion = "spiral"'), ["target.motion", "'linear'", "'spiral'"]),
    "curved-field-on-linear": (with_lines("turn_rate_rad_s = 0.2"), ["target.turn_rate_rad_s", "motion = 'curved'"]),
    "tumbling-missing-omega": (with_lines('motion = "tumbling"', "lever_arm_m = [0.1, 0.0, 0.0]"),
                               ["target.angular_velocity_rad_s", "missing"]),
    "joint-count": (MINIMAL.replace('model = "planar-3r"', 'model = "planar-3r"\ninitial_joints_rad = [0.1, 0.2]'),
                    ["robot.initial_joints_rad", "3 numbers"]),
    "bad-inertia": (MINIMAL.replace('model = "planar-3r"', 'model = "planar-3r"\nbase_inertia_kg_m2 = [1.0, -2.0, 3.0]'),
                    ["robot.base_inertia_kg_m2", "positive"]),
    "bad-rotation": (with_lines("[mapping]", "rotation_task_from_device = [[1, 0, 0], [0, 1, 0], [0, 0, -1]]"),
                     ["mapping.rotation_task_from_device", "proper rotation"]),
    "bad-gain": (with_lines("[guidance.dg]", "k_p = -7.7"), ["guidance.dg.k_p", "> 0", "-7.7"]),
    "unknown-gain": (with_lines("[guidance.apf]", "k_p = 7.7"), ["guidance.apf.k_p", "unknown key"]),
    "unknown-gain-typo": (with_lines("[guidance.dg]", "k_q = 7.7"), ["guidance.dg.k_q", "unknown key", "did you mean 'k_p'"]),
    "unknown-law": (with_lines("[guidance.dgg]", "k_p = 7.7"), ["guidance.dgg", "unknown key", "did you mean 'dg'"]),
    "gain-out-of-range": (with_lines("[guidance.apf]", "saturation_distance_m = 0.0"),
                          ["guidance.apf.saturation_distance_m", "> 0", "[m]", "0.0"]),
    "gain-not-a-number": (with_lines("[guidance.dg]", 'm_kg = "heavy"'), ["guidance.dg.m_kg", "a number", "'heavy'"]),
    "bool-as-number": (with_lines("[capture]", "time_limit_s = true"), ["capture.time_limit_s", "a number"]),
    "table-as-value": ("robot = 3\n" + MINIMAL.replace('[robot]\nmodel = "planar-3r"\n', ""), ["robot", "table"]),
    "bad-saturation": (with_lines("[rendering]", 'saturation = "axes"'), ["rendering.saturation", "did you mean 'axis'"]),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_files_give_one_clear_message(tmp_path: Path, case: str) -> None:
    text, fragments = BROKEN[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_non_toml_bytes_are_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(ScenarioError, match=r"binary\.toml: not valid TOML"):
        load_scenario(path)


def test_missing_file_and_unknown_name() -> None:
    with pytest.raises(ScenarioError, match="nope.toml: cannot read"):
        load_scenario("nope.toml")
    with pytest.raises(ScenarioError, match="did you mean 'paper-2019'"):
        load_scenario("paper2019")


def _run_cli(argv: list[str]) -> int:
    from app.commands.scenarios import add_commands

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


def test_cli_list_show_and_generate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert _run_cli(["scenarios", "list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in builtin_names())
    assert _run_cli(["scenarios", "show", "paper-2019"]) == 0
    assert loads_scenario(capsys.readouterr().out, default_name="x") == load_scenario("paper-2019")
    out = tmp_path / "random.toml"
    assert _run_cli(["scenarios", "generate", "--seed", "7", "--out", str(out)]) == 0
    assert _run_cli(["scenarios", "validate", str(out)]) == 0


def test_cli_validate_exits_non_zero_with_the_message(tmp_path: Path) -> None:
    script = shutil.which("capture-trainer", path=str(Path(sys.executable).parent))
    assert script is not None
    bad = tmp_path / "bad.toml"
    bad.write_text(MINIMAL.replace("0.0044", "-0.01"), encoding="utf-8")
    result = subprocess.run([script, "scenarios", "validate", str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert f"{bad}: target.radius_m: expected a number > 0" in result.stderr
    assert "Traceback" not in result.stderr
    missing = subprocess.run([script, "scenarios", "validate", str(tmp_path / "missing.toml")], capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "cannot read" in missing.stderr


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "three.toml"
    path.write_text(with_lines("[capture]", "time_limit_s = 3600", drop="seed").replace("0.0044", "-0.01"),
                    encoding="utf-8")
    with pytest.raises(ProblemsError) as info:
        load_scenario(path)
    error = info.value
    assert error.problems == (
        f"{path}: seed: missing (expected an integer >= 0 and <= 4294967295)",
        f"{path}: target.radius_m: expected a number > 0 and <= 1, got -0.01",
        f"{path}: capture.time_limit_s: expected a number > 0 and <= 600, got 3600",
    )
    assert str(error).splitlines() == [f"3 problems in {path}:", *error.problems]


def test_a_value_that_is_wrong_is_reported_once_not_again_by_the_checks_that_need_it() -> None:
    with pytest.raises(ProblemsError) as info:
        loads_scenario(with_lines('motion = "spiral"', "turn_rate_rad_s = 0.2").replace('"planar-3r"', '"scara"'))
    assert [line.split(": ")[1] for line in info.value.problems] == ["robot.model", "target.motion"]


@pytest.mark.parametrize(
    ("lines", "field", "fragment"),
    [
        (("[capture]", "time_limit_s = 600.5"), "capture.time_limit_s", "<= 600"),
        (("description = '" + "é" * 2049 + "'",), "description", "a string of 4098 bytes"),
        (('name = "two\\nlines"',), "name", "without line breaks"),
        (("[rendering]", "max_rate_n_s = nan"), "rendering.max_rate_n_s", "got nan"),
        (("[mapping]", "rotation_task_from_device = [[1, 0, 0], [0, 1, 0], [0, 0, inf]]"),
         "mapping.rotation_task_from_device", "finite numbers"),
    ],
)
def test_bounds_and_non_finite_numbers(lines: tuple[str, ...], field: str, fragment: str) -> None:
    text = with_lines(*lines)
    if lines[0].startswith(("description", "name")):
        text = lines[0] + "\n" + MINIMAL
    with pytest.raises(ScenarioError) as info:
        loads_scenario(text, source="s.toml")
    message = str(info.value)
    assert message.startswith(f"s.toml: {field}: expected") and fragment in message, message


def test_seeds_are_32_bits() -> None:
    assert loads_scenario(MINIMAL.replace("seed = 1", "seed = 4294967295")).seed == 2**32 - 1
    with pytest.raises(ScenarioError, match=r"seed: expected an integer >= 0 and <= 4294967295, got 4294967296"):
        loads_scenario(MINIMAL.replace("seed = 1", "seed = 4294967296"))
    with pytest.raises(ScenarioError, match=r"random scenario: seed: expected an integer >= 0 and <= 4294967295"):
        random_scenario(2**32, "planar-3r")


def test_large_deep_and_special_files_are_refused_before_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_bytes(b"seed = 1\n" + b"#" * (1024 * 1024))
    with pytest.raises(ScenarioError, match=r"big\.toml: file too large: 1048585 bytes, at most 1048576 allowed"):
        load_scenario(big)
    with pytest.raises(ScenarioError, match=r"<s>: x \(line 1\): expected at most 8 levels"):
        loads_scenario("x = " + "[" * 1000 + "]" * 1000, source="<s>")
    with pytest.raises(ScenarioError, match=r"cannot read: not a regular file"):
        load_scenario(Path("/dev/zero"))
    with pytest.raises(ScenarioError, match=r"scenario: expected a built-in name or the path of a \.toml file"):
        load_scenario("bad\nname")
