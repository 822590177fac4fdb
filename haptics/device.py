"""The device seam: what every haptic backend (real Touch, simulated, mouse) provides.

Sign convention: a commanded force is the force the device applies **to the stylus**
(and so to the hand), in newtons, device frame; OpenHaptics' ``HD_CURRENT_FORCE`` uses
the same convention. Positions are metres and velocities metres per second in the device
frame (x right, y up, z toward the user for a Touch); backends convert at their edge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from haptics.safety import SafetyLayer
from haptics.spec import DeviceSpec

__all__ = ["BUTTON_ENGAGE", "BUTTON_TRAINER", "Device", "DeviceSpec", "DeviceState", "ServoClock",
           "SimulatedHand", "Tick"]


@dataclass
class DeviceState:
    """One reading of the stylus. Backends may reuse one instance and refill it each tick.

    Attributes:
        t_s: time of the reading [s] (the backend's clock).
        position_m: (3,) stylus tip position [m], device frame.
        velocity_m_s: (3,) stylus tip velocity [m/s], device frame.
        buttons: bit mask; bit 0 = engage/clutch button, bit 1 = trainer button.
    """

    t_s: float = 0.0
    position_m: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    velocity_m_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    buttons: int = 0


BUTTON_ENGAGE = 1 << 0
BUTTON_TRAINER = 1 << 1


@runtime_checkable
class Device(Protocol):
    """A haptic device: everything the servo tick may use of one. Open/close with ``with device:``.

    Attributes:
        spec: the device's capabilities and limits.
        safety: the device's ``SafetyLayer``, the one limiter every command passes
            through. The tick reads its plain bool flags ``engaged``, ``saturated``,
            ``fault`` and ``watchdog`` after ``command_force``.

    ``read()`` returns the stylus state of this period (the device may reuse one
    instance). ``command_force(f)`` passes ``f`` ((3,) N, on the stylus, device frame:
    the calculated force) through ``safety`` and returns the force actually sent (the
    actuated force), a (3,) array owned by the device and valid until the next call.
    ``clock()`` is the ``ServoClock`` that must drive the tick when the device owns its
    servo timing (OpenHaptics: its scheduler), or None when any clock may (simulated,
    mouse).
    """

    spec: DeviceSpec
    safety: SafetyLayer

    def __enter__(self) -> Device: ...

    def __exit__(self, *exc: object) -> None: ...

    def read(self) -> DeviceState: ...

    def command_force(self, force_n: NDArray[np.float64]) -> NDArray[np.float64]: ...

    def clock(self) -> ServoClock | None: ...


@runtime_checkable
class SimulatedHand(Protocol):
    """The optional ability of a device held by a simulated hand (``SimulatedDevice``).

    A trial holds it as an explicit optional part: it maps ``hand_force_n`` to the task
    frame for the guidance law and shows the hand the scene with ``perceive`` once per
    tick, after ``command_force``.
    """

    @property
    def hand_force_n(self) -> NDArray[np.float64]:
        """(3,) the hand's force on the stylus over the last period [N], device frame."""
        ...

    def perceive(
        self,
        t_s: float,
        target_position_dev_m: NDArray[np.float64],
        target_velocity_dev_m_s: NDArray[np.float64],
        ee_position_dev_m: NDArray[np.float64],
        ee_velocity_dev_m_s: NDArray[np.float64],
    ) -> None:
        """Show the hand the target and the end effector at ``t_s`` [s] (device frame, m and m/s)."""
        ...


#: A servo tick: called once per period; returns False to stop the loop.
Tick = Callable[[], bool]


@runtime_checkable
class BatchTick(Protocol):
    """A tick a free-running clock may ask for several periods in one call (headless:
    no period waits for the wall clock, so back-to-back periods need not return between
    them; ``trials.tick.ServoTick``)."""

    def __call__(self) -> bool:
        """Run one period (:data:`Tick`)."""
        ...

    def run_ticks(self, most: int) -> tuple[bool, int]:
        """Run between one and ``most`` periods; returns whether the trial goes on and how
        many periods ran (0 once it is over)."""
        ...


class ServoClock(Protocol):
    """Whoever calls the tick: a device's own scheduler, a paced or a free-running loop."""

    def run(self, tick: Tick, max_ticks: int) -> None:
        """Call ``tick`` until it returns False or ``max_ticks`` ticks have run.

        Exceptions raised by the tick are re-raised here after the force was zeroed.
        """
        ...
