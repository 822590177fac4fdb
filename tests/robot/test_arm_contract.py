"""One contract, every ArmBackend: each backend registered in ``robot.backends.ARM_BACKENDS``
(for every model) and a tiny fake. A backend added to the registry is tested here
without any change to this file; what a real-arm bridge must also pass."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from capture_trainer.errors import ArmError
from robot.arm import ArmBackend, ArmMeasurement, ArmState, JointCommand
from robot.backends import ARM_BACKENDS
from robot.models import MODELS
from robot.pybullet_arm import PyBulletArm


class FakeArm:
    """A perfect velocity-controlled arm without base telemetry, stepped by the test."""

    def __init__(self, n_joints: int, dt_s: float = 1e-3) -> None:
        self._n = n_joints
        self._dt = dt_s
        self._state = ArmState(0.0, np.zeros(n_joints), np.zeros(n_joints), None)
        self._rate = np.zeros(n_joints)
        self.closed = False

    @property
    def n_joints(self) -> int:
        return self._n

    def state(self) -> ArmState:
        return self._state

    def send(self, command: JointCommand) -> None:
        command.check(self._n)
        self._rate[:] = command.qd_rad_s

    def advance(self) -> None:
        self._state.q_rad += self._rate * self._dt
        self._state.qd_rad_s[:] = self._rate
        self._state.t_s += self._dt

    def measure(self) -> ArmMeasurement:
        out = ArmMeasurement(self._n, t_s=self._state.t_s)
        out.q_rad[:] = self._state.q_rad
        out.qd_rad_s[:] = self._state.qd_rad_s
        return out

    def link_positions_m(self) -> np.ndarray:
        return np.zeros((self._n + 2, 3))

    def close(self) -> None:
        self.closed = True


BACKEND_CASES = [f"{name}:{model}" for name in ARM_BACKENDS.names() for model in MODELS] + ["fake"]


@pytest.fixture(params=BACKEND_CASES)
def backend(request) -> Iterator[tuple[ArmBackend, Callable[[], None]]]:
    if request.param == "fake":
        arm: ArmBackend = FakeArm(3)
    else:
        name, model = request.param.split(":")
        arm = ARM_BACKENDS.get(name)(MODELS[model])
    yield arm, arm.advance
    arm.close()


def test_measurement_is_shaped_and_finite(backend):
    arm, advance = backend
    advance()
    m = arm.measure()
    n = arm.n_joints
    assert isinstance(m, ArmMeasurement)
    for vec in (m.ee_position_m, m.ee_velocity_m_s, m.base_torque_n_m, m.base_attitude_rad,
                m.base_angular_velocity_rad_s):
        assert vec.shape == (3,) and np.all(np.isfinite(vec))
    assert m.q_rad.shape == (n,) and m.qd_rad_s.shape == (n,)
    assert np.allclose(m.q_rad, arm.state().q_rad)
    assert arm.link_positions_m().shape == (n + 2, 3)


def test_is_an_arm_backend(backend):
    arm, _ = backend
    assert isinstance(arm, ArmBackend)


def test_state_is_timestamped_and_shaped(backend):
    arm, advance = backend
    state = arm.state()
    n = arm.n_joints
    assert state.q_rad.shape == (n,) and state.qd_rad_s.shape == (n,)
    t0 = state.t_s
    advance()
    assert arm.state().t_s > t0
    if state.base is not None:
        assert arm.state().base.orientation_xyzw.shape == (4,)
        assert abs(np.linalg.norm(arm.state().base.orientation_xyzw) - 1.0) < 1e-9


def test_commanded_rate_is_followed(backend):
    arm, advance = backend
    n = arm.n_joints
    q_before = arm.state().q_rad.copy()
    rate = np.linspace(0.1, -0.1, n)
    arm.send(JointCommand(0.0, q_before.copy(), rate, np.zeros(n)))
    for _ in range(10):
        advance()
    state = arm.state()
    # a step from rest: the plant's motor solver settles within a few 1e-5 rad/s
    assert np.allclose(state.qd_rad_s, rate, atol=1e-5)
    # positions integrate the rates (PyBullet's multibody position update of a rotating
    # chain differs from q += q̇ dt by up to ~1e-4 rad/s of rate; 1 % covers it)
    assert np.allclose(state.q_rad - q_before, rate * 10 * 1e-3, rtol=1e-2, atol=1e-9)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_command_is_refused(backend, bad):
    arm, advance = backend
    n = arm.n_joints
    rate = np.zeros(n)
    rate[0] = bad
    with pytest.raises(ArmError):
        arm.send(JointCommand(0.0, np.zeros(n), rate, np.zeros(n)))


def test_wrong_length_is_refused(backend):
    arm, _ = backend
    n = arm.n_joints + 1
    with pytest.raises(ArmError):
        arm.send(JointCommand(0.0, np.zeros(n), np.zeros(n), np.zeros(n)))


def test_pybullet_drawing_points_and_readouts_agree(model):
    """link_positions_m: base centre first, end effector last, consistent with measure()."""
    with PyBulletArm(model) as arm:
        arm.send(JointCommand(0.0, np.zeros(model.n_joints), np.full(model.n_joints, 0.2), np.zeros(model.n_joints)))
        for _ in range(20):
            arm.advance()
        points = arm.link_positions_m()
        measurement = arm.measure()
        assert points.shape == (model.n_joints + 2, 3)
        assert np.allclose(points[-1], measurement.ee_position_m, atol=1e-12)
        assert np.allclose(points[0], arm.state().base.position_m, atol=1e-12)
        # consecutive joint origins are a fixed link length apart, whatever the motion
        lengths = np.linalg.norm(np.diff(points[1:], axis=0), axis=1)
        fresh = PyBulletArm(model)
        rest = fresh.link_positions_m()
        fresh.close()
        assert np.allclose(lengths, np.linalg.norm(np.diff(rest[1:], axis=0), axis=1), atol=1e-12)


def test_building_the_plant_prints_nothing_on_stdout(capfd) -> None:
    # PyBullet announces a solver switch from C; a command's stdout (JSON) must stay clean
    arm = PyBulletArm(MODELS["planar-3r"])
    arm.advance()
    arm.close()
    out, _ = capfd.readouterr()
    assert out == ""


@pytest.mark.parametrize("field", ["q_rad", "qd_rad_s", "qdd_rad_s2"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_pybullet_refuses_a_non_finite_value_in_any_part_of_the_command(field, bad):
    """The sum test is only the fast path: a non-finite value anywhere is refused."""
    with PyBulletArm(MODELS["planar-3r"]) as arm:
        n = arm.n_joints
        parts = {"q_rad": np.zeros(n), "qd_rad_s": np.zeros(n), "qdd_rad_s2": np.zeros(n)}
        parts[field][n - 1] = bad
        with pytest.raises(ArmError, match="non-finite"):
            arm.send(JointCommand(0.0, parts["q_rad"], parts["qd_rad_s"], parts["qdd_rad_s2"]))


def test_pybullet_accepts_a_finite_command_whose_sum_overflows():
    """Finite rates whose sum is inf take the exact test, which lets them through."""
    with PyBulletArm(MODELS["planar-3r"]) as arm:
        n = arm.n_joints
        huge = np.full(n, 1e308)
        assert math.isinf(float(sum(huge.tolist())))
        arm.send(JointCommand(0.0, huge, np.full(n, 0.25), -huge))
        assert arm._targets == [0.25] * n


@pytest.mark.parametrize("model", sorted(MODELS))
def test_pybullet_raw_read_out_is_measure(model):
    """advance_raw + the compiled load and read-out (the fused tick's plant stage) leave
    the arm as advance + measure does: the same state, measurement and base torque."""
    from robot import _kernels as kern

    arms = [PyBulletArm(MODELS[model]), PyBulletArm(MODELS[model])]
    try:
        n = arms[0].n_joints
        rates = np.linspace(0.4, -0.3, n)
        for k in range(40):
            command = JointCommand(0.0, np.zeros(n), rates * math.cos(0.1 * k), np.zeros(n))
            for arm in arms:
                arm.send(command)
            arms[0].advance()
            reference = arms[0].measure()
            raw, before, arena = arms[1].readout_buffers
            kern.plant_load(raw, before, *arms[1].advance_raw())
            m = arms[1]._measurement
            arrays = arms[1].model.arrays
            kern.plant_readout(raw, before, True, arrays.joint_xyz, arrays.joint_rot, arrays.joint_axis,
                               arrays.ee_offset, arrays.base_inertia, arms[1].dt_s, m.ee_position_m,
                               m.ee_velocity_m_s, m.base_attitude_rad, m.base_torque_n_m, arena)
            assert arms[1].measure() is m  # the same instance, read already
            for name in ("ee_position_m", "ee_velocity_m_s", "base_torque_n_m", "base_attitude_rad",
                         "base_angular_velocity_rad_s", "q_rad", "qd_rad_s"):
                assert np.array_equal(getattr(m, name), getattr(reference, name)), name
            assert m.t_s == reference.t_s and arms[1].state().t_s == arms[0].state().t_s
        assert np.abs(reference.base_torque_n_m).max() > 1e-3  # the arm did push on its base
    finally:
        for arm in arms:
            arm.close()
