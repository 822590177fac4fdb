"""Conservation on the plant: total momentum drift over 10 s of arbitrary joint motion is
small and shrinks with the time step (momentum summed from PyBullet's own link states)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from robot.arm import JointCommand
from robot.pybullet_arm import PyBulletArm

log = logging.getLogger(__name__)


def _drift(model, dt_s, probe, duration_s=10.0):
    n = model.n_joints
    freqs = np.linspace(0.3, 0.9, n)
    amplitude = 0.4 * np.array(model.qd_max_rad_s)
    with PyBulletArm(model, dt_s=dt_s) as arm:
        command = JointCommand.zeros(n)
        steps = int(round(duration_s / dt_s))
        for k in range(steps):
            t = k * dt_s
            command.qd_rad_s[:] = amplitude * np.sin(2 * np.pi * freqs * t) * np.cos(0.5 * np.pi * freqs * t)
            arm.send(command)
            arm.advance()
        linear, angular = probe.momentum(arm)
    # scale: momentum of the links moving at the peak commanded rate on a 1 m lever
    scale = sum(link.mass_kg for link in model.links) * float(np.max(amplitude)) * 1.0
    return np.linalg.norm(linear), np.linalg.norm(angular), scale


@pytest.mark.slow
def test_momentum_drift_shrinks_with_time_step(model, probe, capsys):
    lin_1, ang_1, scale = _drift(model, 1e-3, probe)
    lin_05, ang_05, _ = _drift(model, 5e-4, probe)
    with capsys.disabled():
        print(f"\n[{model.name}] momentum drift over 10 s: dt 1 ms: |P| {lin_1:.3e} kg m/s, |L| {ang_1:.3e} "
              f"kg m^2/s; dt 0.5 ms: |P| {lin_05:.3e}, |L| {ang_05:.3e}")
    # small against the momentum the moving links carry, and first order in dt
    assert lin_1 < 1e-3 * scale and ang_1 < 1e-3 * scale
    assert ang_05 < 0.7 * ang_1 and lin_05 < 0.7 * lin_1
