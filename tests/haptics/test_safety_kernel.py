"""The compiled safety filter (``haptics._kernels.safety_filter``, used by the fused
servo tick) against the layer's own ``filter``: the same outputs and flags, to the bit,
through NaN commands, huge forces, missed ticks, stale heartbeats, engage and release,
in both saturation modes; and ``hypot3`` against ``math.hypot``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from haptics import _kernels as _k
from haptics.safety import SafetyConfig, SafetyLayer
from haptics.simulated import TOUCH_LIKE_SPEC


def test_hypot3_is_pythons_hypot_to_the_bit() -> None:
    rng = np.random.default_rng(3)
    for scale in (1e-320, 1e-300, 1e-6, 1.0, 3.3, 1e6, 1e300):
        values = rng.standard_normal((3000, 3)) * scale
        values[::5, 1] = 0.0
        for x, y, z in values.tolist():
            assert _k.hypot3(x, y, z) == math.hypot(x, y, z)
    assert math.isnan(_k.hypot3(math.nan, 1.0, 0.0))
    assert _k.hypot3(math.inf, math.nan, 0.0) == math.inf
    assert _k.hypot3(0.0, 0.0, 0.0) == 0.0


@pytest.mark.parametrize("saturation", ["norm", "axis"])
def test_compiled_filter_matches_the_layer(saturation: str) -> None:
    config = SafetyConfig(max_force_n=3.0, saturation=saturation, ramp_in_s=0.05, max_rate_n_s=800.0,
                          thermal_tau_s=0.5)
    reference = SafetyLayer(TOUCH_LIKE_SPEC, config)
    compiled = SafetyLayer(TOUCH_LIKE_SPEC, config)
    cfg = compiled.pack_config()
    st = np.zeros(_k.N_SAFETY_STATE)
    rng = np.random.default_rng(11)
    t = 0.0
    watchdog_seen = saturated_seen = fault_seen = 0
    for k in range(6000):
        t += 0.001
        if k % 1500 == 700:
            t += 0.01  # missed ticks: the watchdog trips
        if k == 100 or k == 3000:
            reference.set_engaged(True)
            compiled.set_engaged(True)
        if k == 2500:
            reference.set_engaged(False)
            compiled.set_engaged(False)
        if k % 2000 < 1900:  # the device channel beats, except for a stale stretch
            reference.heartbeat(t)
            compiled.heartbeat(t)
        force = rng.standard_normal(3) * (0.5 if k % 300 < 200 else 50.0)
        if k % 997 == 5:
            force[1] = math.nan
        if k % 1301 == 9:
            force[:] = 1e300
        time_s = math.nan if k == 4321 else t
        expected = reference.filter(time_s, force).copy()
        compiled.pack_state(st)
        _k.safety_filter(st, cfg, time_s, force, compiled.force_n)
        compiled.unpack_state(st)
        assert compiled.force_n.tolist() == expected.tolist(), k
        for flag in ("saturated", "rate_limited", "fault", "watchdog", "engage_gain", "thermal_load"):
            assert getattr(compiled, flag) == getattr(reference, flag), (k, flag)
        watchdog_seen += reference.watchdog
        saturated_seen += reference.saturated
        fault_seen += reference.fault
    # the sequence went through every branch that matters
    assert watchdog_seen > 100 and saturated_seen > 100 and fault_seen >= 5
