"""The servo safety layer: the last stage before any force reaches a device.

Every backend (OpenHaptics, simulated, mouse) passes each commanded force through one
``SafetyLayer`` inside its ``command_force``. Stages, in order, once per tick:

1. **Non-finite guard**: a command with a NaN or infinite component is replaced by
   zero for that tick and ``fault`` is set (the output then falls at the rate limit,
   so even a fault never makes the force jump).
2. **Engage gating**: the command is multiplied by an engage gain in [0, 1] that ramps
   linearly to 1 over ``ramp_in_s`` while engaged and to 0 over ``ramp_out_s`` when
   released. Default: *not engaged* at start (``engaged_at_start=False``): no force
   until the person engages (stylus button 0 on a Touch; the simulated participant
   engages when it takes the stylus).
3. **Norm clamp** to the peak ``spec.max_force_n`` and, below it, to the
   **continuous-force limit**: a thermal budget like a motor winding model. The layer
   keeps the exponentially averaged squared force (time constant ``thermal_tau_s``)

       E ← E + (dt/τ) (|f|² − E)

   (|f|² ∝ copper losses I²R; E/F_c² is the winding's fraction of its allowed
   temperature rise). The full peak is allowed while E ≤ θ F_c² (θ =
   ``thermal_derate_start``); above, the allowed norm derates linearly to the
   continuous rating F_c as E → F_c², so E never exceeds F_c²: a cold device gives the
   full 3.3 N for about 2 s (τ = 30 s), then settles at the 0.88 N continuous rating.
4. **Force-rate limit**: the output moves toward the clamped command by at most
   ``spec.max_force_rate_n_s * dt`` (Euclidean norm of the change).
5. **Watchdog**: the loop has *stalled* when the time since the previous ``filter``
   call exceeds ``max_tick_gap_s`` (missed ticks) or when a watched data channel
   (``heartbeat``; channel 0 is the device reading, backends beat it in ``read``) has
   not been refreshed for ``stale_timeout_s``. Then the output ramps linearly from its
   value at the trip to zero within ``watchdog_ramp_s``, whatever is commanded, and
   ``watchdog`` stays set. With the defaults a stall is zeroed within 4 ms (detection)
   + 1 ms (one tick) + 4 ms (ramp) < 10 ms. If the tick itself is stuck, whoever still
   runs (a device's scheduler callback, a monitor) calls ``ramp_to_zero``. The watchdog
   clears after ``recover_s`` of regular ticks with fresh data; the engage gain then
   restarts from zero, so force ramps in again.

The watchdog ramp takes priority over the rate limit (it is at most
``max_force_n / watchdog_ramp_s`` = 825 N/s for a Touch, below its 1000 N/s limit).

``filter`` is allocation-free apart from Python floats: it works on plain floats and
writes into one owned (3,) buffer, returned to the caller and valid until the next call.
Not thread safe: call ``filter``, ``heartbeat`` and ``ramp_to_zero`` from one thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from guidance.rendering import clamp_norm3
from haptics.device import DeviceSpec

#: Most heartbeat channels a layer can watch (device reading, arm state, ...).
MAX_CHANNELS = 8


@dataclass(frozen=True)
class SafetyConfig:
    """Tuning of the safety layer (seconds, fractions). See the module docstring.

    Attributes:
        engaged_at_start: whether force is allowed before ``set_engaged(True)``.
        ramp_in_s: engage ramp duration [s] (0 → full force).
        ramp_out_s: disengage ramp duration [s] (full force → 0).
        max_tick_gap_s: a period between ``filter`` calls longer than this is a stall.
        stale_timeout_s: a watched channel older than this is stale (a stall).
        watchdog_ramp_s: time [s] in which the watchdog brings the force to zero.
        recover_s: regular ticks with fresh data needed to clear the watchdog [s].
        thermal_tau_s: time constant [s] of the averaged squared force.
        thermal_derate_start: fraction θ of F_c² above which the peak derates.
    """

    engaged_at_start: bool = False
    ramp_in_s: float = 0.25
    ramp_out_s: float = 0.02
    max_tick_gap_s: float = 0.004
    stale_timeout_s: float = 0.004
    watchdog_ramp_s: float = 0.004
    recover_s: float = 0.1
    thermal_tau_s: float = 30.0
    thermal_derate_start: float = 0.8

    def __post_init__(self) -> None:
        for name in ("ramp_in_s", "ramp_out_s", "max_tick_gap_s", "stale_timeout_s",
                     "watchdog_ramp_s", "thermal_tau_s"):
            value = getattr(self, name)
            if not (value > 0.0 and math.isfinite(value)):
                raise ValueError(f"SafetyConfig.{name} must be positive and finite, got {value}")
        if not (self.recover_s >= 0.0 and math.isfinite(self.recover_s)):
            raise ValueError(f"SafetyConfig.recover_s must be >= 0, got {self.recover_s}")
        if not 0.0 <= self.thermal_derate_start < 1.0:
            raise ValueError(
                f"SafetyConfig.thermal_derate_start must be in [0, 1), got {self.thermal_derate_start}"
            )

    def as_dict(self) -> dict[str, object]:
        """Plain-data form recorded with the trial."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


