"""The bench commands' JSON: the shapes other tools read, on very short runs.

Only shapes and internal consistency are asserted here; the figures themselves are
measurements, read against their targets outside the test suite.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trials.fused import FUSED_STAGES
from trials.tick import STAGES

REPO_ROOT = Path(__file__).resolve().parents[2]


def _bench(*args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "bench", *args, "--json"],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _ordered_percentiles(values: dict, middle: str = "median") -> None:
    keys = (middle, "p99", "p99.9", "max")
    assert all(math.isfinite(values[key]) and values[key] > 0.0 for key in keys)
    assert [values[key] for key in keys] == sorted(values[key] for key in keys)


@pytest.mark.parametrize("model", ["planar-3r", "spatial-7dof"])
def test_servo_json(model: str) -> None:
    out = _bench("servo", "--model", model, "--ticks", "400")
    assert out["model"] == model and out["ticks"] == 400
    _ordered_percentiles(out["tick_us"])
    assert set(STAGES) <= set(out["stages_us"])
    for stage in STAGES:
        assert 0.0 < out["stages_us"][stage]["median"] <= out["stages_us"][stage]["p99"]
    # the stages are the tick: their medians cannot add up to more than the slowest tick
    # (stages_us are the staged reference path's, timed in the same process)
    reference = out["reference"]
    _ordered_percentiles(reference["tick_us"])
    assert sum(out["stages_us"][s]["median"] for s in STAGES) <= reference["tick_us"]["max"]
    assert isinstance(out["rss_growth_bytes"], int)
    # the tick as trials run it: fused here, its three stages the tick
    assert out["fused"] is True and out["path"]["fused"] is True
    fused = out["fused_stages_us"]
    assert set(fused) == set(FUSED_STAGES) == set(out["fused_stage_contents"])
    assert sum(fused[s]["median"] for s in FUSED_STAGES) <= out["tick_us"]["max"]
    assert out["tick_to_plant_ratio"] == pytest.approx(out["tick_us"]["median"] / fused["plant"]["median"])
    assert out["tick_minus_plant_us"] == pytest.approx(out["tick_us"]["median"] - fused["plant"]["median"])
    assert reference["tick_to_plant_ratio"] == pytest.approx(reference["tick_us"]["median"]
                                                             / out["stages_us"]["plant"]["median"])
    # no tick of this world runs faster than its plant stage: one millisecond over it
    assert out["plant_ceiling_realtime_factor"] == pytest.approx(1e3 / fused["plant"]["median"])
    assert out["plant_ceiling_realtime_factor"] > out["realtime_factor"]
    assert out["plant_path"].startswith("native: ")  # PyBullet's C API (robot.pybullet_native)
    assert isinstance(out["prepared_event_ticks"], int) and isinstance(out["staged_event_ticks"], int)


def test_throughput_json_with_a_study() -> None:
    out = _bench("throughput", "--model", "planar-3r", "--seconds", "0.3", "--workers", "1", "--trials", "3")
    assert out["model"] == "planar-3r"
    assert out["sim_seconds"] == pytest.approx(0.3)
    assert out["wall_seconds"] > out["build_seconds"] > 0.0
    assert out["realtime_factor"] == pytest.approx(out["sim_seconds"] / out["wall_seconds"])
    assert out["loop_realtime_factor"] > out["realtime_factor"]
    # the process's CPU seconds: some, and no more than its cores could give in the wall time
    assert 0.0 < out["cpu_seconds"] <= out["wall_seconds"] * (os.cpu_count() or 1)
    assert out["cpu_realtime_factor"] == pytest.approx(out["sim_seconds"] / out["cpu_seconds"])
    assert out["reference"]["cpu_realtime_factor"] > 0.0
    assert out["cold"]["start_up_seconds"] > 0.0
    assert out["fused"] is True and out["tick_path"]["fused"] is True
    assert out["plant_path"].startswith("native: ")
    assert 0 < out["quiet_ticks"] < 300  # the 0.3 s trial's ticks, the first ones not quiet
    assert 0 < out["quiet_calls"] < out["quiet_ticks"]  # in the headless clock's batches
    assert out["reference"]["loop_realtime_factor"] > out["reference"]["realtime_factor"] > 0.0
    # three timed runs by default; the figures are the median run's, all of them
    runs = out["runs"]
    assert out["repeat"] == len(runs) == 3
    factors = sorted(run["realtime_factor"] for run in runs)
    assert out["realtime_factor"] == factors[1] and out["realtime_factor_range"] == [factors[0], factors[2]]
    median_run = next(run for run in runs if run["realtime_factor"] == factors[1])
    assert {key: out[key] for key in median_run} == median_run
    study = out["study"]
    assert study["trials"] == 3 and study["workers_1"]["trials"] == 3 and study["workers_1"]["failed"] == 0


def test_study_json() -> None:
    out = _bench("study", "--trials", "3", "--workers", "1", "2", "--repeat", "2")
    assert out["trials"] == 3 and out["repeat"] == 2 and out["chunk_size"] == 1
    assert set(out["parallel_capacity"]) == {"before", "after"}
    assert all(value > 0.0 for value in out["parallel_capacity"].values())
    for count in (1, 2):
        workers = out[f"workers_{count}"]
        assert workers["trials"] == 3 and workers["failed"] == 0
        assert workers["wall_seconds"] > 0.0
        assert 0.0 < workers["trials_per_second"] <= workers["after_start_up_trials_per_second"]
        assert 1 <= len(workers["start_up_seconds"]) <= count
        assert all(seconds > 0.0 for seconds in workers["start_up_seconds"])
        assert workers["cores_used"] > 0.0 and workers["cpu_seconds_per_trial"] > 0.0
        assert len(workers["runs"]) == 2
        for run in workers["runs"]:
            assert run["trials_per_second"] == pytest.approx(run["trials"] / run["wall_seconds"])
    speed_up = out["speed_up"]["workers_2"]
    assert speed_up["trials_per_second"] == pytest.approx(
        out["workers_2"]["trials_per_second"] / out["workers_1"]["trials_per_second"])
    assert speed_up["after_start_up_trials_per_second"] > 0.0


def test_device_loop_json() -> None:
    out = _bench("device-loop", "--seconds", "0.3")
    # a stall of the machine past the 4 ms force watchdog ends the run early: then the
    # JSON says so (a measurement of this machine, not a broken bench)
    if out["fault"] is None:
        assert out["ticks"] == 300
    else:
        assert "watchdog" in out["fault"] and 0 < out["ticks"] < 300
    _ordered_percentiles(out["period_ms"], middle="p50")
    assert 0.0 < out["period_ms"]["mean"] <= out["period_ms"]["max"]
    assert isinstance(out["overruns"], int) and 0 <= out["overruns"] < out["ticks"]
    assert out["hd_errors"] == []
    assert out["scheduler_woken_late"]["ticks"] >= 0


def test_window_json() -> None:
    out = _bench("window", "--seconds", "0.5")
    assert out["status"] == "aborted" and out["video_driver"] == "dummy" and out["frames_drawn"] > 0
    assert out["periods"] >= 499
    assert out["rate_hz"] == pytest.approx(1e3 / out["mean_period_ms"], rel=1e-6)
    order = [out[k] for k in ("p50_period_ms", "p99_period_ms", "p999_period_ms", "max_period_ms")]
    assert order == sorted(order) and order[0] > 0.0
    assert 0 <= out["overruns"] <= out["periods"]
    assert out["overrun_fraction"] == pytest.approx(out["overruns"] / out["periods"])


def test_reaction_family_json() -> None:
    out = _bench("reaction", "--model", "planar-3r", "--family", "2", "--family-seed", "5")
    assert (out["model"], out["family"], out["first_seed"]) == ("planar-3r", 2, 5)
    assert [m["seed"] for m in out["members"]] == [5, 6]
    for condition in ("as", "dg"):
        rows = [m[condition] for m in out["members"]]
        summary = out["summary"][condition]
        # the fractions are the members' own verdicts, recounted here
        assert summary["reactionless_fraction"] == pytest.approx(sum(r["reactionless"] for r in rows) / 2)
        for row in rows:
            expected = (row["lse_peak_attitude_rad"] < out["criteria"]["peak_attitude_rad"]
                        and row["ratio_rms"] < out["criteria"]["ratio_rms"])
            assert row["reactionless"] == expected
            assert row["ratio_rms"] == pytest.approx(row["lse_rms_base_torque"] / row["pinv_rms_base_torque"])
        assert sum(summary["outcomes"].values()) == 2
