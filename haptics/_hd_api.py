"""The HD API (OpenHaptics ``libHD``) as this project uses it: loading, prototypes, codes.

pyOpenHaptics 1.0.1 loads ``libHD.so`` at import time and gives the ctypes handle
(``pyOpenHaptics.hd._lib_hd``) and the HD types and parameter enums
(``pyOpenHaptics.hd_define``). Its high-level wrapper is not used (see
``docs/haptics.md``): this module binds its own prototypes on fresh function
objects of that handle (``lib["name"]`` is not the cached attribute pyOpenHaptics
re-types on every call), with the return types of the real ``hd.h`` (the scheduler
handle kept), and carries the error codes of the real ``hdDefines.h`` (pyOpenHaptics'
table has ``HD_INVALID_OPERATION`` wrong and misses several codes).

``CAPTURE_TRAINER_LIBHD=/path/to/libHD.so`` is pre-loaded (``RTLD_GLOBAL``) before
pyOpenHaptics is imported; its ``CDLL("libHD.so")`` then resolves, by soname, to the
already-loaded library.
"""

from __future__ import annotations

import ctypes
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from capture_trainer.errors import DeviceError

#: Environment variable naming the libHD.so to use instead of the system one.
LIBHD_ENV = "CAPTURE_TRAINER_LIBHD"

INSTALL_HINT = (
    "install 3D Systems OpenHaptics for Linux (it provides libHD.so, e.g. in /usr/lib) and "
    "the Touch device driver (TouchDriver; pair and check the device with Touch_Setup and "
    "Touch_Diagnostic), or set CAPTURE_TRAINER_LIBHD=/path/to/libHD.so"
)

# Error codes of the real hdDefines.h (OpenHaptics 3.x).
HD_SUCCESS = 0x0000
HD_INVALID_ENUM = 0x0100
HD_INVALID_VALUE = 0x0101
HD_INVALID_OPERATION = 0x0102
HD_INVALID_INPUT_TYPE = 0x0103
HD_BAD_HANDLE = 0x0104
HD_WARM_MOTORS = 0x0200
HD_EXCEEDED_MAX_FORCE = 0x0201
HD_EXCEEDED_MAX_FORCE_IMPULSE = 0x0202
HD_EXCEEDED_MAX_VELOCITY = 0x0203
HD_FORCE_ERROR = 0x0204
HD_DEVICE_FAULT = 0x0300
HD_DEVICE_ALREADY_INITIATED = 0x0301
HD_COMM_ERROR = 0x0302
HD_COMM_CONFIG_ERROR = 0x0303
HD_TIMER_ERROR = 0x0304
HD_ILLEGAL_BEGIN = 0x0400
HD_ILLEGAL_END = 0x0401
HD_FRAME_ERROR = 0x0402
HD_INVALID_PRIORITY = 0x0500
HD_SCHEDULER_FULL = 0x0501
HD_INVALID_LICENSE = 0x0600

ERROR_NAMES: dict[int, str] = {
    value: name
    for name, value in dict(globals()).items()
    if name.startswith("HD_") and isinstance(value, int)
}

#: What to tell the person for errors that have a known cause.
ERROR_ADVICE: dict[int, str] = {
    HD_WARM_MOTORS: "the motors are warm; let the device cool down before continuing",
    HD_EXCEEDED_MAX_FORCE: "a force above the device's peak reached the driver",
    HD_EXCEEDED_MAX_VELOCITY: "the stylus moved faster than the driver's velocity limit",
    HD_DEVICE_FAULT: "the device reported a fault; check its cable and power",
    HD_COMM_ERROR: "communication with the device was lost; check its cable",
    HD_INVALID_LICENSE: "the OpenHaptics licence is not valid",
}

HD_INVALID_HANDLE = 0xFFFFFFFF
HD_CALLBACK_DONE = 0
HD_CALLBACK_CONTINUE = 1
HD_WAIT_CHECK_STATUS = 0
HD_WAIT_INFINITE = 1
HD_MAX_SCHEDULER_PRIORITY = 0xFFFF

#: ``HDCallbackCode (*)(void *pUserData)``.
SCHEDULER_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_void_p)


class HDErrorInfo(ctypes.Structure):
    """``HDErrorInfo`` of hd.h: error code, driver-internal code, device handle."""

    _fields_ = [("errorCode", ctypes.c_uint), ("internalErrorCode", ctypes.c_int), ("hHD", ctypes.c_uint)]


def error_text(code: int, internal: int = 0) -> str:
    """``NAME (0x0NNN, internal N): advice`` for an HD error code."""
    name = ERROR_NAMES.get(code, "unknown HD error")
    advice = ERROR_ADVICE.get(code)
    text = f"{name} (0x{code:04x}, internal {internal})"
    return f"{text}: {advice}" if advice else text


@dataclass(frozen=True)
class HDError:
    """One error read from the HD error stack.

    Attributes:
        code: the ``HDerror`` code (real hdDefines.h values).
        internal: the driver's internal error code.
        t_s: when it was read [s] (the backend's clock).
    """

    code: int
    internal: int
    t_s: float

    def __str__(self) -> str:
        return error_text(self.code, self.internal)


