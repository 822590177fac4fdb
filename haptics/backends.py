"""Registry of haptic device backends: name -> factory, with availability probing.

The names are :data:`BACKENDS`' (their one list). Every factory imports its
backend module lazily, so importing this module needs neither pygame nor libHD.

    open_device("simulated", operator=...)   # keyword arguments go to the backend
    open_device("mouse", input_name=...)      # the pointer of another process's window
    probe("openhaptics")                      # -> (False, "libHD.so could not be loaded ...")
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from capture_trainer.errors import DeviceError
from capture_trainer.registry import Registry
from haptics.device import Device


@dataclass(frozen=True)
class Variant:
    """A second class of a backend, chosen by a keyword argument of ``open_device``.

    Its input lives in another process (e.g. the pointer of the trainer window), which
    the backend's probe cannot see from here: the class itself raises ``DeviceError``
    when that input is missing.

    Attributes:
        option: the keyword argument that selects this class (passed on to it too).
        module: the module holding the class (imported only when used).
        class_name: the class; ``class_name(**kwargs)`` builds a device.
    """

    option: str
    module: str
    class_name: str


@dataclass(frozen=True)
class Backend:
    """One device backend.

    Attributes:
        name: registry name (``--device NAME``).
        summary: one line for ``capture-trainer devices``.
        module: the module holding the backend class (imported only when used).
        class_name: the backend class; ``class_name(**kwargs)`` builds a device.
        probe: ``() -> (available, reason)``; cheap, never raises.
        variants: other classes of this backend, each chosen by a keyword argument.
    """

    name: str
    summary: str
    module: str
    class_name: str
    probe: Callable[[], tuple[bool, str]]
    variants: tuple[Variant, ...] = ()

    def variant_for(self, kwargs: Mapping[str, object]) -> Variant | None:
        """The variant whose option is among ``kwargs``, or None for the backend's class."""
        return next((variant for variant in self.variants if variant.option in kwargs), None)

    def factory(self, **kwargs: object) -> Device:
        """Build the device (``module.class_name(**kwargs)``, or the selected variant's)."""
        variant = self.variant_for(kwargs)
        source: Backend | Variant = self if variant is None else variant
        cls = getattr(importlib.import_module(source.module), source.class_name)
        device: Device = cls(**kwargs)
        return device


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


BACKENDS: Registry[Backend] = Registry("device backend", error=DeviceError)
for _backend in (
    Backend("simulated", "simulated device and participant (headless, any speed)",
            "haptics.simulated", "SimulatedDevice", _probe_simulated),
    Backend("openhaptics", "3D Systems Touch / Touch X through OpenHaptics (libHD), 1 kHz",
            "haptics.openhaptics", "OpenHapticsDevice", _probe_openhaptics),
    Backend("mouse", "mouse and keyboard stand-in in a pygame window (no force output)",
            "haptics.mouse", "MouseDevice", _probe_mouse,
            variants=(Variant("input_name", "haptics.shared_input", "SharedInputDevice"),)),
):
    BACKENDS.register(_backend.name, _backend)


def backend_names() -> tuple[str, ...]:
    """The registered backend names, in registration order."""
    return tuple(BACKENDS)


def _lookup(name: str) -> Backend:
    return BACKENDS.get(name)  # DeviceError with a did-you-mean for an unknown name


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

    A keyword argument naming a variant's option builds that variant instead:
    ``open_device("mouse", input_name=block_name)`` is the
    :class:`haptics.shared_input.SharedInputDevice` reading the window's pointer.

    Raises:
        DeviceError: unknown name (with a did-you-mean), the backend is unavailable
            (with why and which backends work now), or a variant's input is missing.
    """
    backend = _lookup(name)
    if name == "openhaptics" or backend.variant_for(kwargs) is not None:
        # their own errors already say what is missing (libHD; the window's input)
        return backend.factory(**kwargs)
    ok, why = backend.probe()
    if not ok:
        raise DeviceError(f"device backend {name!r} is not available: {why}. {available_summary(exclude=(name,))}")
    return backend.factory(**kwargs)
