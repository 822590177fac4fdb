"""Names that several packages must agree on, without importing each other."""

from __future__ import annotations

#: Manipulator models (robot.models registers exactly these).
MODEL_NAMES: tuple[str, ...] = ("planar-3r", "spatial-7dof")
#: Experimental conditions: dynamic guidance, no guidance, potential field, automatic.
CONDITIONS: tuple[str, ...] = ("dg", "ng", "apf", "as")
#: Built-in simulated participant kinds (haptics.operators registers these).
PARTICIPANT_KINDS: tuple[str, ...] = ("novice", "expert", "passive")
#: Device backends (haptics.backends registers these).
DEVICE_BACKENDS: tuple[str, ...] = ("simulated", "openhaptics", "mouse")
