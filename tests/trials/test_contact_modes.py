"""Campbell's post-capture contact modes through the clamped virtual coupling
(trials.contact_modes). Expected forces are computed by hand from the laws (C1)-(C4) and
(VC) for a hand moving 1 cm per 10 ms tick; steady states from the bodies' physics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from capture_trainer.errors import TrialError
from trials.compensators import CompensatorConfig, make_compensator
from trials.contact_modes import CONTACT_MODES, CouplingGains, VirtualCoupling, coupling_gains
from trials.delay import DelayConfig, DelayLine

DT = 0.01  # a coarse tick keeps the hand computations short


def _coupling(mode: str, max_force_n: float = 10.0) -> VirtualCoupling:
    """K = 100 N/m, B = 0, m = 2 kg, c = 4 N s/m."""
    return VirtualCoupling(CouplingGains(mode, 100.0, 0.0, 2.0, 4.0, max_force_n), DT)


def _felt(coupling: VirtualCoupling, hand_x_m: list[float]) -> list[float]:
    out = np.zeros(3)
    coupling.start()
    coupling.force(np.array([hand_x_m[0], 0.0, 0.0]), out)  # the body appears at the hand: no force
    assert not np.any(out)
    felt = []
    for x in hand_x_m[1:]:
        coupling.force(np.array([x, 0.0, 0.0]), out)
        felt.append(float(out[0]))
    return felt


@pytest.mark.parametrize(("mode", "expected"), [
    # F1 = K 0.01 = 1; then x_b and v_b by hand:
    # free-body: v1 = 1 dt/m = 0.005, x1 = 5e-5; F2 = 100 (0.02 - 5e-5) = 1.995;
    #            v2 = 0.005 + 1.995 dt/m = 0.014975, x2 = 1.9975e-4; F3 = 100 (0.03 - 1.9975e-4)
    ("free-body", [1.0, 1.995, 2.980025]),
    # viscous (c dt/m = 0.02): v1 = 0.005, x1 = 5e-5; F2 = 1.995; v2 = 0.005 + 0.009975 - 0.02 * 0.005
    #            = 0.014875, x2 = 1.9875e-4; F3 = 100 (0.03 - 1.9875e-4)
    ("viscous", [1.0, 1.995, 2.980125]),
    # damper: v1 = 1/4 = 0.25, x1 = 0.0025; F2 = 100 (0.02 - 0.0025) = 1.75; v2 = 0.4375, x2 = 0.006875;
    #            F3 = 100 (0.03 - 0.006875)
    ("damper", [1.0, 1.75, 2.3125]),
])
def test_the_felt_force_matches_the_hand_computed_laws(mode: str, expected: list[float]) -> None:
    felt = _felt(_coupling(mode), [0.0, 0.01, 0.02, 0.03])
    np.testing.assert_allclose(felt, [-f for f in expected], rtol=0.0, atol=1e-12)  # the body pushes back


def test_the_coupling_force_is_clamped_along_its_direction() -> None:
    felt = _felt(_coupling("free-body", max_force_n=2.0), [0.0, 0.01, 0.02, 0.03])
    np.testing.assert_allclose(felt, [-1.0, -1.995, -2.0], atol=1e-12)  # the third (2.98 N) clamped
    coupling = _coupling("damper", max_force_n=1.0)
    out = np.zeros(3)
    coupling.start()
    coupling.force(np.zeros(3), out)
    coupling.force(np.array([0.03, 0.04, 0.0]), out)  # 3 N and 4 N: 5 N, clamped to 1 N
    np.testing.assert_allclose(out, [-0.6, -0.8, 0.0], atol=1e-12)
    assert coupling.clamped_ticks == 1
    np.testing.assert_allclose(coupling.body_velocity_m_s, [0.15, 0.2, 0.0])  # the body felt the clamped force


def _steady(mode: str, hand: list[float]) -> float:
    damping = 0.0 if mode == "damper" else 2.0 * 0.7 * math.sqrt(100.0 * 2.0)
    return _felt(VirtualCoupling(CouplingGains(mode, 100.0, damping, 2.0, 4.0, 10.0), DT), hand)[-1]


def test_the_bodies_steady_forces_are_their_physics() -> None:
    v, a = 0.05, 0.2
    ramp = [v * DT * k for k in range(3000)]  # the hand at constant velocity for 30 s
    assert _steady("damper", ramp) == pytest.approx(-4.0 * v, rel=1e-6)  # F = c v
    assert _steady("viscous", ramp) == pytest.approx(-4.0 * v, rel=1e-3)  # at constant velocity, F = c v
    assert _steady("free-body", ramp) == pytest.approx(0.0, abs=1e-6)  # a free mass at constant velocity: no force
    parabola = [0.5 * a * (DT * k) ** 2 for k in range(3000)]
    assert _steady("free-body", parabola) == pytest.approx(-2.0 * a, rel=1e-3)  # F = m a


def test_the_coupling_respects_the_devices_passive_stiffness_bound() -> None:
    gains = coupling_gains("viscous", payload_mass_kg=500.0, contact_force_scale=0.02, time_constant_s=0.5,
                           device_stiffness_n_m=1020.0, coupling_share=0.5, position_scale=1.75, force_scale=2.0,
                           max_force_dev_n=3.0, dt_s=1e-3)
    # rendered at the stylus: K k_f p (N per device metre), half of the 1.02 N/mm bound
    assert gains.stiffness_n_m * 2.0 * 1.75 == pytest.approx(510.0)
    assert gains.mass_kg == pytest.approx(10.0) and gains.body_damping_n_s_m == pytest.approx(20.0)
    assert gains.max_force_n == pytest.approx(1.5)  # 3 N at the device is 1.5 task newtons at k_f = 2
    damper = coupling_gains("damper", payload_mass_kg=1.0, contact_force_scale=1e-3, time_constant_s=0.5,
                            device_stiffness_n_m=1020.0, coupling_share=1.0, position_scale=1.0, force_scale=1.0,
                            max_force_dev_n=3.0, dt_s=1e-3)
    assert damper.damping_n_s_m == 0.0 and damper.body_damping_n_s_m == pytest.approx(1020.0 * 1e-3)  # K dt guard
    with pytest.raises(TrialError, match="no damper of its own"):
        CouplingGains("damper", 100.0, 5.0, 1.0, 4.0, 10.0)
    with pytest.raises(TrialError, match="coupling_share"):
        coupling_gains("damper", payload_mass_kg=1.0, contact_force_scale=0.02, time_constant_s=0.5,
                       device_stiffness_n_m=1020.0, coupling_share=1.5, position_scale=1.0, force_scale=1.0,
                       max_force_dev_n=3.0, dt_s=1e-3)


def test_the_modes_are_registered_and_checked() -> None:
    assert CONTACT_MODES.names() == ("contact", "free-body", "viscous", "damper")
    with pytest.raises(TrialError, match="unknown contact mode 'free-bod'; did you mean 'free-body'"):
        CompensatorConfig(contact_mode="free-bod")


@pytest.mark.parametrize("name", ["none", "passivity"])
def test_the_hand_feels_the_body_once_the_operators_side_has_seen_the_capture(name: str) -> None:
    """The capture at t = 0.05 s, 30 ms each way: the contact force goes through until a
    state sample sent at or after the capture arrives (t = 0.08 s), then the coupling's."""
    dt = 1e-3
    line = DelayLine(3, DelayConfig(delay_s=0.03), dt, seed=1)
    gains = CouplingGains("damper", 100.0, 0.0, 1.0, 4.0, 10.0)
    compensator = make_compensator(CompensatorConfig(name, contact_feedback=True, contact_mode="damper"), dt,
                                   coupling=gains, state_line=line)
    hand = np.zeros(3)
    felt = []
    for k in range(1, 121):
        t = k * dt
        line.send(t, np.zeros(3))
        line.receive(t, np.zeros(3))
        if k == 50:
            compensator.captured(t)
        hand[0] = 0.001 * max(k - 80, 0)  # the hand moves 1 mm per tick from the first seen tick
        force = np.array([0.25, 0.0, 0.0])  # a contact force as it arrived
        compensator.shape(t, force, hand)
        felt.append(force[0])
    assert felt[:79] == [0.25] * 79  # up to t = 0.079 s the capture is not yet seen
    # from t = 0.080 s: the body starts at the hand; at 0.081 s F = K 1 mm = 0.1 N (the damper: x_b += F dt / c)
    assert felt[79] == pytest.approx(0.0, abs=1e-15) and felt[80] == pytest.approx(-0.1, abs=1e-12)
    figures = compensator.metadata()["contact_mode"]
    assert figures["mode"] == "damper" and figures["started"] is True


