"""The libHD test double (``haptics/libhd-double/libhd_double.c``, package data): build, read, probe.

The double is a small C library emulating the subset of OpenHaptics' HD API this
project (and pyOpenHaptics) calls, with a 1 kHz scheduler thread and a scripted stylus.
The test suite and ``capture-trainer bench device-loop`` build it with the system C
compiler (``haptics._native``); no binary is committed. The source ships with the
package (``haptics/libhd-double/``); ``CAPTURE_TRAINER_LIBHD_SRC`` names another.

Besides building it, this module reads what reached the double's "motors" (its counters
and its time-stamped log of every force committed) and probes the OpenHaptics backend's
force watchdog with it (:func:`measure_stall`, used by the tests and ``bench
device-loop``).
"""

from __future__ import annotations

import ctypes
import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import DeviceError
from capture_trainer.native import build_library

if TYPE_CHECKING:
    from haptics.openhaptics import OpenHapticsDevice

#: Environment variable naming the double's C source when not in the source tree.
SOURCE_ENV = "CAPTURE_TRAINER_LIBHD_SRC"


def double_source() -> Path:
    """Path of the double's C source.

    Raises:
        DeviceError: neither the package nor ``CAPTURE_TRAINER_LIBHD_SRC`` has it.
    """
    override = os.environ.get(SOURCE_ENV, "").strip()
    candidates = [Path(override)] if override else []
    candidates.append(Path(__file__).resolve().parent / "libhd-double" / "libhd_double.c")
    for path in candidates:
        if path.is_file():
            return path
    raise DeviceError(
        f"the libHD test double's source is not here ({candidates[-1]}): a broken install? "
        f"Reinstall, or set {SOURCE_ENV}=/path/to/libhd_double.c"
    )


def build_double(out_dir: str | Path | None = None) -> Path:
    """Compile the double into ``out_dir/libHD.so`` (soname ``libHD.so``) and return it.

    The result is cached by the source's hash: an up-to-date library is reused.

    Args:
        out_dir: where to put ``libHD.so`` (default: a per-user cache under the temp dir).

    Raises:
        DeviceError: no C compiler, or the compilation failed (with its output).
    """
    return build_library(double_source(), out_dir, soname="libHD.so")


class HddStats(ctypes.Structure):
    """The double's ``HddStats`` (``hdd_stats``): what reached its "motors"."""

    _fields_ = [
        ("ticks", ctypes.c_long),
        ("late_ticks", ctypes.c_long),
        ("callback_calls", ctypes.c_long),
        ("force_commits", ctypes.c_long),
        ("nonfinite_forces", ctypes.c_long),
        ("over_limit_sent", ctypes.c_long),
        ("max_sent_norm_n", ctypes.c_double),
        ("max_commanded_norm_n", ctypes.c_double),
        ("force_output_enabled", ctypes.c_int),
        ("clamping_enabled", ctypes.c_int),
        ("wake_late_ticks", ctypes.c_long),
        ("max_wake_late_s", ctypes.c_double),
        ("realtime", ctypes.c_int),
    ]


def double_stats(lib: ctypes.CDLL) -> dict[str, float] | None:
    """The double's counters as a dict, or None when ``lib`` is not the double."""
    if not hasattr(lib, "hdd_stats"):
        return None
    stats = HddStats()
    lib.hdd_stats(ctypes.byref(stats))
    return {field[0]: getattr(stats, field[0]) for field in HddStats._fields_}


#: How a servo loop can stall: the tick sleeps, another thread holds the GIL (a C call
#: that does not release it), or the tick never returns (busy in Python).
STALL_KINDS: tuple[str, ...] = ("sleeping_tick", "gil_hog", "stuck_tick")


def _double_clock(lib: ctypes.CDLL) -> Callable[[], float]:
    now = lib.hdd_now_s
    now.restype = ctypes.c_double
    now.argtypes = []
    return now