class HDApi:
    """Typed entry points of one loaded libHD (the subset this project calls).

    Args:
        lib: the ctypes handle of libHD (pyOpenHaptics' ``_lib_hd``).
        path: where it came from, for messages.
        hd_define: pyOpenHaptics' ``hd_define`` module (parameter enums and types).

    Raises:
        DeviceError: a required entry point is missing from the library.
    """

    _REQUIRED: dict[str, tuple[Any, tuple[Any, ...]]] = {
        "hdInitDevice": (ctypes.c_uint, (ctypes.c_char_p,)),
        "hdDisableDevice": (None, (ctypes.c_uint,)),
        "hdGetCurrentDevice": (ctypes.c_uint, ()),
        "hdMakeCurrentDevice": (None, (ctypes.c_uint,)),
        "hdEnable": (None, (ctypes.c_uint,)),
        "hdDisable": (None, (ctypes.c_uint,)),
        "hdStartScheduler": (None, ()),
        "hdStopScheduler": (None, ()),
        "hdScheduleAsynchronous": (ctypes.c_ulong, (SCHEDULER_CALLBACK, ctypes.c_void_p, ctypes.c_ushort)),
        "hdUnschedule": (None, (ctypes.c_ulong,)),
        "hdBeginFrame": (None, (ctypes.c_uint,)),
        "hdEndFrame": (None, (ctypes.c_uint,)),
        "hdGetDoublev": (None, (ctypes.c_uint, ctypes.POINTER(ctypes.c_double))),
        "hdGetIntegerv": (None, (ctypes.c_uint, ctypes.POINTER(ctypes.c_int))),
        "hdSetDoublev": (None, (ctypes.c_uint, ctypes.POINTER(ctypes.c_double))),
        "hdGetString": (ctypes.c_char_p, (ctypes.c_uint,)),
        "hdGetError": (HDErrorInfo, ()),
    }
    _OPTIONAL: dict[str, tuple[Any, tuple[Any, ...]]] = {
        "hdIsEnabled": (ctypes.c_ubyte, (ctypes.c_uint,)),
        "hdGetSchedulerTimeStamp": (ctypes.c_double, ()),
        "hdWaitForCompletion": (ctypes.c_ubyte, (ctypes.c_ulong, ctypes.c_uint)),
    }

    # The entry points, bound in __init__ (ctypes function pointers; an optional one that
    # the library lacks is None).
    hdInitDevice: Callable[..., Any]
    hdDisableDevice: Callable[..., Any]
    hdGetCurrentDevice: Callable[..., Any]
    hdMakeCurrentDevice: Callable[..., Any]
    hdEnable: Callable[..., Any]
    hdDisable: Callable[..., Any]
    hdStartScheduler: Callable[..., Any]
    hdStopScheduler: Callable[..., Any]
    hdScheduleAsynchronous: Callable[..., Any]
    hdUnschedule: Callable[..., Any]
    hdBeginFrame: Callable[..., Any]
    hdEndFrame: Callable[..., Any]
    hdGetDoublev: Callable[..., Any]
    hdGetIntegerv: Callable[..., Any]
    hdSetDoublev: Callable[..., Any]
    hdGetString: Callable[..., Any]
    hdGetError: Callable[..., Any]
    hdIsEnabled: Callable[..., Any] | None
    hdGetSchedulerTimeStamp: Callable[..., Any] | None
    hdWaitForCompletion: Callable[..., Any] | None

    def __init__(self, lib: ctypes.CDLL, path: str, hd_define: ModuleType) -> None:
        self.path = path
        self.define = hd_define
        missing = []
        for table, required in ((self._REQUIRED, True), (self._OPTIONAL, False)):
            for name, (restype, argtypes) in table.items():
                try:
                    func = lib[name]
                except AttributeError:
                    if required:
                        missing.append(name)
                    setattr(self, name, None)
                    continue
                func.restype = restype
                func.argtypes = list(argtypes)
                setattr(self, name, func)
        if missing:
            raise DeviceError(
                f"the libHD at {path} lacks {', '.join(missing)}; it is not an OpenHaptics HD "
                f"library: {INSTALL_HINT}"
            )

    def drain_errors(self, t_s: float, limit: int = 16) -> list[HDError]:
        """Pop every pending error from the HD error stack (at most ``limit``)."""
        errors = []
        for _ in range(limit):
            info = self.hdGetError()
            if info.errorCode == HD_SUCCESS:
                break
            errors.append(HDError(int(info.errorCode), int(info.internalErrorCode), t_s))
        return errors


_API: HDApi | None = None


def load_api() -> HDApi:
    """Load libHD through pyOpenHaptics once per process and bind the HD entry points.

    Raises:
        DeviceError: libHD cannot be loaded (with what to install), or is not an HD library.
    """
    global _API
    if _API is not None:
        return _API
    path = os.environ.get(LIBHD_ENV, "").strip()
    if path:
        if not os.path.isfile(path):
            raise DeviceError(f"{LIBHD_ENV}={path} does not name a file; {INSTALL_HINT}")
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            raise DeviceError(f"cannot load {LIBHD_ENV}={path} ({error}); {INSTALL_HINT}") from None
    try:
        hd = importlib.import_module("pyOpenHaptics.hd")
        hd_define = importlib.import_module("pyOpenHaptics.hd_define")
    except OSError as error:
        raise DeviceError(f"libHD.so could not be loaded ({error}); {INSTALL_HINT}") from None
    except ImportError as error:
        raise DeviceError(f"pyOpenHaptics is not installed ({error}); pip install pyopenhaptics==1.0.1") from None
    lib = getattr(hd, "_lib_hd", None)
    if lib is None:
        raise DeviceError("pyOpenHaptics did not load libHD on this platform; " + INSTALL_HINT)
    _API = HDApi(lib, path or getattr(lib, "_name", "libHD.so"), hd_define)
    return _API
