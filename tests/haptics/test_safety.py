"""The safety layer: limits, rate, non-finite guard, engage ramp, thermal budget, watchdog."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haptics.device import DeviceSpec
from haptics.safety import SafetyConfig, SafetyLayer

SPEC = DeviceSpec(
    name="test", model="Touch-like", vendor="test",
    workspace_min_m=(-0.08, -0.06, -0.035), workspace_max_m=(0.08, 0.06, 0.035),
    max_force_n=3.3, continuous_force_n=0.88, rate_hz=1000.0, max_force_rate_n_s=1000.0,
)
DT = 1e-3
STALL_BOUND_S = 0.010

component = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e6, max_value=1e6),
    st.sampled_from([0.0, 3.3, -3.3, 1e300, -1e300, math.nan, math.inf, -math.inf]),
)
command = st.tuples(component, component, component)
commands = st.lists(command, min_size=1, max_size=120)


def engaged_layer(config: SafetyConfig | None = None) -> SafetyLayer:
    layer = SafetyLayer(SPEC, config)
    layer.set_engaged(True)
    return layer


def thermal_energy(outputs: np.ndarray, tau_s: float) -> np.ndarray:
    """Independent recomputation of the averaged squared force after each tick."""
    energy = 0.0
    history = []
    for f in outputs:
        energy += DT / tau_s * (float(f @ f) - energy)
        history.append(energy)
    return np.array(history)


@settings(max_examples=150, deadline=None)
@given(commands)
def test_output_is_finite_bounded_and_rate_limited(seq: list[tuple[float, float, float]]) -> None:
    layer = engaged_layer()
    previous = np.zeros(3)
    outputs = []
    for k, cmd in enumerate(seq):
        t = k * DT
        layer.heartbeat(t)
        out = layer.filter(t, np.array(cmd, dtype=float)).copy()
        assert np.all(np.isfinite(out))
        assert np.linalg.norm(out) <= SPEC.max_force_n * (1 + 1e-12)
        assert np.linalg.norm(out - previous) <= SPEC.max_force_rate_n_s * DT * (1 + 1e-9) + 1e-12
        assert layer.fault == (not all(math.isfinite(c) for c in cmd))
        assert not layer.watchdog
        previous = out
        outputs.append(out)
    energy = thermal_energy(np.array(outputs), layer.config.thermal_tau_s)
    assert np.all(energy <= SPEC.continuous_force_n**2 * (1 + 1e-9))


@settings(max_examples=100, deadline=None)
@given(commands, st.integers(min_value=0, max_value=30), commands)
def test_stale_data_brings_force_to_zero_within_10_ms(
    before: list[tuple[float, float, float]], lead_ticks: int, after: list[tuple[float, float, float]]
) -> None:
    layer = engaged_layer()
    big = np.array([3.0, -1.0, 0.5])
    k = 0
    for _ in range(lead_ticks):  # build up some force first
        layer.heartbeat(k * DT)
        layer.filter(k * DT, big)
        k += 1
    for cmd in before:
        layer.heartbeat(k * DT)
        layer.filter(k * DT, np.array(cmd, dtype=float))
        k += 1
    t_stall = (k - 1) * DT  # the last fresh data
    norms = []
    for j in range(25):  # the loop keeps ticking, the data stopped coming
        t = (k + j) * DT
        cmd = np.array(after[j % len(after)], dtype=float)
        out = layer.filter(t, cmd)
        norms.append(np.linalg.norm(out))
        if t - t_stall >= STALL_BOUND_S - 1e-12:
            assert np.all(out == 0.0), f"force {out} still on {t - t_stall:.4f} s after the stall"
            assert layer.watchdog
    assert all(b <= a + 1e-12 for a, b in zip(norms[4:], norms[5:]))


@settings(max_examples=60, deadline=None)
@given(commands)
def test_missed_ticks_ramp_to_zero_from_a_monitor(seq: list[tuple[float, float, float]]) -> None:
    layer = engaged_layer()
    k = 0
    for cmd in [(3.0, 0.0, 0.0)] * 20 + list(seq):
        layer.heartbeat(k * DT)
        layer.filter(k * DT, np.array(cmd, dtype=float))
        k += 1
    t_last = (k - 1) * DT
    # The tick is stuck; a monitor (e.g. the device's scheduler) checks every period.
    for j in range(1, 20):
        t = t_last + j * DT
        if layer.stalled(t):
            out = layer.ramp_to_zero(t)
        else:
            out = layer.force_n
        assert np.linalg.norm(out) <= SPEC.max_force_n
        if t - t_last >= STALL_BOUND_S - 1e-12:
            assert np.all(out == 0.0)


def test_a_gap_between_ticks_trips_the_watchdog_and_recovery_ramps_back_in() -> None:
    layer = engaged_layer()
    f = np.array([1.0, 0.0, 0.0])
    t = 0.0
    for k in range(400):
        t = k * DT
        layer.heartbeat(t)
        layer.filter(t, f)
    assert np.allclose(layer.force_n, f)
    t += 0.020  # 20 ms without a tick
    layer.heartbeat(t)
    out = layer.filter(t, f)
    assert layer.watchdog and np.linalg.norm(out) <= 1.0
    for j in range(1, 6):
        layer.heartbeat(t + j * DT)
        out = layer.filter(t + j * DT, f)
    assert np.all(out == 0.0) and layer.watchdog
    # Regular ticks with fresh data: the watchdog clears after recover_s, then the
    # engage ramp brings the force back (never a step).
    cfg = layer.config
    previous = 0.0
    for j in range(6, int((cfg.recover_s + cfg.ramp_in_s) / DT) + 20):
        tj = t + j * DT
        layer.heartbeat(tj)
        out = layer.filter(tj, f)
        assert np.linalg.norm(out) - previous <= SPEC.max_force_rate_n_s * DT + 1e-12
        previous = float(np.linalg.norm(out))
    assert not layer.watchdog
    assert np.allclose(out, f)


def test_no_force_until_engaged_then_linear_ramp_in_and_out() -> None:
    layer = SafetyLayer(SPEC)
    assert not layer.engaged  # documented default: no force before engaging
    f = np.array([0.0, 0.2, 0.0])
    t = 0.0
    for k in range(50):
        t = k * DT
        layer.heartbeat(t)
        assert np.all(layer.filter(t, f) == 0.0)
    layer.set_engaged(True)
    ramp = layer.config.ramp_in_s
    n_half = int(round(ramp / 2 / DT))
    for j in range(1, n_half + 1):
        layer.heartbeat(t + j * DT)
        out = layer.filter(t + j * DT, f)
    assert out[1] == pytest.approx(0.2 * n_half * DT / ramp, rel=1e-9)
    t += n_half * DT
    for j in range(1, int(ramp / DT) + 1):
        layer.heartbeat(t + j * DT)
        out = layer.filter(t + j * DT, f)
    assert np.allclose(out, f)
    t += int(ramp / DT) * DT
    layer.set_engaged(False)
    for j in range(1, int(round(layer.config.ramp_out_s / DT)) + 1):
        layer.heartbeat(t + j * DT)
        out = layer.filter(t + j * DT, f)
    assert np.all(out == 0.0)


def test_continuous_limit_allows_the_peak_when_cold_then_settles_at_the_rating() -> None:
    layer = SafetyLayer(SPEC, SafetyConfig(engaged_at_start=True, ramp_in_s=1e-3))
    f = np.array([10.0, 0.0, 0.0])
    norms = []
    for k in range(int(120.0 / DT)):
        t = k * DT
        layer.heartbeat(t)
        norms.append(np.linalg.norm(layer.filter(t, f)))
    norms = np.array(norms)
    assert np.all(norms[5:1000] == pytest.approx(SPEC.max_force_n))  # cold: full peak for 1 s
    assert norms[-1] == pytest.approx(SPEC.continuous_force_n, rel=1e-3)
    assert layer.thermal_load <= 1.0 + 1e-12
    # Time-averaged squared force over the last thermal time constant within the rating.
    window = int(layer.config.thermal_tau_s / DT)
    assert np.mean(norms[-window:] ** 2) <= SPEC.continuous_force_n**2 * 1.001


def test_fault_is_latched_for_the_tick_only() -> None:
    layer = engaged_layer(SafetyConfig(ramp_in_s=1e-3))
    for k in range(10):
        layer.heartbeat(k * DT)
        layer.filter(k * DT, np.array([0.5, 0.0, 0.0]))
    layer.heartbeat(10 * DT)
    out = layer.filter(10 * DT, np.array([np.nan, 1.0, 0.0]))
    assert layer.fault and np.all(np.isfinite(out))
    layer.heartbeat(11 * DT)
    layer.filter(11 * DT, np.array([0.5, 0.0, 0.0]))
    assert not layer.fault


def test_saturation_flag_and_direction_kept() -> None:
    layer = engaged_layer(SafetyConfig(ramp_in_s=1e-3))
    f = np.array([30.0, 40.0, 0.0])
    for k in range(20):
        layer.heartbeat(k * DT)
        out = layer.filter(k * DT, f)
    assert layer.saturated
    assert np.allclose(out, f / 50.0 * SPEC.max_force_n)


@pytest.mark.parametrize("field", ["ramp_in_s", "max_tick_gap_s", "watchdog_ramp_s", "thermal_tau_s"])
def test_config_rejects_non_positive_times(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SafetyConfig(**{field: 0.0})


def test_extra_channel_going_stale_trips_the_watchdog() -> None:
    layer = engaged_layer()
    arm = layer.watch("arm")
    assert arm == 1 and layer.watch("arm") == 1
    for k in range(10):
        layer.heartbeat(k * DT)
        layer.heartbeat(k * DT, arm)
        layer.filter(k * DT, np.zeros(3))
    assert not layer.watchdog
    for k in range(10, 20):
        layer.heartbeat(k * DT)  # device fresh, arm state stale
        layer.filter(k * DT, np.zeros(3))
    assert layer.watchdog
