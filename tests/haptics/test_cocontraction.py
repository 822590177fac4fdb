"""Co-contraction adapted by error (Franklin et al. 2008's V-shaped rule, in time).

Expectations are worked out by hand or in closed form, not read back from the kernel:
the rule ``c ← clip(c + dt (r |e + δ ė| − γ), 0, c_max)`` stepped tick by tick, the
hand's force ``−(grip + c) K e`` on a held stylus, and the damping ratio of the hand
(mass, scaled damping and stiffness) under a spring field from the logarithmic
decrement of its free oscillation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from haptics import _kernels as k
from haptics.operators import HumanOperator
from haptics.participants import PARTICIPANT_PRESETS
from haptics.safety import SafetyConfig
from haptics.simulated import TOUCH_DAMPING_N_S_M, TOUCH_TIP_MASS_KG, SimulatedDevice
from tests.haptics.conftest import quiet_novice

NO_RAMP = SafetyConfig(ramp_in_s=1e-9)
DT = 1e-3


def quiet(**changes: float) -> HumanOperator:
    """A novice without motor noise, guidance yielding or taking charge."""
    return quiet_novice(DT, **changes)


def test_cocontraction_follows_the_rule_tick_by_tick() -> None:
    rate, decay, delta, c_max = 1000.0, 2.0, 0.05, 0.5
    op = quiet(cocontraction_rate=rate, cocontraction_decay=decay, cocontraction_delta_s=delta, cocontraction_max=c_max)
    x = np.array([0.003, -0.004, 0.0])  # 5 mm from the plan (at rest at the origin)
    v = np.array([0.0, 0.0, 0.02])      # and moving 2 cm/s across it
    eps = math.sqrt(0.003**2 + 0.004**2 + (delta * 0.02) ** 2)
    out = np.zeros(3)
    expected = 0.0
    seen = []
    for i in range(1, 601):
        hand_x, hand_v = (x, v) if i <= 400 else (np.zeros(3), np.zeros(3))  # the error vanishes after 0.4 s
        op.drive(i * DT, hand_x, hand_v, np.zeros(3), out)
        error = eps if i <= 400 else 0.0
        # The first tick has dt = 1 ms from the reset at t = 0.
        expected = min(c_max, max(0.0, expected + DT * (rate * error - decay)))
        seen.append(op._s[k.S_COCON])
        assert seen[-1] == pytest.approx(expected, abs=1e-12)
    # By hand: |ε| = √(3² + 4² + 1²) mm = √26 mm = 5.0990 mm, so dc/dt = 1000 × 0.005099 − 2 = 3.099 /s;
    # after 0.1 s c = 0.3099; the cap 0.5 holds from 0.1613 s to 0.4 s; then it falls by
    # 2 /s, to 0.1 at 0.6 s.
    assert seen[99] == pytest.approx(0.1 * (rate * 0.00509901951359 - decay), abs=1e-9)
    assert seen[170] == seen[399] == c_max
    assert seen[599] == pytest.approx(0.1, abs=1e-9)


def test_cocontraction_rises_to_its_cap_and_falls_at_the_constant_rate() -> None:
    rate, decay, c_max = 400.0, 0.5, 0.8
    op = quiet(cocontraction_rate=rate, cocontraction_decay=decay, cocontraction_delta_s=0.0, cocontraction_max=c_max)
    out = np.zeros(3)
    e = 0.01  # 1 cm: dc/dt = 400 × 0.01 − 0.5 = 3.5 /s, so the cap 0.8 is reached after 0.8 / 3.5 = 0.2286 s
    for i in range(1, 229):
        op.drive(i * DT, np.array([e, 0.0, 0.0]), np.zeros(3), np.zeros(3), out)
    assert op._s[k.S_COCON] == pytest.approx(min(c_max, 0.228 * 3.5), abs=1e-9)
    for i in range(229, 301):
        op.drive(i * DT, np.array([e, 0.0, 0.0]), np.zeros(3), np.zeros(3), out)
    assert op._s[k.S_COCON] == pytest.approx(c_max, abs=1e-12)
    # Without error it falls by γ dt per tick: 0.8 − 0.5 × 1.0 s = 0.3 after a second.
    for i in range(301, 1301):
        op.drive(i * DT, np.zeros(3), np.zeros(3), np.zeros(3), out)
    assert op._s[k.S_COCON] == pytest.approx(c_max - decay * 1.0, abs=1e-9)
    # The hand's force on a stylus held 1 cm off its plan is the scaled spring −(1 + c) K e
    # (the device integrates −K x − B v; the drive carries the rest).
    c = float(op._s[k.S_COCON])
    op.drive(1.301, np.array([e, 0.0, 0.0]), np.zeros(3), np.zeros(3), out)
    c_after = float(op._s[k.S_COCON])  # the drive used the c before this tick's update
    hand = out[0] - op.params.hand_stiffness_n_m * e
    assert c_after > c and hand == pytest.approx(-(1.0 + c) * op.params.hand_stiffness_n_m * e, rel=1e-9)


def free_oscillation(op: HumanOperator, spring_n_m: float, pull_m: float, seconds: float) -> np.ndarray:
    """The stylus held by ``op`` (plan at rest at the origin) in a spring field centred at
    ``pull_m`` on x, as APF's is at the target; returns x(t) [m]."""
    dev = SimulatedDevice(operator=op, seed=0, dt_s=DT, safety_config=NO_RAMP)
    xs = []
    f = np.zeros(3)
    for _ in range(int(seconds / DT)):
        state = dev.read()
        f[0] = spring_n_m * (pull_m - state.position_m[0])
        dev.command_force(f)
        xs.append(state.position_m[0])
    return np.array(xs)


