"""Registry of haptic device backends: name -> factory, with availability probing.

The names are ``capture_trainer.catalog.DEVICE_BACKENDS``. Every factory imports its
backend module lazily, so importing this module needs neither pygame nor libHD.

    open_device("simulated", operator=...)   # keyword arguments go to the backend
    probe("openhaptics")                      # -> (False, "libHD.so could not be loaded ...")
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass

from capture_trainer.catalog import DEVICE_BACKENDS
from capture_trainer.errors import DeviceError
from haptics.device import Device


@dataclass(frozen=True)
class Backend:
    """One device backend.

    Attributes:
        name: registry name (``--device NAME``).
        summary: one line for ``capture-trainer devices``.
        module: the module holding the backend class (imported only when used).
        class_name: the backend class; ``class_name(**kwargs)`` builds a device.
        probe: ``() -> (available, reason)``; cheap, never raises.
    """

    name: str
    summary: str
    module: str
    class_name: str
    probe: Callable[[], tuple[bool, str]]

    def factory(self, **kwargs: object) -> Device:
        """Build the device (``module.class_name(**kwargs)``)."""
        cls = getattr(importlib.import_module(self.module), self.class_name)
        return cls(**kwargs)


def _module_present(module: str) -> tuple[bool, str]:
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    return found, "" if found else f"the module {module} is missing from this installation"


def _probe_simulated() -> tuple[bool, str]:
    ok, why = _module_present("haptics.simulated")
    return (True, "simulated Touch-like device (eq. 8), needs no hardware") if ok else (False, why)


def _probe_mouse() -> tuple[bool, str]:
    ok, why = _module_present("pygame")
    if not ok:
        return False, why
    driver = os.environ.get("SDL_VIDEODRIVER", "")
    if driver in ("dummy", "offscreen"):
        return False, f"SDL_VIDEODRIVER={driver}: no display to open the pointer window on"
    if not (driver or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False, "no display (DISPLAY and WAYLAND_DISPLAY are unset); the mouse stand-in needs a window"
    ok, why = _module_present("haptics.mouse")
    if not ok:
        return False, why
    return True, "pygame window on this display; forces are drawn, not felt"


def _probe_openhaptics() -> tuple[bool, str]:
    """Load libHD and initialise (then release) the default device."""
    try:
        from haptics._hd_api import HD_INVALID_HANDLE, load_api

        api = load_api()
        api.drain_errors(0.0)
        handle = api.hdInitDevice(None)
        errors = api.drain_errors(0.0)
        if handle == HD_INVALID_HANDLE or errors:
            if handle != HD_INVALID_HANDLE:
                api.hdDisableDevice(handle)
                api.drain_errors(0.0)
            why = "; ".join(map(str, errors)) or "no handle returned"
            return False, (
                f"libHD loaded from {api.path} but no device initialised ({why}); connect the "
                "Touch and install its driver (TouchDriver, check with Touch_Diagnostic)"
            )
        model = api.hdGetString(api.define.HD_DEVICE_MODEL_TYPE) or b"?"
        vendor = api.hdGetString(api.define.HD_DEVICE_VENDOR) or b"?"
        api.hdDisableDevice(handle)
        api.drain_errors(0.0)
        return True, f"{vendor.decode(errors='replace')} {model.decode(errors='replace')} via {api.path}"
    except DeviceError as error:
        return False, str(error)
    except Exception as error:  # noqa: BLE001 - a probe reports, it never raises
        return False, f"probing OpenHaptics failed: {error!r}"


BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend("simulated", "simulated device and participant (headless, any speed)",
                "haptics.simulated", "SimulatedDevice", _probe_simulated),
        Backend("openhaptics", "3D Systems Touch / Touch X through OpenHaptics (libHD), 1 kHz",
                "haptics.openhaptics", "OpenHapticsDevice", _probe_openhaptics),
        Backend("mouse", "mouse and keyboard stand-in in a pygame window (no force output)",
                "haptics.mouse", "MouseDevice", _probe_mouse),
    )
}
if tuple(BACKENDS) != DEVICE_BACKENDS:
    raise RuntimeError("haptics.backends must register exactly capture_trainer.catalog.DEVICE_BACKENDS")


def backend_names() -> tuple[str, ...]:
    """The registered backend names, in catalog order."""
    return tuple(BACKENDS)


def _lookup(name: str) -> Backend:
    backend = BACKENDS.get(name)
    if backend is None:
        close = difflib.get_close_matches(name, BACKENDS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise DeviceError(f"unknown device backend {name!r} (choose from {', '.join(BACKENDS)}){hint}")
    return backend


def probe(name: str) -> tuple[bool, str]:
    """Whether backend ``name`` can be used here, and why (or why not).

    Raises:
        DeviceError: ``name`` is not a registered backend.
    """
    return _lookup(name).probe()


def available_summary(exclude: tuple[str, ...] = ()) -> str:
    """One sentence naming the backends that work here now (probing each)."""
    names = [name for name in BACKENDS if name not in exclude and BACKENDS[name].probe()[0]]
    if not names:
        return "No other backend is available here."
    return f"Backends available now: {', '.join(names)} (capture-trainer devices)."


def open_device(name: str, **kwargs: object) -> Device:
    """Build the device of backend ``name``; keyword arguments go to its class.

    Raises:
        DeviceError: unknown name (with a did-you-mean), or the backend is unavailable
            (with why and which backends work now).
    """
    backend = _lookup(name)
    if name == "openhaptics":
        return backend.factory(**kwargs)  # its own errors already say what to install
    ok, why = backend.probe()
    if not ok:
        raise DeviceError(f"device backend {name!r} is not available: {why}. {available_summary(exclude=(name,))}")
    return backend.factory(**kwargs)
