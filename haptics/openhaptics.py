"""OpenHaptics backend: a real Touch-class device through libHD (via pyOpenHaptics).

The servo tick runs **inside the HD scheduler callback** at the device's rate (1 kHz):

    callback (HD servo thread, every tick)
      hdBeginFrame → read HD_CURRENT_POSITION / _VELOCITY / _TRANSFORM / _BUTTONS
      → [during a run] tick()  (calls device.read() and device.command_force(f))
      → hdSetDoublev(HD_CURRENT_FORCE) → hdEndFrame → hdGetError (drained, real codes)

``OpenHapticsDevice.clock().run(tick, max_ticks)`` hands a tick to that callback and
blocks the calling thread on an ``Event`` (releasing the GIL) until the tick returns
False, ``max_ticks`` ticks have run, the tick raises, or the device reports an error.
Between runs the callback keeps reading the stylus (``read()`` from any thread returns
the latest reading) and holds zero force.

Units and frames: libHD reports millimetres and mm/s in the device frame (Touch: x right,
y up, z toward the user); they are converted to metres at this edge. Forces are newtons
on the stylus, device frame, as ``HD_CURRENT_FORCE``. ``HD_CURRENT_TRANSFORM`` is a
column-major 4x4 (OpenGL order): element ``[col*4 + row]``.

Safety: every command goes through ``haptics.safety.SafetyLayer`` (peak clamp, thermal
continuous-force limit, rate limit, non-finite guard, watchdog, engage ramp), and
libHD's own ``HD_MAX_FORCE_CLAMPING`` is enabled as a second line. Force ramps in
(engage ramp, restarted at every run) and out (``SafetyLayer.ramp_to_zero``) at the
end of a run. A tick that raises, or any HD error, zeroes the force in that frame,
latches a fault (``clear_fault`` to go on) and is re-raised in the thread that called
``run``.

The GIL: the HD thread must take the GIL every tick. While the device is open the
interpreter's switch interval is lowered (``switch_interval_s``, default 0.5 ms) so that
another busy Python thread hands the GIL over within half a tick, and every run records
its tick-period statistics (``haptics.timing.ServoTiming``) in ``last_run``.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import logging
import math
import sys
import threading
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import DeviceError
from haptics._hd_api import (
    HD_CALLBACK_CONTINUE,
    HD_CALLBACK_DONE,
    HD_INVALID_HANDLE,
    HD_MAX_SCHEDULER_PRIORITY,
    INSTALL_HINT,
    SCHEDULER_CALLBACK,
    HDApi,
    HDError,
    load_api,
)
from haptics.device import BUTTON_ENGAGE, DeviceSpec, DeviceState, Tick
from haptics.safety import SafetyConfig, SafetyLayer
from haptics.timing import ServoTiming, frozen_heap

logger = logging.getLogger(__name__)

# Callback modes (plain ints: read by the HD thread every tick, written by the caller).
#: Run states: idle; running the tick; ramping out after the run; one zero-force frame
#: still to send after a libHD error seen past the end of a frame.
_IDLE, _RUNNING, _RAMP_OUT, _ZERO_THEN_IDLE = 0, 1, 2, 3

#: Longest run a ServoTiming keeps every period of (10 minutes at 1 kHz).
_TIMING_CAPACITY = 600_000

# A Touch's data sheet: used only for a limit a (minimal, emulated) libHD does not report.
TOUCH_MAX_FORCE_N = 3.3
TOUCH_CONTINUOUS_FORCE_N = 0.88
TOUCH_USABLE_WORKSPACE_MM = (-80.0, -60.0, -35.0, 80.0, 60.0, 35.0)


class OpenHapticsDevice:
    """A Touch-class device through OpenHaptics' HD API, its tick in the HD scheduler.

    The constructor initialises the device and reads its limits (``spec``); entering the
    context (``with device:``) starts the HD scheduler; leaving it stops the scheduler
    and releases the device. ``clock().run(tick, max_ticks)`` runs a servo loop.

    Args:
        device_name: HD configuration name (None: ``HD_DEFAULT_DEVICE``).
        safety_config: tuning of the safety layer (engage default, ramps, watchdog).
        max_force_rate_n_s: force-rate limit [N/s] for the spec (not reported by libHD).
        engage_from_button: a press of stylus button 1 (``BUTTON_ENGAGE``) during a run
            engages the force. Engagement persists (across runs too) until
            ``set_engaged(False)``; the force ramps in again at every run. With False
            only ``set_engaged`` and ``safety_config.engaged_at_start`` engage.
        switch_interval_s: ``sys.setswitchinterval`` while the device is open (None:
            leave it).
        stall_timeout_s: ``run`` raises DeviceError when the HD scheduler has not called
            back for this long [s].

    Attributes:
        spec: the device's limits read at start (``DeviceSpec``, name ``openhaptics``).
        info: further identification (serial, driver version, libHD path, ...).
        safety: the ``SafetyLayer`` every command passes through.
        last_run: statistics of the last run (``ServoTiming.summary()`` plus ``ticks_run``,
            ``busy_ms_mean``/``busy_ms_max`` (time inside the callback, from
            ``hdGetSchedulerTimeStamp``), ``hd_errors``, ``stopped_by``), or None.

    Raises:
        DeviceError: libHD or the device is missing (with what to install and which
            backends work now), or the device reports nonsense limits.
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
        self._callback_dead = False
        self._engage_from_button = bool(engage_from_button)
        self._switch_interval_s = switch_interval_s
        self._saved_switch_interval: float | None = None
        self._stall_timeout_s = float(stall_timeout_s)
        self._init_device(device_name)
        try:
            self.spec, self.info = self._read_spec(max_force_rate_n_s)
            self.safety = SafetyLayer(self.spec, safety_config)
        except BaseException:
            self._api.hdDisableDevice(self._handle)
            self._api.drain_errors(0.0)
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
        d = self._define
        self._E_POS, self._E_VEL = d.HD_CURRENT_POSITION, d.HD_CURRENT_VELOCITY
        self._E_XF, self._E_BTN, self._E_FORCE = d.HD_CURRENT_TRANSFORM, d.HD_CURRENT_BUTTONS, d.HD_CURRENT_FORCE
        self._pos_buf = (ctypes.c_double * 3)()
        self._vel_buf = (ctypes.c_double * 3)()
        self._xf_buf = (ctypes.c_double * 16)()
        self._btn_buf = ctypes.c_int(0)
        self._btn_ref = ctypes.byref(self._btn_buf)
        self._force_buf = (ctypes.c_double * 3)()
        self._pos_mm = np.ctypeslib.as_array(self._pos_buf)
        self._vel_mm_s = np.ctypeslib.as_array(self._vel_buf)
        self._force_np = np.ctypeslib.as_array(self._force_buf)
        self._zero = np.zeros(3)
        self._sent = np.zeros(3)
        self._state = DeviceState()
        self._main_state = DeviceState()
        self._published: tuple[Any, ...] | None = None
        self._main_xf = bytes(ctypes.sizeof(self._xf_buf))
        self._servo_ident = -1
        self._in_tick = False
        self._in_frame = False
        self._has_pos = self._has_vel = self._has_xf = self._has_btn = True
        self._prev_pos_mm = [0.0, 0.0, 0.0]
        self._prev_t_s = -1.0
        self._wake_runner = False
        self._commanded = False
        self._mode = _IDLE
        self._tick: Tick | None = None
        self._max_ticks = 0
        self._ticks_run = 0
        self._stop_requested = False
        self._stopped_by = ""
        self._run_exc: BaseException | None = None
        self._fault: str | None = None
        self._prev_buttons = 0
        self._heartbeat = 0
        self._busy_sum_s = 0.0
        self._busy_max_s = 0.0
        self._timing: ServoTiming | None = None
        self._run_errors: list[HDError] = []
        self.hd_errors: collections.deque[HDError] = collections.deque(maxlen=256)
        self._done = threading.Event()
        self._alive = threading.Event()
        self._t0 = time.perf_counter()
        # The ctypes thunk must outlive every call libHD may make: keep it on self.
        self._callback = SCHEDULER_CALLBACK(self._on_servo)

    # -- Device protocol -------------------------------------------------------------

    def __enter__(self) -> OpenHapticsDevice:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        """Schedule the servo callback and start the HD scheduler (idempotent)."""
        if self._open:
            return
        if self._handle == HD_INVALID_HANDLE:
            raise DeviceError("this OpenHapticsDevice was closed; create a new one")
        api = self._api
        self._alive.clear()
        self._sched_handle = int(api.hdScheduleAsynchronous(self._callback, None, HD_MAX_SCHEDULER_PRIORITY))
        api.hdStartScheduler()
        errors = api.drain_errors(self._now())
        if errors:
            self._shutdown()
            raise DeviceError("the HD scheduler did not start: " + "; ".join(map(str, errors)))
        if not self._alive.wait(1.0):
            self._shutdown()
            raise DeviceError("the HD scheduler started but never called the servo callback")
        if self._fault is not None:
            reason = self._fault
            self._shutdown()
            raise DeviceError(f"the first servo frame failed: {reason}")
        answered = {"HD_CURRENT_POSITION": self._has_pos, "HD_CURRENT_VELOCITY": self._has_vel,
                    "HD_CURRENT_TRANSFORM": self._has_xf, "HD_CURRENT_BUTTONS": self._has_btn}
        missing = [name for name, ok in answered.items() if not ok]
        if missing:
            logger.warning("libHD does not answer %s; derived from the other readings", ", ".join(missing))
        self.info["state_fallbacks"] = missing
        self._open = True
        atexit.register(self.close)  # never leave the HD thread calling into a dying interpreter
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
        self._mode = _IDLE
        self._shutdown()
        atexit.unregister(self.close)
        if self._saved_switch_interval is not None:
            sys.setswitchinterval(self._saved_switch_interval)
            self._saved_switch_interval = None

    def _shutdown(self) -> None:
        api = self._api
        if self._sched_handle is not None and not self._callback_dead:
            api.hdUnschedule(self._sched_handle)  # returns once the callback is not running
        self._sched_handle = None
        api.hdStopScheduler()
        api.hdDisableDevice(self._handle)
        for error in api.drain_errors(self._now()):
            logger.warning("libHD at close: %s", error)
        self._handle = HD_INVALID_HANDLE
        self._open = False

    def read(self) -> DeviceState:
        """The latest stylus reading (metres, m/s, device frame; buttons bit mask).

        Inside the tick: this frame's reading (one instance, refilled every tick; also
        beats the safety watchdog's device channel). From another thread: a consistent
        copy of the latest reading (one instance per device, refilled per call).
        """
        if self._in_tick and threading.get_ident() == self._servo_ident:
            self.safety.heartbeat(self._state.t_s)
            return self._state
        published = self._published
        if published is None:
            raise DeviceError("no reading yet: open the device (with device: ...) first")
        st = self._main_state
        st.t_s, px, py, pz, vx, vy, vz, buttons, self._main_xf = published
        st.position_m[0], st.position_m[1], st.position_m[2] = px, py, pz
        st.velocity_m_s[0], st.velocity_m_s[1], st.velocity_m_s[2] = vx, vy, vz
        st.buttons = int(buttons)
        return st

    def command_force(self, force_n: NDArray[np.float64]) -> NDArray[np.float64]:
        """Pass ``force_n`` (3,) [N, on the stylus, device frame] through the safety layer.

        Valid only inside the tick (the HD thread); the result is written to the device
        in this frame. Returns the force sent (owned buffer, valid until the next call).
        Outside the tick a zero force is accepted (the device already holds zero between
        runs); anything else raises DeviceError.
        """
        if not (self._in_tick and threading.get_ident() == self._servo_ident):
            if not np.any(force_n):
                return self._zero
            raise DeviceError("command_force is only valid inside the servo tick (device.clock().run)")
        safe = self.safety.filter(self._state.t_s, force_n)
        self._force_np[:] = safe
        self._sent[:] = safe
        self._commanded = True
        return self._sent

    @property
    def fault(self) -> str | None:
        """Why the device is faulted (a tick raised or libHD reported an error), or None."""
        return self._fault

    def clear_fault(self) -> None:
        """Forget a latched fault so that the next run may start (force ramps in again)."""
        if self._mode != _IDLE:
            raise DeviceError("cannot clear a fault while a run is active")
        self._fault = None

    def set_engaged(self, engaged: bool) -> None:
        """Engage (force ramps in) or release (force ramps out) the guidance force."""
        self.safety.set_engaged(engaged)

    def stylus_transform(self) -> NDArray[np.float64]:
        """(4, 4) homogeneous stylus transform (device frame; rotation, translation in m).

        From ``HD_CURRENT_TRANSFORM`` of this frame inside the tick, else of the reading
        last returned by ``read()``. A new array (not for the tick's hot path).
        """
        if self._in_tick and threading.get_ident() == self._servo_ident:
            raw = np.ctypeslib.as_array(self._xf_buf).copy()
        else:
            raw = np.frombuffer(self._main_xf, dtype=np.float64)
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
        """The ServoClock that runs ticks inside this device's HD scheduler callback."""
        return OpenHapticsClock(self)

    # -- running a tick --------------------------------------------------------------

    def _now(self) -> float:
        return time.perf_counter() - self._t0

    def run(self, tick: Tick, max_ticks: int) -> None:
        """Run ``tick`` in the HD callback until it returns False or ``max_ticks`` ran.

        Blocks the calling thread (waiting on an Event, so the HD thread gets the GIL).
        Force ramps in (safety engage ramp, restarted here) and out at the end. Opens the
        device first if ``with device:`` has not (``close``/``__exit__`` still stop it).

        Raises:
            Exception: whatever the tick raised (force zeroed first, fault latched).
            DeviceError: libHD reported an error, the scheduler stalled, or the device is
                not open / faulted / already running.
        """
        if not self._open:
            self.open()  # a clock run needs the scheduler; __exit__/close (or exit) stops it
        if self._fault is not None:
            raise DeviceError(f"the device is faulted ({self._fault}); call clear_fault() to go on")
        if self._mode != _IDLE:
            raise DeviceError("a run is already active on this device")
        if threading.get_ident() == self._servo_ident:
            raise DeviceError("run() cannot be called from inside the servo tick")
        if max_ticks < 1:
            raise ValueError(f"max_ticks must be at least 1, got {max_ticks}")
        self._tick = tick
        self._max_ticks = int(max_ticks)
        self._ticks_run = 0
        self._stop_requested = False
        self._stopped_by = ""
        self._run_exc = None
        self._run_errors = []
        self._busy_sum_s = 0.0
        self._busy_max_s = 0.0
        self._timing = ServoTiming(1.0 / self.spec.rate_hz, capacity=min(self._max_ticks, _TIMING_CAPACITY))
        engaged = self.safety.engaged  # engagement persists across runs; the ramp restarts
        self.safety.reset()
        self.safety.set_engaged(engaged)
        self._prev_buttons = 0
        self._done.clear()
        try:
            with frozen_heap():
                self._mode = _RUNNING  # the HD thread picks it up at its next tick
                self._wait_for_run()
        except BaseException:
            self._stop_requested = True
            self._done.wait(1.0)
            self._mode = _IDLE
            raise
        finally:
            self._tick = None
            self._finish_run()
        if self._run_exc is not None:
            exc, self._run_exc = self._run_exc, None
            raise exc

    def _wait_for_run(self) -> None:
        last_beat = self._heartbeat
        while not self._done.wait(self._stall_timeout_s):
            if self._heartbeat == last_beat:
                self._mode = _IDLE
                self._fault = "the HD scheduler stopped calling back"
                raise DeviceError(f"{self._fault} (no servo tick for {self._stall_timeout_s} s)")
            last_beat = self._heartbeat

    def _finish_run(self) -> None:
        summary: dict[str, Any] = dict(self._timing.summary()) if self._timing else {}
        n = max(self._ticks_run, 1)
        summary.update(
            ticks_run=self._ticks_run,
            busy_ms_mean=self._busy_sum_s / n * 1e3,
            busy_ms_max=self._busy_max_s * 1e3,
            hd_errors=[str(e) for e in self._run_errors],
            stopped_by=self._stopped_by,
        )
        self.last_run = summary

    # -- the HD scheduler callback (HD servo thread) ---------------------------------

    def _on_servo(self, _user_data: int | None) -> int:
        """The scheduler callback: never lets an exception out, always returns a code."""
        try:
            return self._servo_step()
        except BaseException as exc:  # noqa: BLE001 - nothing may escape into libHD
            return self._servo_emergency(exc)

    def _servo_step(self) -> int:
        api, h = self._api, self._handle
        t = time.perf_counter() - self._t0
        if self._servo_ident != threading.get_ident():
            self._servo_ident = threading.get_ident()
        api.hdBeginFrame(h)
        self._in_frame = True
        if self._heartbeat == 0:
            self._probe_state_enums()
        if self._has_xf:
            api.hdGetDoublev(self._E_XF, self._xf_buf)
        if self._has_pos:
            api.hdGetDoublev(self._E_POS, self._pos_buf)
        else:
            self._pos_buf[0], self._pos_buf[1], self._pos_buf[2] = self._xf_buf[12:15]
        if self._has_vel:
            api.hdGetDoublev(self._E_VEL, self._vel_buf)
        else:
            self._difference_velocity(t)
        if self._has_btn:
            api.hdGetIntegerv(self._E_BTN, self._btn_ref)
        st = self._state
        st.t_s = t
        np.multiply(self._pos_mm, 1e-3, out=st.position_m)
        np.multiply(self._vel_mm_s, 1e-3, out=st.velocity_m_s)
        buttons = self._btn_buf.value
        st.buttons = buttons

        mode = self._mode
        if mode == _RUNNING:
            self._run_tick(t, buttons)
        elif mode == _RAMP_OUT:
            self._force_np[:] = self.safety.ramp_to_zero(t)
            if not self._force_np.any():
                self._end_run()
        elif mode == _ZERO_THEN_IDLE:
            self._force_np[:] = 0.0
            self._end_run()
        else:
            self._force_np[:] = 0.0
        api.hdSetDoublev(self._E_FORCE, self._force_buf)
        api.hdEndFrame(h)
        self._in_frame = False

        info = api.hdGetError()
        if info.errorCode:
            self._on_hd_errors(t, int(info.errorCode), int(info.internalErrorCode))
        p, v = self._pos_buf, self._vel_buf
        self._published = (
            t, p[0] * 1e-3, p[1] * 1e-3, p[2] * 1e-3, v[0] * 1e-3, v[1] * 1e-3, v[2] * 1e-3,
            buttons, bytes(self._xf_buf),
        )
        if self._heartbeat == 0:
            self._alive.set()
        self._heartbeat += 1
        if mode != _IDLE and api.hdGetSchedulerTimeStamp is not None:
            busy = api.hdGetSchedulerTimeStamp()
            self._busy_sum_s += busy
            if busy > self._busy_max_s:
                self._busy_max_s = busy
        if self._wake_runner:
            self._wake_runner = False
            self._done.set()
        return HD_CALLBACK_CONTINUE

    def _probe_state_enums(self) -> None:
        """First frame: which state queries this libHD answers (all, on a real driver)."""
        api = self._api
        queries = (("_has_xf", self._E_XF, self._xf_buf), ("_has_pos", self._E_POS, self._pos_buf),
                   ("_has_vel", self._E_VEL, self._vel_buf))
        for attr, enum, buf in queries:
            api.hdGetDoublev(enum, buf)
            setattr(self, attr, not api.drain_errors(0.0))
        api.hdGetIntegerv(self._E_BTN, self._btn_ref)
        self._has_btn = not api.drain_errors(0.0)
        if not self._has_xf:
            for i, value in enumerate((1.0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 1.0)):
                self._xf_buf[i] = value
        if not (self._has_pos or self._has_xf):
            raise DeviceError("libHD answers neither HD_CURRENT_POSITION nor HD_CURRENT_TRANSFORM")

    def _difference_velocity(self, t: float) -> None:
        """Velocity [mm/s] by differencing positions, for a libHD without HD_CURRENT_VELOCITY.

        The positions are differenced over the times the scheduler's ticks began (when
        the device was sampled: ``t`` less ``hdGetSchedulerTimeStamp``), not over when
        this callback got the GIL: every ctypes call may wait for it, so with a busy Python
        thread beside the loop callback-time differencing misread speeds by up to 1.8x.
        """
        stamp = self._api.hdGetSchedulerTimeStamp
        if stamp is not None:
            # read the clock right before the call: every ctypes call may wait for the GIL
            # on its way back, so ``t`` (taken on entry) can be late by then
            now = time.perf_counter() - self._t0
            in_tick = stamp()
            if 0.0 <= in_tick < 0.05:
                t = now - in_tick
        p, prev, v = self._pos_buf, self._prev_pos_mm, self._vel_buf
        dt = t - self._prev_t_s
        for i in range(3):
            v[i] = (p[i] - prev[i]) / dt if 0.0 < dt < 0.05 else 0.0
            prev[i] = p[i]
        self._prev_t_s = t
        if not self._has_xf:
            self._xf_buf[12], self._xf_buf[13], self._xf_buf[14] = p[0], p[1], p[2]

    def _run_tick(self, t: float, buttons: int) -> None:
        self._timing.mark(t)
        if self._engage_from_button and buttons & BUTTON_ENGAGE and not self._prev_buttons & BUTTON_ENGAGE:
            self.safety.set_engaged(True)
        self._prev_buttons = buttons
        self._commanded = False
        self._in_tick = True
        try:
            keep_going = self._tick()
        except BaseException as exc:  # noqa: BLE001 - re-raised in run()'s thread
            self._in_tick = False
            self._force_np[:] = 0.0
            self._latch(f"the servo tick raised {type(exc).__name__}: {exc}", exc, "tick exception")
            return
        self._in_tick = False
        if not self._commanded:
            self._force_np[:] = self.safety.filter(t, self._zero)
        self._ticks_run += 1
        if keep_going is False or self._ticks_run >= self._max_ticks or self._stop_requested:
            self._stopped_by = "tick" if keep_going is False else ("stop" if self._stop_requested else "max_ticks")
            self._mode = _RAMP_OUT

    def _end_run(self) -> None:
        # run() is woken at the end of this callback, once the frame (zero force) is sent.
        self._mode = _IDLE
        self._wake_runner = True

    def _latch(self, reason: str, exc: BaseException, stopped_by: str) -> None:
        """Zero force from now on, remember why, and wake the thread waiting in run()."""
        self._force_np[:] = 0.0
        if self._fault is None:
            self._fault = reason
        if self._mode != _IDLE:
            self._run_exc = exc
            self._stopped_by = stopped_by
            self._end_run()

    def _on_hd_errors(self, t: float, code: int, internal: int) -> None:
        errors = [HDError(code, internal, t), *self._api.drain_errors(t)]
        self.hd_errors.extend(errors)
        self._run_errors.extend(errors)
        text = "; ".join(map(str, errors))
        error = DeviceError(f"libHD reported {text} during the servo loop")
        running = self._mode != _IDLE
        self._latch(f"libHD reported {text}", error, "hd error")
        if running:
            # This frame's force has already gone out: run() is woken only after the next
            # frame has sent zero force.
            self._wake_runner = False
            self._mode = _ZERO_THEN_IDLE

    def _servo_emergency(self, exc: BaseException) -> int:
        """Our own callback machinery failed: zero force, end the frame, latch, report."""
        try:
            self._alive.set()  # open() is waiting for the first frame: let it see the fault
            self._force_np[:] = 0.0
            if self._in_frame:
                self._api.hdSetDoublev(self._E_FORCE, self._force_buf)
                self._api.hdEndFrame(self._handle)
                self._in_frame = False
            reason = f"the servo callback failed: {exc!r}"
            self._latch(reason, DeviceError(reason), "callback error")
            if self._wake_runner:
                self._wake_runner = False
                self._done.set()
            return HD_CALLBACK_CONTINUE
        except BaseException:  # noqa: BLE001 - last resort: leave the scheduler
            self._callback_dead = True
            return HD_CALLBACK_DONE


class OpenHapticsClock:
    """``ServoClock`` whose ticks run inside the device's HD scheduler callback."""

    def __init__(self, device: OpenHapticsDevice) -> None:
        self.device = device

    @property
    def timing(self) -> ServoTiming | None:
        """The ``ServoTiming`` of the current or last run (None before the first)."""
        return self.device.timing

    def run(self, tick: Tick, max_ticks: int) -> None:
        """See ``OpenHapticsDevice.run``."""
        self.device.run(tick, max_ticks)

