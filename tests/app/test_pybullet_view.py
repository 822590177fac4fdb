"""The PyBullet view mirrors the servo's arm from the snapshot and the joint angles.

The mirror rebuilds the pose from the base centre, the base attitude and the joint
angles through PyBullet's own forward kinematics; the servo computes the snapshot's
``links`` with the robot package's kernels. Both must put every joint in one place.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from app.ui.pybullet_view import PoseMirror, quaternion_xyzw
from app.ui.scene import Frame
from capture_trainer.trial_log import joint_position_column
from trials.runner import TrialRequest, build_trial
from trials.snapshot import SharedSnapshot, SnapshotLayout


@pytest.mark.parametrize("rotvec", [(0.0, 0.0, 0.0), (0.1, -0.2, 0.3), (0.0, 0.0, 3.0)])
def test_quaternion_of_rotation_vector(rotvec: tuple[float, float, float]) -> None:
    expected = Rotation.from_rotvec(rotvec).as_quat()  # x, y, z, w
    got = np.array(quaternion_xyzw(np.array(rotvec)))
    assert np.allclose(got, expected) or np.allclose(got, -expected)


@pytest.mark.parametrize("scenario", ["paper-2019", "from-above-3d"])
def test_mirror_puts_the_joints_where_the_servo_does(scenario: str, tmp_path) -> None:
    import pybullet as pb

    trial = build_trial(TrialRequest(scenario=scenario, condition="dg", seed=3), tmp_path)
    snapshot = SharedSnapshot(SnapshotLayout(trial.n_joints))
    client = pb.connect(pb.DIRECT)
    try:
        trial.attach_snapshot(snapshot, every_n_ticks=1)
        for _ in range(600):
            trial.tick()
        frame = Frame.read(snapshot)
        assert frame is not None
        row = trial.recorder.row
        q = [row[trial.recorder.column_index(joint_position_column(j))] for j in range(trial.n_joints)]
        assert np.ptp(frame.links_m[:, 0]) > 0.1  # a real pose, not zeros
        mirror = PoseMirror(pb, client, trial.scenario.robot.model, trial.scenario.target.radius_m)
        mirror.update(frame, q)
        np.testing.assert_allclose(mirror.joint_origins_m(), frame.links_m[1:-1], atol=1e-6)
        position, _ = pb.getBasePositionAndOrientation(mirror.debris, physicsClientId=client)
        np.testing.assert_allclose(position, frame.target_m, atol=1e-9)
    finally:
        pb.disconnect(physicsClientId=client)
        trial.abort("test")
        snapshot.close()