def damping_ratio_from_peaks(x: np.ndarray, centre: float) -> float:
    d = x - centre
    peaks = [i for i in range(1, len(d) - 1) if d[i] > d[i - 1] and d[i] >= d[i + 1] and d[i] > 0]
    assert len(peaks) >= 2, "no oscillation"
    decrement = math.log(d[peaks[0]] / d[peaks[1]])
    return decrement / math.sqrt(4.0 * math.pi**2 + decrement**2)


@pytest.mark.parametrize("c_max", [0.0, 1.0])
def test_a_co_contracted_hand_in_a_spring_field_has_the_closed_form_damping_ratio(c_max: float) -> None:
    """APF's stiffness at the stylus (38.5 N/m × the paper's position scale 1.75) on the
    novice's hand; co-contraction saturates within the first swing (fast rule, no decay),
    so the hand is a mass-spring-damper with stiffness (1 + c) K + k_s and damping
    (1 + c) B + c_dev: ζ = ((1 + c) B + c_dev) / (2 √(((1 + c) K + k_s)(M + m)))."""
    p = PARTICIPANT_PRESETS["novice"]
    k_s = 38.5 * 1.75
    op = quiet(cocontraction_rate=5000.0, cocontraction_decay=0.0, cocontraction_max=c_max)
    x = free_oscillation(op, k_s, 0.02, 1.5)
    g = 1.0 + c_max
    stiffness = g * p.hand_stiffness_n_m + k_s
    damping = g * p.hand_damping_n_s_m + TOUCH_DAMPING_N_S_M
    mass = p.hand_mass_kg + TOUCH_TIP_MASS_KG
    zeta = damping / (2.0 * math.sqrt(stiffness * mass))
    centre = k_s * 0.02 / stiffness  # the spring field against the hand's spring
    assert x[-1] == pytest.approx(centre, abs=2e-5)
    skip = int(0.15 / DT)  # the first swing, while c rises
    assert damping_ratio_from_peaks(x[skip:], centre) == pytest.approx(zeta, rel=0.01)
    if c_max > 0.0:
        assert op._s[k.S_COCON] == pytest.approx(c_max)
        assert zeta > 1.4 * 12.1 / (2.0 * math.sqrt((p.hand_stiffness_n_m + k_s) * mass))
