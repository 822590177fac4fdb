"""Shared helpers of the robot tests: independent read-outs straight from PyBullet."""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from robot.models import MODELS
from robot.pybullet_arm import PyBulletArm


def plant_ee_velocity(arm: PyBulletArm) -> np.ndarray:
    """End-effector velocity from PyBullet's own link state (CoM frame, double precision)."""
    model = arm.model
    n = model.n_joints
    state = pb.getLinkState(arm.body_id, n - 1, computeLinkVelocity=1, computeForwardKinematics=1,
                            physicsClientId=arm.client_id)
    rot = np.array(pb.getMatrixFromQuaternion(state[1])).reshape(3, 3)
    lever = rot @ (np.array(model.ee_offset_m) - np.array(model.links[-1].com_m))
    return np.array(state[6]) + np.cross(np.array(state[7]), lever)


def plant_momentum(arm: PyBulletArm) -> tuple[np.ndarray, np.ndarray]:
    """Total linear [kg m/s] and angular [kg m^2/s] momentum (about the world origin),
    summed from PyBullet's link states and dynamics info: independent of robot.*."""
    body, client = arm.body_id, arm.client_id
    linear = np.zeros(3)
    angular = np.zeros(3)
    for link in range(-1, arm.n_joints):
        info = pb.getDynamicsInfo(body, link, physicsClientId=client)
        mass, inertia_diag = info[0], np.array(info[2])
        if link == -1:
            pos, orn = pb.getBasePositionAndOrientation(body, physicsClientId=client)
            v, w = pb.getBaseVelocity(body, physicsClientId=client)
        else:
            s = pb.getLinkState(body, link, computeLinkVelocity=1, computeForwardKinematics=1, physicsClientId=client)
            pos, orn, v, w = s[0], s[1], s[6], s[7]
        rot = np.array(pb.getMatrixFromQuaternion(orn)).reshape(3, 3)
        pos, v, w = np.array(pos), np.array(v), np.array(w)
        linear += mass * v
        angular += rot @ np.diag(inertia_diag) @ rot.T @ w + mass * np.cross(pos, v)
    return linear, angular


class PlantProbe:
    """Independent read-outs of a PyBulletArm (handed to tests by the ``probe`` fixture)."""

    ee_velocity = staticmethod(plant_ee_velocity)
    momentum = staticmethod(plant_momentum)


@pytest.fixture
def probe() -> type[PlantProbe]:
    """Independent PyBullet read-outs (importing conftest is not possible in importlib mode)."""
    return PlantProbe


@pytest.fixture(params=list(MODELS))
def model(request):
    """Every registered model."""
    return MODELS[request.param]
