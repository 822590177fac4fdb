"""The robot command line and the start-pose scoring behind the models' q0."""

from __future__ import annotations

import argparse
import json

import numpy as np

from app.commands import robot as cli
from robot.models import MODELS
from trials.pose_search import score_pose


def _run(argv, capsys):
    parser = argparse.ArgumentParser()
    cli.add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    assert args.handler(args) == 0
    return capsys.readouterr().out


def test_capture_command_prints_a_json_summary(capsys):
    out = _run(["robot", "capture", "--model", "planar-3r", "--duration", "2.8", "--json"], capsys)
    summary = json.loads(out)
    assert summary["captured"] is True and summary["model"] == "planar-3r"


def test_urdf_command_prints_every_joint(capsys):
    out = _run(["robot", "urdf", "--model", "spatial-7dof"], capsys)
    assert out.count('type="revolute"') == MODELS["spatial-7dof"].n_joints


def test_registered_planar_start_pose_keeps_its_searched_score():
    """The documented search result: sigma_ratio stays above 0.14 from +x and +y."""
    model = MODELS["planar-3r"]
    score = score_pose(model, np.array(model.q0_rad), directions=("+x", "+y"))
    assert score.score > 0.14
