"""The mouse stand-in under SDL's dummy video driver, driven by synthetic pygame events."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
import pygame  # noqa: E402

from haptics.device import BUTTON_ENGAGE, BUTTON_TRAINER, Device  # noqa: E402
from haptics.mouse import DEPTH_SPEED_M_S, MOUSE_SPEC, WHEEL_STEP_M, MouseDevice  # noqa: E402


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def device():  # type: ignore[no-untyped-def]
    pygame.display.init()
    pygame.display.set_mode((400, 300))
    pygame.event.clear()
    clock = FakeClock()
    dev = MouseDevice(clock=clock)
    dev.clock_for_test = clock  # type: ignore[attr-defined]
    yield dev
    pygame.display.quit()


def post(kind: int, **attrs: object) -> None:
    pygame.event.post(pygame.event.Event(kind, **attrs))


def test_pointer_spans_the_workspace_with_y_up(device: MouseDevice) -> None:
    assert isinstance(device, Device)
    lo, hi = np.array(MOUSE_SPEC.workspace_min_m), np.array(MOUSE_SPEC.workspace_max_m)
    post(pygame.MOUSEMOTION, pos=(0, 0), rel=(0, 0), buttons=(0, 0, 0))
    state = device.read()
    assert np.allclose(state.position_m[:2], [lo[0], hi[1]])  # top-left of the window
    post(pygame.MOUSEMOTION, pos=(400, 300), rel=(0, 0), buttons=(0, 0, 0))
    assert np.allclose(device.read().position_m[:2], [hi[0], lo[1]])
    post(pygame.MOUSEMOTION, pos=(100, 150), rel=(0, 0), buttons=(0, 0, 0))
    assert np.allclose(device.read().position_m[:2], [lo[0] + 0.25 * (hi[0] - lo[0]), 0.5 * (lo[1] + hi[1])])


def test_keys_and_wheel_move_in_depth_and_velocity_follows(device: MouseDevice) -> None:
    clock = device.clock_for_test  # type: ignore[attr-defined]
    z0 = device.read().position_m[2]
    post(pygame.MOUSEWHEEL, x=0, y=2)
    assert device.read().position_m[2] == pytest.approx(z0 + 2 * WHEEL_STEP_M)
    post(pygame.KEYDOWN, key=pygame.K_w, mod=0, unicode="w", scancode=0)
    device.read()
    for _ in range(100):
        clock.t += 1e-3
        state = device.read()
    assert state.position_m[2] == pytest.approx(z0 + 2 * WHEEL_STEP_M + 100e-3 * DEPTH_SPEED_M_S)
    assert state.velocity_m_s[2] == pytest.approx(DEPTH_SPEED_M_S, rel=0.01)
    post(pygame.KEYUP, key=pygame.K_w, mod=0, unicode="w", scancode=0)
    clock.t += 1e-3
    z = device.read().position_m[2]
    clock.t += 0.1
    assert device.read().position_m[2] == pytest.approx(z)
    for _ in range(20):
        post(pygame.MOUSEWHEEL, x=0, y=5)
    assert device.read().position_m[2] == pytest.approx(MOUSE_SPEC.workspace_max_m[2])


def test_buttons_engage_and_forces_are_kept_for_drawing(device: MouseDevice) -> None:
    clock = device.clock_for_test  # type: ignore[attr-defined]
    state = device.read()
    assert state.buttons == BUTTON_ENGAGE
    post(pygame.MOUSEBUTTONDOWN, pos=(10, 10), button=3)
    assert device.read().buttons == BUTTON_ENGAGE | BUTTON_TRAINER
    post(pygame.MOUSEBUTTONUP, pos=(10, 10), button=3)
    assert device.read().buttons == BUTTON_ENGAGE
    f = np.array([10.0, 0.0, np.nan])
    for _ in range(400):
        clock.t += 1e-3
        device.read()
        out = device.command_force(f)
    assert device.last_force_n is out
    assert np.all(np.isfinite(out)) and np.linalg.norm(out) <= MOUSE_SPEC.max_force_n + 1e-12
    f = np.array([1.0, 0.0, 0.0])
    for _ in range(400):
        clock.t += 1e-3
        device.read()
        out = device.command_force(f)
    assert np.allclose(out, f)
    post(pygame.KEYDOWN, key=pygame.K_SPACE, mod=0, unicode=" ", scancode=0)  # release
    for _ in range(100):
        clock.t += 1e-3
        state = device.read()
        out = device.command_force(f)
    assert state.buttons == 0 and np.all(out == 0.0)
