"""The servo safety layer: the one limiter, the last stage before any force reaches a device.

Guidance computes and frames a force (``guidance.rendering.ForceRenderer``); every
backend (OpenHaptics, simulated, mouse) passes each commanded force through one
``SafetyLayer`` inside its ``command_force``, and nothing else limits it. Stages, in
order, once per tick:

1. **Non-finite guard**: a command with a NaN or infinite component, or a tick with a
   non-finite time, is replaced by zero for that tick and ``fault`` is set (the output
   then falls at the rate limit, so even a fault never makes the force jump). A
   non-finite time is taken as one nominal period after the previous tick and is never
   stored, so it cannot turn a later output into NaN; a non-finite ``heartbeat`` is
   ignored (it is not fresh data).
2. **Engage ramp**: the command is multiplied by an engage gain in [0, 1] that ramps
   linearly to 1 over ``ramp_in_s`` (the scenario's ``ramp_time_s``; 0: no ramp) while
   engaged and to 0 over ``ramp_out_s`` when released. Default: *not engaged* at start
   (``engaged_at_start=False``): no force until the person engages (stylus button 0 on a
   Touch; the simulated participant engages when it takes the stylus).
3. **Saturation** to the force limit ``min(config.max_force_n, spec.max_force_n)``:
   ``saturation="norm"`` scales the vector down and keeps its direction;
   ``"axis"`` clamps each component, as the paper did (3 N per axis), which may turn
   the direction. Then, in both modes, a **norm clamp** to the device's peak
   ``spec.max_force_n`` derated by the **thermal budget** toward its continuous rating
   F_c, like a motor winding model. The layer keeps the exponentially averaged squared
   force (time constant ``thermal_tau_s``)

       E ← E + (dt/τ) (|f|² − E)

   (|f|² ∝ copper losses I²R; E/F_c² is the winding's fraction of its allowed
   temperature rise). The full peak is allowed while E ≤ θ F_c² (θ =
   ``thermal_derate_start``); above, the allowed norm derates linearly to F_c as
   E → F_c², so E never exceeds F_c²: a cold Touch gives the full 3.3 N for about 2 s
   (τ = 30 s), then settles at its 0.88 N continuous rating.
4. **Rate limit**: the output moves toward the clamped command by at most
   ``rate * dt`` (Euclidean norm of the change), ``rate = min(config.max_rate_n_s,
   spec.max_force_rate_n_s)``.
5. **Watchdog** (in the tick): the loop has *stalled* when the time since the previous
   ``filter`` call exceeds ``max_tick_gap_s`` (missed ticks) or when a watched data
   channel (``heartbeat``; channel 0 is the device reading, backends beat it in
   ``read``) has not been refreshed for ``stale_timeout_s``. Then the output ramps
   linearly from its value at the trip to zero within ``watchdog_ramp_s``, whatever is
   commanded, and ``watchdog`` stays set; it clears after ``recover_s`` of regular ticks
   with fresh data, and the engage gain then restarts from zero, so force ramps in again.
   With the defaults a stall is zeroed within 4 ms (detection) + 1 ms (one tick) + 4 ms
   (ramp) < ``force_deadline_s`` = 10 ms (checked when the layer is built).

This watchdog only acts when ``filter`` is called. When the tick itself is stuck, a
watchdog that does not need the tick must zero the device: the OpenHaptics backend's
servo callback is C (``haptics/native/hd_servo.c``) and sends a force only while it is
fresh (no fresh force for ``max_tick_gap_s``: ramp to zero over ``watchdog_ramp_s``, and
zero at ``force_deadline_s`` at the latest), whatever Python is doing.

The watchdog ramp takes priority over the rate limit (it is at most
``max_force_n / watchdog_ramp_s`` = 825 N/s for a Touch, below its 1000 N/s limit).

``filter`` is allocation-free apart from Python floats: it works on plain floats and
writes into one owned (3,) buffer, returned to the caller and valid until the next call.
Not thread safe: call ``filter``, ``heartbeat`` and ``ramp_to_zero`` from one thread.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

from haptics import _kernels as _k
from haptics.spec import DeviceSpec

#: Most heartbeat channels a layer can watch (device reading, arm state, ...).
MAX_CHANNELS = 8
#: Saturation modes: keep the direction (``norm``) or clamp each axis (``axis``, the paper).
SATURATION_MODES: tuple[str, ...] = ("norm", "axis")
#: Smallest positive normal double: below it a ratio has lost precision.
_SMALLEST_NORMAL = sys.float_info.min


def clamp_norm3(x: float, y: float, z: float, limit: float) -> tuple[float, float, float, bool]:
    """``(x, y, z)`` scaled down to a Euclidean norm of at most ``limit``, and whether it was.

    Keeps the direction. A non-finite input gives zeros (never NaN).
    """
    # hypot neither overflows for huge components nor loses precision for tiny ones.
    norm = math.hypot(x, y, z)
    if norm <= limit:
        return x, y, z, False
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        return 0.0, 0.0, 0.0, True
    gain = limit / norm
    if gain < _SMALLEST_NORMAL:
        # limit / norm is subnormal (huge vector, tiny limit) and has lost its precision:
        # scale the unit direction instead (no other case changes).
        cx, cy, cz = x / norm * limit, y / norm * limit, z / norm * limit
    else:
        cx, cy, cz = x * gain, y * gain, z * gain
    if limit < _SMALLEST_NORMAL and math.hypot(cx, cy, cz) > limit:
        # a subnormal limit: the components round up to the smallest steps, whose norm can
        # exceed it (5e-324 on each axis is 1e-323); only zero stays under it
        return 0.0, 0.0, 0.0, True
    return cx, cy, cz, True


def clamp_axis3(x: float, y: float, z: float, limit: float) -> tuple[float, float, float, bool]:
    """Each component clamped to ``[-limit, limit]`` (the paper's 3 N per axis), and whether any was.

    A NaN input gives zeros (never NaN).
    """
    if x != x or y != y or z != z:
        return 0.0, 0.0, 0.0, True
    cx = min(max(x, -limit), limit)
    cy = min(max(y, -limit), limit)
    cz = min(max(z, -limit), limit)
    return cx, cy, cz, (cx != x or cy != y or cz != z)


def _positive_or_none(name: str, value: float | None, allow_zero: bool = False) -> None:
    if value is None:
        return
    ok = value >= 0.0 if allow_zero else value > 0.0
    if not (ok and math.isfinite(value)):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"SafetyConfig.{name} must be finite and {bound} (or None), got {value}")


@dataclass(frozen=True)
class SafetyConfig:
    """Tuning of the safety layer (newtons, seconds, fractions). See the module docstring.

    Attributes:
        engaged_at_start: whether force is allowed before ``set_engaged(True)``.
        max_force_n: force limit [N] (norm, or per axis with ``saturation="axis"``);
            the effective limit is ``min(max_force_n, spec.max_force_n)``; None: the
            device's peak.
        saturation: ``"norm"`` (keeps the direction) or ``"axis"`` (per component).
        ramp_in_s: engage ramp duration [s] (0 → full force); 0: no ramp.
        ramp_out_s: disengage ramp duration [s] (full force → 0).
        max_rate_n_s: force-rate limit [N/s]; the effective rate is
            ``min(max_rate_n_s, spec.max_force_rate_n_s)``; None: the device's.
        max_tick_gap_s: a period between ``filter`` calls (between fresh forces, for the
            independent watchdog) longer than this is a stall.
        stale_timeout_s: a watched channel older than this is stale (a stall).
        watchdog_ramp_s: time [s] in which a watchdog brings the force to zero.
        force_deadline_s: the watchdogs' promise: at most this long [s] after the last
            fresh force, the force at the device is zero (the independent watchdog cuts
            it here at the latest). Must cover ``max_tick_gap_s`` + one servo period +
            ``watchdog_ramp_s`` (checked by ``SafetyLayer``, which knows the period).
        recover_s: regular ticks with fresh data needed to clear the in-tick watchdog [s].
        thermal_tau_s: time constant [s] of the averaged squared force.
        thermal_derate_start: fraction θ of F_c² above which the peak derates.
    """

    engaged_at_start: bool = False
    max_force_n: float | None = None
    saturation: str = "norm"
    ramp_in_s: float = 0.25
    ramp_out_s: float = 0.02
    max_rate_n_s: float | None = None
    max_tick_gap_s: float = 0.004
    stale_timeout_s: float = 0.004
    watchdog_ramp_s: float = 0.004
    force_deadline_s: float = 0.010
    recover_s: float = 0.1
    thermal_tau_s: float = 30.0
    thermal_derate_start: float = 0.8

    def __post_init__(self) -> None:
        for name in ("ramp_out_s", "max_tick_gap_s", "stale_timeout_s", "watchdog_ramp_s",
                     "force_deadline_s", "thermal_tau_s"):
            value = getattr(self, name)
            if not (value > 0.0 and math.isfinite(value)):
                raise ValueError(f"SafetyConfig.{name} must be positive and finite, got {value}")
        for name in ("ramp_in_s", "recover_s"):
            value = getattr(self, name)
            if not (value >= 0.0 and math.isfinite(value)):
                raise ValueError(f"SafetyConfig.{name} must be finite and >= 0, got {value}")
        _positive_or_none("max_force_n", self.max_force_n, allow_zero=True)
        _positive_or_none("max_rate_n_s", self.max_rate_n_s)
        if self.saturation not in SATURATION_MODES:
            raise ValueError(f"SafetyConfig.saturation must be one of {SATURATION_MODES}, got {self.saturation!r}")
        if not 0.0 <= self.thermal_derate_start < 1.0:
            raise ValueError(
                f"SafetyConfig.thermal_derate_start must be in [0, 1), got {self.thermal_derate_start}"
            )

    @classmethod
    def for_rendering(
        cls,
        *,
        max_force_n: float,
        saturation: str,
        ramp_time_s: float,
        max_rate_n_s: float,
        **tuning: object,
    ) -> SafetyConfig:
        """The layer tuned by a scenario's rendering section (``scenarios.schema.RenderingConfig``).

        Args:
            max_force_n: the scenario's force limit [N] (the device's peak still applies).
            saturation: ``"norm"`` or ``"axis"``.
            ramp_time_s: the engage ramp [s] (``ramp_in_s``).
            max_rate_n_s: the scenario's force-rate limit [N/s] (the device's still applies).
            **tuning: any other ``SafetyConfig`` field (e.g. ``engaged_at_start``).
        """
        return cls(max_force_n=max_force_n, saturation=saturation, ramp_in_s=ramp_time_s,
                   max_rate_n_s=max_rate_n_s, **tuning)  # type: ignore[arg-type]

    def as_dict(self) -> dict[str, object]:
        """Plain-data form recorded with the trial."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


