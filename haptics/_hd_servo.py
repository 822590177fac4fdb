"""The OpenHaptics backend's C servo callback and force watchdog (``haptics/native/hd_servo.c``).

libHD calls its scheduler callbacks from one servo thread. A Python callback there takes
the GIL every tick, so a tick that sleeps or hangs, or another thread holding the GIL,
holds the servo thread and with it the last force on the motors (pyOpenHaptics only
offers such callbacks, and libHD has no deadline of its own on a committed force). So
the callback is C: it samples the stylus, hands the sample to the Python servo loop,
waits at most ``answer_wait_s`` for the loop's force, and sends that force only while it
is fresh; otherwise its watchdog ramps the force to zero (see the C file). Python runs
the tick in the thread that called ``run`` and never in libHD's thread.

:class:`ServoShim` wraps one instance; the library is compiled with the system C compiler
on first use (``haptics._native``), for the real libHD and the test double alike.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from capture_trainer.errors import DeviceError
from haptics._hd_api import SCHEDULER_CALLBACK, HDApi
from capture_trainer.native import build_library

#: Errors the shim keeps (the newest ones).
ERROR_RING = 16

_c_double_p = ctypes.POINTER(ctypes.c_double)


class Sample(ctypes.Structure):
    """``HdsSample``: one servo tick's reading (mm, mm/s; column-major transform)."""

    _fields_ = [
        ("seq", ctypes.c_int64),
        ("t_s", ctypes.c_double),
        ("pos_mm", ctypes.c_double * 3),
        ("vel_mm_s", ctypes.c_double * 3),
        ("xform", ctypes.c_double * 16),
        ("buttons", ctypes.c_int32),
        ("tripped", ctypes.c_int32),
        ("hd_fault", ctypes.c_int32),
        ("closed", ctypes.c_int32),
        ("n_errors", ctypes.c_int64),
    ]


class Status(ctypes.Structure):
    """``HdsStatus``: the watchdog, the libHD errors and the callback's statistics."""

    _fields_ = [
        ("armed", ctypes.c_int32),
        ("posted", ctypes.c_int32),
        ("tripped", ctypes.c_int32),
        ("hd_fault", ctypes.c_int32),
        ("probed", ctypes.c_int32),
        ("has_pos", ctypes.c_int32),
        ("has_vel", ctypes.c_int32),
        ("has_xf", ctypes.c_int32),
        ("has_btn", ctypes.c_int32),
        ("trip_t_s", ctypes.c_double),
        ("trip_age_s", ctypes.c_double),
        ("zero_t_s", ctypes.c_double),
        ("last_fresh_t_s", ctypes.c_double),
        ("callbacks", ctypes.c_int64),
        ("completed", ctypes.c_int64),
        ("answered", ctypes.c_int64),
        ("unanswered", ctypes.c_int64),
        ("trips", ctypes.c_int64),
        ("busy_sum_s", ctypes.c_double),
        ("busy_max_s", ctypes.c_double),
        ("n_errors", ctypes.c_int64),
        ("err_code", ctypes.c_uint32 * ERROR_RING),
        ("err_internal", ctypes.c_int32 * ERROR_RING),
        ("err_t_s", ctypes.c_double * ERROR_RING),
        ("sent_force_n", ctypes.c_double * 3),
    ]


def shim_source() -> Path:
    """Path of the C source (package data)."""
    return Path(__file__).resolve().parent / "native" / "hd_servo.c"


_LIB: ctypes.CDLL | None = None


def load_shim() -> ctypes.CDLL:
    """Build (once, cached by hash) and load the servo library, with its prototypes.

    Raises:
        DeviceError: no C compiler, or the build failed.
    """
    global _LIB
    if _LIB is not None:
        return _LIB
    source = shim_source()
    if not source.is_file():
        raise DeviceError(f"the OpenHaptics servo callback's source is missing ({source}): a broken install?")
    lib = ctypes.CDLL(str(build_library(source)))
    vp, i64, dbl = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
    prototypes: dict[str, tuple[object, list[object]]] = {
        "hds_now": (dbl, []),
        "hds_create": (vp, [vp, vp, vp, vp, vp, vp, ctypes.c_uint, dbl, dbl, dbl, dbl, dbl]),
        "hds_destroy": (None, [vp]),
        "hds_arm": (None, [vp]),
        "hds_disarm": (None, [vp]),
        "hds_wait_zero_sent": (ctypes.c_int, [vp, dbl]),
        "hds_close": (None, [vp]),
        "hds_clear_fault": (None, [vp]),
        "hds_post_force": (ctypes.c_int, [vp, i64, _c_double_p]),
        "hds_wait_sample": (i64, [vp, i64, dbl, ctypes.POINTER(Sample)]),
        "hds_post_and_wait": (i64, [vp, i64, _c_double_p, dbl, ctypes.POINTER(Sample)]),
        "hds_latest": (None, [vp, ctypes.POINTER(Sample)]),
        "hds_status": (None, [vp, ctypes.POINTER(Status)]),
        "hds_reset_stats": (None, [vp]),
    }
    for name, (restype, argtypes) in prototypes.items():
        func = getattr(lib, name)
        func.restype = restype
        func.argtypes = argtypes
    _LIB = lib
    return lib


