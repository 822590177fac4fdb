"""Pointer input shared between the window and the servo process."""

from __future__ import annotations

import time

import numpy as np
import pytest

from capture_trainer.errors import DeviceError
from haptics.device import BUTTON_ENGAGE, BUTTON_TRAINER, Device
from haptics.backends import open_device
from haptics.shared_input import POINTER_SPEC, SharedInput, SharedInputDevice


@pytest.fixture
def shared() -> SharedInput:
    block = SharedInput()
    yield block
    block.close()


def test_block_round_trip(shared: SharedInput) -> None:
    reader = SharedInput(shared.name)
    try:
        shared.write((0.01, -0.02, 0.003), BUTTON_ENGAGE | BUTTON_TRAINER)
        sample = reader.read()
        assert sample is not None
        assert sample[0] == 2.0  # one complete write: the sequence is even
        np.testing.assert_array_equal(sample[2:5], [0.01, -0.02, 0.003])
        assert int(sample[5]) == BUTTON_ENGAGE | BUTTON_TRAINER
    finally:
        reader.close()


def test_device_follows_pointer_with_finite_difference_velocity(shared: SharedInput) -> None:
    device = SharedInputDevice(shared.name)
    assert isinstance(device, Device)
    with device:
        now = time.monotonic()
        shared.write((0.0, 0.0, 0.0), BUTTON_ENGAGE, stamp_s=now - 0.020)
        device.read()
        shared.write((0.01, 0.02, 0.0), BUTTON_ENGAGE, stamp_s=now - 0.004)
        state = device.read()
        expected_v = np.array([0.01, 0.02, 0.0]) / 0.016
        np.testing.assert_allclose(state.velocity_m_s, expected_v, rtol=1e-9)
        # Dead reckoning: newest sample + v * lead, 0.004 s <= lead <= one interval (0.016 s).
        lead = (state.position_m[:2] - [0.01, 0.02]) / expected_v[:2]
        assert lead[0] == pytest.approx(lead[1])
        assert 0.004 <= lead[0] <= 0.016 + 1e-9
        assert state.position_m[2] == 0.0
        assert state.buttons == BUTTON_ENGAGE


def test_stale_pointer_stops_and_holds(shared: SharedInput) -> None:
    with SharedInputDevice(shared.name, stale_after_s=0.0) as device:
        shared.write((0.0, 0.0, 0.0), 0)
        device.read()
        shared.write((0.03, 0.0, 0.0), 0)
        state = device.read()
        np.testing.assert_array_equal(state.position_m, [0.03, 0.0, 0.0])
        np.testing.assert_array_equal(state.velocity_m_s, [0.0, 0.0, 0.0])


def test_forces_pass_the_safety_layer(shared: SharedInput) -> None:
    with SharedInputDevice(shared.name) as device:
        shared.write((0.0, 0.0, 0.0), 0)  # not engaged: no force at all
        device.read()
        out = device.command_force(np.array([2.0, 0.0, 0.0]))
        np.testing.assert_array_equal(out, 0.0)
        shared.write((0.0, 0.0, 0.0), BUTTON_ENGAGE)
        for command in ([50.0, 50.0, 50.0], [np.nan, 1.0, 0.0], [np.inf, 0.0, 0.0]) * 50:
            device.read()
            out = device.command_force(np.array(command))
            assert np.all(np.isfinite(out))
            assert np.linalg.norm(out) <= POINTER_SPEC.max_force_n + 1e-9
        np.testing.assert_array_equal(device.last_force_n, out)


def test_missing_block_is_a_clear_error() -> None:
    with pytest.raises(DeviceError, match="needs its window"):
        SharedInputDevice("psm_capture_trainer_missing")


def test_the_mouse_backend_with_an_input_name_is_the_shared_input(shared: SharedInput, monkeypatch) -> None:
    # the servo process has no display of its own: the window's probe does not apply
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    with open_device("mouse", input_name=shared.name, stale_after_s=0.5) as device:
        assert isinstance(device, SharedInputDevice)
        assert device.input_name == shared.name and device.stale_after_s == 0.5
        shared.write((0.01, 0.0, 0.0), BUTTON_ENGAGE)
        np.testing.assert_allclose(device.read().position_m, [0.01, 0.0, 0.0], atol=1e-3)
    with pytest.raises(DeviceError, match="needs its window"):
        open_device("mouse", input_name="psm_capture_trainer_missing")
    with pytest.raises(DeviceError, match="SDL_VIDEODRIVER=dummy"):
        open_device("mouse")  # without the name it is the window's own pointer
