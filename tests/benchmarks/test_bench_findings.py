"""`bench findings` on a tiny run: one population seed, paper-2019 and one generated
scenario (4 s time limit), two participants. Only shapes, internal consistency and
resuming are asserted; the figures are measurements (docs/benchmarks.md)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PAIRS = (("dg", "apf"), ("apf", "ng"), ("dg", "ng"))
CONDITIONS = ("dg", "apf", "ng")
ARGS = ("--population-seeds", "0", "--family", "1", "--participants", "2", "--repetitions", "1", "--time-limit", "4")


def _run(out: Path, workers: int) -> tuple[dict[str, Any], str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "bench", "findings", *ARGS, "--workers", str(workers),
         "--out", str(out), "--json"],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr  # stdout is the JSON and nothing else


def _trial_files(out: Path) -> dict[str, int]:
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in sorted(out.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("findings")
    first, first_log = _run(out, workers=2)
    files = _trial_files(out)
    second, second_log = _run(out, workers=2)
    return {"out": out, "first": first, "first_log": first_log, "files": files,
            "second": second, "second_log": second_log,
            "files_after": _trial_files(out)}


def test_documented_keys(runs: dict[str, Any]) -> None:
    out = runs["first"]
    assert {"bench", "design", "out", "scenarios", "results", "summary", "runs", "cost", "machine"} <= set(out)
    design = out["design"]
    assert design["population_seeds"] == [0] and design["family"] == 1 and design["participants"] == 2
    assert design["ordering"] == ["dg", "apf", "ng"] and design["metric"] == "impact_velocity_m_s"
    assert set(design["conditions"]) == set(CONDITIONS)
    assert set(out["scenarios"]) == {"paper-2019", "random-planar-3r-0"}
    generated = out["scenarios"]["random-planar-3r-0"]
    assert generated["generated"] and generated["time_limit_s"] == 4.0
    assert Path(generated["reference"]).is_file()  # written into OUT as TOML
    for scenario in out["scenarios"].values():
        assert isinstance(scenario["automatic_capture"]["reached"], bool)
    assert sorted((e["scenario"], e["population_seed"]) for e in out["results"]) == [
        ("paper-2019", 0), ("random-planar-3r-0", 0)]
    for entry in out["results"]:
        assert {"impact_velocity_m_s", "ordering_holds", "ordering_holds_significantly", "comparisons",
                "capture_rate", "reached_rate", "outcomes", "expert_vs_novice", "failing_pairs", "why"} <= set(entry)
        assert set(entry["comparisons"]) == {f"{a}-{b}" for a, b in PAIRS}
        for row in entry["comparisons"].values():
            assert {"p", "p_holm", "p_holm_3", "significant", "significant_holm_3", "effect_size", "n"} <= set(row)
        assert entry["trials"] == {c: 2 for c in CONDITIONS}  # 2 participants x 1 repetition
        # the paper's mix (novice 0.6, expert 0.4) of two is one of each
        assert set(entry["expert_vs_novice"]) == set(CONDITIONS)
    run = out["runs"]["0"]
    assert run["planned"] == 12 and run["ran"] == 12 and run["reused"] == 0 and run["failed"] == 0
    cost = out["cost"]
    assert cost["trials_run"] == 12 and cost["wall_seconds_per_trial"] > 0.0
    assert cost["simulated_seconds_per_trial"] > 0.0


def test_progress_goes_to_stderr(runs: dict[str, Any]) -> None:
    assert "[run 12/12" in runs["first_log"]
    assert "all 12 trials reused" in runs["second_log"]


def test_the_flags_agree_with_the_means(runs: dict[str, Any]) -> None:
    out = runs["first"]
    for entry in out["results"]:
        means = entry["impact_velocity_m_s"]
        finite = all(means[c] is not None and math.isfinite(means[c]) for c in CONDITIONS)
        holds = finite and means["dg"] < means["apf"] < means["ng"]
        assert entry["ordering_holds"] == holds
        significant = []
        for a, b in PAIRS:
            row = entry["comparisons"][f"{a}-{b}"]
            pair_holds = means[a] is not None and means[b] is not None and means[a] < means[b]
            assert row["holds"] == pair_holds
            assert (f"{a}-{b}" in entry["failing_pairs"]) == (not pair_holds)
            assert row["significant"] == (row["p_holm"] is not None and row["p_holm"] < 0.05)
            significant.append(row["significant"])
            if row["p"] is None:  # two participants: fewer than the tests need
                assert row["p_holm"] is None and row["n"] < 3
        assert entry["ordering_holds_significantly"] == (holds and all(significant))
        for condition in CONDITIONS:
            counts = entry["outcomes"][condition]
            assert entry["capture_rate"][condition] == pytest.approx(counts.get("captured", 0) / sum(counts.values()))
            kinds = entry["expert_vs_novice"][condition]
            if kinds["expert"]["mean"] is not None and kinds["novice"]["mean"] is not None:
                assert kinds["expert_minus_novice"] == pytest.approx(kinds["expert"]["mean"] - kinds["novice"]["mean"])
    summary = out["summary"]
    assert summary["cases"] == len(out["results"])
    assert summary["ordering_holds"] == sum(e["ordering_holds"] for e in out["results"])
    assert summary["ordering_holds_significantly"] == sum(e["ordering_holds_significantly"] for e in out["results"])
    assert len(summary["failures"]) == summary["cases"] - summary["ordering_holds"]
    for a, b in PAIRS:
        key = f"{a}-{b}"
        assert summary["pair_fails"][key] == sum(key in e["failing_pairs"] for e in out["results"])


def test_a_second_run_reuses_every_trial(runs: dict[str, Any]) -> None:
    second = runs["second"]
    assert second["runs"]["0"]["ran"] == 0 and second["runs"]["0"]["reused"] == 12
    assert second["cost"]["trials_run"] == 0 and second["cost"]["wall_seconds_per_trial"] is None
    assert all(s["automatic_capture"]["reused"] for s in second["scenarios"].values())
    assert runs["files_after"] == runs["files"]  # no new trial file, none rewritten
    assert [e["impact_velocity_m_s"] for e in second["results"]] == [
        e["impact_velocity_m_s"] for e in runs["first"]["results"]]
    assert second["summary"] == runs["first"]["summary"]


def test_the_default_design_is_the_paper_protocols_three_repetitions() -> None:
    from benchmarks.bench_findings import paper_design

    assert paper_design().repetitions == 3  # Li & Yan 2019: each condition three times
    assert paper_design(repetitions=1).repetitions == 1
