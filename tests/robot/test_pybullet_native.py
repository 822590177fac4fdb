"""The plant step through PyBullet's C API (``robot.pybullet_native``) against the
pybullet module's own calls: two copies of an arm stepped side by side, one by
``setJointMotorControlArray`` / ``stepSimulation`` / the three state queries, one by
``ct_plant_step``, must hold the same state to the bit; a free body read natively must
read as ``getBasePositionAndOrientation`` and ``getBaseVelocity`` read it; a non-finite
command must be refused before anything reaches the world. The symbol lookup is checked
on a library compiled here, against the loader's own addresses."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from capture_trainer.errors import ArmError, PhysicsError
from capture_trainer.native import build_library
from robot import pybullet_native as native
from robot.arm import JointCommand
from robot.models import MODELS
from robot.pybullet_arm import PyBulletArm, _import_pybullet

STEP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64)


def _native_of(arm: PyBulletArm, targets: np.ndarray) -> native.NativePlant:
    plant = arm.native_plant(targets)
    assert isinstance(plant, native.NativePlant), plant
    return plant


def _python_state(arm: PyBulletArm) -> np.ndarray:
    pb, client, body = arm._pb, arm.client_id, arm.body_id
    joints = pb.getJointStates(body, list(range(arm.n_joints)), physicsClientId=client)
    position, orientation = pb.getBasePositionAndOrientation(body, physicsClientId=client)
    velocity, angular = pb.getBaseVelocity(body, physicsClientId=client)
    return np.array([s[0] for s in joints] + [s[1] for s in joints]
                    + list(position + orientation + velocity + angular))


@pytest.mark.parametrize("name", list(MODELS))
def test_the_native_step_moves_the_world_as_the_module_does(name: str) -> None:
    model = MODELS[name]
    n = model.n_joints
    rng = np.random.default_rng(4)
    with PyBulletArm(model) as reference, PyBulletArm(model) as subject:
        targets = np.zeros(n)
        plant = _native_of(subject, targets)
        step = STEP(plant.step_address)
        raw, before, _ = subject.readout_buffers
        command = JointCommand(0.0, np.zeros(n), np.zeros(n), np.zeros(n))
        for k in range(300):
            rates = rng.uniform(-0.8, 0.8, n) if k % 50 == 0 else command.qd_rad_s
            command.qd_rad_s = np.array(rates)
            targets[:] = rates
            reference.send(command)
            reference.advance()
            expected_before = raw.copy()
            assert step(plant.address, native.DEBRIS_NONE) == native.OK
            # the module's queries of either world, and the step's own buffers
            assert np.array_equal(raw, _python_state(reference))
            assert np.array_equal(raw, _python_state(subject))
            assert np.array_equal(before, expected_before)
        assert np.any(raw[:n] != 0.0)  # the arm moved


def test_a_free_body_reads_natively_as_the_module_reads_it() -> None:
    pb = _import_pybullet()
    with PyBulletArm(MODELS["planar-3r"]) as arm:
        client = arm.client_id
        shape = pb.createCollisionShape(pb.GEOM_SPHERE, radius=0.1, physicsClientId=client)
        body = pb.createMultiBody(baseMass=2.0, baseCollisionShapeIndex=shape, basePosition=[1.5, 0.3, 0.0],
                                  baseOrientation=[0.0, 0.0, 0.38268343236508984, 0.9238795325112867],
                                  physicsClientId=client)
        pb.resetBaseVelocity(body, [-0.1, 0.02, 0.0], [0.0, 0.0, 0.3], physicsClientId=client)
        plant = _native_of(arm, np.zeros(3))
        coasting_velocity, coasting_spin = (9.0, 8.0, 7.0), (6.0, 5.0, 4.0)
        plant.bind_debris(body, coasting_velocity, coasting_spin)
        step = STEP(plant.step_address)
        for _ in range(20):
            assert step(plant.address, native.DEBRIS_FULL) == native.OK
            position, orientation = pb.getBasePositionAndOrientation(body, physicsClientId=client)
            velocity, angular = pb.getBaseVelocity(body, physicsClientId=client)
            assert np.array_equal(plant.debris_state, position + orientation + velocity + angular)
        # its pose only: the velocities are left as they were
        held = plant.debris_state[7:].copy()
        assert step(plant.address, native.DEBRIS_POSE) == native.OK
        position, orientation = pb.getBasePositionAndOrientation(body, physicsClientId=client)
        assert np.array_equal(plant.debris_state[:7], position + orientation)
        assert np.array_equal(plant.debris_state[7:], held)
        assert step(plant.address, native.DEBRIS_NONE) == native.OK  # nothing read: unchanged
        assert np.array_equal(plant.debris_state[:7], position + orientation)


def test_a_non_finite_command_never_reaches_the_world() -> None:
    with PyBulletArm(MODELS["spatial-7dof"]) as arm:
        targets = np.full(7, 0.1)
        plant = _native_of(arm, targets)
        step = STEP(plant.step_address)
        assert step(plant.address, native.DEBRIS_NONE) == native.OK
        raw = arm.readout_buffers[0].copy()
        for bad in (np.nan, np.inf, -np.inf):
            targets[3] = bad
            assert step(plant.address, native.DEBRIS_NONE) == native.NONFINITE
            assert np.array_equal(arm.readout_buffers[0], raw)  # nothing read
            assert np.array_equal(_python_state(arm), raw)  # nothing stepped
        with pytest.raises(ArmError, match="non-finite"):
            native.raise_step_error(native.NONFINITE, targets)
        with pytest.raises(PhysicsError, match=f"code {native.STEP_FAILED}"):
            native.raise_step_error(native.STEP_FAILED, targets)
        native.raise_step_error(native.OK, targets)


def test_the_arm_rebinds_its_native_step_to_a_rebuilt_body() -> None:
    """A payload merged into the last link rebuilds the multibody (a new body id): the
    step follows it and still reads what the module reads."""
    from robot.debris import Payload

    with PyBulletArm(MODELS["planar-3r"]) as arm:
        targets = np.full(3, 0.05)
        plant = _native_of(arm, targets)
        old = arm.body_id
        arm.carry(Payload(mass_kg=5.0, com_m=np.array([0.1, 0.0, 0.0]), inertia_kg_m2=np.eye(3) * 0.01))
        assert arm.body_id != old and plant.arm_body == arm.body_id
        assert STEP(plant.step_address)(plant.address, native.DEBRIS_NONE) == native.OK
        assert np.array_equal(arm.readout_buffers[0], _python_state(arm))


def test_without_the_module_s_client_there_is_a_reason_not_a_crash(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    pb = _import_pybullet()
    module = native._module(pb)
    assert isinstance(module, native._Module), module
    with pytest.raises(PhysicsError, match="not connected"):
        module.handle(1023)
    with pytest.raises(PhysicsError, match="outside"):
        module.handle(5000)
    monkeypatch.setenv(native.SWITCH, "0")
    with PyBulletArm(MODELS["planar-3r"]) as arm:
        reason = arm.native_plant(np.zeros(3))
        assert isinstance(reason, str) and "turned off" in reason
    monkeypatch.delenv(native.SWITCH)

    class OtherBuild:  # another shared-memory protocol: its status codes are not known here
        __file__ = pb.__file__

        @staticmethod
        def getAPIVersion() -> int:  # noqa: N802 - pybullet's name
            return native.API_VERSION + 1

    assert "API version" in str(native._module(OtherBuild()))  # type: ignore[arg-type]
    not_elf = tmp_path / "not-elf.so"
    not_elf.write_bytes(b"#!/bin/sh\n" * 10)
    assert native.elf_symbols(not_elf, ("anything",)) == {}


def test_symbols_are_found_where_the_loader_put_them(tmp_path: Path) -> None:
    """An exported and a file-local variable of a library built here: the local one's
    address (from a function that returns it) is the load base plus its table value,
    the base taken from the exported one."""
    source = tmp_path / "probe.c"
    source.write_text("int ct_probe_exported = 7;\n"
                      "static int ct_probe_local = 5;\n"
                      "int *ct_probe_local_address(void) { ct_probe_local += 1; return &ct_probe_local; }\n")
    library_path = build_library(source, tmp_path / "lib", error=PhysicsError)
    library = ctypes.CDLL(str(library_path))
    values = native.elf_symbols(library_path, ("ct_probe_exported", "ct_probe_local", "ct_probe_missing"))
    assert set(values) == {"ct_probe_exported", "ct_probe_local"}
    base = ctypes.addressof(ctypes.c_int.in_dll(library, "ct_probe_exported")) - values["ct_probe_exported"]
    library.ct_probe_local_address.restype = ctypes.c_void_p
    assert library.ct_probe_local_address() == base + values["ct_probe_local"]
    assert ctypes.c_int.from_address(base + values["ct_probe_local"]).value == 6
