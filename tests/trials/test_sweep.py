"""Sweeps (``trials.sweep``, ``capture-trainer sweep``): the design expands into validated
scenario variants that run as one resumable study, and the results carry the swept
values."""

from __future__ import annotations

import json
from pathlib import Path

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
    for out, options in (("local", []), ("dask", ["--executor", "dask-local", "--workers", "2"])):
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
