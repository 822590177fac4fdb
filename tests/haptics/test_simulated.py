"""The simulated device (eq. 8) against closed forms, its safety layer and determinism."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from haptics.device import Device
from haptics.operators import make_operator
from haptics.safety import SafetyConfig
from haptics.simulated import TOUCH_LIKE_SPEC, SimulatedDevice, zoh_discretise

FAST_SPEC = replace(TOUCH_LIKE_SPEC, max_force_rate_n_s=1e9)
NO_RAMP = SafetyConfig(ramp_in_s=1e-9)


def test_touch_like_spec() -> None:
    spec = TOUCH_LIKE_SPEC
    assert spec.max_force_n == 3.3 and spec.continuous_force_n == 0.88 and spec.rate_hz == 1000.0
    extent = np.subtract(spec.workspace_max_m, spec.workspace_min_m)
    assert np.allclose(extent, [0.16, 0.12, 0.07])
    assert isinstance(SimulatedDevice(), Device)


@pytest.mark.parametrize("force", [(0.3, 0.0, 0.0), (-0.2, 0.4, 0.1)])
def test_constant_force_on_the_bare_device_matches_eq8_closed_form(force: tuple[float, float, float]) -> None:
    m, c = 0.045, 1.0
    dev = SimulatedDevice(spec=FAST_SPEC, mass_kg=m, damping_n_s_m=c, safety_config=NO_RAMP)
    f = np.array(force)
    dev.command_force(f)
    for k in range(1, 151):
        state = dev.read()
        actuated = dev.command_force(f)
        assert np.allclose(actuated, f)
        t = k * dev.dt_s
        # m ẍ + c ẋ = f from rest: v = f/c (1 - e^{-ct/m}), x = f/c (t - m/c (1 - e^{-ct/m}))
        decay = 1.0 - math.exp(-c * t / m)
        assert np.allclose(state.velocity_m_s, f / c * decay, rtol=1e-9, atol=1e-12)
        assert np.allclose(state.position_m, f / c * (t - m / c * decay), rtol=1e-9, atol=1e-12)
        assert state.t_s == pytest.approx(t)


def test_zoh_discretisation_of_a_spring_mass_damper() -> None:
    m, c, k, dt = 1.3, 9.0, 400.0, 1e-3
    (p11, p12, p21, p22), (g1, g2) = zoh_discretise(m, c, k, dt)
    # Against a fine explicit integration of the same ODE under a constant input.
    x, v, u = 0.01, -0.2, 2.0
    n = 20000
    h = dt / n
    xe, ve = x, v
    for _ in range(n):
        a = (u - c * ve - k * xe) / m
        xe, ve = xe + h * ve + 0.5 * h * h * a, ve + h * a
    assert p11 * x + p12 * v + g1 * u == pytest.approx(xe, rel=1e-6)
    assert p21 * x + p22 * v + g2 * u == pytest.approx(ve, rel=1e-5)


def test_each_discretisation_is_computed_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import haptics.simulated

    calls = []
    expm = haptics.simulated.expm
    monkeypatch.setattr(haptics.simulated, "expm", lambda a: calls.append(a) or expm(a))
    args = (0.045 + 0.6, 0.1 + 2.5, 131.0, 1e-3)  # a hand impedance no other test uses
    first = zoh_discretise(*args)
    assert zoh_discretise(*args) == first and len(calls) == 1  # the second call did not compute
    # three bare devices of that mass and damping (no hand: no stiffness): one more computation
    devices = [SimulatedDevice(mass_kg=args[0], damping_n_s_m=args[1]) for _ in range(3)]
    assert len(calls) == 2 and all(np.array_equal(d._zoh, devices[0]._zoh) for d in devices)
    assert first == zoh_discretise.__wrapped__(*args)  # the cached result is the computed one, bit for bit


def test_forces_reach_the_device_clamped_and_finite() -> None:
    dev = SimulatedDevice(safety_config=NO_RAMP)
    for k in range(50):
        dev.read()
        out = dev.command_force(np.array([100.0, np.nan if k == 10 else 0.0, 0.0]))
        assert np.all(np.isfinite(out)) and np.linalg.norm(out) <= TOUCH_LIKE_SPEC.max_force_n + 1e-12
    assert dev.last_force_n is dev.safety.force_n


def test_end_stops_hold_the_stylus() -> None:
    dev = SimulatedDevice(safety_config=NO_RAMP)
    for _ in range(3000):
        state = dev.read()
        dev.command_force(np.array([3.0, 0.0, 0.0]))
    assert state.position_m[0] == pytest.approx(1.5 * 0.08)
    assert state.velocity_m_s[0] == 0.0


def run(seed: int, kind: str = "novice", ticks: int = 1500) -> np.ndarray:
    dev = SimulatedDevice(operator=make_operator(kind, seed=7), seed=seed)
    target = np.array([0.05, 0.02, 0.0])
    v_t = np.array([-0.03, 0.0, 0.0])
    out = []
    for k in range(ticks):
        t = k * dev.dt_s
        p = target + v_t * t
        dev.perceive(t, p, v_t, dev.state.position_m, dev.state.velocity_m_s)
        state = dev.read()
        dev.command_force(np.array([0.3, 0.0, 0.0]))
        out.append(state.position_m.copy())
    return np.array(out)


def test_deterministic_for_a_seed_and_different_for_another() -> None:
    a, b, c = run(1), run(1), run(2)
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)


def test_hand_force_is_reported() -> None:
    dev = SimulatedDevice(operator=make_operator("expert", seed=1), seed=0)
    target = np.array([0.05, 0.0, 0.0])
    forces = []
    for k in range(800):
        dev.perceive(k * 1e-3, target, np.zeros(3), dev.state.position_m, dev.state.velocity_m_s)
        dev.read()
        dev.command_force(np.zeros(3))
        forces.append(dev.hand_force_n[0])
    # The hand pushes the stylus toward the target (+x) to start the reach: the feedforward
    # alone peaks at M_ff * 5.77 D / T^2 (minimum-jerk peak acceleration) with M_ff =
    # 1.25 kg, D ~ 0.042 m (0.05 m less the 5 mm surface offset and the expert's ~3 mm
    # undershoot) and Fitts' T = 0.35 + 0.22 log2(1 + 5) = 0.92 s: ~0.36 N.
    assert max(forces) > 0.3
    assert np.all(SimulatedDevice().hand_force_n == 0.0)
