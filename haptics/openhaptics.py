"""OpenHaptics backend: a real Touch-class device through libHD (via pyOpenHaptics).

libHD's servo thread calls **C**, not Python: the scheduler callback is
``haptics/native/hd_servo.c`` (``haptics._hd_servo``), so nothing Python does (a tick
that sleeps or hangs, another thread holding the GIL, a garbage collection) can hold the
servo thread or the last force on the motors. The servo tick runs in the thread that
called ``run``, once per servo tick, paced by the callback:

    C callback (libHD's servo thread, every tick, no GIL)
      hdBeginFrame → read HD_CURRENT_POSITION / _VELOCITY / _TRANSFORM / _BUTTONS
      → publish the sample ─────────────► run()'s thread wakes (waiting, GIL released)
                                            tick(): device.read() … device.command_force(f)
                                              (safety layer); the tick returns
      ◄── wait up to answer_wait_s ───── post the force, wait for the next sample
      → force watchdog → hdSetDoublev(HD_CURRENT_FORCE) → hdEndFrame → hdGetError

The callback sends the posted force only while it is fresh: from the run's first force
on (the first tick may take tens of milliseconds to warm up; zero is sent until it
posts), no fresh force for ``SafetyConfig.max_tick_gap_s`` (4 ms) trips the **force watchdog**, which ramps the
force to zero over ``watchdog_ramp_s`` (4 ms) and cuts it at ``force_deadline_s`` (10 ms)
at the latest; the trip is latched (``fault``) and ``run`` raises DeviceError once the
tick returns. When Python is quick (a tick takes ~0.1 ms) the force answers the sample
of the same frame; when it misses ``answer_wait_s`` the callback sends the latest fresh
force and the answer goes out with the next frame. A Python loop that falls behind
processes only the newest sample (skipped samples are counted).

``OpenHapticsDevice.clock().run(tick, max_ticks)`` runs the tick until it returns False,
``max_ticks`` ticks have run, the tick raises, the device reports an error or the
watchdog trips. Between runs the callback keeps sampling the stylus (``read()`` from any
thread returns the latest reading) and sends zero force.

Units and frames: libHD reports millimetres and mm/s in the device frame (Touch: x right,
y up, z toward the user); they are converted to metres at this edge. Forces are newtons
on the stylus, device frame, as ``HD_CURRENT_FORCE``. ``HD_CURRENT_TRANSFORM`` is a
column-major 4x4 (OpenGL order): element ``[col*4 + row]``. Times are seconds of the
monotonic clock (``time.perf_counter``, CLOCK_MONOTONIC, the C callback's clock too).

Safety: every command goes through ``haptics.safety.SafetyLayer`` (the one limiter: the
scenario's saturation, the peak and thermal limits, rate, non-finite guard, engage ramp,
in-tick watchdog), and libHD's own ``HD_MAX_FORCE_CLAMPING`` is enabled as a second line.
Force ramps in (engage ramp, restarted at every run) and out (``SafetyLayer.ramp_to_zero``)
at the end of a run. A tick that raises zeroes the force in that frame; it, any HD error
or a watchdog trip latches a fault (``clear_fault`` to go on) and is raised in the thread
that called ``run``.

The GIL and the CPU: while the device is open the interpreter's switch interval is
lowered (``switch_interval_s``, default 0.5 ms) so that another busy Python thread hands
the GIL to the servo loop within half a tick, and during a run the thread running the
ticks is SCHED_FIFO where the system allows it (as the tick was when it ran in libHD's
servo thread), so that other processes do not hold it off the CPU. The other Python
threads of the process still hold the GIL at times (the trial recorder's flusher builds
and writes its file): one preempted by another process while holding it held the servo
loop off for a time slice (~4 ms on a busy machine: the force watchdog's limit), so during
a real-time run they do that work inside ``haptics.timing.gil_sharer`` (real-time too,
below the loop). Every run records its tick-period statistics
(``haptics.timing.ServoTiming``) in ``last_run``.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import ctypes
import logging
import math
import os
import sys
import threading
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import DeviceError
from haptics._hd_api import (
    HD_INVALID_HANDLE,
    HD_MAX_SCHEDULER_PRIORITY,
    INSTALL_HINT,
    HDApi,
    HDError,
    load_api,
)
from haptics._hd_servo import Sample, ServoShim, WatchdogTiming
from haptics.device import BUTTON_ENGAGE, DeviceSpec, DeviceState, Tick
from haptics.safety import SafetyConfig, SafetyLayer
from haptics.timing import ServoTiming, frozen_heap, realtime_loop

logger = logging.getLogger(__name__)

#: Run states: idle (zero force); running the tick; ramping out after the run.
_IDLE, _RUNNING, _RAMP_OUT = 0, 1, 2

#: Longest run a ServoTiming keeps every period of (10 minutes at 1 kHz).
_TIMING_CAPACITY = 600_000
#: Longest single wait for a sample [s]: signals (Ctrl-C) are seen at least this often.
_WAIT_SLICE_S = 0.05
#: SCHED_FIFO priority of the thread running the ticks during a run: above every normal
#: thread (as when the tick ran in libHD's servo thread), below the servo thread itself.
_LOOP_PRIORITY = 50


def _realtime_thread() -> tuple[tuple[int, int] | None, bool]:
    """Run the calling thread SCHED_FIFO (Linux; pid 0 is the calling thread).

    Returns the policy and priority to restore (None: nothing changed) and whether the
    thread now runs real-time (False when not allowed: no CAP_SYS_NICE / rtprio limit).
    """
    try:
        policy = os.sched_getscheduler(0)
        if policy in (os.SCHED_FIFO, os.SCHED_RR):
            return None, True  # already real-time (e.g. the trainer's servo process)
        previous = (policy, os.sched_getparam(0).sched_priority)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(_LOOP_PRIORITY))
    except (AttributeError, OSError):
        return None, False
    return previous, True


def _restore_thread(previous: tuple[int, int] | None) -> None:
    if previous is not None:
        try:
            os.sched_setscheduler(0, previous[0], os.sched_param(previous[1]))
        except OSError as error:
            logger.warning("could not restore the servo thread's scheduling policy: %s", error)

# A Touch's data sheet: used only for a limit a (minimal, emulated) libHD does not report.
TOUCH_MAX_FORCE_N = 3.3
TOUCH_CONTINUOUS_FORCE_N = 0.88
TOUCH_USABLE_WORKSPACE_MM = (-80.0, -60.0, -35.0, 80.0, 60.0, 35.0)


class OpenHapticsDevice:
    """A Touch-class device through OpenHaptics' HD API, its servo callback in C.

    The constructor initialises the device and reads its limits (``spec``); entering the
    context (``with device:``) starts the HD scheduler; leaving it stops the scheduler
    and releases the device. ``clock().run(tick, max_ticks)`` runs a servo loop.

    Args:
        device_name: HD configuration name (None: ``HD_DEFAULT_DEVICE``).
        safety_config: the safety layer's tuning (the scenario's limits, the engage
            default, ramps, the watchdogs' timing; ``SafetyConfig.for_rendering``).
        max_force_rate_n_s: force-rate limit [N/s] for the spec (not reported by libHD).
        engage_from_button: a press of stylus button 1 (``BUTTON_ENGAGE``) during a run
            engages the force. Engagement persists (across runs too) until
            ``set_engaged(False)``; the force ramps in again at every run. With False
            only ``set_engaged`` and ``safety_config.engaged_at_start`` engage.
        switch_interval_s: ``sys.setswitchinterval`` while the device is open (None:
            leave it).
        stall_timeout_s: ``run`` raises DeviceError when the HD scheduler has not called
            back for this long [s].
        answer_wait_s: how long each servo callback waits for the tick's force for its
            own sample before it sends the latest fresh one [s].

    Attributes:
        spec: the device's limits read at start (``DeviceSpec``, name ``openhaptics``).
        info: further identification (serial, driver version, libHD path, ...).
        safety: the ``SafetyLayer`` every command passes through.
        last_run: statistics of the last run (``ServoTiming.summary()`` of the tick
            starts plus ``ticks_run``, ``busy_ms_mean``/``busy_ms_max`` (time inside the C
            callback, its wait for the tick's force included), ``answered_in_frame`` /
            ``answered_late`` (callbacks that sent the force answering their own sample /
            the latest earlier one), ``samples_skipped``, ``hd_errors``, ``watchdog``
            (the force watchdog's trip, or None), ``realtime`` (the ticks ran SCHED_FIFO)
            and ``stopped_by``), or None.

    Raises:
        DeviceError: libHD or the device is missing (with what to install and which
            backends work now), the device reports nonsense limits, or the servo
            callback cannot be built (no C compiler).
    """

    def __init__(
        self,
        device_name: str | None = None,
        *,
        safety_config: SafetyConfig | None = None,
        max_force_rate_n_s: float = 1000.0,
        engage_from_button: bool = True,
        switch_interval_s: float | None = 5e-4,
        stall_timeout_s: float = 0.5,
        answer_wait_s: float = 6e-4,
    ) -> None:
        try:
            self._api: HDApi = load_api()
        except DeviceError as error:
            from haptics.backends import available_summary

            raise DeviceError(
                f"the openhaptics backend is not available: {error}. {available_summary(exclude=('openhaptics',))}"
            ) from None
        self._define = self._api.define
        self._handle = HD_INVALID_HANDLE
        self._open = False
        self._sched_handle: int | None = None
        self._shim: ServoShim | None = None
        self._engage_from_button = bool(engage_from_button)
        self._switch_interval_s = switch_interval_s
        self._saved_switch_interval: float | None = None
        self._stall_timeout_s = float(stall_timeout_s)
        self._init_device(device_name)
        try:
            self.spec, self.info = self._read_spec(max_force_rate_n_s)
            self.safety = SafetyLayer(self.spec, safety_config)
            cfg = self.safety.config
            # A sample comes about a period after the force that answered the one before;
            # what a callback sends lasts until the next one (SafetyLayer checked that
            # the stale time, a period and the ramp fit in force_deadline_s).
            period = 1.0 / self.spec.rate_hz
            self._shim = ServoShim(self._api, self._handle, WatchdogTiming(
                stale_s=cfg.max_tick_gap_s, pending_s=cfg.max_tick_gap_s - period, ramp_s=cfg.watchdog_ramp_s,
                cut_s=cfg.force_deadline_s - period, answer_wait_s=float(answer_wait_s)))
        except BaseException:
            self._api.hdDisableDevice(self._handle)
            self._api.drain_errors(0.0)
            self._handle = HD_INVALID_HANDLE
            raise
        self._setup_buffers()
        self.last_run: dict[str, Any] | None = None

    # -- set-up ----------------------------------------------------------------------

    def _init_device(self, device_name: str | None) -> None:
        api = self._api
        api.drain_errors(0.0)  # stale errors from an earlier user of the library
        handle = api.hdInitDevice(device_name.encode() if device_name else None)
        errors = api.drain_errors(0.0)
        if handle == HD_INVALID_HANDLE or errors:
            if handle != HD_INVALID_HANDLE:
                api.hdDisableDevice(handle)
                api.drain_errors(0.0)
            from haptics.backends import available_summary

            why = "; ".join(str(e) for e in errors) or "no handle returned"
            raise DeviceError(
                f"OpenHaptics could not initialise a haptic device "
                f"({device_name or 'HD_DEFAULT_DEVICE'}: {why}). Connect the Touch, "
                f"{INSTALL_HINT}. {available_summary(exclude=('openhaptics',))}"
            )
        self._handle = int(handle)
        api.hdMakeCurrentDevice(self._handle)
        d = self._define
        api.hdEnable(d.HD_FORCE_OUTPUT)
        api.hdEnable(d.HD_MAX_FORCE_CLAMPING)
        errors = api.drain_errors(0.0)
        if errors:
            api.hdDisableDevice(self._handle)
            api.drain_errors(0.0)
            raise DeviceError("OpenHaptics refused force output with clamping: " + "; ".join(map(str, errors)))
        self._clamping_verified = bool(api.hdIsEnabled(d.HD_MAX_FORCE_CLAMPING)) if api.hdIsEnabled else False
        api.drain_errors(0.0)
        if not self._clamping_verified:
            # The safety layer clamps every command anyway; libHD's clamp is the second line.
            logger.warning("libHD does not confirm HD_MAX_FORCE_CLAMPING; relying on the safety layer")

    def _read_spec(self, max_force_rate_n_s: float) -> tuple[DeviceSpec, dict[str, Any]]:
        """Read the device's limits; a limit libHD does not report falls back to a Touch's.

        Every real OpenHaptics driver reports all of them; the fallback (logged and
        listed in ``info["spec_fallbacks"]``) only serves minimal libHD emulators.
        Values that are reported but implausible are a DeviceError.
        """
        api, d = self._api, self._define
        fallbacks: list[str] = []

        def checked(name: str, value: Any, fallback: Any) -> Any:
            if api.drain_errors(0.0) or value is None:
                fallbacks.append(name)
                return fallback
            return value

        def doubles(enum: int, n: int) -> list[float] | None:
            buf = (ctypes.c_double * 16)(*([math.nan] * 16))
            api.hdGetDoublev(enum, buf)
            values = list(buf[:n])
            return None if any(math.isnan(v) for v in values) else values

        def integer(enum: int) -> int | None:
            value = ctypes.c_int(-(2**31))
            api.hdGetIntegerv(enum, ctypes.byref(value))
            return None if value.value == -(2**31) else value.value

        def string(enum: int) -> str | None:
            raw = api.hdGetString(enum)
            return raw.decode(errors="replace").strip() or None if raw else None

        max_force_n = checked("HD_NOMINAL_MAX_FORCE", doubles(d.HD_NOMINAL_MAX_FORCE, 1), [TOUCH_MAX_FORCE_N])[0]
        continuous_n = checked("HD_NOMINAL_MAX_CONTINUOUS_FORCE", doubles(d.HD_NOMINAL_MAX_CONTINUOUS_FORCE, 1),
                               [TOUCH_CONTINUOUS_FORCE_N])[0]
        workspace_mm = checked("HD_USABLE_WORKSPACE_DIMENSIONS", doubles(d.HD_USABLE_WORKSPACE_DIMENSIONS, 6),
                               list(TOUCH_USABLE_WORKSPACE_MM))
        rate_hz = checked("HD_UPDATE_RATE", integer(d.HD_UPDATE_RATE), 1000)
        model = checked("HD_DEVICE_MODEL_TYPE", string(d.HD_DEVICE_MODEL_TYPE), "unknown")
        vendor = checked("HD_DEVICE_VENDOR", string(d.HD_DEVICE_VENDOR), "unknown")
        input_dof = checked("HD_INPUT_DOF", integer(d.HD_INPUT_DOF), 6)
        output_dof = checked("HD_OUTPUT_DOF", integer(d.HD_OUTPUT_DOF), 3)
        info: dict[str, Any] = {
            "libhd": api.path, "handle": self._handle, "clamping_verified": self._clamping_verified,
            "spec_fallbacks": fallbacks,
            "serial": checked("HD_DEVICE_SERIAL_NUMBER", string(d.HD_DEVICE_SERIAL_NUMBER), ""),
            "driver_version": checked("HD_DEVICE_DRIVER_VERSION", string(d.HD_DEVICE_DRIVER_VERSION), ""),
        }
        if fallbacks:
            logger.warning("libHD did not report %s; using a Touch's values for them", ", ".join(fallbacks))

        lo_mm, hi_mm = workspace_mm[:3], workspace_mm[3:]
        problems = []
        if not (math.isfinite(max_force_n) and 0.0 < max_force_n < 100.0):
            problems.append(f"HD_NOMINAL_MAX_FORCE = {max_force_n} N")
        if not (math.isfinite(continuous_n) and 0.0 < continuous_n <= max_force_n):
            problems.append(f"HD_NOMINAL_MAX_CONTINUOUS_FORCE = {continuous_n} N")
        if not all(math.isfinite(a) and math.isfinite(b) and a < b for a, b in zip(lo_mm, hi_mm)):
            problems.append(f"HD_USABLE_WORKSPACE_DIMENSIONS = {workspace_mm} mm")
        if not 100 <= rate_hz <= 10_000:
            problems.append(f"HD_UPDATE_RATE = {rate_hz} Hz")
        if problems:
            raise DeviceError("the device reported implausible limits: " + ", ".join(problems))
        spec = DeviceSpec(
            name="openhaptics",
            model=model,
            vendor=vendor,
            workspace_min_m=(lo_mm[0] * 1e-3, lo_mm[1] * 1e-3, lo_mm[2] * 1e-3),
            workspace_max_m=(hi_mm[0] * 1e-3, hi_mm[1] * 1e-3, hi_mm[2] * 1e-3),
            max_force_n=float(max_force_n),
            continuous_force_n=float(continuous_n),
            rate_hz=float(rate_hz),
            input_dof=input_dof if input_dof > 0 else 6,
            output_dof=output_dof if output_dof > 0 else 3,
            max_force_rate_n_s=float(max_force_rate_n_s),
        )
        return spec, info

    def _setup_buffers(self) -> None:
        self._sample = Sample()      # the tick's sample (run()'s thread)
        self._latest = Sample()      # read() from other threads
        self._latest_lock = threading.Lock()
        self._xf_view = np.ctypeslib.as_array(self._sample.xform)
        self._pos_mm = np.ctypeslib.as_array(self._sample.pos_mm)
        self._vel_mm_s = np.ctypeslib.as_array(self._sample.vel_mm_s)
        self._zero = np.zeros(3)
        self._sent = np.zeros(3)
        self._state = DeviceState()
        self._main_state = DeviceState()
        self._seq = 0
        self._errors_seen = 0
        self._servo_ident = -1
        self._in_tick = False
        self._commanded = False
        self._mode = _IDLE
        self._tick: Tick | None = None
        self._max_ticks = 0
        self._ticks_run = 0
        self._skipped = 0
        self._stop_requested = False
        self._stopped_by = ""
        self._watchdog_report: dict[str, Any] | None = None
        self._realtime = False
        self._fault: str | None = None
        self._prev_buttons = 0
        self._timing: ServoTiming | None = None
        self._run_errors: list[HDError] = []
        self.hd_errors: collections.deque[HDError] = collections.deque(maxlen=256)
        self._done = threading.Event()
        self._done.set()
        self._t0 = time.perf_counter()  # CLOCK_MONOTONIC, the C callback's clock too

    # -- Device protocol -------------------------------------------------------------

    def __enter__(self) -> OpenHapticsDevice:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Free the C state only when libHD can no longer call it: never scheduled, or
        # closed (an open device is kept alive by its atexit registration).
        shim = getattr(self, "_shim", None)
        if shim is not None and not getattr(self, "_open", True):
            shim.destroy()

    def open(self) -> None:
        """Schedule the C servo callback and start the HD scheduler (idempotent)."""
        if self._open:
            return
        if self._handle == HD_INVALID_HANDLE or self._shim is None:
            raise DeviceError("this OpenHapticsDevice was closed; create a new one")
        api, shim = self._api, self._shim
        api.drain_errors(self._now())
        self._sched_handle = int(api.hdScheduleAsynchronous(shim.callback, shim.user_data, HD_MAX_SCHEDULER_PRIORITY))
        api.hdStartScheduler()
        errors = api.drain_errors(self._now())
        if errors:
            self._shutdown()
            raise DeviceError("the HD scheduler did not start: " + "; ".join(map(str, errors)))
        self._open = True  # _shutdown() below must stop the scheduler
        if shim.wait_sample(0, 1.0, self._sample) == 0:
            self._shutdown()
            raise DeviceError("the HD scheduler started but never called the servo callback")
        status = shim.status()
        if status.hd_fault:
            reason = "; ".join(map(str, self._new_errors()))
            self._shutdown()
            raise DeviceError(f"the first servo frame failed: {reason}")
        answered = {"HD_CURRENT_POSITION": status.has_pos, "HD_CURRENT_VELOCITY": status.has_vel,
                    "HD_CURRENT_TRANSFORM": status.has_xf, "HD_CURRENT_BUTTONS": status.has_btn}
        if not (status.has_pos or status.has_xf):
            self._shutdown()
            raise DeviceError("libHD answers neither HD_CURRENT_POSITION nor HD_CURRENT_TRANSFORM")
        missing = [name for name, ok in answered.items() if not ok]
        if missing:
            logger.warning("libHD does not answer %s; derived from the other readings", ", ".join(missing))
        self.info["state_fallbacks"] = missing
        atexit.register(self.close)  # never leave the HD thread running into a dying interpreter
        if self._switch_interval_s is not None:
            self._saved_switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(self._switch_interval_s)
        spec = self.spec
        logger.info("opened %s %s (%s), %.0f Hz", spec.vendor, spec.model, self._api.path, spec.rate_hz)

    def close(self) -> None:
        """Ramp out (if a run is active), stop the scheduler and release the device."""
        if self._handle == HD_INVALID_HANDLE:
            return
        if self._mode != _IDLE:
            self._stop_requested = True
            self._done.wait(1.0)
        self._shutdown()
        atexit.unregister(self.close)
        if self._saved_switch_interval is not None:
            sys.setswitchinterval(self._saved_switch_interval)
            self._saved_switch_interval = None

    def _shutdown(self) -> None:
        api = self._api
        if self._shim is not None:
            self._shim.close()  # zero force now, and wake whoever waits for a sample
        if self._sched_handle is not None:
            api.hdUnschedule(self._sched_handle)  # returns once the callback is not running
        self._sched_handle = None
        api.hdStopScheduler()
        api.hdDisableDevice(self._handle)
        for error in api.drain_errors(self._now()):
            logger.warning("libHD at close: %s", error)
        self._handle = HD_INVALID_HANDLE
        self._open = False

    def _in_servo_tick(self) -> bool:
        return self._in_tick and threading.get_ident() == self._servo_ident

    def read(self) -> DeviceState:
        """The latest stylus reading (metres, m/s, device frame; buttons bit mask).

        Inside the tick: this tick's sample (one instance, refilled every tick; also
        beats the safety watchdog's device channel). From another thread: a copy of the
        latest sample (one instance per device, refilled per call).
        """
        if self._in_servo_tick():
            self.safety.heartbeat(self._state.t_s)
            return self._state
        if self._shim is None or self._handle == HD_INVALID_HANDLE:
            raise DeviceError("no reading: the device is closed")
        with self._latest_lock:
            latest = self._latest
            self._shim.latest(latest)
            if latest.seq == 0:
                raise DeviceError("no reading yet: open the device (with device: ...) first")
            st = self._main_state
            st.t_s = latest.t_s - self._t0
            p, v = latest.pos_mm, latest.vel_mm_s
            st.position_m[0], st.position_m[1], st.position_m[2] = p[0] * 1e-3, p[1] * 1e-3, p[2] * 1e-3
            st.velocity_m_s[0], st.velocity_m_s[1], st.velocity_m_s[2] = v[0] * 1e-3, v[1] * 1e-3, v[2] * 1e-3
            st.buttons = int(latest.buttons)
        return st

    def command_force(self, force_n: NDArray[np.float64]) -> NDArray[np.float64]:
        """Pass ``force_n`` (3,) [N, on the stylus, device frame] through the safety layer.

        Valid only inside the tick; the result is posted to the servo callback when the
        tick returns (for this frame if the callback still waits, else for the next:
        one call out of Python per tick). Returns the force to send (owned buffer, valid
        until the next call); should the force watchdog have tripped meanwhile, zero is
        sent instead and ``run`` raises after this tick. Outside the tick a zero force is
        accepted (the device already holds zero between runs); anything else raises
        DeviceError.
        """
        if not self._in_servo_tick():
            if not np.any(force_n):
                return self._zero
            raise DeviceError("command_force is only valid inside the servo tick (device.clock().run)")
        self._sent[:] = self.safety.filter(self._state.t_s, force_n)
        self._commanded = True
        return self._sent

    @property
    def fault(self) -> str | None:
        """Why the device is faulted (a tick raised, libHD reported an error, the force
        watchdog tripped), or None."""
        if self._fault is None and self._mode == _IDLE and self._open:
            errors = self._new_errors()
            if errors:
                self._fault = "libHD reported " + "; ".join(map(str, errors))
        return self._fault

    def clear_fault(self) -> None:
        """Forget a latched fault so that the next run may start (force ramps in again)."""
        if self._mode != _IDLE:
            raise DeviceError("cannot clear a fault while a run is active")
        if self._open:
            self._new_errors()
        self._fault = None
        if self._shim is not None:
            self._shim.clear_fault()

    def set_engaged(self, engaged: bool) -> None:
        """Engage (force ramps in) or release (force ramps out) the guidance force."""
        self.safety.set_engaged(engaged)

    def stylus_transform(self) -> NDArray[np.float64]:
        """(4, 4) homogeneous stylus transform (device frame; rotation, translation in m).

        From ``HD_CURRENT_TRANSFORM`` of this tick's sample inside the tick, else of the
        reading last returned by ``read()`` (read now if there was none). A new array (not
        for the tick's hot path).
        """
        if self._in_servo_tick():
            raw = self._xf_view.copy()
        else:
            if self._latest.seq == 0:
                self.read()
            with self._latest_lock:
                raw = np.ctypeslib.as_array(self._latest.xform).copy()
        # Column-major storage (element [col*4 + row]): a row-major reshape is the transpose.
        matrix = raw.reshape(4, 4).T.copy()
        matrix[:3, 3] *= 1e-3
        return matrix

    def stylus_rotation(self) -> NDArray[np.float64]:
        """(3, 3) rotation of the stylus, device frame (see ``stylus_transform``)."""
        return self.stylus_transform()[:3, :3].copy()

    @property
    def timing(self) -> ServoTiming | None:
        """The tick-period statistics of the current or last run (None before the first)."""
        return self._timing

    def clock(self) -> OpenHapticsClock:
        """The ServoClock that runs ticks paced by this device's HD scheduler."""
        return OpenHapticsClock(self)

    # -- running a tick --------------------------------------------------------------

    def _now(self) -> float:
        return time.perf_counter() - self._t0

    def _new_errors(self) -> list[HDError]:
        """The libHD errors the servo callback read since the last call (also kept in hd_errors)."""
        if self._shim is None:
            return []
        raw = self._shim.errors_since(self._errors_seen)
        self._errors_seen = int(self._shim.status().n_errors)
        errors = [HDError(code, internal, t_s - self._t0) for code, internal, t_s in raw]
        self.hd_errors.extend(errors)
        self._run_errors.extend(errors)
        return errors

    def run(self, tick: Tick, max_ticks: int) -> None:
        """Run ``tick`` once per servo tick until it returns False or ``max_ticks`` ran.

        The tick runs in the calling thread, paced by the C servo callback (waiting for
        each sample with the GIL released). Force ramps in (safety engage ramp, restarted
        here) and out at the end. Opens the device first if ``with device:`` has not
        (``close``/``__exit__`` still stop it).

        Raises:
            Exception: whatever the tick raised (force zeroed first, fault latched).
            DeviceError: libHD reported an error, the force watchdog tripped (no fresh
                force in time: a tick that stalled), the scheduler stalled, or the device
                is not open / faulted / already running.
        """
        if not self._open:
            self.open()  # a clock run needs the scheduler; __exit__/close (or exit) stops it
        if self.fault is not None:
            raise DeviceError(f"the device is faulted ({self._fault}); call clear_fault() to go on")
        if self._mode != _IDLE:
            raise DeviceError("a run is already active on this device")
        if max_ticks < 1:
            raise ValueError(f"max_ticks must be at least 1, got {max_ticks}")
        assert self._shim is not None
        shim = self._shim
        self._tick = tick
        self._max_ticks = int(max_ticks)
        self._ticks_run = 0
        self._skipped = 0
        self._stop_requested = False
        self._stopped_by = ""
        self._watchdog_report = None
        self._run_errors = []
        self._timing = ServoTiming(1.0 / self.spec.rate_hz, capacity=min(self._max_ticks, _TIMING_CAPACITY))
        engaged = self.safety.engaged  # engagement persists across runs; the ramp restarts
        self.safety.reset()
        self.safety.set_engaged(engaged)
        self._prev_buttons = 0
        self._servo_ident = threading.get_ident()
        self._done.clear()
        shim.reset_stats()
        restore, self._realtime = _realtime_thread()
        try:
            if not self._realtime:
                logger.info("the servo loop runs without real-time priority (grant CAP_SYS_NICE or an rtprio "
                            "limit): a busy machine may delay a tick past the force watchdog's limit")
            with frozen_heap(), realtime_loop() if self._realtime else contextlib.nullcontext():
                latest = Sample()
                shim.latest(latest)
                self._seq = int(latest.seq)  # the first tick answers the next sample
                shim.arm()
                self._mode = _RUNNING
                self._loop()
        finally:
            shim.disarm()  # zero force from the next callback, whatever happened ...
            shim.wait_zero_sent(0.05)  # ... and sent before run() returns or raises
            self._mode = _IDLE
            self._tick = None
            self._in_tick = False
            self._servo_ident = -1
            _restore_thread(restore)
            self._finish_run()
            self._done.set()

    def _loop(self) -> None:
        assert self._shim is not None
        shim, sample = self._shim, self._sample
        waited_s = 0.0
        post = False  # the tick's force (self._sent) is still to be posted for self._seq
        while True:
            if post:
                x, y, z = self._sent.tolist()
                seq = shim.post_and_wait(self._seq, x, y, z, _WAIT_SLICE_S, sample)
                post = False
            else:
                seq = shim.wait_sample(self._seq, _WAIT_SLICE_S, sample)
            if seq == 0:
                if sample.closed or self._handle == HD_INVALID_HANDLE:
                    self._stopped_by = "closed"
                    raise DeviceError("the device was closed during a run")
                waited_s += _WAIT_SLICE_S
                if waited_s >= self._stall_timeout_s:
                    self._fault = "the HD scheduler stopped calling back"
                    self._stopped_by = "scheduler stall"
                    raise DeviceError(f"{self._fault} (no servo tick for {self._stall_timeout_s} s)")
                continue
            waited_s = 0.0
            self._skipped += seq - self._seq - 1
            self._seq = seq
            if sample.hd_fault or sample.n_errors > self._errors_seen:
                self._raise_hd_errors()
            if sample.tripped:
                self._raise_watchdog()
            t = sample.t_s - self._t0
            self._load_state(t)
            if self._mode == _RUNNING:
                self._run_tick(t)
            else:  # _RAMP_OUT
                self._sent[:] = self.safety.ramp_to_zero(t)
                if not self._sent.any():
                    shim.post_force(self._seq, 0.0, 0.0, 0.0)
                    return
            post = True

    def _load_state(self, t: float) -> None:
        st = self._state
        st.t_s = t
        np.multiply(self._pos_mm, 1e-3, out=st.position_m)
        np.multiply(self._vel_mm_s, 1e-3, out=st.velocity_m_s)
        st.buttons = int(self._sample.buttons)

    def _run_tick(self, t: float) -> None:
        assert self._timing is not None and self._tick is not None
        self._timing.mark(time.perf_counter() - self._t0)
        buttons = self._state.buttons
        if self._engage_from_button and buttons & BUTTON_ENGAGE and not self._prev_buttons & BUTTON_ENGAGE:
            self.safety.set_engaged(True)
        self._prev_buttons = buttons
        self._commanded = False
        self._in_tick = True
        try:
            keep_going = self._tick()
        except BaseException as exc:
            self._in_tick = False
            assert self._shim is not None
            self._shim.post_force(self._seq, 0.0, 0.0, 0.0)  # zero in this frame if the callback still waits
            self._fault = f"the servo tick raised {type(exc).__name__}: {exc}"
            self._stopped_by = "tick exception"
            raise
        self._in_tick = False
        if not self._commanded:
            self._sent[:] = self.safety.filter(t, self._zero)
        self._ticks_run += 1
        if keep_going is False or self._ticks_run >= self._max_ticks or self._stop_requested:
            self._stopped_by = "tick" if keep_going is False else ("stop" if self._stop_requested else "max_ticks")
            self._mode = _RAMP_OUT

    def _raise_hd_errors(self) -> None:
        errors = self._new_errors()
        text = "; ".join(map(str, errors)) or "an error"
        self._fault = f"libHD reported {text}"
        self._stopped_by = "hd error"
        raise DeviceError(f"libHD reported {text} during the servo loop")

    def _raise_watchdog(self) -> None:
        assert self._shim is not None
        st = self._shim.status()
        self._watchdog_report = {
            "trip_t_s": st.trip_t_s - self._t0,
            "no_fresh_force_ms": 1e3 * st.trip_age_s,
            "zero_t_s": None if math.isnan(st.zero_t_s) else st.zero_t_s - self._t0,
            "last_fresh_t_s": st.last_fresh_t_s - self._t0,
        }
        self._fault = (f"the force watchdog zeroed the force: no fresh force from the servo tick for "
                       f"{1e3 * st.trip_age_s:.1f} ms (limit {1e3 * self._shim.timing.stale_s:.1f} ms)")
        self._stopped_by = "force watchdog"
        raise DeviceError(self._fault)

    def _finish_run(self) -> None:
        summary: dict[str, Any] = dict(self._timing.summary()) if self._timing else {}
        st = self._shim.status() if self._shim is not None else None
        armed_calls = (st.answered + st.unanswered) if st is not None else 0
        summary.update(
            ticks_run=self._ticks_run,
            busy_ms_mean=(st.busy_sum_s / armed_calls * 1e3) if st is not None and armed_calls else 0.0,
            busy_ms_max=st.busy_max_s * 1e3 if st is not None else 0.0,
            answered_in_frame=int(st.answered) if st is not None else 0,
            answered_late=int(st.unanswered) if st is not None else 0,
            samples_skipped=self._skipped,
            hd_errors=[str(e) for e in self._run_errors],
            watchdog=self._watchdog_report,
            realtime=self._realtime,
            stopped_by=self._stopped_by,
        )
        self.last_run = summary


class OpenHapticsClock:
    """``ServoClock`` whose ticks are paced by the device's HD scheduler."""

    def __init__(self, device: OpenHapticsDevice) -> None:
        self.device = device

    @property
    def timing(self) -> ServoTiming | None:
        """The ``ServoTiming`` of the current or last run (None before the first)."""
        return self.device.timing

    def run(self, tick: Tick, max_ticks: int) -> None:
        """See ``OpenHapticsDevice.run``."""
        self.device.run(tick, max_ticks)