def test_in_a_trial_the_hand_feels_the_free_body_from_the_capture_on(tmp_path) -> None:
    """A simulated expert captures with ``--contact-feedback free-body``: from the capture
    row on, the felt force beyond guidance (``dev_force_calc − guide_force``, the paper's
    identity mapping) is the free body's reaction, replayed here from the logged hand
    (the command: no link) with (VC), (C1), (C4)."""
    from capture_trainer.trial_log import read_trial_log
    from trials.runner import TrialRequest, run_trial

    request = TrialRequest(trial_id="free", participant="expert", seed=1, contact_feedback=True,
                           contact_mode="free-body")
    table, meta = read_trial_log(run_trial(request, tmp_path)["path"])
    assert meta["outcome"] == "captured"
    gains = meta["compensator"]["contact_mode"]["coupling"]
    assert meta["compensator"]["contact_mode"]["started"] and gains["mode"] == "free-body"
    k, b, m, f_max, dt = (gains["stiffness_n_m"], gains["damping_n_s_m"], gains["mass_kg"], gains["max_force_n"],
                          meta["dt_s"])
    hand = np.column_stack([table[f"cmd_{a}_m"].to_numpy() for a in "xyz"])
    felt = np.column_stack([table[f"dev_force_calc_{a}_n"].to_numpy() - table[f"guide_force_{a}_n"].to_numpy()
                            for a in "xyz"])
    captured = table["captured"].to_numpy()
    start = int(np.argmax(captured))
    v_b = (hand[start] - hand[start - 1]) / dt  # the body appears at the hand, moving with it: no force,
    x_b = hand[start] + v_b * dt  # and (C4) moves it on that tick
    expected = np.zeros_like(felt)
    for row in range(start + 1, len(hand)):
        v_h = (hand[row] - hand[row - 1]) / dt
        force = k * (hand[row] - x_b) + b * (v_h - v_b)
        norm = np.linalg.norm(force)
        if norm > f_max:
            force *= f_max / norm
        v_b = v_b + force * dt / m
        x_b = x_b + v_b * dt
        expected[row] = -force
    engaged = ~table["clutch"].to_numpy()  # clutched, the stylus feels nothing
    rows = np.arange(len(hand)) >= start
    assert np.count_nonzero(rows & engaged) > 100
    np.testing.assert_allclose(felt[rows & engaged], expected[rows & engaged], atol=1e-9)
    assert np.max(np.abs(expected[rows & engaged])) > 0.05  # the hand did feel the body
