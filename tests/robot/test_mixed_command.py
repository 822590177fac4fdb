"""Mixed force/motion commands to a massive payload (``robot.mixed_command``, Yang & Konno)."""

from __future__ import annotations

import numpy as np
import pytest

from robot.mixed_command import (MixedCommandGains, TransferOperator, VirtualArm, force_mse, simulate_transfer,
                                 slave_command_m_s)


def test_force_mse_is_eq_11() -> None:
    """(1/N) Σ |f|²: rows (3, 4, 0) and (0, 0, 1) give (25 + 1) / 2."""
    assert force_mse(np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 1.0]])) == 13.0
    assert force_mse(np.array([2.0, -2.0, 0.0])) == pytest.approx(8.0 / 3.0)


def test_eq_3_by_hand() -> None:
    """K_s = 1/1400, G = 10, K_c = 0.08, D = 0.3: f_m = 2 N, f_s = 7 N, x_vir − x_s = 0.01 m,
    v(t−Δt) − v(t−2Δt) = 0.001 m/s: (20 − 7)/1400 + 0.0008 − 0.0003."""
    gains = MixedCommandGains()
    v = slave_command_m_s(gains, 2.0, 7.0, 0.51, 0.50, 0.003, 0.002)
    assert v == pytest.approx(13.0 / 1400.0 + 0.0008 - 0.0003)
    assert slave_command_m_s(gains, 2.0, 7.0, 0.51, 0.50, 0.003, 0.002, force_feedback=False,
                             restraint=False) == pytest.approx(20.0 / 1400.0 - 0.0003)


def test_a_constant_push_ends_at_the_reference_velocity_with_the_payloads_momentum() -> None:
    """Their HILS check (Fig. 8-9): under a constant master force the payload converges to
    v_s,r = K_s G f_m and the force integral equals m v_s,r (3000 kg at 0.01 m/s: 30 N s)."""
    gains = MixedCommandGains()
    f_m = 0.01 / (gains.force_gain_m_s_n * gains.force_scale)  # 1.4 N for 0.01 m/s
    arm = VirtualArm(gains, 3000.0, 1e-3)
    impulse = 0.0
    for _ in range(30_000):
        arm.step(f_m)
        impulse += arm.force_n * 1e-3
    assert arm.payload_m_s == pytest.approx(0.01, rel=1e-3)
    assert arm.v_m_s == pytest.approx(0.01, rel=1e-3)
    assert impulse == pytest.approx(30.0, rel=1e-3)


def test_with_delay_the_virtual_arm_keeps_the_slave_force_lower_than_direct_commands() -> None:
    """Yang & Konno's qualitative result, 4500 kg, 5 s each way, the ground's mass model
    20 % light: closing the loop on the virtual arm, the slave's force MSE is what it
    is without delay; with direct delayed commands it grows with the delay."""
    virtual = {d: simulate_transfer("virtual", delay_s=d) for d in (0.0, 5.0)}
    direct = {d: simulate_transfer("direct", delay_s=d) for d in (0.0, 5.0)}
    assert virtual[5.0].force_mse_n2 == pytest.approx(virtual[0.0].force_mse_n2, rel=0.02)
    assert direct[0.0].force_mse_n2 == pytest.approx(virtual[0.0].force_mse_n2, rel=0.1)  # same without delay
    assert direct[5.0].force_mse_n2 > 2.0 * virtual[5.0].force_mse_n2
    assert virtual[5.0].final_error_m < 0.005  # the payload got there
    # the virtual grip force predicts the slave's, one delay earlier (their Fig. 16)
    run = virtual[5.0]
    shift = 50  # 5 s at the traces' 0.1 s spacing
    slave, predicted = run.slave_force_n[shift:], run.virtual_force_n[:-shift]
    assert np.corrcoef(slave, predicted)[0, 1] > 0.9


def test_without_local_force_feedback_the_grip_force_is_huge() -> None:
    """Their "without force feedback" at 500 kg: the operator's push goes straight to a
    stiff, barely damped grip (ζ ≈ 0.03): forces far above the mixed command's."""
    mixed = simulate_transfer("direct", mass_kg=500.0, delay_s=0.0, duration_s=30.0)
    velocity = simulate_transfer("velocity", mass_kg=500.0, delay_s=0.0, duration_s=30.0)
    assert velocity.force_mse_n2 > 100.0 * mixed.force_mse_n2


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="scheme"):
        simulate_transfer("smith")
    with pytest.raises(ValueError, match="servo_lag_s"):
        MixedCommandGains(servo_lag_s=0.0)
    with pytest.raises(ValueError, match="model_mass_kg"):
        VirtualArm(MixedCommandGains(), 0.0, 1e-3)
    assert TransferOperator(max_force_n=3.0).force_n(-10.0, 0.0) == 3.0


def test_bench_mixed_json() -> None:
    """``capture-trainer bench mixed --json``: one row per mass, delay and scheme."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "app.cli", "bench", "mixed", "--mass", "500", "--delay", "0", "1",
                             "--duration", "10", "--json"], env=dict(os.environ, PYTHONPATH=str(root)),
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert [(r["delay_s"], r["scheme"]) for r in runs] == [(d, s) for d in (0.0, 1.0)
                                                           for s in ("virtual", "direct", "velocity")]
    assert all(r["force_mse_n2"] > 0.0 and r["peak_force_n"] > 0.0 for r in runs)
