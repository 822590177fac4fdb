"""The reactionless workspace (robot/workspace.py and `capture-trainer robot workspace`).

Expectations come from outside the code under test: the start end effector from
robot.dynamics, the shoulder and reach from the model's own link data, the cell area
from the grid's definition, sigma_ratio from numpy's SVD of M (I − pinv(J) J).
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from app.commands import robot as cli
from robot.dynamics import dynamics_terms
from robot.models import MODELS
from robot.workspace import (
    FAIL_SINGULAR,
    WorkspaceSettings,
    approach_axes,
    evaluate_points,
    map_workspace,
    shoulder_and_reach,
    sigma_ratio,
)

#: The keys `robot workspace --json` documents (docs/robot.md, "The reactionless workspace").
DOCUMENTED_KEYS = {
    "model", "task_dim", "size_unit", "resolution", "cell_size_m", "cell_measure", "directions", "approach_axes",
    "shoulder_m", "reach_m", "reach_size", "cells", "cells_simulated", "fraction_threshold", "cells_in_workspace",
    "workspace_size", "workspace_size_weighted", "coverage", "coverage_weighted", "size_per_axis", "start_ee_m",
    "start_fraction", "start_sigma_ratio", "pairs_trackable", "pairs_simulated", "failures", "approach_failures",
    "max_attitude_change_trackable_rad", "settings", "grid_axes_m", "fraction", "runtime_s",
}


def _start_ee(model):
    q0 = np.array(model.q0_rad)
    return dynamics_terms(model, q0, np.zeros(model.n_joints)).ee_position_m


def _shoulder_and_reach_from_links(model):
    """Planar: the first joint sits on the mount; spatial: joint 2 sits on joint 1's axis
    (along the mount's z), one first-link length out. Reach: the links after it."""
    mount = np.array(model.mount_xyz_m)
    if model.task_dim == 2:
        return mount, sum(link.length_m for link in model.links)
    axis = np.array([1.0, 0.0, 0.0])  # mount rpy (0, pi/2, 0) turns the joint-1 z axis onto base +x
    return mount + model.links[0].length_m * axis, sum(link.length_m for link in model.links[1:])


def _numpy_sigma(model, q):
    terms = dynamics_terms(model, np.asarray(q, dtype=float), np.zeros(model.n_joints))
    jac = terms.jacobian[[0, 1]] if model.task_dim == 2 else terms.jacobian
    react = terms.reaction_map[[2]] if model.task_dim == 2 else terms.reaction_map
    projector = np.eye(model.n_joints) - np.linalg.pinv(jac) @ jac
    return np.linalg.svd(react @ projector, compute_uv=False).min() / np.linalg.svd(react, compute_uv=False).max()


def test_the_start_point_along_the_papers_approach_is_trackable():
    model = MODELS["planar-3r"]
    result = evaluate_points(model, _start_ee(model)[None], np.array([[-1.0, 0.0, 0.0]]))
    assert result.trackable[0, 0], result.failures
    assert result.sigma_ratio_min[0, 0] > 0.1  # the documented capture keeps >= 0.14
    assert result.error_max_m[0, 0] < 1e-3
    assert result.attitude_change_max_rad[0, 0] < 1e-4  # reactionless: the base barely turns


@pytest.mark.parametrize("name", list(MODELS))
def test_shoulder_and_reach_match_the_link_data(name):
    model = MODELS[name]
    shoulder, reach = shoulder_and_reach(model)
    expected_shoulder, expected_reach = _shoulder_and_reach_from_links(model)
    np.testing.assert_allclose(shoulder, expected_shoulder, atol=1e-12)
    assert reach == pytest.approx(expected_reach, abs=1e-12)


@pytest.mark.parametrize("name", list(MODELS))
def test_a_point_beyond_the_reach_is_never_trackable(name):
    model = MODELS[name]
    shoulder, reach = _shoulder_and_reach_from_links(model)
    angles = np.radians([0.0, 40.0, -70.0])
    if model.task_dim == 2:
        unit = np.column_stack([np.cos(angles), np.sin(angles), np.zeros(3)])
    else:
        unit = np.column_stack([np.cos(angles), np.zeros(3), np.sin(angles)])
    points = shoulder + (reach + 0.05) * unit
    result = evaluate_points(model, points, approach_axes(model.task_dim, 3))
    assert not result.trackable.any()
    assert np.all(result.failures != 0)


def test_a_point_across_a_reaction_singularity_fails_on_sigma_ratio():
    model = MODELS["planar-3r"]
    result = evaluate_points(model, np.array([[0.6, -0.8, 0.0]]), np.array([[1.0, 0.0, 0.0]]))
    assert result.approach_failures[0] & FAIL_SINGULAR
    assert result.sigma_ratio_min[0, 0] < WorkspaceSettings().ik.sigma_threshold


def test_the_area_is_the_count_of_qualifying_cells_times_the_cell_area():
    model = MODELS["planar-3r"]
    resolution = 9
    wmap = map_workspace(model, resolution, 4)
    _, reach = _shoulder_and_reach_from_links(model)
    cell_area = (2.0 * reach / resolution) ** 2
    per_point = wmap.points.trackable.mean(axis=1)  # the simulated cells, from the raw pairs
    qualifying = int(np.count_nonzero(per_point >= 0.5))
    assert qualifying > 0  # the cell next to the start end effector qualifies
    assert wmap.size == pytest.approx(qualifying * cell_area, rel=1e-12)
    assert wmap.size_weighted == pytest.approx(per_point.sum() * cell_area, rel=1e-12)
    summary = wmap.summary()
    assert summary["workspace_size"] == pytest.approx(qualifying * cell_area, rel=1e-12)
    assert summary["coverage"] == pytest.approx(qualifying * cell_area / (math.pi * reach**2), rel=1e-12)
    assert wmap.fraction.shape == (resolution, resolution)


@pytest.mark.parametrize("name", list(MODELS))
def test_sigma_ratio_matches_numpy(name):
    model = MODELS[name]
    q0 = np.array(model.q0_rad)
    assert sigma_ratio(model, q0) == pytest.approx(_numpy_sigma(model, q0), abs=1e-9)
    # the value the map reports at the configuration its approach ended in
    target = _start_ee(model) + (np.array([0.0, 0.05, 0.0]) if model.task_dim == 2 else np.array([-0.05, 0.0, 0.0]))
    result = evaluate_points(model, target[None], np.array([[1.0, 0.0, 0.0]]))
    q_end = result.q_at_point_rad[0]
    assert np.abs(q_end - q0).max() > 0.01  # the arm moved
    assert result.sigma_ratio_at_point[0] == pytest.approx(_numpy_sigma(model, q_end), abs=1e-9)
    rng = np.random.default_rng(3)
    for q in q0 + rng.uniform(-0.4, 0.4, (5, model.n_joints)):
        assert sigma_ratio(model, q) == pytest.approx(_numpy_sigma(model, q), abs=1e-9)


def test_approach_axes_are_unit_and_distinct_up_to_sign():
    for task_dim, count in ((2, 16), (3, 13), (3, 3), (3, 20)):
        axes = approach_axes(task_dim, count)
        assert axes.shape == (count, 3)
        np.testing.assert_allclose(np.linalg.norm(axes, axis=1), 1.0, atol=1e-12)
        overlap = np.abs(axes @ axes.T) - np.eye(count)
        assert overlap.max() < 1.0 - 1e-6
        if task_dim == 2:
            assert np.all(axes[:, 2] == 0.0)


def _run(argv, capsys):
    parser = argparse.ArgumentParser()
    cli.add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    assert args.handler(args) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(("name", "resolution"), [("planar-3r", 5), ("spatial-7dof", 3)])
def test_json_has_the_documented_keys_and_the_figure_is_a_png(name, resolution, capsys, tmp_path):
    figure = tmp_path / "out" / "workspace.png"
    out = _run(["robot", "workspace", name, "--resolution", str(resolution), "--directions", "2", "--json",
                "--figure", str(figure)], capsys)
    summary = json.loads(out)
    assert set(summary) == DOCUMENTED_KEYS
    model = MODELS[name]
    assert summary["model"] == name and summary["task_dim"] == model.task_dim
    assert summary["size_unit"] == ("m^2" if model.task_dim == 2 else "m^3")
    assert np.asarray(summary["fraction"]).shape == (resolution,) * model.task_dim
    assert summary["directions"] == 2 and len(summary["size_per_axis"]) == 2
    assert 0.0 <= summary["coverage"] <= 1.0
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_human_summary_names_the_size(capsys):
    out = _run(["robot", "workspace", "planar-3r", "--resolution", "3", "--directions", "1"], capsys)
    assert "m² = " in out and "of the reach disc" in out
