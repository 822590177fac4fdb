"""The PyBullet view draws the capture tool at the end effector, coloured by contact state."""

from __future__ import annotations

import numpy as np
import pytest

from app.ui.pybullet_view import ENVELOPE_ALPHA, MIN_DEBRIS_RADIUS_M, PoseMirror, state_rgba
from app.ui.scene import Frame
from robot.models import get_model


def _frame(model_name: str, flags: frozenset[str]) -> Frame:
    n = get_model(model_name).n_joints
    z = np.zeros(3)
    links = np.zeros((n + 2, 3))
    ee = np.array([0.7, 0.2, 0.05])
    return Frame(
        t_s=1.0, ee_m=ee, ee_v_m_s=z.copy(), target_m=ee + [0.006, 0.0, 0.0], target_v_m_s=z.copy(),
        command_m=z.copy(), guidance_force_n=z.copy(), dev_force_calc_n=z.copy(), dev_force_act_n=z.copy(),
        base_torque_n_m=z.copy(), base_attitude_rad=z.copy(), distance_m=0.0, flags=flags, phase="running",
        reached_at_s=0.5, links_m=links, servo_rate_hz=1000.0, servo_overruns=0,
    )


def _rgba(pb, body: int, client: int) -> list[float]:
    return list(pb.getVisualShapeData(body, physicsClientId=client)[0][7])


@pytest.mark.parametrize("model_name", ["planar-3r", "spatial-7dof"])
def test_tool_follows_the_end_effector_in_the_state_colour(model_name: str) -> None:
    import pybullet as pb

    client = pb.connect(pb.DIRECT)
    try:
        mirror = PoseMirror(pb, client, model_name, 0.0044)
        tool = mirror.model.capture_tool
        assert mirror.detail == pytest.approx(MIN_DEBRIS_RADIUS_M / 0.0044)
        tip_radius = pb.getVisualShapeData(mirror.tip, physicsClientId=client)[0][3][0]
        envelope_radius = pb.getVisualShapeData(mirror.envelope, physicsClientId=client)[0][3][0]
        assert tip_radius == pytest.approx(tool.tip_radius_m * mirror.detail)
        assert envelope_radius == pytest.approx(tool.envelope_radius_m * mirror.detail)
        joints = [0.0] * mirror.model.n_joints
        for flags, state in ((frozenset(), "tool"), (frozenset({"contact"}), "contact"),
                             (frozenset({"contact", "captured"}), "captured")):
            frame = _frame(model_name, flags)
            mirror.update(frame, joints)
            for body in (mirror.tip, mirror.envelope):
                position, _ = pb.getBasePositionAndOrientation(body, physicsClientId=client)
                np.testing.assert_allclose(position, frame.ee_m, atol=1e-9)
            assert _rgba(pb, mirror.tip, client) == pytest.approx(state_rgba(state))
            assert _rgba(pb, mirror.envelope, client) == pytest.approx(state_rgba(state, ENVELOPE_ALPHA))
        mirror.remove()
    finally:
        pb.disconnect(physicsClientId=client)
