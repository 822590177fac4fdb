"""The safety layer, the one limiter: saturation (norm / per axis), peak and thermal budget,
rate, non-finite force and time, engage ramp, watchdog. Each limit is proven on the path
every force takes: ``ForceRenderer.render`` (frames, never limits) then ``SafetyLayer.filter``."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from guidance.rendering import ForceRenderer
from haptics.device import DeviceSpec
from haptics.safety import SafetyConfig, SafetyLayer, clamp_axis3, clamp_norm3
from haptics.simulated import SimulatedDevice

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
        assert np.linalg.norm(out) <= SPEC.max_force_n * (1.0 + 1e-12)  # sqrt(3.3²) rounds to 3.3000000000000003
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


@pytest.mark.parametrize(
    "field", ["ramp_out_s", "max_tick_gap_s", "stale_timeout_s", "watchdog_ramp_s", "force_deadline_s", "thermal_tau_s"]
)
def test_config_rejects_non_positive_times(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SafetyConfig(**{field: 0.0})


@pytest.mark.parametrize(
    "kwargs",
    [{"saturation": "box"}, {"max_force_n": -1.0}, {"max_force_n": math.nan}, {"max_rate_n_s": 0.0},
     {"max_rate_n_s": math.inf}, {"ramp_in_s": -0.1}, {"ramp_in_s": math.nan}, {"thermal_derate_start": 1.0}],
)
def test_config_rejects_bad_limits(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        SafetyConfig(**kwargs)


def test_the_watchdog_timing_must_keep_the_force_deadline() -> None:
    # 4 ms gap + 1 ms period + 4 ms ramp = 9 ms <= 10 ms; a 6 ms gap cannot keep 10 ms.
    SafetyLayer(SPEC, SafetyConfig())
    with pytest.raises(ValueError, match="force_deadline_s"):
        SafetyLayer(SPEC, SafetyConfig(max_tick_gap_s=0.006))
    SafetyLayer(SPEC, SafetyConfig(max_tick_gap_s=0.006, force_deadline_s=0.011))


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


# ---------------------------------------------------------------------------------------
# The one force path: the scenario's rendering limits applied once, by the safety layer.

rendering_configs = st.fixed_dictionaries({
    "max_force_n": st.one_of(st.floats(0.0, 10.0), st.sampled_from([0.0, 1.0, 3.0, 3.3, 50.0])),
    "saturation": st.sampled_from(["norm", "axis"]),
    "ramp_time_s": st.one_of(st.just(0.0), st.floats(1e-4, 0.5)),
    "max_rate_n_s": st.one_of(st.floats(1.0, 1e4), st.just(1000.0), st.just(1e9)),
})
periods = st.one_of(st.floats(0.0, 0.003), st.just(DT), st.sampled_from([math.nan, math.inf, -math.inf]))


@settings(max_examples=200, deadline=None)
@given(rendering=rendering_configs, steps=st.lists(st.tuples(command, periods), min_size=1, max_size=80))
# the smallest subnormal limit: each scaled component rounds up to it, their norm to twice it
@example(rendering={"max_force_n": 5e-324, "saturation": "norm", "ramp_time_s": 0.0, "max_rate_n_s": 1.0},
         steps=[((101522.0, 79894.0, 91190.0), 0.001)])
def test_every_limit_holds_for_any_scenario_limits_commands_and_times(rendering, steps) -> None:
    layer = SafetyLayer(SPEC, SafetyConfig.for_rendering(**rendering, engaged_at_start=True))
    limit = min(rendering["max_force_n"], SPEC.max_force_n)
    rate = min(rendering["max_rate_n_s"], SPEC.max_force_rate_n_s)
    assert layer.force_limit_n == limit and layer.rate_limit_n_s == rate
    t = 0.0
    previous = np.zeros(3)
    for i, (cmd, period) in enumerate(steps):
        t_call = t + period  # NaN / inf periods feed a non-finite time
        if math.isfinite(t_call):
            t = t_call
        layer.heartbeat(t)
        out = layer.filter(t_call, np.array(cmd, dtype=float)).copy()
        # the first call, and a non-finite time, count one nominal period
        step_s = period if math.isfinite(t_call) and i > 0 else DT
        assert np.all(np.isfinite(out))
        if rendering["saturation"] == "norm":
            assert math.hypot(*out) <= limit * (1 + 1e-12)
        else:
            assert np.max(np.abs(out)) <= limit and math.hypot(*out) <= SPEC.max_force_n * (1 + 1e-12)
        assert math.hypot(*(out - previous)) <= rate * max(step_s, 0.0) * (1 + 1e-9) + 1e-12
        assert layer.fault == (not all(math.isfinite(c) for c in cmd) or not math.isfinite(t_call))
        assert not layer.watchdog
        if not math.isfinite(t_call) and i > 0:
            t += DT  # where the layer put it (the very first call: t = 0)
        previous = out
    assert layer.thermal_load <= 1.0 + 1e-9  # never more than the continuous rating on average


def test_per_axis_saturation_is_the_papers_3_n_per_axis_and_the_peak_still_holds() -> None:
    layer = SafetyLayer(replace(SPEC, max_force_rate_n_s=1e9), SafetyConfig.for_rendering(max_force_n=3.0, saturation="axis", ramp_time_s=0.0,
                                                        max_rate_n_s=1e9, engaged_at_start=True))
    layer.heartbeat(0.0)
    out = layer.filter(0.0, np.array([7.9, -0.5, 0.2]))
    np.testing.assert_array_equal(out, [3.0, -0.5, 0.2])  # one axis clamped, the others kept
    assert layer.saturated
    layer.heartbeat(DT)
    out = layer.filter(DT, np.array([7.9, -3.8, 0.0]))  # (3, -3) per axis: 4.24 N > the 3.3 N peak
    assert math.hypot(*out) == pytest.approx(SPEC.max_force_n)
    np.testing.assert_allclose(out / np.linalg.norm(out), np.array([1.0, -1.0, 0.0]) / math.sqrt(2.0))


def test_the_scenario_limit_and_rate_take_the_smaller_of_scenario_and_device() -> None:
    strict = SafetyLayer(SPEC, SafetyConfig.for_rendering(max_force_n=2.0, saturation="norm", ramp_time_s=0.0,
                                                         max_rate_n_s=100.0, engaged_at_start=True))
    lax = SafetyLayer(SPEC, SafetyConfig.for_rendering(max_force_n=50.0, saturation="norm", ramp_time_s=0.0,
                                                      max_rate_n_s=1e6, engaged_at_start=True))
    assert (strict.force_limit_n, strict.rate_limit_n_s) == (2.0, 100.0)
    assert (lax.force_limit_n, lax.rate_limit_n_s) == (SPEC.max_force_n, SPEC.max_force_rate_n_s)
    f = np.array([0.0, 0.0, 10.0])
    for k in range(100):
        for layer in (strict, lax):
            layer.heartbeat(k * DT)
            layer.filter(k * DT, f)
        if k == 0:
            # the first tick: at most rate * one period from zero
            assert strict.force_n[2] == pytest.approx(100.0 * DT)
            assert lax.force_n[2] == pytest.approx(SPEC.max_force_rate_n_s * DT)
    assert strict.force_n[2] == pytest.approx(100.0 * DT * 20)  # still rising at 100 N/s
    assert lax.force_n[2] == pytest.approx(SPEC.max_force_n)


def test_the_scenario_ramp_time_is_the_engage_ramp_and_zero_means_none() -> None:
    f = np.array([0.5, 0.0, 0.0])
    ramped = SafetyLayer(SPEC, SafetyConfig.for_rendering(max_force_n=3.0, saturation="norm", ramp_time_s=0.1,
                                                         max_rate_n_s=1e9, engaged_at_start=True))
    immediate = SafetyLayer(SPEC, SafetyConfig.for_rendering(max_force_n=3.0, saturation="norm", ramp_time_s=0.0,
                                                            max_rate_n_s=1e9, engaged_at_start=True))
    for k in range(150):
        for layer in (ramped, immediate):
            layer.heartbeat(k * DT)
            layer.filter(k * DT, f)
        # the first call counts one nominal period: gain (k + 1) ms / 100 ms
        assert ramped.force_n[0] == pytest.approx(0.5 * min(1.0, (k + 1) * DT / 0.1))
        assert immediate.force_n[0] == 0.5


def test_a_non_finite_time_never_turns_later_outputs_into_nan() -> None:
    for bad in (math.nan, math.inf, -math.inf):
        layer = engaged_layer(SafetyConfig(ramp_in_s=1e-3))
        f = np.array([1.0, 0.5, 0.0])
        for k in range(20):
            layer.heartbeat(k * DT)
            layer.filter(k * DT, f)
        before = layer.force_n.copy()
        layer.heartbeat(bad)  # ignored: not fresh data
        out = layer.filter(bad, f)
        assert layer.fault and np.all(np.isfinite(out))
        # treated as a zero command one period later: falls at the rate limit, no jump
        assert math.hypot(*(out - before)) == pytest.approx(SPEC.max_force_rate_n_s * DT)
        assert layer.stalled(bad)
        ramped = layer.ramp_to_zero(bad)
        assert np.all(np.isfinite(ramped))
        layer.reset()
        layer.set_engaged(True)
        for k in range(20, 400):  # later, regular ticks: finite, and the force comes back
            layer.heartbeat(k * DT)
            out = layer.filter(k * DT, f)
            assert np.all(np.isfinite(out)) and not layer.fault
        np.testing.assert_allclose(out, f)


def test_a_non_finite_time_does_not_disturb_the_next_ticks() -> None:
    layer = engaged_layer(SafetyConfig(ramp_in_s=1e-3))
    f = np.array([1.0, 0.0, 0.0])
    for k in range(20):
        layer.heartbeat(k * DT)
        layer.filter(k * DT, f)
    layer.filter(math.nan, f)
    for k in range(21, 40):
        layer.heartbeat(k * DT)
        out = layer.filter(k * DT, f)
        assert np.all(np.isfinite(out)) and not layer.fault and not layer.watchdog
    np.testing.assert_allclose(out, f)
    assert math.isfinite(layer.thermal_load)


def test_a_stale_heartbeat_is_not_refreshed_by_a_non_finite_time() -> None:
    layer = engaged_layer()
    for k in range(10):
        layer.heartbeat(k * DT)
        layer.filter(k * DT, np.zeros(3))
    for k in range(10, 20):
        layer.heartbeat(math.nan)  # a broken clock is no heartbeat: the channel goes stale
        layer.filter(k * DT, np.zeros(3))
    assert layer.watchdog


@settings(max_examples=100, deadline=None)
@given(
    forces=st.lists(command, min_size=1, max_size=40),
    q=st.tuples(*[st.floats(-1, 1)] * 4).filter(lambda q: np.linalg.norm(q) > 0.1),
    scale=st.floats(1e-3, 1e3),
    rendering=rendering_configs,
)
def test_the_one_path_frames_then_limits(forces, q, scale, rendering) -> None:
    """Renderer (frames) then the device's safety layer (limits), as a trial runs them."""
    w, x, y, z = np.array(q) / np.linalg.norm(q)
    r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                  [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                  [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    renderer = ForceRenderer(r, scale)
    device = SimulatedDevice(safety_config=SafetyConfig.for_rendering(**rendering))
    limit = min(rendering["max_force_n"], device.spec.max_force_n)
    calculated = np.zeros(3)
    previous = np.zeros(3)
    for force in forces:
        f_task = np.array(force, dtype=float)
        device.read()
        renderer.render(f_task, calculated)
        with np.errstate(all="ignore"):
            expected = scale * r @ f_task
        # the calculated force is the framed one, unlimited (NaN stays NaN, for the record)
        np.testing.assert_array_equal(np.isfinite(calculated), np.isfinite(expected))
        finite = np.isfinite(expected) & (np.abs(expected) < 1e300)
        # a product's round-off scales with its terms, not its result: a small component
        # of a large force may differ by eps times the force (|R| |f| s bounds the terms)
        with np.errstate(all="ignore"):
            terms = scale * (np.abs(r) @ np.abs(f_task))
        error = np.abs(calculated[finite] - expected[finite])
        assert np.all(error <= 1e-12 * terms[finite] + 1e-300), (calculated, expected)
        actuated = device.command_force(calculated).copy()
        assert np.all(np.isfinite(actuated))
        if rendering["saturation"] == "norm":
            assert math.hypot(*actuated) <= limit * (1 + 1e-12)
        else:
            assert np.max(np.abs(actuated)) <= limit
        assert math.hypot(*(actuated - previous)) <= device.safety.rate_limit_n_s * DT * (1 + 1e-9) + 1e-12
        assert device.safety.fault == (not np.all(np.isfinite(calculated)))
        previous = actuated


@settings(max_examples=200, deadline=None)
@given(force=command, limit=st.floats(0.0, 100.0))
@example(force=(0.0, 0.0, 1e308), limit=1e-5)  # limit / norm is subnormal
@example(force=(0.0, 0.0, 1.0), limit=7.904462648500766e-161)  # tiny limit
@example(force=(101522.0, 79894.0, 91190.0), limit=5e-324)  # a subnormal limit: only zero stays under it
def test_clamps_are_bounded_and_finite_for_any_input(force, limit) -> None:
    nx, ny, nz, _ = clamp_norm3(*force, limit)
    ax, ay, az, _ = clamp_axis3(*force, limit)
    # math.hypot: np.linalg.norm squares the components and loses precision below 1e-154
    assert all(map(math.isfinite, (nx, ny, nz))) and math.hypot(nx, ny, nz) <= limit * (1 + 1e-12) + 1e-300
    assert all(map(math.isfinite, (ax, ay, az))) or any(math.isinf(c) for c in force)
    if all(math.isfinite(c) for c in force):
        assert max(abs(ax), abs(ay), abs(az)) <= limit


@settings(max_examples=200, deadline=None)
@given(force=st.tuples(*[st.floats(-1e6, 1e6)] * 3), limit=st.floats(0.01, 100.0))
def test_norm_clamp_keeps_the_direction(force, limit) -> None:
    f = np.array(force)
    out = np.array(clamp_norm3(*force, limit)[:3])
    assert np.linalg.norm(out) == pytest.approx(min(np.linalg.norm(f), limit), rel=1e-9, abs=1e-12)
    assert np.linalg.norm(np.cross(out, f)) <= 1e-9 * np.linalg.norm(f) * max(np.linalg.norm(out), 1.0)
    assert out @ f >= 0.0


def test_clamp_keeps_its_bound_when_the_ratio_is_subnormal() -> None:
    # limit / norm underflows to a subnormal here; the direction is scaled instead.
    x, y, z, changed = clamp_norm3(0.0, 0.0, 9.99999999987713e307, 1e-5)
    assert changed and math.hypot(x, y, z) <= 1e-5 * (1 + 1e-15)
    assert (x, y, z) == (0.0, 0.0, 1e-5)


def test_clamps_report_whether_they_changed_the_force() -> None:
    assert clamp_norm3(1.0, 0.0, 0.0, 3.0) == (1.0, 0.0, 0.0, False)
    assert clamp_norm3(4.0, 0.0, 0.0, 3.0) == (3.0, 0.0, 0.0, True)
    assert clamp_axis3(7.9, -3.8, 0.5, 3.0) == (3.0, -3.0, 0.5, True)
    assert clamp_axis3(1.0, -2.0, 0.5, 3.0)[3] is False
    assert clamp_axis3(math.nan, 1.0, 0.0, 3.0) == (0.0, 0.0, 0.0, True)
