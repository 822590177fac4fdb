"""The process's pool of PyBullet clients: a client is handed to one world at a time,
comes back emptied, and a dead one is never handed out again."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pybullet as pb
import pytest

from capture_trainer.errors import PhysicsError
from robot.arm import JointCommand
from robot.models import MODELS
from robot.pybullet_arm import SOLVER_ITERATIONS, PyBulletArm
from robot.pybullet_clients import ClientPool, client_pool

PLANAR = MODELS["planar-3r"]


@pytest.fixture
def pool() -> Iterator[ClientPool]:
    """The process's pool with no idle client (what a test counts starts from zero)."""
    shared = client_pool(pb)
    shared.clear()
    yield shared
    shared.clear()


def _command(n: int, rate_rad_s: float) -> JointCommand:
    command = JointCommand.zeros(n)
    command.qd_rad_s[:] = rate_rad_s
    return command


def test_two_arms_alive_have_two_worlds_and_both_come_back_empty(pool: ClientPool) -> None:
    a, b = PyBulletArm(PLANAR), PyBulletArm(PLANAR)
    clients = {a.client_id, b.client_id}
    try:
        assert len(clients) == 2
        a.send(_command(3, 0.1))
        for _ in range(100):
            a.advance()
            b.advance()
        # the velocity motors track the rate exactly: 0.1 rad/s for 0.1 s; b never moved
        np.testing.assert_allclose(a.state().q_rad - PLANAR.q0_rad, 0.01, atol=1e-9)
        np.testing.assert_array_equal(b.state().q_rad, PLANAR.q0_rad)
    finally:
        a.close()
        b.close()
    idle = pool.idle()
    assert set(idle) == clients
    for client in idle:
        assert pb.getNumBodies(physicsClientId=client) == 0
    connected = pool.connected
    with PyBulletArm(PLANAR) as c:
        assert c.client_id in idle
        assert pool.connected == connected  # no new connection
        assert pb.getNumBodies(physicsClientId=c.client_id) == 1
        assert c.body_id == 0  # ids start again from 0, as in a fresh client


def test_a_reused_client_has_the_arm_engine_parameters(pool: ClientPool) -> None:
    dt_s = 1.0 / 1500.0
    connected = pool.connected
    with PyBulletArm(PLANAR, dt_s=dt_s) as first:
        client = first.client_id
        fresh = pb.getPhysicsEngineParameters(physicsClientId=client)
    with PyBulletArm(MODELS["spatial-7dof"], dt_s=0.002):
        pass  # another step size in the same client meanwhile
    with PyBulletArm(PLANAR, dt_s=dt_s) as again:
        assert again.client_id == client and pool.connected == connected + 1
        reused = pb.getPhysicsEngineParameters(physicsClientId=again.client_id)
    assert reused == fresh
    assert reused["fixedTimeStep"] == dt_s
    assert reused["numSolverIterations"] == SOLVER_ITERATIONS
    assert reused["numSubSteps"] == 0
    assert (reused["gravityAccelerationX"], reused["gravityAccelerationY"], reused["gravityAccelerationZ"]) == (0, 0, 0)


def test_a_build_that_fails_gives_its_client_back_empty(pool: ClientPool, monkeypatch: pytest.MonkeyPatch) -> None:
    load = PyBulletArm._load_body

    def load_then_fail(self: PyBulletArm, *args: object) -> int:
        load(self, *args)  # the body is in the world when the failure comes
        raise PhysicsError("a failure after the URDF was loaded")

    monkeypatch.setattr(PyBulletArm, "_load_body", load_then_fail)
    with pytest.raises(PhysicsError, match="after the URDF"):
        PyBulletArm(PLANAR)
    (client,) = pool.idle()
    assert pb.getNumBodies(physicsClientId=client) == 0
    monkeypatch.undo()
    with PyBulletArm(PLANAR) as arm:
        assert arm.client_id == client
        assert arm.body_id == 0


def test_a_client_disconnected_while_idle_is_never_handed_out(pool: ClientPool) -> None:
    with PyBulletArm(PLANAR):
        pass
    (client,) = pool.idle()
    pb.disconnect(physicsClientId=client)
    connected = pool.connected
    with PyBulletArm(PLANAR) as arm:
        assert pool.connected == connected + 1  # the dead one was dropped, a new one connected
        assert pb.isConnected(physicsClientId=arm.client_id)
        arm.advance()
        assert arm.state().t_s == pytest.approx(1e-3)


def test_a_client_disconnected_while_in_use_is_not_kept(pool: ClientPool) -> None:
    arm = PyBulletArm(PLANAR)
    pb.disconnect(physicsClientId=arm.client_id)
    arm.close()  # no error
    arm.close()  # idempotent
    assert pool.idle() == ()


def test_the_pool_keeps_at_most_max_idle_and_hands_each_client_to_one_taker() -> None:
    pool = ClientPool(pb, max_idle=2)
    takers = 4
    taken: list[int] = []
    all_taken = threading.Barrier(takers)
    lock = threading.Lock()

    def take_and_give_back() -> None:
        client = pool.acquire()
        with lock:
            taken.append(client)
        all_taken.wait()  # every client is held at once here
        pool.release(client)

    threads = [threading.Thread(target=take_and_give_back) for _ in range(takers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert len(set(taken)) == takers
        assert pool.connected == takers
        idle = pool.idle()
        assert len(idle) == 2
        dropped = set(taken) - set(idle)
        assert not any(pb.isConnected(physicsClientId=c) for c in dropped)
        assert pool.acquire() in idle
        assert pool.reused == 1
    finally:
        pool.clear()
