"""The delay study: the built-in ``delay`` sweep's design, the winner statement, and the
analysis of a tiny real delay study."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import delay_study
from app.cli import main

DELAYS = (0.0, 0.25, 0.5, 1.0, 2.0, 5.0)
COMPENSATORS = ("none", "predictive", "passivity")
GUIDANCE = ("dg", "ng", "apf")


def test_the_builtin_delay_study_expands_to_delay_x_compensator_x_guidance(tmp_path: Path) -> None:
    from trials.protocol import CONTROLLER_ID
    from trials.sweep import prepare_sweep, sweep_specs
    from trials.vocabulary import load_scenario

    protocol, points = prepare_sweep("delay", tmp_path / "out")
    specs = sweep_specs(protocol, points)
    participants = protocol.participants.count
    cells: Counter[tuple[float, str, str, str]] = Counter()
    seeds: dict[tuple[str, str], set[int]] = {}
    for spec in specs:
        assert spec.participant_id != CONTROLLER_ID
        scenario = load_scenario(spec.scenario)  # the variant file as the trial loads it
        assert scenario.rendering.contact_feedback and scenario.capture.time_limit_s == 30.0
        assert list(scenario.target.velocity_m_s) == [-0.025, 0.0, 0.0]
        cells[(scenario.delay.delay_s, scenario.delay.compensator, spec.condition, spec.participant_id)] += 1
        seeds.setdefault((spec.participant_id, spec.condition), set()).add(spec.seed)
    expected = set(itertools.product(DELAYS, COMPENSATORS, GUIDANCE, {s.participant_id for s in specs}))
    assert set(cells) == expected and set(cells.values()) == {1}  # every cell once per participant
    assert len(specs) == 6 * 3 * 3 * participants == len(expected)
    assert all(len(s) == 1 for s in seeds.values())  # common random numbers across the 18 cells


def _synthetic() -> pd.DataFrame:
    """Three DG trials per cell; impact velocities and captures chosen for hand-computed winners."""
    nan = float("nan")
    impact = {
        0.0: {"none": [0.1] * 3, "predictive": [0.1] * 3, "passivity": [0.1] * 3},
        1.0: {"none": [0.40, 0.41, 0.42], "predictive": [0.10, 0.11, 0.12], "passivity": [0.40, 0.42, 0.44]},
        2.0: {"none": [0.5, nan, nan], "predictive": [0.2, 0.6, 0.4], "passivity": [nan] * 3},
    }
    captured = {
        0.0: {"none": [1, 1, 0], "predictive": [1, 1, 0], "passivity": [1, 1, 0]},
        1.0: {"none": [0, 0, 0], "predictive": [1, 1, 1], "passivity": [0, 0, 0]},
        2.0: {"none": [0, 0, 0], "predictive": [1, 0, 1], "passivity": [0, 0, 0]},
    }
    rows = []
    for delay, by_compensator in impact.items():
        for compensator, values in by_compensator.items():
            for i, value in enumerate(values):
                rows.append({"condition": "dg", "sweep:delay.delay_s": delay, "sweep:delay.compensator": compensator,
                             "impact_velocity_m_s": value, "captured": bool(captured[delay][compensator][i]),
                             "mse_slave_force_n2": nan, "felt_force_mse_n2": nan})
    return pd.DataFrame(rows)


def test_the_winner_statement_on_a_table_computed_by_hand() -> None:
    stats = delay_study.cell_stats(delay_study.delay_table(_synthetic()))
    wins = {(w.metric, w.condition, w.delay_s): w for w in delay_study.winners(stats)}
    # 1 s: predictive 0.11 ± t(0.975, 2) 0.01/sqrt(3) = [0.0852, 0.1348], none [0.385, 0.435]: clear
    one = wins[("impact_velocity_m_s", "all", 1.0)]
    assert one.best == ("predictive",) and one.clear and one.means["none"] == pytest.approx(0.41)
    # 2 s: predictive 0.4 against none's single 0.5 (no interval): best, not clear; passivity never reached
    two = wins[("impact_velocity_m_s", "dg", 2.0)]
    assert two.best == ("predictive",) and not two.clear and set(two.means) == {"predictive", "none"}
    # capture at 1 s: 3/3 (Wilson [0.438, 1]) against 0/3 ([0, 0.562]): best but not clear
    rate = wins[("capture_rate", "all", 1.0)]
    assert rate.best == ("predictive",) and not rate.clear and rate.means["predictive"] == 1.0
    assert wins[("capture_rate", "all", 0.0)].best == ("none", "passivity", "predictive")
    lines = delay_study.findings(list(wins.values()))
    assert lines[0] == (
        "impact velocity [m/s], lower is better: all equal at 0 s; predictive at 1 and 2 s. Per delay: "
        "0 s: none 0.1 (n=3), passivity 0.1 (n=3), predictive 0.1 (n=3); "
        "1 s: predictive 0.11 (n=3), none 0.41 (n=3), passivity 0.42 (n=3); "
        "2 s: predictive 0.4 (n=3), none 0.5 (n=1) (CI not clear of the runner-up's).")
    assert lines[1].startswith("capture rate, higher is better: all equal at 0 s; predictive at 1 and 2 s. ")
    assert "2 s: predictive 0.667 (n=3), none 0 (n=3), passivity 0 (n=3) (CI not clear" in lines[1]
    assert len(lines) == 2  # the force metrics have no data at all: no sentence
    assert delay_study.condition_findings(list(wins.values()))[0] == (
        "DG, impact velocity [m/s]: all equal at 0 s; predictive at 1 and 2 s.")


SWEEP = """
name = "tiny-delay"
seed = 4
scenarios = ["paper-2019"]
conditions = ["dg"]
common_seeds = true
[participants]
kind = "simulated"
count = 1
mix = { expert = 1.0 }
[set]
"target.velocity_m_s" = [-0.025, 0.0, 0.0]
"capture.time_limit_s" = 3.0
"rendering.contact_feedback" = true
[grid]
"delay.delay_s" = [0.0, 0.3]
"delay.compensator" = ["none", "passivity"]
"""


def test_analyze_reports_a_tiny_real_delay_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(SWEEP, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["study", str(path), "--out", str(out)]) == 0  # `study` runs a sweep as `sweep` does
    assert "4 trials planned, 0 already done, 4 run, 0 failed" in capsys.readouterr().out
    for metric, _, _ in delay_study.DELAY_METRICS:
        assert (out / f"delay-{metric}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["analyze", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["delay_study"]
    trials = pd.read_parquet(out / "sweep-results.parquet")
    cells = {(c["condition"], c["compensator"], c["delay_s"], c["metric"]): c for c in summary["cells"]}
    assert len(cells) == 2 * 2 * 2 * 4  # (dg, pooled) x compensators x delays x metrics
    for _, row in trials.iterrows():  # one trial per cell: each cell's mean is that trial's value
        key = ("dg", row["sweep:delay.compensator"], row["sweep:delay.delay_s"])
        for metric in ("impact_velocity_m_s", "felt_force_mse_n2"):
            value = float(row[metric])
            recorded = cells[(*key, metric)]["mean"]
            assert (recorded is None and not math.isfinite(value)) or recorded == pytest.approx(value)
        assert cells[(*key, "capture_rate")]["mean"] == float(row["captured"])
    zero = trials[trials["sweep:delay.delay_s"] == 0.0]
    # the passivity controller shapes only the contact force: until the first contact the
    # two trials are the same (same seed), so they reach at the same speed
    assert zero["impact_velocity_m_s"].nunique(dropna=False) == 1
    plain = zero[zero["sweep:delay.compensator"] == "none"]["felt_force_mse_n2"].to_numpy(dtype=float)
    if np.isfinite(plain).any():  # without delay or compensator the hand is given the slave's force as it is
        assert np.nanmax(plain) < 1e-9
    report = tmp_path / "report.html"
    assert main(["analyze", str(out), "--report", str(report)]) == 0
    text = report.read_text(encoding="utf-8")
    assert "<h2>Delay study</h2>" in text and "impact velocity [m/s], lower is better:" in text
