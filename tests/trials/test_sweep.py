"""Sweeps (``trials.sweep``, ``capture-trainer sweep``): the design expands into validated
scenario variants that run as one resumable study, and the results carry the swept
values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app.cli import main
from capture_trainer.errors import ScenarioError
from trials.sweep import prepare_sweep
from trials.vocabulary import load_scenario

HEAD = """
name = "dg-gains"
seed = 5
scenarios = ["paper-2019"]
conditions = ["dg", "ng"]
repetitions = 1
[participants]
kind = "simulated"
count = 1
"""


def _file(tmp_path: Path, tables: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(HEAD + tables, encoding="utf-8")
    return path


def test_a_grid_is_the_full_factorial_and_every_variant_carries_its_values(tmp_path: Path) -> None:
    path = _file(tmp_path, '[grid]\n"guidance.dg.k_p" = [5.0, 7.7, 9.0]\n"debris.mass_kg" = [2.0, 400.0]\n')
    protocol, points = prepare_sweep(path, tmp_path / "out")
    assert len(points) == len(protocol.scenarios) == 6
    seen = set()
    for point in points:
        scenario = load_scenario(str(point.path))
        k_p, mass = point.values["guidance.dg.k_p"], point.values["debris.mass_kg"]
        assert scenario.guidance.params("dg")["k_p"] == k_p and scenario.debris.mass_kg == mass
        assert scenario.name == point.scenario
        seen.add((k_p, mass))
    assert seen == {(k, m) for k in (5.0, 7.7, 9.0) for m in (2.0, 400.0)}
    design = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert design["parameters"] == ["debris.mass_kg", "guidance.dg.k_p"] and len(design["points"]) == 6


def test_a_random_design_draws_within_its_ranges(tmp_path: Path) -> None:
    path = _file(tmp_path, '[random]\nsamples = 7\nseed = 3\n"debris.mass_kg" = [5.0, 50.0]\n')
    _, points = prepare_sweep(path, tmp_path / "out")
    masses = [p.values["debris.mass_kg"] for p in points]
    assert len(masses) == 7 and all(5.0 <= m <= 50.0 for m in masses) and len(set(masses)) == 7


@pytest.mark.parametrize(("tables", "message"), [
    ('[grid]\n"guidance.dg.k_p" = [7.7, -1.0]\n', r"point 1 \(guidance.dg.k_p=-1.0\).*k_p.*> 0"),
    ('[grid]\n"target.radiuss_m" = [0.01]\n', r"radiuss_m.*unknown key"),
    ('[grid]\n"guidance.dg.k_p" = []\n', r"non-empty list"),
    ('[random]\nsamples = 0\n"debris.mass_kg" = [1.0, 2.0]\n', r"random.samples"),
    ('[random]\nsamples = 3\n"debris.mass_kg" = [2.0, 1.0]\n', r"low <= high"),
    ('', r"\[grid\] or a \[random\]"),
])
def test_a_bad_design_is_refused_naming_the_point_and_field(tmp_path: Path, tables: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        prepare_sweep(_file(tmp_path, tables), tmp_path / "out")


def test_the_sweep_runs_resumes_and_writes_its_results(tmp_path: Path, capsys) -> None:
    path = _file(tmp_path, '[grid]\n"guidance.dg.k_p" = [5.0, 9.0]\n"capture.time_limit_s" = [1.5]\n')
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 0
    assert "4 trials planned, 0 already done, 4 run" in capsys.readouterr().out
    assert main(["sweep", str(path), "--out", str(out)]) == 0
    assert "4 trials planned, 4 already done, 0 run" in capsys.readouterr().out
    table = pd.read_parquet(out / "sweep-results.parquet")
    assert len(table) == 4 and set(table["condition"]) == {"dg", "ng"}
    by_scenario = table.groupby("scenario")["sweep:guidance.dg.k_p"].first().to_dict()
    assert by_scenario == {"paper-2019--p000": 5.0, "paper-2019--p001": 9.0}
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_sweep_runs_on_a_two_process_dask_cluster_like_locally(tmp_path: Path) -> None:
    """Run as a user would (its own process: Dask's nannies need the real standard streams)."""
    import os
    import subprocess
    import sys

    path = _file(tmp_path, '[grid]\n"guidance.dg.k_p" = [5.0, 9.0]\n"capture.time_limit_s" = [1.0]\n')
    root = str(Path(__file__).resolve().parents[2])
    # two trials per Dask task (a chunk), one per local task
    for out, options in (("local", []), ("dask", ["--executor", "dask-local", "--workers", "2", "--chunk-size", "2"])):
        result = subprocess.run([sys.executable, "-m", "app.cli", "sweep", str(path), "--out", str(tmp_path / out),
                                 *options], capture_output=True, text=True, timeout=240, cwd=tmp_path,
                                stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": root}, check=False)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "4 trials planned, 0 already done, 4 run, 0 failed" in result.stdout
    local = pd.read_parquet(tmp_path / "local" / "sweep-results.parquet").sort_values("trial_id")
    on_dask = pd.read_parquet(tmp_path / "dask" / "sweep-results.parquet").sort_values("trial_id")
    # the same trials, the same numbers: where a trial runs does not change it
    assert list(local["trial_id"]) == list(on_dask["trial_id"])
    for column in ("impact_velocity_m_s", "time_to_reach_s", "outcome"):
        assert local[column].tolist() == on_dask[column].tolist() or (
            local[column].isna().tolist() == on_dask[column].isna().tolist()), column


@pytest.mark.parametrize(("trials", "workers", "chunk"), [
    (4, 2, 1), (63, 2, 1), (64, 2, 1), (128, 2, 2), (200, 2, 3), (256, 2, 4), (1080, 2, 4), (100_000, 8, 4),
    (1080, 64, 1),
])
def test_dask_tasks_are_chunked_only_while_every_worker_keeps_32_of_them(trials: int, workers: int,
                                                                         chunk: int) -> None:
    from trials.study import dask_chunk_size

    assert dask_chunk_size(trials, workers) == chunk


@pytest.mark.parametrize(("address", "ok"), [
    ("tcp://127.0.0.1:8786", True), ("tcp://localhost:8786", True), ("tls://10.0.0.5:8786", True),
    ("tcp://10.0.0.5:8786", False), ("http://127.0.0.1:8786", False), ("", False),
])
def test_an_off_host_scheduler_needs_tls(address: str, ok: bool) -> None:
    from capture_trainer.errors import TrialError
    from trials.study import check_scheduler

    if ok:
        assert check_scheduler(address) == address
    else:
        with pytest.raises(TrialError):
            check_scheduler(address)


def test_analyze_draws_the_sweep_in_its_report(tmp_path: Path) -> None:
    path = _file(tmp_path, '[grid]\n"guidance.dg.k_p" = [5.0, 9.0]\n"capture.time_limit_s" = [1.0]\n')
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 0
    report = tmp_path / "report.html"
    assert main(["analyze", str(out), "--report", str(report)]) == 0
    text = report.read_text(encoding="utf-8")
    assert "<h2>Sweep</h2>" in text and "2 scenario variants over capture.time_limit_s, guidance.dg.k_p" in text
    plain = tmp_path / "plain.html"  # a plain study has no sweep section
    assert main(["analyze", str(out / "trials"), "--report", str(plain)]) == 0
    assert "<h2>Sweep</h2>" not in plain.read_text(encoding="utf-8")


# --- participant parameters, conditions, vector ranges, [set], seeds -------------------------------------

HEAD_NO_CONDITIONS = HEAD.replace('conditions = ["dg", "ng"]\n', "")


def _specs(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    from trials.sweep import sweep_specs

    path = tmp_path / "sweep.toml"
    path.write_text(text, encoding="utf-8")
    protocol, points = prepare_sweep(path, tmp_path / "out")
    return protocol, points, sweep_specs(protocol, points)


def test_a_participant_parameter_is_swept_over_every_participant(tmp_path: Path) -> None:
    text = HEAD.replace("count = 1", "count = 2") + '[grid]\n"participant.reaction_time_s" = [0.15, 0.3]\n'
    _, points, specs = _specs(tmp_path, text)
    assert len(points) == 2 and len(specs) == 2 * 2 * 2  # points x conditions x participants
    for spec in specs:
        expected = 0.15 if spec.scenario.endswith("--p000.toml") else 0.3
        assert spec.participant_params["reaction_time_s"] == expected
        assert spec.participant_params["kind"] in ("novice", "expert")  # the sampled rest is kept
    assert load_scenario(str(points[0].path)).as_dict() == {**load_scenario(str(points[1].path)).as_dict(),
                                                            "name": points[0].scenario}


def test_a_swept_condition_runs_each_point_in_its_condition_only(tmp_path: Path) -> None:
    text = HEAD_NO_CONDITIONS + '[grid]\ncondition = ["dg", "apf", "ng"]\n"guidance.dg.k_p" = [5.0, 9.0]\n'
    protocol, points, specs = _specs(tmp_path, text)
    assert set(protocol.conditions) == {"dg", "apf", "ng"} and len(points) == 6
    assert len(specs) == 6  # one participant, one condition per point
    by_point = {p.path.name: p.values["condition"] for p in points}
    assert sorted((Path(s.scenario).name, s.condition) for s in specs) == sorted(by_point.items())


def test_a_random_vector_field_is_drawn_per_component(tmp_path: Path) -> None:
    ranges = [[-0.12, -0.05], [0.01, 0.02], [0.0, 0.0]]
    text = HEAD + f'[random]\nsamples = 5\nseed = 2\n"target.velocity_m_s" = {ranges}\n'
    _, points, _ = _specs(tmp_path, text)
    drawn = [p.values["target.velocity_m_s"] for p in points]
    assert len({tuple(v) for v in drawn}) == 5
    for vector, point in zip(drawn, points):
        assert all(low <= value <= high for value, (low, high) in zip(vector, ranges))
        assert np.allclose(load_scenario(str(point.path)).target.velocity_m_s, vector)


def test_set_fields_reach_every_variant_without_being_swept(tmp_path: Path) -> None:
    text = HEAD + ('[set]\n"capture.time_limit_s" = 2.5\n"participant.compliance" = 0.2\n'
                   '[grid]\n"guidance.dg.k_p" = [5.0, 9.0]\n')
    _, points, specs = _specs(tmp_path, text)
    assert all(load_scenario(str(p.path)).capture.time_limit_s == 2.5 for p in points)
    assert all(spec.participant_params["compliance"] == 0.2 for spec in specs)
    design = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert design["parameters"] == ["guidance.dg.k_p"]


def test_common_seeds_give_every_point_the_same_seed(tmp_path: Path) -> None:
    grid = '[grid]\n"guidance.dg.k_p" = [5.0, 9.0, 12.0]\n'
    _, _, apart = _specs(tmp_path, HEAD + grid)
    _, _, common = _specs(tmp_path, HEAD.replace("repetitions = 1", "repetitions = 1\ncommon_seeds = true") + grid)
    for specs, distinct in ((apart, 6), (common, 2)):  # 3 points x 2 conditions
        assert len({s.seed for s in specs}) == distinct
    per_condition = {(s.condition, s.seed) for s in common}
    assert len(per_condition) == 2  # one seed per condition, whatever the point


@pytest.mark.parametrize(("text", "message"), [
    (HEAD + '[grid]\n"participant.reaction_time_s" = [0.2, -1.0]\n',
     r"point 1 \(participant.reaction_time_s=-1.0\): participant.reaction_time_s: expected a number in \[0, 2\]"),
    (HEAD + '[grid]\n"participant.compliance" = [0.5, 1.5]\n',
     r"point 1 .*participant.compliance: expected a number in \[0, 1\], got 1.5"),
    (HEAD + '[grid]\n"participant.reaction_tme_s" = [0.2]\n', r"grid.participant.reaction_tme_s: unknown.*"
                                                               r"did you mean 'reaction_time_s'"),
    (HEAD + '[random]\nsamples = 2\n"participant.hand_mass_kg" = [-1.0, 1.0]\n',
     r"point [01] .*participant.hand_mass_kg: expected a number > 0"),
    (HEAD + '[set]\n"participant.learning" = 1\n[grid]\n"guidance.dg.k_p" = [5.0]\n',
     r"set.participant.learning: expected true or false"),
    (HEAD_NO_CONDITIONS + '[grid]\ncondition = ["dg", "dgg"]\n',
     r"point 1 \(condition='dgg'\): condition: expected one of .* got 'dgg' \(did you mean 'dg'\?\)"),
    (HEAD + '[grid]\ncondition = ["dg"]\n', r"conditions: leave it out when \[grid\] sweeps 'condition'"),
    (HEAD_NO_CONDITIONS + '[random]\nsamples = 2\ncondition = ["dg", "ng"]\n', r"random.condition: .*\[grid\]"),
    (HEAD + '[random]\nsamples = 2\n"target.velocity_m_s" = [[-0.1, -0.2], [0.0, 0.0], [0.0, 0.0]]\n',
     r"random.target.velocity_m_s: expected .* one \[low, high\] per component"),
    (HEAD + '[random]\nsamples = 2\n"target.velocity_m_s" = [[-0.2, -0.1], [0.0, 0.0]]\n',
     r"point 0 .*velocity_m_s"),
    (HEAD + '[set]\n"guidance.dg.k_p" = 5.0\n[grid]\n"guidance.dg.k_p" = [5.0]\n', r"set.guidance.dg.k_p: also in \[grid\]"),
    (HEAD.replace('kind = "simulated"\ncount = 1', 'kind = "human"\nids = ["A"]')
     + '[grid]\n"participant.reaction_time_s" = [0.2]\n', r"only with simulated participants"),
])
def test_a_bad_participant_condition_or_vector_is_refused_naming_the_point_and_field(
        tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError, match=message):
        prepare_sweep(path, tmp_path / "out")


def test_the_plan_fingerprint_holds_participant_values_so_a_changed_one_reruns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Only the changed point's trial runs again (with --force); unchanged, it resumes."""
    head = HEAD.replace('conditions = ["dg", "ng"]', 'conditions = ["ng"]')
    path = tmp_path / "sweep.toml"
    out = tmp_path / "out"

    def sweep(values: str, *options: str) -> int:
        path.write_text(head + f'[set]\n"capture.time_limit_s" = 0.3\n[grid]\n"participant.reaction_time_s" = '
                        f'{values}\n', encoding="utf-8")
        return main(["sweep", str(path), "--out", str(out), *options])

    assert sweep("[0.2, 0.3]") == 0
    assert "2 trials planned, 0 already done, 2 run" in capsys.readouterr().out
    assert sweep("[0.2, 0.3]") == 0
    assert "2 trials planned, 2 already done, 0 run" in capsys.readouterr().out
    assert sweep("[0.2, 0.35]") == 2
    assert "holds trials of a different plan (changed: design)" in capsys.readouterr().err
    assert sweep("[0.2, 0.35]", "--force") == 0
    assert "2 trials planned, 1 already done, 1 run" in capsys.readouterr().out
    from capture_trainer.trial_log import read_metadata

    params = {read_metadata(f)["participant"]["params"]["reaction_time_s"] for f in (out / "trials").glob("*.parquet")}
    assert params == {0.2, 0.35}