@dataclass(frozen=True)
class WatchdogTiming:
    """The C watchdog's timing [s] (from ``haptics.safety.SafetyConfig``).

    Attributes:
        stale_s: no fresh force for longer than this trips it (``max_tick_gap_s``) ...
        pending_s: ... once the loop has also had a sample to answer for this long
            (``max_tick_gap_s`` less one period: not when the servo thread itself was
            held up and published nothing).
        ramp_s: it ramps the force to zero in this time (``watchdog_ramp_s``).
        cut_s: zero, whatever the ramp, from the first callback this long after the
            last fresh force (``force_deadline_s`` less one period: what a callback
            sends lasts until the next one).
        answer_wait_s: how long each callback waits for the loop's force for its own
            sample before it sends the latest fresh one.
    """

    stale_s: float
    pending_s: float
    ramp_s: float
    cut_s: float
    answer_wait_s: float


def _address(func: object) -> int:
    value = ctypes.cast(func, ctypes.c_void_p).value  # type: ignore[arg-type]
    if not value:
        raise DeviceError("a libHD entry point has no address")
    return int(value)


class ServoShim:
    """One C servo callback bound to a libHD device (``haptics/native/hd_servo.c``).

    Args:
        api: the loaded libHD.
        handle: the HD device handle.
        timing: the watchdog's timing.

    ``callback`` is the function pointer to hand to ``hdScheduleAsynchronous`` with
    ``user_data``. Every method but ``destroy`` may be called from any thread; the
    waiting ones release the GIL (plain ctypes calls).

    Raises:
        DeviceError: the library cannot be built or the timing is invalid.
    """

    def __init__(self, api: HDApi, handle: int, timing: WatchdogTiming) -> None:
        lib = load_shim()
        self._lib = lib
        self.timing = timing
        self.user_data = lib.hds_create(
            _address(api.hdBeginFrame), _address(api.hdEndFrame), _address(api.hdGetDoublev),
            _address(api.hdGetIntegerv), _address(api.hdSetDoublev), _address(api.hdGetError),
            handle, timing.stale_s, timing.pending_s, timing.ramp_s, timing.cut_s, timing.answer_wait_s,
        )
        if not self.user_data:
            raise DeviceError(f"the servo callback refused its timing {timing}")
        # A plain function pointer: libHD calls C directly, no Python thunk, no GIL.
        self.callback = SCHEDULER_CALLBACK(_address(lib.hds_callback))
        self._status = Status()
        self._force = (ctypes.c_double * 3)()
        self.now = lib.hds_now
        self._post = lib.hds_post_force
        self._wait = lib.hds_wait_sample
        self._post_wait = lib.hds_post_and_wait

    def arm(self) -> None:
        """Start a run: send the loop's forces, watched; the force is zero and fresh now."""
        self._lib.hds_arm(self.user_data)

    def disarm(self) -> None:
        """End a run: zero force from the next callback on."""
        self._lib.hds_disarm(self.user_data)

    def wait_zero_sent(self, timeout_s: float) -> bool:
        """After ``disarm``: wait (GIL released) until a callback begun now has sent its
        force (zero); False on a timeout (the scheduler is not calling back)."""
        return bool(self._lib.hds_wait_zero_sent(self.user_data, timeout_s))

    def close(self) -> None:
        """Zero force for good and wake every waiter (before unscheduling the callback)."""
        self._lib.hds_close(self.user_data)

    def destroy(self) -> None:
        """Free the C state; only once libHD no longer calls the callback."""
        if self.user_data:
            self._lib.hds_destroy(self.user_data)
            self.user_data = None

    def clear_fault(self) -> None:
        """Forget a libHD error (the callback sends forces again when armed)."""
        self._lib.hds_clear_fault(self.user_data)

    def post_force(self, seq: int, x: float, y: float, z: float) -> bool:
        """The loop's force [N] for sample ``seq``; True when the watchdog has tripped."""
        force = self._force
        force[0] = x
        force[1] = y
        force[2] = z
        return bool(self._post(self.user_data, seq, force))

    def wait_sample(self, after_seq: int, timeout_s: float, out: Sample) -> int:
        """Wait (GIL released) for a sample newer than ``after_seq``; the newest into ``out``.

        Returns its ``seq``, or 0 on a timeout or once closed.
        """
        return int(self._wait(self.user_data, after_seq, timeout_s, ctypes.byref(out)))

    def post_and_wait(self, seq: int, x: float, y: float, z: float, timeout_s: float, out: Sample) -> int:
        """``post_force`` then ``wait_sample(seq, ...)`` in one call (one GIL hand-over per tick)."""
        force = self._force
        force[0] = x
        force[1] = y
        force[2] = z
        return int(self._post_wait(self.user_data, seq, force, timeout_s, ctypes.byref(out)))

    def latest(self, out: Sample) -> None:
        """The newest sample into ``out`` (``seq`` 0: none yet)."""
        self._lib.hds_latest(self.user_data, ctypes.byref(out))

    def status(self) -> Status:
        """A snapshot of the watchdog, errors and statistics (one instance, refilled)."""
        self._lib.hds_status(self.user_data, ctypes.byref(self._status))
        return self._status

    def reset_stats(self) -> None:
        """Restart the answered / unanswered counts and the busy times."""
        self._lib.hds_reset_stats(self.user_data)

    def errors_since(self, count: int) -> list[tuple[int, int, float]]:
        """``(code, internal, t_s)`` of the errors after the first ``count`` (the newest 16 at most)."""
        st = self.status()
        first = max(count, st.n_errors - ERROR_RING)
        return [(int(st.err_code[k % ERROR_RING]), int(st.err_internal[k % ERROR_RING]),
                 float(st.err_t_s[k % ERROR_RING])) for k in range(first, st.n_errors)]
