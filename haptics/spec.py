"""What a device can do: ``DeviceSpec``, plain data (re-exported by ``haptics.device``).

Its own module so that the safety layer, which limits forces to a spec, and the device
seam, which holds a safety layer, do not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass


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
        max_stiffness_n_m: the stiffness the device renders passively at most [N/m]
            (device frame; a Touch's datasheet figure on its softest axis, 1.02 N/mm,
            unless the device says otherwise): what a virtual coupling may ask of it.
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
    max_stiffness_n_m: float = 1020.0

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
            "max_stiffness_n_m": self.max_stiffness_n_m,
        }
