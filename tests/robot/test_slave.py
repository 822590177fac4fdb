"""The slave-control path on a backend without base telemetry, and its NaN guard."""

from __future__ import annotations

import numpy as np

from robot.arm import ArmState, JointCommand
from robot.models import MODELS
from robot.slave import SlaveController


class RecordingArm:
    """A velocity-controlled fake arm without base state that keeps every command."""

    def __init__(self, q0: np.ndarray, dt_s: float = 1e-3) -> None:
        self._state = ArmState(0.0, q0.copy(), np.zeros_like(q0), None)
        self._dt = dt_s
        self.sent: list[JointCommand] = []

    @property
    def n_joints(self) -> int:
        return self._state.q_rad.shape[0]

    def state(self) -> ArmState:
        return self._state

    def send(self, command: JointCommand) -> None:
        command.check(self.n_joints)
        self.sent.append(JointCommand(command.t_s, command.q_rad.copy(), command.qd_rad_s.copy(),
                                      command.qdd_rad_s2.copy()))
        self._state.qd_rad_s[:] = command.qd_rad_s
        self._state.q_rad += command.qd_rad_s * self._dt
        self._state.t_s += self._dt

    def close(self) -> None:
        pass


def test_non_finite_command_never_reaches_the_arm():
    model = MODELS["planar-3r"]
    arm = RecordingArm(np.array(model.q0_rad))
    slave = SlaveController(model, arm)
    x = slave.step(0.0, np.zeros(3), np.zeros(3), np.zeros(3)).ee_position_m.copy()
    target = x + np.array([0.05, 0.0, 0.0])
    for k in range(1, 50):
        status = slave.step(k * 1e-3, target, np.zeros(3), np.zeros(3))
        assert not status.fault
    good = arm.sent[-1]
    for bad in (np.nan, np.inf, -np.inf):
        status = slave.step(0.05, np.array([bad, 0.0, 0.0]), np.zeros(3), np.zeros(3))
        assert status.fault
        assert np.array_equal(arm.sent[-1].qd_rad_s, good.qd_rad_s)
        assert all(np.all(np.isfinite(c.qd_rad_s)) for c in arm.sent)
    assert slave.fault_count == 3
    status = slave.step(0.06, target, np.zeros(3), np.zeros(3))
    assert not status.fault


def test_controller_without_base_state_moves_toward_the_command():
    """The same path drives an arm that reports no base state (no base feedback)."""
    model = MODELS["spatial-7dof"]
    arm = RecordingArm(np.array(model.q0_rad))
    slave = SlaveController(model, arm)
    start = slave.step(0.0, np.zeros(3), np.zeros(3), np.zeros(3)).ee_position_m.copy()
    target = start + np.array([0.03, -0.02, 0.01])
    for k in range(1, 3000):
        status = slave.step(k * 1e-3, target, np.zeros(3), np.zeros(3))
    # the fake's base never moves, the model's does: small model error, closed by eq. 10
    assert np.linalg.norm(status.ee_position_m - target) < 0.1 * np.linalg.norm(start - target)


def test_plain_sequences_are_accepted_and_equal_to_arrays():
    model = MODELS["planar-3r"]
    results = []
    for convert in (list, np.array):
        arm = RecordingArm(np.array(model.q0_rad))
        slave = SlaveController(model, arm)
        slave.step(0.0, convert([1.2, 0.1, 0.0]), convert([0.0, 0.0, 0.0]), convert([0.0, 0.0, 0.0]))
        results.append(arm.sent[-1].qd_rad_s)
    assert np.array_equal(results[0], results[1]) and np.any(results[0] != 0.0)