def motor_log(lib: ctypes.CDLL, since_s: float, max_rows: int = 16384) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """What the double's motors received since ``since_s`` (its clock, ``hdd_now_s``).

    Returns:
        ``(t_s, force_n)``: (n,) commit times [s] and (n, 3) forces [N], oldest first.
    """
    t = np.zeros(max_rows)
    f = np.zeros((max_rows, 3))
    fn = lib.hdd_motor_log
    fn.restype = ctypes.c_long
    fn.argtypes = [ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    n = int(fn(since_s, t.ctypes.data, f.ctypes.data, max_rows))
    return t[:n], f[:n]


def measure_stall(
    device: OpenHapticsDevice,
    lib: ctypes.CDLL,
    kind: str,
    *,
    force_n: tuple[float, float, float] = (0.0, 2.0, 0.0),
    lead_ticks: int = 300,
    stall_s: float = 0.1,
) -> dict[str, Any]:
    """Stall an OpenHaptics servo loop on the double and time "stall begins -> zero force".

    Runs a tick that commands ``force_n`` (the device must be engaged) for
    ``lead_ticks``, then stalls for ``stall_s`` the ``kind`` way (``STALL_KINDS``). The
    stall's beginning is stamped on the double's clock where it begins (in the tick, or
    in the thread that takes the GIL); when the force reached zero comes from the
    double's motor log. Nothing is synchronised by sleeping.

    Returns:
        ``stalled`` (False: the run ended before the stall began, e.g. the machine held
        the loop back so long that the watchdog tripped first), ``zero_after_ms`` (stall begins -> the first commit of zero force, after which
        every commit during the stall is zero; None if it never happened),
        ``force_at_stall_n`` (norm of the force on the motors when the stall began),
        ``max_force_after_zero_n`` (largest norm sent after that, during the stall),
        ``raised`` / ``message`` (what ``run`` raised), ``fault`` (the device's latched
        fault), ``watchdog`` (``last_run["watchdog"]``), ``stall_s``.
    """
    if kind not in STALL_KINDS:
        raise ValueError(f"stall kind must be one of {STALL_KINDS}, got {kind!r}")
    now = _double_clock(lib)
    held = ctypes.PyDLL(lib._name)  # the same library; PyDLL calls keep the GIL
    held_now = held.hdd_now_s
    held_now.restype = ctypes.c_double
    hold_gil = ctypes.PyDLL(None).usleep  # libc usleep, called without releasing the GIL
    hold_gil.argtypes = [ctypes.c_uint]
    stamps: dict[str, float] = {}
    go = threading.Event()
    force = np.array(force_n, dtype=float)

    def hog() -> None:
        if go.wait(30.0):
            stamps["begin"] = held_now()
            hold_gil(int(stall_s * 1e6))

    count = [0]

    def tick() -> bool:
        device.read()
        count[0] += 1
        stalling = count[0] == lead_ticks
        if stalling and kind != "gil_hog":
            # stamped before this tick's force, the last fresh one: a machine pause between
            # the two must not put the watchdog's ramp before the stall's beginning
            stamps["begin"] = now()
        device.command_force(force)
        if stalling:
            if kind == "sleeping_tick":
                time.sleep(stall_s)
            elif kind == "stuck_tick":
                begin = stamps["begin"]
                while now() - begin < stall_s:
                    pass
            else:
                go.set()
        return True

    worker = threading.Thread(target=hog, daemon=True) if kind == "gil_hog" else None
    if worker is not None:
        worker.start()
    raised: BaseException | None = None
    try:
        device.clock().run(tick, lead_ticks + int(3 * stall_s * device.spec.rate_hz) + 1000)
    except Exception as exc:  # noqa: BLE001 - what the stall made run() raise is the result
        raised = exc
    finally:
        go.set()
        if worker is not None:
            worker.join()
    begin = stamps.get("begin", math.nan)
    t, f = motor_log(lib, begin - 0.01)
    norms = np.linalg.norm(f, axis=1)
    before = norms[t < begin]
    during = (t >= begin) & (t <= begin + stall_s)
    zero_at: float | None = None
    for i in np.flatnonzero(during):
        if not norms[i:][t[i:] <= begin + stall_s].any():
            zero_at = float(t[i])
            break
    after_zero = norms[(t >= zero_at) & (t <= begin + stall_s)] if zero_at is not None else norms[during]
    run = device.last_run or {}
    return {
        "stalled": "begin" in stamps,
        "zero_after_ms": None if zero_at is None else 1e3 * (zero_at - begin),
        "force_at_stall_n": float(before[-1]) if before.size else None,
        "max_force_after_zero_n": float(after_zero.max()) if after_zero.size else None,
        "raised": None if raised is None else type(raised).__name__,
        "message": None if raised is None else str(raised),
        "fault": device.fault,
        "watchdog": run.get("watchdog"),
        "stall_s": stall_s,
    }