class SafetyLayer:
    """Clamp, thermal limit, rate limit, non-finite guard, engage ramp and watchdog.

    Args:
        spec: the device's limits (``max_force_n``, ``continuous_force_n``,
            ``max_force_rate_n_s``, ``rate_hz``).
        config: tuning, see ``SafetyConfig``.

    Attributes describing the last ``filter``/``ramp_to_zero`` call:
        saturated: the command's norm was reduced by the peak or thermal clamp.
        rate_limited: the rate limit held the output back.
        fault: the command was not finite (replaced by zero).
        watchdog: the watchdog is tripped (output ramping to / held at zero).
        engaged: the person has engaged (force allowed, subject to the ramp).
        engage_gain: current engage ramp gain in [0, 1].
        thermal_load: E / F_c², the used fraction of the continuous-force budget.
    """

    def __init__(self, spec: DeviceSpec, config: SafetyConfig | None = None) -> None:
        self.spec = spec
        self.config = config if config is not None else SafetyConfig()
        if not (spec.max_force_n > 0.0 and spec.continuous_force_n > 0.0 and spec.max_force_rate_n_s > 0.0):
            raise ValueError("DeviceSpec forces and force rate must be positive")
        if not spec.rate_hz > 0.0:
            raise ValueError(f"DeviceSpec.rate_hz must be positive, got {spec.rate_hz}")
        self._out: NDArray[np.float64] = np.zeros(3)
        self._hb_t_s: NDArray[np.float64] = np.full(MAX_CHANNELS, -math.inf)
        self._channel_names: list[str] = ["device"]
        self._peak = float(spec.max_force_n)
        self._cont = min(float(spec.continuous_force_n), self._peak)
        self._rate = float(spec.max_force_rate_n_s)
        self._period = 1.0 / float(spec.rate_hz)
        self.reset()

    # -- set-up (not per tick) -----------------------------------------------------

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
        return len(self._channel_names) - 1

    def reset(self) -> None:
        """Back to the start state: zero output, cold thermal model, no heartbeat yet."""
        self._out[:] = 0.0
        self._hb_t_s[:] = -math.inf
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
        """Record that fresh data arrived on ``channel`` at time ``t_s`` [s]."""
        self._hb_t_s[channel] = t_s

    def stalled(self, t_s: float) -> bool:
        """Whether, at ``t_s``, ticks were missed or a watched channel is stale."""
        last = self._last_t_s
        if last == last and t_s - last > self.config.max_tick_gap_s:
            return True
        return self._stale(t_s)

    def _stale(self, t_s: float) -> bool:
        timeout = self.config.stale_timeout_s
        hb = self._hb_t_s
        for ch in range(len(self._channel_names)):
            if t_s - hb[ch] > timeout:
                return True
        return False

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

        For whoever still runs when the tick is stuck (a scheduler callback, a
        monitor) and for a controlled stop. The force reaches zero ``watchdog_ramp_s``
        after the first call. Returns the owned (3,) buffer [N], device frame.
        """
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

    def filter(self, t_s: float, force_dev_n: NDArray[np.float64]) -> NDArray[np.float64]:
        """Make a commanded force safe to send.

        Args:
            t_s: time of this tick [s] (the loop's clock, monotonic).
            force_dev_n: (3,) commanded force on the stylus [N], device frame.

        Returns:
            The owned (3,) output buffer [N], device frame, valid until the next call.
        """
        # Plain floats throughout, the rate limit and thermal update inlined: the same
        # operations, in the same order, as guard_finite_into, clamp_norm_into,
        # limit_step_into and _energy_update, at half the cost of calling them per tick.
        cfg = self.config
        last = self._last_t_s
        dt = self._period if last != last else t_s - last
        if dt < 0.0:
            dt = 0.0
        gap = dt > cfg.max_tick_gap_s
        stale = self._stale(t_s)

        # 1. non-finite guard
        x, y, z = force_dev_n.tolist()
        if math.isfinite(x) and math.isfinite(y) and math.isfinite(z):
            self.fault = False
        else:
            x = y = z = 0.0
            self.fault = True

        # 5. watchdog (checked first: it overrides everything)
        if gap or stale:
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
            gain += dt / cfg.ramp_in_s
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
        # 3. norm clamp to the thermally derated peak
        x, y, z, self.saturated = clamp_norm3(x, y, z, self._norm_limit())
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
        out[0] = x
        out[1] = y
        out[2] = z
        # thermal model: E <- E + (dt/tau) (|f|^2 - E), dt since the previous call
        dt_e = self._period if last != last else t_s - last
        if dt_e > 0.0:
            a = dt_e / cfg.thermal_tau_s
            if a > 1.0:
                a = 1.0
            self._energy_n2 += a * ((x * x + y * y + z * z) - self._energy_n2)
        self._last_t_s = t_s
        return out
