"""Mouse-and-keyboard stand-in for a haptic device (pygame). Forces are drawn, not felt.

The pointer over the window moves the stylus in the device's x-y plane (the window spans
the usable workspace: x right, y up, like a Touch seen from the front); the mouse wheel
or W/S (and the up/down arrows) move it in depth z; the engage button (bit 0) is on at
start and Space toggles it (released = clutched, like the stylus' first button); the
right mouse button is the trainer button (bit 1). A commanded force still passes
through the safety layer, and what it would have actuated is kept in ``last_force_n``
for the window to draw.

pygame is imported in the constructor only. The device reads the pointer through
pygame's event queue, so it must run in the thread that owns the window (a paced
clock in the main thread). When the window belongs to another process (the trainer
window, whose servo loop runs in a child process), the same ``mouse`` backend reads the
pointer from shared memory instead: ``open_device("mouse", input_name=...)`` builds a
:class:`haptics.shared_input.SharedInputDevice`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import DeviceError
from haptics.device import BUTTON_ENGAGE, BUTTON_TRAINER, DeviceSpec, DeviceState
from haptics.safety import SafetyConfig, SafetyLayer
from haptics.simulated import TOUCH_LIKE_SPEC

#: The mouse stand-in: a Touch's workspace and limits (the forces are only drawn).
MOUSE_SPEC: DeviceSpec = replace(
    TOUCH_LIKE_SPEC, name="mouse", model="pointer", vendor="pygame", input_dof=3, output_dof=0
)

#: Depth moved per mouse-wheel notch [m].
WHEEL_STEP_M = 0.005
#: Depth speed while W/S or an arrow key is held [m/s].
DEPTH_SPEED_M_S = 0.05
#: Time constant of the velocity estimate's low-pass filter [s].
VELOCITY_TAU_S = 0.02


class MouseDevice:
    """A ``haptics.device.Device`` whose stylus is the pygame pointer.

    Args:
        spec: workspace and limits (default ``MOUSE_SPEC``).
        window_size_px: size of the window opened when none exists yet.
        safety_config: safety layer tuning; the engage button starts on, so forces
            are computed (and drawn) from the start.
        clock: time source [s] (``time.perf_counter`` by default; tests inject one).

    Raises:
        DeviceError: pygame cannot open a window here (no display).
    """

    def __init__(
        self,
        spec: DeviceSpec = MOUSE_SPEC,
        window_size_px: tuple[int, int] = (800, 600),
        safety_config: SafetyConfig | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        try:
            import pygame
        except ImportError as error:  # pragma: no cover - pygame is a dependency
            raise DeviceError("the mouse device needs pygame (pip install pygame)") from error
        self._pg = pygame
        try:
            pygame.display.init()
            surface = pygame.display.get_surface()
            if surface is None:
                surface = pygame.display.set_mode(window_size_px)
                pygame.display.set_caption("capture-trainer: mouse stand-in")
        except pygame.error as error:
            raise DeviceError(
                f"the mouse device cannot open a window here ({error}); it needs a display "
                "(set DISPLAY, or use --device simulated)"
            ) from error
        self.spec = spec
        self.safety = SafetyLayer(spec, safety_config)
        self._clock = clock
        self._t0_s = clock()
        self._size_px = surface.get_size()
        lo = np.array(spec.workspace_min_m, dtype=float)
        hi = np.array(spec.workspace_max_m, dtype=float)
        self._lo = lo.tolist()
        self._hi = hi.tolist()
        self.state = DeviceState()
        self.last_force_n: NDArray[np.float64] = self.safety.force_n
        self._pointer_px = (self._size_px[0] / 2.0, self._size_px[1] / 2.0)
        self._depth_m = 0.5 * (self._lo[2] + self._hi[2])
        self._depth_dir = 0
        self._engaged = True
        self._trainer = False
        self._last_t_s = math.nan
        self.state.buttons = BUTTON_ENGAGE
        self.safety.set_engaged(True)

    def __enter__(self) -> MouseDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.safety.ramp_to_zero(self._now())

    def clock(self) -> None:
        """None: the caller's clock drives this device (a paced clock in the window's thread)."""
        return None

    def _now(self) -> float:
        return self._clock() - self._t0_s

    def _handle_events(self) -> None:
        pg = self._pg
        for event in pg.event.get((pg.MOUSEMOTION, pg.MOUSEBUTTONDOWN, pg.MOUSEBUTTONUP,
                                   pg.MOUSEWHEEL, pg.KEYDOWN, pg.KEYUP)):
            if event.type == pg.MOUSEMOTION:
                self._pointer_px = (float(event.pos[0]), float(event.pos[1]))
            elif event.type == pg.MOUSEWHEEL:
                self._depth_m += WHEEL_STEP_M * event.y
            elif event.type in (pg.MOUSEBUTTONDOWN, pg.MOUSEBUTTONUP) and event.button == 3:
                self._trainer = event.type == pg.MOUSEBUTTONDOWN
            elif event.type == pg.KEYDOWN:
                if event.key == pg.K_SPACE:
                    self._engaged = not self._engaged
                elif event.key in (pg.K_w, pg.K_UP):
                    self._depth_dir = 1
                elif event.key in (pg.K_s, pg.K_DOWN):
                    self._depth_dir = -1
            elif event.type == pg.KEYUP and event.key in (pg.K_w, pg.K_UP, pg.K_s, pg.K_DOWN):
                self._depth_dir = 0

    def read(self) -> DeviceState:
        """Pointer to stylus pose [m, m/s], device frame; the state object is reused."""
        t = self._now()
        last = self._last_t_s
        dt = 0.0 if last != last else t - last
        self._last_t_s = t
        self._handle_events()
        lo, hi = self._lo, self._hi
        self._depth_m = min(hi[2], max(lo[2], self._depth_m + self._depth_dir * DEPTH_SPEED_M_S * dt))
        w, h = self._size_px
        px, py = self._pointer_px
        # Screen y grows downward; device y grows upward.
        new = (
            lo[0] + (hi[0] - lo[0]) * min(1.0, max(0.0, px / w)),
            hi[1] - (hi[1] - lo[1]) * min(1.0, max(0.0, py / h)),
            self._depth_m,
        )
        st = self.state
        pos, vel = st.position_m, st.velocity_m_s
        if dt > 0.0:
            a = dt / (VELOCITY_TAU_S + dt)
            for k in range(3):
                vel[k] += a * ((new[k] - float(pos[k])) / dt - float(vel[k]))
        for k in range(3):
            pos[k] = new[k]
        st.t_s = t
        st.buttons = (BUTTON_ENGAGE if self._engaged else 0) | (BUTTON_TRAINER if self._trainer else 0)
        self.safety.set_engaged(self._engaged)
        self.safety.heartbeat(t)
        return st

    def command_force(self, force_n: NDArray[np.float64]) -> NDArray[np.float64]:
        """Pass ``force_n`` (3,) [N], device frame, through the safety layer; keep it to draw."""
        self.last_force_n = self.safety.filter(self._now(), force_n)
        return self.last_force_n
