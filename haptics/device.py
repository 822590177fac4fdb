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


@dataclass(frozen=True)
class DeviceSpec:
    """Capabilities of a device, read from the device where it can tell.

    Attributes:
        name: backend name (``openhaptics``, ``simulated``, ``mouse``).
        model: device model string (e.g. ``Touch``), vendor: its maker.
        workspace_min_m, workspace_max_m: usable workspace box corners [m], device frame.
        max_force_n: nominal peak force [N] (norm).
        continuous_force_n: force sustainable indefinitely [N] (norm, time-averaged).
        rate_hz: servo update rate [Hz].
        input_dof: degrees of freedom sensed; output_dof: degrees of freedom actuated.
        max_force_rate_n_s: largest allowed change of force per second [N/s].
    """

    name: str
    model: str
    vendor: str
    workspace_min_m: tuple[float, float, float]
    workspace_max_m: tuple[float, float, float]
    max_force_n: float
    continuous_force_n: float
    rate_hz: float = 1000.0
    input_dof: int = 6
    output_dof: int = 3
    max_force_rate_n_s: float = 1000.0

    def as_dict(self) -> dict[str, object]:
        """Plain-data form recorded with every trial."""
        return {
            "name": self.name,
            "model": self.model,
            "vendor": self.vendor,
            "workspace_min_m": list(self.workspace_min_m),
            "workspace_max_m": list(self.workspace_max_m),
            "max_force_n": self.max_force_n,
            "continuous_force_n": self.continuous_force_n,
            "rate_hz": self.rate_hz,
            "input_dof": self.input_dof,
            "output_dof": self.output_dof,
            "max_force_rate_n_s": self.max_force_rate_n_s,
        }


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
    """A haptic device. Open/close with ``with device:``.

    ``command_force`` applies the backend's safety layer (clamp, continuous limit, rate
    limit, non-finite guard, watchdog) and returns the force actually sent, a (3,) array
    in newtons, device frame, owned by the device and valid until the next call.
    """

    spec: DeviceSpec

    def __enter__(self) -> "Device": ...

    def __exit__(self, *exc: object) -> None: ...

    def read(self) -> DeviceState: ...

    def command_force(self, force_n: NDArray[np.float64]) -> NDArray[np.float64]: ...


#: A servo tick: called once per period; returns False to stop the loop.
Tick = Callable[[], bool]


class ServoClock(Protocol):
    """Whoever calls the tick: a device's own scheduler, a paced or a free-running loop."""

    def run(self, tick: Tick, max_ticks: int) -> None:
        """Call ``tick`` until it returns False or ``max_ticks`` ticks have run.

        Exceptions raised by the tick are re-raised here after the force was zeroed.
        """
        ...