class SafetyLayer:
    """Non-finite guard, engage ramp, saturation, thermal limit, rate limit and watchdog.

    Args:
        spec: the device's limits (``max_force_n``, ``continuous_force_n``,
            ``max_force_rate_n_s``, ``rate_hz``).
        config: tuning, see ``SafetyConfig`` (``SafetyConfig()`` when None).

    Attributes describing the last ``filter``/``ramp_to_zero`` call (plain bools, read
    by the tick):
        engaged: the person has engaged (force allowed, subject to the ramp).
        saturated: the actuated force was limited on this tick: saturation, the
            thermal clamp or the rate limit changed it (``trial_log``'s ``saturated``).
        rate_limited: the rate limit held the output back (part of ``saturated``).
        fault: the command or the time was not finite (the command replaced by zero).
        watchdog: the watchdog is tripped (output ramping to / held at zero).
        engage_gain: current engage ramp gain in [0, 1].
        thermal_load: E / F_c², the used fraction of the continuous-force budget.

    Raises:
        ValueError: the spec's limits are not positive, or the watchdog timing cannot
            keep ``force_deadline_s`` at the spec's rate.
    """

    def __init__(self, spec: DeviceSpec, config: SafetyConfig | None = None) -> None:
        self.spec = spec
        self.config = config if config is not None else SafetyConfig()
        if not (spec.max_force_n > 0.0 and spec.continuous_force_n > 0.0 and spec.max_force_rate_n_s > 0.0):
            raise ValueError("DeviceSpec forces and force rate must be positive")
        if not spec.rate_hz > 0.0:
            raise ValueError(f"DeviceSpec.rate_hz must be positive, got {spec.rate_hz}")
        cfg = self.config
        self._period = 1.0 / float(spec.rate_hz)
        if not cfg.max_tick_gap_s > self._period:
            raise ValueError(f"SafetyConfig.max_tick_gap_s ({cfg.max_tick_gap_s} s) must exceed the servo "
                             f"period ({self._period} s)")
        if cfg.max_tick_gap_s + self._period + cfg.watchdog_ramp_s > cfg.force_deadline_s:
            raise ValueError(
                f"SafetyConfig.force_deadline_s ({cfg.force_deadline_s} s) must cover max_tick_gap_s + one "
                f"period + watchdog_ramp_s ({cfg.max_tick_gap_s} + {self._period} + {cfg.watchdog_ramp_s} s)"
            )
        self._out: NDArray[np.float64] = np.zeros(3)
        self._hb_t_s: list[float] = [-math.inf] * MAX_CHANNELS  # a list: cheaper per tick than an array
        self._channel_names: list[str] = ["device"]
        self._n_channels = 1
        self._peak = float(spec.max_force_n)
        self._cont = min(float(spec.continuous_force_n), self._peak)
        limit = self._peak if cfg.max_force_n is None else min(float(cfg.max_force_n), self._peak)
        self._limit = limit
        self._axis = cfg.saturation == "axis"
        spec_rate = float(spec.max_force_rate_n_s)
        self._rate = spec_rate if cfg.max_rate_n_s is None else min(float(cfg.max_rate_n_s), spec_rate)
        self.reset()

    # -- set-up (not per tick) -----------------------------------------------------

    @property
    def force_limit_n(self) -> float:
        """The effective force limit [N]: ``min(config.max_force_n, spec.max_force_n)``."""
        return self._limit

    @property
    def rate_limit_n_s(self) -> float:
        """The effective force-rate limit [N/s]: ``min(config.max_rate_n_s, spec.max_force_rate_n_s)``."""
        return self._rate

    def watch(self, name: str) -> int:
        """Register another data channel whose freshness the watchdog checks.

        Returns the channel index to pass to ``heartbeat``. Channel 0 (``device``)
        always exists. Call before the loop starts.
        """
        if name in self._channel_names:
            return self._channel_names.index(name)
        if len(self._channel_names) >= MAX_CHANNELS:
            raise ValueError(f"at most {MAX_CHANNELS} watched channels")
        self._channel_names.append(name)
        self._n_channels = len(self._channel_names)
        return self._n_channels - 1

    def reset(self) -> None:
        """Back to the start state: zero output, cold thermal model, no heartbeat yet."""
        self._out[:] = 0.0
        self._hb_t_s[:] = [-math.inf] * MAX_CHANNELS
        self._last_t_s = math.nan
        self._energy_n2 = 0.0
        self.engaged = bool(self.config.engaged_at_start)
        self.engage_gain = 0.0
        self.saturated = False
        self.rate_limited = False
        self.fault = False
        self.watchdog = False
        self._wd_t0_s = 0.0
        self._wd_fx = self._wd_fy = self._wd_fz = 0.0
        self._ok_since_s = math.nan

    # -- per tick ------------------------------------------------------------------

    @property
    def thermal_load(self) -> float:
        """E / F_c²: 1.0 means the continuous-force budget is used up."""
        return self._energy_n2 / (self._cont * self._cont)

    @property
    def force_n(self) -> NDArray[np.float64]:
        """The last output force [N], device frame (the owned buffer)."""
        return self._out

    def set_engaged(self, engaged: bool) -> None:
        """Engage (force ramps in) or release (force ramps out)."""
        self.engaged = bool(engaged)

    def heartbeat(self, t_s: float, channel: int = 0) -> None:
        """Record that fresh data arrived on ``channel`` at time ``t_s`` [s] (ignored if not finite)."""
        if math.isfinite(t_s):
            self._hb_t_s[channel] = t_s

    def stalled(self, t_s: float) -> bool:
        """Whether, at ``t_s``, ticks were missed or a watched channel is stale (True if ``t_s`` is not finite)."""
        if not math.isfinite(t_s):
            return True
        last = self._last_t_s
        if last == last and t_s - last > self.config.max_tick_gap_s:
            return True
        return self._stale(t_s)

    def _stale(self, t_s: float) -> bool:
        timeout = self.config.stale_timeout_s
        hb = self._hb_t_s
        for ch in range(self._n_channels):
            if t_s - hb[ch] > timeout:
                return True
        return False

    def _finite_time(self, t_s: float) -> float:
        """``t_s``, or for a non-finite one a nominal period after the previous tick."""
        if math.isfinite(t_s):
            return t_s
        last = self._last_t_s
        return 0.0 if last != last else last + self._period

    def _trip(self, t_s: float) -> None:
        self.watchdog = True
        self._wd_t0_s = t_s
        self._wd_fx, self._wd_fy, self._wd_fz = self._out.tolist()
        self._ok_since_s = math.nan

    def _watchdog_output(self, t_s: float) -> None:
        k = 1.0 - (t_s - self._wd_t0_s) / self.config.watchdog_ramp_s
        if k <= 0.0:
            k = 0.0
        elif k > 1.0:
            k = 1.0
        out = self._out
        out[0] = k * self._wd_fx
        out[1] = k * self._wd_fy
        out[2] = k * self._wd_fz

    def ramp_to_zero(self, t_s: float) -> NDArray[np.float64]:
        """Trip the watchdog (if not yet) and return the ramped-down force at ``t_s``.

        For a controlled stop (the end of a run, closing a device) and for whoever still
        runs beside a stuck tick. The force reaches zero ``watchdog_ramp_s`` after the
        first call. Returns the owned (3,) buffer [N], device frame.
        """
        t_s = self._finite_time(t_s)
        if not self.watchdog:
            self._trip(t_s)
        self._ok_since_s = math.nan
        self._watchdog_output(t_s)
        self._energy_update(t_s)
        self._last_t_s = t_s
        self.saturated = self.rate_limited = self.fault = False
        return self._out

    def _energy_update(self, t_s: float) -> None:
        last = self._last_t_s
        dt = self._period if last != last else t_s - last
        if dt <= 0.0:
            return
        a = dt / self.config.thermal_tau_s
        if a > 1.0:
            a = 1.0
        fx, fy, fz = self._out.tolist()
        f2 = fx * fx + fy * fy + fz * fz
        self._energy_n2 += a * (f2 - self._energy_n2)

    def _norm_limit(self) -> float:
        cont2 = self._cont * self._cont
        theta = self.config.thermal_derate_start
        head = (cont2 - self._energy_n2) / ((1.0 - theta) * cont2)
        if head >= 1.0:
            return self._peak
        if head <= 0.0:
            return self._cont
        return self._cont + (self._peak - self._cont) * head

    # -- the compiled form (haptics._kernels.safety_filter, for the fused servo tick) ----

    def pack_config(self) -> NDArray[np.float64]:
        """The layer's constants as ``haptics._kernels.safety_filter`` takes them (``SC_*``)."""
        cfg = self.config
        out = np.zeros(_k.N_SAFETY_CONFIG)
        out[_k.SC_PERIOD] = self._period
        out[_k.SC_MAX_GAP] = cfg.max_tick_gap_s
        out[_k.SC_STALE] = cfg.stale_timeout_s
        out[_k.SC_RECOVER] = cfg.recover_s
        out[_k.SC_WD_RAMP] = cfg.watchdog_ramp_s
        out[_k.SC_RAMP_IN] = cfg.ramp_in_s
        out[_k.SC_RAMP_OUT] = cfg.ramp_out_s
        out[_k.SC_THERMAL_TAU] = cfg.thermal_tau_s
        out[_k.SC_DERATE_START] = cfg.thermal_derate_start
        out[_k.SC_PEAK] = self._peak
        out[_k.SC_CONT] = self._cont
        out[_k.SC_LIMIT] = self._limit
        out[_k.SC_AXIS] = 1.0 if self._axis else 0.0
        out[_k.SC_RATE] = self._rate
        return out

    def pack_state(self, st: NDArray[np.float64]) -> None:
        """Write the layer's state into ``st`` (``haptics._kernels.SF_*``); the output force
        stays in :attr:`force_n`, which the compiled filter writes like :meth:`filter`."""
        st[_k.SF_HB:_k.SF_HB + MAX_CHANNELS] = self._hb_t_s
        st[_k.SF_LAST_T] = self._last_t_s
        st[_k.SF_ENERGY] = self._energy_n2
        st[_k.SF_ENGAGED] = self.engaged
        st[_k.SF_GAIN] = self.engage_gain
        st[_k.SF_SATURATED] = self.saturated
        st[_k.SF_RATE_LIMITED] = self.rate_limited
        st[_k.SF_FAULT] = self.fault
        st[_k.SF_WATCHDOG] = self.watchdog
        st[_k.SF_WD_T0] = self._wd_t0_s
        st[_k.SF_WD_FX:_k.SF_WD_FZ + 1] = (self._wd_fx, self._wd_fy, self._wd_fz)
        st[_k.SF_OK_SINCE] = self._ok_since_s
        st[_k.SF_N_CHANNELS] = self._n_channels

    def unpack_state(self, st: NDArray[np.float64]) -> None:
        """Take the state back from ``st`` after compiled filtering (:meth:`pack_state`)."""
        values = st.tolist()
        self._hb_t_s[:] = values[_k.SF_HB:_k.SF_HB + MAX_CHANNELS]
        self._last_t_s = values[_k.SF_LAST_T]
        self._energy_n2 = values[_k.SF_ENERGY]
        self.engaged = values[_k.SF_ENGAGED] != 0.0
        self.engage_gain = values[_k.SF_GAIN]
        self.saturated = values[_k.SF_SATURATED] != 0.0
        self.rate_limited = values[_k.SF_RATE_LIMITED] != 0.0
        self.fault = values[_k.SF_FAULT] != 0.0
        self.watchdog = values[_k.SF_WATCHDOG] != 0.0
        self._wd_t0_s = values[_k.SF_WD_T0]
        self._wd_fx, self._wd_fy, self._wd_fz = values[_k.SF_WD_FX:_k.SF_WD_FZ + 1]
        self._ok_since_s = values[_k.SF_OK_SINCE]

    def filter(self, t_s: float, force_dev_n: NDArray[np.float64]) -> NDArray[np.float64]:
        """Make a commanded force safe to send (the stages of the module docstring).

        Args:
            t_s: time of this tick [s] (the loop's clock, monotonic).
            force_dev_n: (3,) commanded (calculated) force on the stylus [N], device frame.

        Returns:
            The owned (3,) output buffer [N], device frame, valid until the next call:
            the actuated force.
        """
        # Plain floats throughout, the stages inlined (half the cost of a call per stage).
        cfg = self.config
        # 1. non-finite guard (force and time)
        x, y, z = force_dev_n.tolist()
        fault = not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z))
        if not math.isfinite(t_s):
            fault = True
            t_s = self._finite_time(t_s)
        if fault:
            x = y = z = 0.0
        self.fault = fault
        last = self._last_t_s
        dt = self._period if last != last else t_s - last
        if dt < 0.0:
            dt = 0.0

        # 5. watchdog (checked first: it overrides everything)
        if dt > cfg.max_tick_gap_s or self._stale(t_s):
            if not self.watchdog:
                self._trip(t_s)
            self._ok_since_s = math.nan
        elif self.watchdog:
            if self._ok_since_s != self._ok_since_s:
                self._ok_since_s = t_s
            if t_s - self._ok_since_s >= cfg.recover_s:
                self.watchdog = False
                self.engage_gain = 0.0
        if self.watchdog:
            self._watchdog_output(t_s)
            self.saturated = self.rate_limited = False
            self._energy_update(t_s)
            self._last_t_s = t_s
            return self._out

        # 2. engage ramp
        gain = self.engage_gain
        if self.engaged:
            gain = 1.0 if cfg.ramp_in_s == 0.0 else gain + dt / cfg.ramp_in_s
            if gain > 1.0:
                gain = 1.0
        else:
            gain -= dt / cfg.ramp_out_s
            if gain < 0.0:
                gain = 0.0
        self.engage_gain = gain
        if gain != 1.0:
            x *= gain
            y *= gain
            z *= gain
        # 3. saturation (per axis: clamp_axis3 inlined) and the thermally derated peak
        # (norm: clamp_norm3 inlined; the inputs are finite here)
        peak = self._norm_limit()
        clamped = False
        if self._axis:
            lim = self._limit
            if x > lim or x < -lim or y > lim or y < -lim or z > lim or z < -lim:
                clamped = True
                x = lim if x > lim else (-lim if x < -lim else x)
                y = lim if y > lim else (-lim if y < -lim else y)
                z = lim if z > lim else (-lim if z < -lim else z)
        elif self._limit < peak:
            peak = self._limit
        norm = math.hypot(x, y, z)
        if norm > peak:
            clamped = True
            k = peak / norm
            if k < _SMALLEST_NORMAL:  # a huge vector: clamp_norm3 keeps the bound
                x, y, z, _ = clamp_norm3(x, y, z, peak)
            else:
                x *= k
                y *= k
                z *= k
        # 4. rate limit: move from the last output toward the command by <= rate dt
        out = self._out
        px, py, pz = out.tolist()
        dx, dy, dz = x - px, y - py, z - pz
        max_step = self._rate * dt
        step = math.sqrt(dx * dx + dy * dy + dz * dz)
        if step <= max_step:
            self.rate_limited = False
        else:
            self.rate_limited = True
            k = max_step / step
            x = px + dx * k
            y = py + dy * k
            z = pz + dz * k
        self.saturated = clamped or self.rate_limited
        out[0] = x
        out[1] = y
        out[2] = z
        # thermal model: E <- E + (dt/tau) (|f|^2 - E), dt since the previous call
        if dt > 0.0:
            a = dt / cfg.thermal_tau_s
            if a > 1.0:
                a = 1.0
            self._energy_n2 += a * ((x * x + y * y + z * z) - self._energy_n2)
        self._last_t_s = t_s
        return out
