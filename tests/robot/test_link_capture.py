"""A trial over the link equals the in-process trial: lock-step over loopback gives the
same numbers, bit for bit (the documented tolerance is zero: floats cross the link as
msgpack float64 and the server's plant takes exactly the in-process plant's steps).

The trials assemble their arm through ``ARM_BACKENDS.get("pybullet")``; here that name is
pointed at the ``remote`` backend (a private loopback server running the PyBullet plant),
so the slave controller, the tick and the trial are the unchanged ones."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import trials.capture
import trials.runner
from capture_trainer.trial_log import read_trial_log
from robot.backends import ARM_BACKENDS

REMOTE_ONLY = {"pybullet": ARM_BACKENDS.get("remote")}


def same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray):
        return bool(np.array_equal(a, b, equal_nan=True))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


@pytest.mark.parametrize(("model", "duration_s"), [("planar-3r", 3.0), ("spatial-7dof", 2.0)])
def test_the_automatic_capture_over_the_link_is_bit_identical(monkeypatch, model, duration_s):
    local = trials.capture.run_automatic_capture(model, duration_s=duration_s)
    monkeypatch.setattr(trials.capture, "ARM_BACKENDS", REMOTE_ONLY)
    linked = trials.capture.run_automatic_capture(model, duration_s=duration_s)
    assert local.first_reach_time_s < duration_s  # the capture happened within the run
    different = [f.name for f in dataclasses.fields(local) if not same(getattr(local, f.name), getattr(linked, f.name))]
    assert different == []
    assert linked.impact_velocity_m_s == local.impact_velocity_m_s


def test_a_guided_trial_with_a_simulated_participant_is_bit_identical(monkeypatch, tmp_path):
    request = trials.runner.TrialRequest(scenario="paper-2019", condition="dg", participant="novice", seed=2,
                                         trial_id="t", time_limit_s=4.0, contact="proximity")
    local = trials.runner.run_trial(request, tmp_path / "local")
    monkeypatch.setattr(trials.runner, "ARM_BACKENDS", REMOTE_ONLY)
    linked = trials.runner.run_trial(request, tmp_path / "linked")
    a, b = read_trial_log(local["path"]).table, read_trial_log(linked["path"]).table
    assert a.num_rows == b.num_rows > 1000
    assert a.column_names == b.column_names
    assert [name for name in a.column_names if not a[name].equals(b[name])] == []
    for key in ("end_reason", "ticks", "time_to_reach_s", "impact_velocity_m_s"):
        assert local.get(key) == linked.get(key), key


def test_run_with_arm_drives_a_served_arm_like_the_in_process_one(tmp_path, capsys):
    """`capture-trainer run --arm ADDR`: the same trial file as without --arm (lock-step)."""
    from app.cli import main
    from robot.link.server import LinkServer
    from robot.models import MODELS

    argv = ["run", "--condition", "apf", "--seed", "4", "--json", "--contact", "proximity"]
    assert main([*argv, "--out", str(tmp_path / "local")]) == 0
    with LinkServer(MODELS["planar-3r"], ARM_BACKENDS.get("pybullet"), "tcp://127.0.0.1:*") as server:
        server.start()
        assert main([*argv, "--out", str(tmp_path / "linked"), "--arm", server.endpoint]) == 0
    a = read_trial_log(next((tmp_path / "local").glob("*.parquet"))).table
    b = read_trial_log(next((tmp_path / "linked").glob("*.parquet"))).table
    assert a.num_rows == b.num_rows > 1000
    assert [name for name in a.column_names if not a[name].equals(b[name])] == []


def test_a_study_over_the_link_needs_one_worker(tmp_path, capsys):
    from app.cli import main

    out = tmp_path / "study"
    assert main(["study", "paper-2019", "--out", str(out), "--workers", "2", "--arm", "127.0.0.1:1"]) == 2
    assert "one session at a time" in capsys.readouterr().err
    assert not out.exists()


def test_a_trial_over_the_link_keeps_contact_physics_on_this_side(monkeypatch, tmp_path):
    """Over the link the debris lives in a world of its own with a kinematic probe
    (``robot.debris_world``): the approach is the in-process one bit for bit, so the first
    contact, its impact velocities and the paper's impact velocity are the same; after the
    contact the arm is not pushed back over the link, so the rest may part."""
    request = trials.runner.TrialRequest(scenario="paper-2019", condition="as", trial_id="t", time_limit_s=4.0)
    local = trials.runner.run_trial(request, tmp_path / "local")
    monkeypatch.setattr(trials.runner, "ARM_BACKENDS", REMOTE_ONLY)
    linked = trials.runner.run_trial(request, tmp_path / "linked")
    a, meta_a = read_trial_log(local["path"])
    b, meta_b = read_trial_log(linked["path"])
    assert (meta_a["contact_model"], meta_b["contact_model"]) == ("physics", "physics_local")
    first_a, first_b = meta_a["first_contact"], meta_b["first_contact"]
    assert first_a is not None and first_a["t_s"] == first_b["t_s"]
    # the same contact up to round-off (a probe on a link there, a body of its own here)
    for key in ("point_m", "normal", "relative_velocity_m_s", "normal_speed_m_s", "tangential_speed_m_s"):
        np.testing.assert_allclose(first_b[key], first_a[key], rtol=1e-9, atol=1e-12, err_msg=key)
    assert linked["impact_velocity_m_s"] == local["impact_velocity_m_s"]
    before = int(round(meta_a["first_contact"]["t_s"] / 1e-3))
    for name in ("ee_x_m", "ee_y_m", "target_x_m", "target_y_m", "base_att_z_rad"):
        assert a[name].to_numpy()[:before].tolist() == b[name].to_numpy()[:before].tolist(), name
    assert linked["outcome"] == local["outcome"] == "captured"
