"""A corpus of broken scenario files, protocol files and command lines.

Every case must end the same way: exit code 2, no traceback, one line per problem on
stderr (a file with three problems: a summary line and three lines), each line naming
the file (or option) and the field, and nothing written. Cases run in-process through
``app.cli.main`` (fast); a few run the installed console script in a subprocess.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import EXIT_ERROR, main

SCENARIO = """seed = 1
[robot]
model = "planar-3r"
[target]
radius_m = 0.0044
start_offset_m = [0.27, -0.099, 0.0]
velocity_m_s = [-0.1, 0.0, 0.0]
"""

PROTOCOL = """name = "p"
scenarios = ["paper-2019"]
conditions = ["dg", "ng"]
repetitions = 2
[participants]
count = 2
"""

ERROR = "capture-trainer: error: "
SUMMARY = re.compile(r"(\d+) problems in (.+):")


def scenario(*lines: str, replace: tuple[str, str] | None = None, drop: str | None = None) -> str:
    """The minimal valid scenario with lines replaced, dropped (by prefix) or added."""
    text = SCENARIO if replace is None else SCENARIO.replace(*replace)
    assert replace is None or replace[0] in SCENARIO, replace
    kept = [line for line in text.splitlines() if drop is None or not line.startswith(drop)]
    return "\n".join(kept + list(lines)) + "\n"


def protocol(*lines: str, replace: tuple[str, str] | None = None) -> str:
    text = PROTOCOL if replace is None else PROTOCOL.replace(*replace)
    assert replace is None or replace[0] in PROTOCOL, replace
    head, participants = text.split("[participants]\n")
    top = [line for line in lines if not line.startswith("participants.")]
    inner = [line.removeprefix("participants.") for line in lines if line.startswith("participants.")]
    return head + "\n".join(top) + "\n[participants]\n" + participants + "\n".join(inner) + "\n"


#: name -> (scenario TOML, the fields named, one problem line each, in any order).
SCENARIO_CASES: dict[str, tuple[str, list[str]]] = {
    "nan-radius": (scenario(replace=("0.0044", "nan")), ["target.radius_m"]),
    "inf-velocity": (scenario(replace=("[-0.1, 0.0, 0.0]", "[-inf, 0.0, 0.0]")), ["target.velocity_m_s"]),
    "nan-in-matrix": (scenario("[mapping]", "rotation_task_from_device = [[1, 0, 0], [0, nan, 0], [0, 0, 1]]"),
                      ["mapping.rotation_task_from_device"]),
    "time-limit-an-hour": (scenario("[capture]", "time_limit_s = 3600"), ["capture.time_limit_s"]),
    "negative-seed": (scenario(replace=("seed = 1", "seed = -1")), ["seed"]),
    "seed-past-32-bits": (scenario(replace=("seed = 1", "seed = 4294967296")), ["seed"]),
    "seed-huge": (scenario(replace=("seed = 1", "seed = 9223372036854775807")), ["seed"]),
    "seed-a-float": (scenario(replace=("seed = 1", "seed = 1.5")), ["seed"]),
    "description-too-long": (scenario(replace=("seed = 1", "seed = 1\ndescription = '" + "d" * 5000 + "'")),
                             ["description"]),
    "description-not-text": (scenario(replace=("seed = 1", "seed = 1\ndescription = 3")), ["description"]),
    "empty-name": (scenario(replace=("seed = 1", "seed = 1\nname = ''")), ["name"]),
    "name-with-line-break": (scenario(replace=("seed = 1", 'seed = 1\nname = "a\\nb"')), ["name"]),
    "name-too-long": (scenario(replace=("seed = 1", "seed = 1\nname = '" + "n" * 4097 + "'")), ["name"]),
    "three-problems": (scenario("[capture]", "time_limit_s = 3600", replace=("0.0044", "-0.01"), drop="seed"),
                       ["seed", "target.radius_m", "capture.time_limit_s"]),
    "empty-file": ("", ["seed", "robot", "target"]),
    "unknown-keys": (scenario("colour = 'red'", "[rendering]", "max_forse_n = 2"),
                     ["target.colour", "rendering.max_forse_n"]),
    "bool-as-number": (scenario("[capture]", "tolerance_m = true"), ["capture.tolerance_m"]),
    "text-as-number": (scenario(replace=("0.0044", "'small'")), ["target.radius_m"]),
    "short-vector": (scenario(replace=("[0.27, -0.099, 0.0]", "[0.27, -0.099]")), ["target.start_offset_m"]),
    "too-fast": (scenario(replace=("[-0.1, 0.0, 0.0]", "[-30.0, 0.0, 0.0]")), ["target.velocity_m_s"]),
    "start-too-far": (scenario(replace=("[0.27, -0.099, 0.0]", "[1e300, 0.0, 0.0]")), ["target.start_offset_m"]),
    "planar-z": (scenario(replace=("[0.27, -0.099, 0.0]", "[0.27, -0.099, 0.1]")), ["target.start_offset_m"]),
    "joints-out-of-range": (scenario(replace=('model = "planar-3r"', 'model = "planar-3r"\ninitial_joints_rad = [0, 7, 0]')),
                            ["robot.initial_joints_rad"]),
    "inertia-overflow": (scenario(replace=('model = "planar-3r"',
                                           'model = "planar-3r"\nbase_inertia_kg_m2 = [[1e308, 1e308, 0], [1e308, 1e308, 0], [0, 0, 1]]')),
                         ["robot.base_inertia_kg_m2"]),
    "unknown-model-and-its-joints": (scenario(replace=('model = "planar-3r"', 'model = "scara"\ninitial_joints_rad = [0, 0]')),
                                     ["robot.model"]),
    "bad-motion-and-its-fields": (scenario("motion = 'spiral'", "turn_rate_rad_s = 0.2"), ["target.motion"]),
    "curved-field-on-linear": (scenario("turn_rate_rad_s = 0.2"), ["target.turn_rate_rad_s"]),
    "gain-nan": (scenario("[guidance.dg]", "k_p = nan"), ["guidance.dg.k_p"]),
    "law-not-a-table": (scenario("[guidance]", "dg = 3"), ["guidance.dg"]),
    "unknown-law": (scenario("[guidance.dgg]", "k_p = 1"), ["guidance.dgg"]),
    "force-inf": (scenario("[rendering]", "max_force_n = inf"), ["rendering.max_force_n"]),
    "improper-rotation": (scenario("[mapping]", "rotation_task_from_device = [[1, 0, 0], [0, 1, 0], [0, 0, -1]]"),
                          ["mapping.rotation_task_from_device"]),
    "robot-not-a-table": ("robot = 3\n" + scenario(drop="[robot]").replace('model = "planar-3r"\n', ""), ["robot"]),
    "control-character-key": (scenario('"bell\\u0007" = 1'), ["target.bell\\x07"]),
    "nested-too-deep": (scenario("x = " + "[" * 20 + "]" * 20), ["target.x[0][0][0][0][0][0][0]"]),
    "nested-past-the-parser": (scenario("x = " + "[" * 3000 + "]" * 3000), ["x (line 8)"]),
    "inline-tables-past-the-parser": ("seed = 1\ny = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", ["y (line 2)"]),
}

#: name -> (bytes of a file that is not a scenario, a fragment of the one line).
FILE_CASES: dict[str, tuple[bytes | None, str]] = {
    "larger-than-1-MiB": (b"# " + b"x" * (1024 * 1024) + b"\nseed = 1\n", "file too large"),
    "not-utf-8": (b"seed = 1\nname = '\xff\xfe'\n", "not UTF-8"),
    "not-toml": (b"seed = = 1\n", "not valid TOML"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00", "not valid TOML"),
    "a-folder": (None, "not a regular file"),
}

#: name -> (protocol TOML, the fields named, one problem line each).
PROTOCOL_CASES: dict[str, tuple[str, list[str]]] = {
    "nan-share": (protocol("participants.mix = { novice = nan }"), ["participants.mix.novice"]),
    "inf-share": (protocol("participants.mix = { novice = inf, expert = 1 }"), ["participants.mix.novice"]),
    "a-billion-repetitions": (protocol(replace=("repetitions = 2", "repetitions = 1000000000")), ["repetitions"]),
    "a-million-participants": (protocol(replace=("count = 2", "count = 1000000")), ["participants.count"]),
    "too-many-trials": (PROTOCOL.replace("repetitions = 2", "repetitions = 100").replace("count = 2", "count = 1000")
                        .replace('["paper-2019"]', '["paper-2019", "side-approach"]'),
                        ["expected at most 50000 planned trials"]),
    "missing-scenario-file": (protocol(replace=('["paper-2019"]', '["paper-2019", "nowhere.toml"]')),
                              ["scenarios[1]: nowhere.toml"]),
    "unknown-builtin-scenario": (protocol(replace=('["paper-2019"]', '["paper-2091"]')), ["scenarios[0]"]),
    "scenario-listed-twice": (protocol(replace=('["paper-2019"]', '["paper-2019", "paper-2019"]')), ["scenarios[1]"]),
    "scenarios-not-a-list": (protocol(replace=('["paper-2019"]', '"paper-2019"')), ["scenarios"]),
    "no-scenarios": (protocol(replace=('["paper-2019"]', "[]")), ["scenarios"]),
    "negative-seed": (protocol("seed = -1"), ["seed"]),
    "seed-past-32-bits": (protocol("seed = 4294967296"), ["seed"]),
    "unknown-key": (protocol("colour = 1"), ["colour"]),
    "unknown-participants-key": (protocol("participants.cuont = 3"), ["participants.cuont"]),
    "unknown-condition": (protocol(replace=('["dg", "ng"]', '["dg", "apff"]')), ["conditions[1]"]),
    "condition-twice": (protocol(replace=('["dg", "ng"]', '["dg", "dg"]')), ["conditions"]),
    "bad-controller-conditions": (protocol("controller_conditions = 'as'"), ["controller_conditions"]),
    "unknown-kind": (protocol("participants.kind = 'robots'"), ["participants.kind"]),
    "unknown-mix-kind": (protocol("participants.mix = { wizard = 1 }"), ["participants.mix.wizard"]),
    "zero-shares": (protocol("participants.mix = { novice = 0 }"), ["participants.mix"]),
    "humans-with-a-count": (protocol("participants.kind = 'human'", "participants.ids = ['P1']"),
                            ["participants.count"]),
    "humans-duplicate-ids": (protocol("participants.kind = 'human'", "participants.ids = ['P1', 'P1']",
                                      replace=("count = 2", "")), ["participants.ids[1]"]),
    "human-id-too-long": (protocol("participants.kind = 'human'", f"participants.ids = ['{'p' * 65}']",
                                   replace=("count = 2", "")), ["participants.ids[0]"]),
    "missing-participants": (PROTOCOL.split("[participants]")[0], ["participants"]),
    "empty-name": (protocol(replace=('name = "p"', 'name = ""')), ["name"]),
    "description-too-long": (protocol("description = '" + "d" * 5000 + "'"), ["description"]),
    "description-not-text": (protocol("description = 5"), ["description"]),
    "nested-past-the-parser": (protocol("x = " + "[" * 3000 + "]" * 3000), ["x (line 5)"]),
    "five-problems": (protocol("seed = -1", "colour = 1", "controller_repetitions = 101",
                               "participants.mix = { novice = nan }", replace=("repetitions = 2", "repetitions = 0")),
                      ["seed", "colour", "repetitions", "participants.mix.novice", "controller_repetitions"]),
}

#: name -> (argv with {tmp} for a scratch folder, the option or field named).
CLI_CASES: dict[str, tuple[list[str], str]] = {
    "run-seed-negative": (["run", "--seed", "-1", "--out", "{tmp}/o"], "--seed"),
    "run-seed-past-32-bits": (["run", "--seed", "4294967296", "--out", "{tmp}/o"], "--seed"),
    "run-seed-not-a-number": (["run", "--seed", "x", "--out", "{tmp}/o"], "--seed"),
    "run-out-read-only": (["run", "--out", "/proc/capture-trainer-out"], "--out"),
    "run-out-under-a-file": (["run", "--out", "{tmp}/a-file/trials"], "--out"),
    "run-out-a-file": (["run", "--out", "{tmp}/a-file"], "--out"),
    "run-unknown-condition": (["run", "--condition", "zz", "--out", "{tmp}/o"], "--condition"),
    "run-unknown-device": (["run", "--device", "nope", "--out", "{tmp}/o"], "--device"),
    "run-empty-participant": (["run", "--participant", "", "--out", "{tmp}/o"], "--participant"),
    "run-participant-too-long": (["run", "--participant", "p" * 65, "--out", "{tmp}/o"], "--participant"),
    "run-missing-scenario": (["run", "--scenario", "{tmp}/nowhere.toml", "--out", "{tmp}/o"], "nowhere.toml"),
    "run-unknown-option": (["run", "--sede", "1"], "--sede"),
    "run-unknown-builtin-scenario": (["run", "--scenario", "paper2019", "--out", "{tmp}/o"], "did you mean 'paper-2019'"),
    "run-broken-scenario": (["run", "--scenario", "{tmp}/a-file", "--out", "{tmp}/o"], "a-file: not valid TOML"),
    "study-workers-zero": (["study", "paper-2019", "--out", "{tmp}/o", "--workers", "0"], "--workers"),
    "study-workers-too-many": (["study", "paper-2019", "--out", "{tmp}/o", "--workers", "65"], "--workers"),
    "study-without-out": (["study", "paper-2019"], "--out"),
    "study-out-read-only": (["study", "paper-2019", "--out", "/proc/capture-trainer-study"], "--out"),
    "study-missing-protocol": (["study", "{tmp}/nowhere.toml", "--out", "{tmp}/o"], "nowhere.toml"),
    "study-unknown-protocol": (["study", "paper-2091", "--out", "{tmp}/o"], "paper-2091"),
    "demo-workers-not-a-number": (["demo", "--workers", "two", "--out", "{tmp}/o"], "--workers"),
    "protocols-unknown": (["protocols", "nope"], "nope"),
    "scenarios-generate-negative-seed": (["scenarios", "generate", "--seed", "-1"], "--seed"),
    "scenarios-generate-out-read-only": (["scenarios", "generate", "--seed", "1", "--out", "/proc/x.toml"], "--out"),
    "scenarios-generate-out-a-folder": (["scenarios", "generate", "--seed", "1", "--out", "{tmp}"], "--out"),
    "scenarios-show-unknown": (["scenarios", "show", "paper2019"], "paper2019"),
    "scenarios-validate-nothing": (["scenarios", "validate"], "FILE"),
    "robot-capture-duration-nan": (["robot", "capture", "--duration", "nan"], "--duration"),
    "robot-capture-duration-an-hour": (["robot", "capture", "--duration", "3600"], "--duration"),
    "analyze-missing-folder": (["analyze", "{tmp}/nowhere"], "nowhere"),
    "analyze-report-read-only": (["analyze", "{tmp}", "--report", "/proc/report.html"], "--report"),
    "train-fps-zero": (["train", "--fps", "0"], "--fps"),
    "train-missing-scenario": (["train", "--scenario", "{tmp}/nowhere.toml", "--out", "{tmp}/o"], "nowhere.toml"),
    "train-screenshot-a-folder": (["train", "--screenshot", "{tmp}"], "--screenshot"),
    "train-empty-trainee": (["train", "--trainee", " "], "--trainee"),
    "train-stop-after-inf": (["train", "--stop-after", "inf"], "--stop-after"),
    "session-auto-trials-negative": (["session", "paper-2019", "--participant", "P1", "--device", "simulated",
                                      "--auto-trials", "-1"], "--auto-trials"),
    "no-command": ([], "COMMAND"),
    "unknown-command": (["fly"], "fly"),
}


def _problem_lines(stderr: str) -> list[str]:
    """The problem lines of an error on stderr, checking its shape: one line, or a summary
    line with the count and then exactly that many lines."""
    lines = stderr.strip().splitlines()
    assert lines, "nothing on stderr"
    assert "Traceback" not in stderr, stderr
    first = lines[0]
    assert re.match(r"capture-trainer( [a-z-]+)*: error: ", first), first
    summary = SUMMARY.fullmatch(first.split(": error: ", 1)[1])
    if summary is None:
        assert len(lines) == 1, stderr
        return [first.split(": error: ", 1)[1]]
    count = int(summary.group(1))
    shown = lines[1:]
    assert len(shown) == min(count, 50) + (count > 50), stderr
    return shown


def _check_file_problems(stderr: str, source: str, fields: list[str]) -> None:
    lines = _problem_lines(stderr)
    assert len(lines) == len(fields), (fields, stderr)
    for line in lines:
        assert line.startswith(f"{source}: "), (line, source)
        assert line.isprintable(), line
    named = [line.removeprefix(f"{source}: ") for line in lines]
    for field in fields:  # each field (or whole-file problem) opens exactly one line
        assert sum(line.startswith(field) for line in named) == 1, (field, stderr)


@pytest.mark.parametrize("case", sorted(SCENARIO_CASES))
def test_a_broken_scenario_gives_one_line_per_problem(case: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    text, fields = SCENARIO_CASES[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["scenarios", "validate", str(path)]) == EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    _check_file_problems(captured.err, str(path), fields)


@pytest.mark.parametrize("case", sorted(FILE_CASES))
def test_a_file_that_is_no_scenario_gives_one_line(case: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    content, fragment = FILE_CASES[case]
    path = tmp_path / f"{case}.toml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    assert main(["scenarios", "validate", str(path)]) == EXIT_ERROR
    [line] = _problem_lines(capsys.readouterr().err)
    assert line.startswith(f"{path}: ") and fragment in line, line


@pytest.mark.parametrize("case", sorted(PROTOCOL_CASES))
def test_a_broken_protocol_is_refused_before_anything_is_written(case: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    text, fields = PROTOCOL_CASES[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "study"
    assert main(["study", str(path), "--out", str(out)]) == EXIT_ERROR
    captured = capsys.readouterr()
    _check_file_problems(captured.err, str(path), fields)
    assert not out.exists()


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_a_bad_command_line_gives_one_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv, named = CLI_CASES[case]
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    assert main(argv) == EXIT_ERROR
    captured = capsys.readouterr()
    [line] = _problem_lines(captured.err)
    assert named in line, line
    assert not (tmp_path / "o").exists()


def test_the_corpus_holds_at_least_forty_cases_of_each_kind_together() -> None:
    files = len(SCENARIO_CASES) + len(FILE_CASES) + len(PROTOCOL_CASES)
    assert files >= 40 and len(CLI_CASES) >= 20


def test_a_protocol_with_a_bad_scenario_lists_the_scenarios_problems(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(scenario("[capture]", "time_limit_s = 3600", replace=("0.0044", "nan")), encoding="utf-8")
    path = tmp_path / "p.toml"
    path.write_text(protocol(replace=('["paper-2019"]', f'["paper-2019", "{bad}"]')), encoding="utf-8")
    assert main(["study", str(path), "--out", str(tmp_path / "study")]) == EXIT_ERROR
    lines = _problem_lines(capsys.readouterr().err)
    assert lines == [
        f"{path}: scenarios[1]: {bad}: target.radius_m: expected a number > 0 and <= 1, got nan",
        f"{path}: scenarios[1]: {bad}: capture.time_limit_s: expected a number > 0 and <= 600, got 3600",
    ]
    assert not (tmp_path / "study").exists()


def test_validate_reports_every_file_and_passes_the_good_ones(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    good, bad, worse = tmp_path / "good.toml", tmp_path / "bad.toml", tmp_path / "worse.toml"
    good.write_text(SCENARIO, encoding="utf-8")
    bad.write_text(scenario(replace=("seed = 1", "seed = -1")), encoding="utf-8")
    worse.write_text("", encoding="utf-8")
    assert main(["scenarios", "validate", str(bad), str(good), str(worse)]) == EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.out.startswith(f"ok: {good}")
    lines = _problem_lines(captured.err)
    assert captured.err.startswith(f"{ERROR}4 problems in 2 files:")
    assert [line.split(": ")[:2] for line in lines] == [
        [str(bad), "seed"], [str(worse), "seed"], [str(worse), "robot"], [str(worse), "target"]]


def test_a_file_with_very_many_problems_lists_fifty_and_counts_the_rest(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "many.toml"
    path.write_text(scenario(*(f"extra_{i} = 1" for i in range(60))), encoding="utf-8")
    assert main(["scenarios", "validate", str(path)]) == EXIT_ERROR
    err = capsys.readouterr().err
    lines = _problem_lines(err)
    assert err.startswith(f"{ERROR}60 problems in {path}:")
    assert len(lines) == 51 and lines[-1] == "... and 10 more"


def test_help_and_version_still_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert main(["run", "--help"]) == 0
    assert "--seed" in capsys.readouterr().out


def test_an_unexpected_exception_is_one_line_and_not_exit_2(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import app.commands.scenarios as commands

    def broken(args: object) -> int:
        raise ZeroDivisionError("a bug\nover two lines")

    monkeypatch.setattr(commands, "_list", broken)
    assert main(["scenarios", "list"]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("capture-trainer: internal error: ZeroDivisionError: a bug over two lines (a bug")


def _script() -> str:
    script = shutil.which("capture-trainer", path=str(Path(sys.executable).parent))
    assert script is not None
    return script


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run", "--seed", "-1"], "--seed"),
        (["study", "{bad_protocol}", "--out", "{tmp}/study"], "scenarios[0]: {tmp}/nowhere.toml: cannot read"),
        (["scenarios", "validate", "{deep}"], "expected at most 8 levels"),
        (["study", "paper-2019", "--out", "/proc/capture-trainer-study"], "--out"),
    ],
)
def test_the_console_script_exits_2_without_a_traceback(argv: list[str], named: str, tmp_path: Path) -> None:
    bad_protocol = tmp_path / "p.toml"
    bad_protocol.write_text(protocol(replace=('["paper-2019"]', f'["{tmp_path}/nowhere.toml"]')), encoding="utf-8")
    deep = tmp_path / "deep.toml"
    deep.write_text(scenario("x = " + "[" * 5000 + "]" * 5000), encoding="utf-8")
    values = {"{tmp}": str(tmp_path), "{bad_protocol}": str(bad_protocol), "{deep}": str(deep)}
    for key, value in values.items():
        argv = [arg.replace(key, value) for arg in argv]
        named = named.replace(key, value)
    result = subprocess.run([_script(), *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == EXIT_ERROR, result.stderr
    [line] = _problem_lines(result.stderr)
    assert named in line, line
    assert not (tmp_path / "study").exists()
