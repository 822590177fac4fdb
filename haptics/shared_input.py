"""Pointer input from the window process to a device in the servo process.

pygame must own the window (and so the mouse) in the display process, while the servo
tick that reads the device runs in another process. The display writes the stylus
position it derives from the pointer (metres, device frame) and the button mask into a
small shared block (a seqlock, like the trial's snapshot block); :class:`SharedInputDevice`
reads it in the servo process and implements :class:`haptics.device.Device`. It is the
``mouse`` backend's device when the pointer comes from another process:
``haptics.backends.open_device("mouse", input_name=block.name)``.

The window writes at display rate (about 60 Hz), the servo reads at 1 kHz. To give the
arm a smooth 1 kHz command rather than a 60 Hz staircase, the device estimates the
stylus velocity from the last two distinct samples and extrapolates the position from
the newest sample by at most one sample interval (dead reckoning, about one frame of
lag). When the window stops writing for longer than ``stale_after_s`` the velocity is
zeroed and the device stops beating the safety layer's heartbeat, so the watchdog
ramps the (drawn) force to zero.

Like the mouse stand-in it has no force output: a commanded force still passes through
:class:`haptics.safety.SafetyLayer` with a Touch's limits, so the force the window draws
is the one a real device would have received.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from multiprocessing import shared_memory
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import DeviceError
from haptics.device import BUTTON_ENGAGE, DeviceSpec, DeviceState
from haptics.simulated import TOUCH_LIKE_SPEC

if TYPE_CHECKING:
    from haptics.safety import SafetyConfig

# Block layout (float64): sequence, writer's monotonic stamp [s], position (3) [m], buttons.
_SEQ, _STAMP, _POS, _BUTTONS = 0, 1, slice(2, 5), 5
_SIZE = 6

#: A Touch's workspace and force limits without force output: the window maps the
#: pointer into this box and draws the force a Touch would have rendered.
POINTER_SPEC = replace(
    TOUCH_LIKE_SPEC, name="mouse", model="pointer (shared input)", vendor="pygame",
    input_dof=3, output_dof=0,
)


class SharedInput:
    """The shared block; create it in the window process, attach by name in the servo.

    Args:
        name: attach to an existing block; None creates one (the creator frees it).
    """

    def __init__(self, name: str | None = None) -> None:
        self._owner = name is None
        self._shm = shared_memory.SharedMemory(name=name, create=self._owner, size=_SIZE * 8)
        self.block: NDArray[np.float64] = np.ndarray((_SIZE,), np.float64, self._shm.buf)
        if self._owner:
            self.block[:] = 0.0
            self.block[_STAMP] = math.nan
        self._copy = np.zeros(_SIZE)

    @property
    def name(self) -> str:
        return self._shm.name

    def write(
        self, position_m: NDArray[np.float64] | tuple[float, float, float], buttons: int,
        stamp_s: float | None = None,
    ) -> None:
        """Publish one stylus sample (writer side).

        Args:
            position_m: (3,) stylus position [m], device frame.
            buttons: button mask (``haptics.device.BUTTON_*``).
            stamp_s: when the sample was taken, ``time.monotonic()`` seconds (default now;
                the same clock in every process of the machine).
        """
        seq = self.block[_SEQ] + 1.0
        self.block[_SEQ] = seq
        self.block[_POS] = position_m
        self.block[_BUTTONS] = float(buttons)
        self.block[_STAMP] = time.monotonic() if stamp_s is None else stamp_s
        self.block[_SEQ] = seq + 1.0

    def read(self, retries: int = 50) -> NDArray[np.float64] | None:
        """A consistent copy (reader side): [seq, stamp_s, x, y, z, buttons], or None."""
        block = self.block
        for _ in range(retries):
            before = block[_SEQ]
            if before % 2.0 == 1.0:
                continue
            self._copy[:] = block
            if block[_SEQ] == before:
                return self._copy
        return None

    def close(self) -> None:
        """Detach; the creating side also frees the block."""
        del self.block
        self._shm.close()
        if self._owner:
            self._shm.unlink()


class SharedInputDevice:
    """A :class:`haptics.device.Device` whose stylus is the window's pointer.

    The block is attached on construction (like the other backends, the device is open
    once built) and released by ``__exit__``.

    Args:
        input_name: name of the :class:`SharedInput` block the window writes.
        spec: workspace and force limits (default :data:`POINTER_SPEC`).
        stale_after_s: no new sample for this long counts as a lost window [s].
        safety_config: safety layer tuning (``SafetyConfig()`` when None), as for the
            other backends.

    Attributes:
        last_force_n: (3,) the force after the safety layer [N], device frame (drawn,
            never felt).
    """

    def __init__(
        self, input_name: str, spec: DeviceSpec = POINTER_SPEC, stale_after_s: float = 0.25,
        safety_config: SafetyConfig | None = None,
    ) -> None:
        from haptics.safety import SafetyLayer

        self.spec = spec
        self.input_name = input_name
        self.stale_after_s = float(stale_after_s)
        self.safety = SafetyLayer(spec, safety_config)
        self.last_force_n: NDArray[np.float64] = np.zeros(3)
        self._state = DeviceState()
        try:
            self._input: SharedInput | None = SharedInput(input_name)
        except FileNotFoundError:
            raise DeviceError(
                f"the window's pointer input {input_name!r} does not exist (the mouse device "
                "of the trainer needs its window: capture-trainer train --device mouse)"
            ) from None
        self._t0 = time.monotonic()
        self._seq = -1.0
        self._stamp = math.nan
        self._prev = np.zeros(3)
        self._prev_stamp = math.nan
        self._latest = np.zeros(3)
        self._velocity = np.zeros(3)
        self._interval_s = 0.0

    def __enter__(self) -> SharedInputDevice:
        return self

    def clock(self) -> None:
        """None: any clock may drive this device."""
        return None

    def __exit__(self, *exc: object) -> None:
        """Release the shared block (idempotent); the device cannot be read afterwards."""
        self.last_force_n[:] = 0.0
        if self._input is not None:
            self._input.close()
            self._input = None

    def read(self) -> DeviceState:
        """The stylus sample, extrapolated to now (see the module docstring)."""
        if self._input is None:
            raise DeviceError("SharedInputDevice.read() after the device was closed")
        now = time.monotonic()
        sample = self._input.read()
        state = self._state
        state.t_s = now - self._t0
        if sample is not None and sample[0] != self._seq and sample[1] == sample[1]:
            self._seq = sample[0]
            self._prev[:] = self._latest
            self._prev_stamp = self._stamp
            self._latest[:] = sample[2:5]
            self._stamp = sample[1]
            state.buttons = int(sample[5])
            dt = self._stamp - self._prev_stamp
            if dt > 1e-4:  # NaN (first sample) compares False
                self._interval_s = dt
                np.subtract(self._latest, self._prev, out=self._velocity)
                self._velocity /= dt
            else:
                self._velocity[:] = 0.0
        age = now - self._stamp
        if not age <= self.stale_after_s:  # also NaN: nothing written yet
            self._velocity[:] = 0.0
            state.position_m[:] = self._latest
            state.velocity_m_s[:] = 0.0
            return state
        lead = min(age, self._interval_s)
        state.position_m[0] = self._latest[0] + self._velocity[0] * lead
        state.position_m[1] = self._latest[1] + self._velocity[1] * lead
        state.position_m[2] = self._latest[2] + self._velocity[2] * lead
        state.velocity_m_s[:] = self._velocity
        self.safety.heartbeat(state.t_s)
        self.safety.set_engaged(bool(state.buttons & BUTTON_ENGAGE))
        return state

    def command_force(self, force_n: NDArray[np.float64]) -> NDArray[np.float64]:
        """Pass ``force_n`` [N] (device frame) through the safety layer; nothing is felt."""
        out = self.safety.filter(time.monotonic() - self._t0, force_n)
        self.last_force_n[:] = out
        return out
