"""Force rendering: limits hold for any input, maps and ramps match their closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from guidance.rendering import (
    ForceRenderer,
    RateLimiter,
    clamp_norm,
    clamp_norm_into,
    clamp_per_axis,
    guard_finite_into,
)

any_float = st.floats(allow_nan=True, allow_infinity=True)
wild_float = st.one_of(any_float, st.sampled_from([1e308, -1e308, 1e200, 5e-324, math.nan, math.inf, -math.inf]))
wild_vec = st.tuples(wild_float, wild_float, wild_float)
finite_vec = st.tuples(*[st.floats(-1e6, 1e6)] * 3)


def rotation_from(q: tuple[float, float, float, float]) -> np.ndarray:
    """Rotation matrix of a (non-normalised, non-zero) quaternion (w, x, y, z)."""
    w, x, y, z = np.array(q) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


quaternions = st.tuples(*[st.floats(-1, 1)] * 4).filter(lambda q: np.linalg.norm(q) > 0.1)


@settings(max_examples=300, deadline=None)
@given(
    forces=st.lists(wild_vec, min_size=1, max_size=8),
    q=quaternions,
    scale=st.floats(1e-3, 1e3),
    limit=st.floats(0.0, 10.0),
    mode=st.sampled_from(["norm", "axis"]),
    ramp=st.floats(0.0, 1.0),
    rate=st.one_of(st.none(), st.floats(1.0, 1e4)),
    dt=st.one_of(st.floats(0.0, 0.05), st.sampled_from([math.nan, math.inf])),
)
def test_actuated_force_never_exceeds_the_limit(forces, q, scale, limit, mode, ramp, rate, dt) -> None:
    renderer = ForceRenderer(rotation_from(q).T, scale, limit, mode, ramp, rate)
    for force in forces:
        result = renderer.render(np.array(force, dtype=float), dt)
        act = result.actuated_dev_n
        assert np.all(np.isfinite(act))
        assert np.all(np.isfinite(result.calculated_dev_n))
        if mode == "norm":
            assert np.linalg.norm(act) <= limit * (1 + 1e-12) + 1e-300
        else:
            assert np.max(np.abs(act)) <= limit
        if not all(math.isfinite(v) for v in force) or not math.isfinite(dt):
            assert result.fault and not act.any()


@settings(max_examples=200, deadline=None)
@given(force=wild_vec, limit=st.floats(0.0, 100.0))
@example(force=(0.0, 0.0, 1e308), limit=1e-5)  # limit / norm is subnormal
@example(force=(0.0, 0.0, 1.0), limit=7.904462648500766e-161)  # tiny limit
def test_clamps_are_bounded_and_finite_for_any_input(force, limit) -> None:
    norm_out = clamp_norm(force, limit)
    axis_out = clamp_per_axis(force, limit)
    # math.hypot: np.linalg.norm squares the components and loses precision below 1e-154
    assert np.all(np.isfinite(norm_out)) and math.hypot(*norm_out) <= limit * (1 + 1e-12) + 1e-300
    assert np.all(np.isfinite(axis_out)) and np.max(np.abs(axis_out)) <= limit


@settings(max_examples=200, deadline=None)
@given(force=finite_vec, limit=st.floats(0.01, 100.0))
def test_norm_clamp_keeps_the_direction(force, limit) -> None:
    f = np.array(force)
    out = clamp_norm(f, limit)
    assert np.linalg.norm(out) == pytest.approx(min(np.linalg.norm(f), limit), rel=1e-9, abs=1e-12)
    assert np.linalg.norm(np.cross(out, f)) <= 1e-9 * np.linalg.norm(f) * max(np.linalg.norm(out), 1.0)
    assert out @ f >= 0.0


def test_per_axis_clamp_is_the_paper_3n_per_axis() -> None:
    np.testing.assert_array_equal(clamp_per_axis([7.9, -3.8, 0.5], 3.0), [3.0, -3.0, 0.5])


def test_clamp_reports_whether_it_changed_the_force() -> None:
    out = np.zeros(3)
    assert not clamp_norm_into(np.array([1.0, 0.0, 0.0]), 3.0, out)
    assert clamp_norm_into(np.array([4.0, 0.0, 0.0]), 3.0, out)
    np.testing.assert_array_equal(out, [3.0, 0.0, 0.0])


def test_guard_zeroes_non_finite_values() -> None:
    out = np.ones(3)
    assert guard_finite_into(np.array([1.0, math.nan, 0.0]), out)
    np.testing.assert_array_equal(out, 0.0)
    assert not guard_finite_into(np.array([1.0, 2.0, 3.0]), out)
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0])


def test_rate_limiter_steps_at_most_rate_times_dt_and_arrives() -> None:
    limiter = RateLimiter(max_rate_n_s=100.0)
    target = np.array([3.0, 4.0, 0.0])  # 5 N away: 50 steps of 0.1 N at 1 kHz
    previous = limiter.output_n.copy()
    for step in range(50):
        assert limiter.step(target, 1e-3) == (step < 49)
        assert np.linalg.norm(limiter.output_n - previous) <= 0.1 + 1e-12
        previous = limiter.output_n.copy()
    np.testing.assert_allclose(limiter.output_n, target, atol=1e-12)


def test_calculated_force_is_the_scaled_rotation_of_the_task_force() -> None:
    r = rotation_from((0.3, -0.2, 0.9, 0.1))
    renderer = ForceRenderer(r, force_scale=2.5, max_force_n=1e9, ramp_time_s=0.0, max_rate_n_s=None)
    f_task = np.array([0.3, -1.2, 0.7])
    result = renderer.render(f_task, 1e-3)
    np.testing.assert_allclose(result.calculated_dev_n, 2.5 * r @ f_task, atol=1e-12)
    np.testing.assert_allclose(result.actuated_dev_n, 2.5 * r @ f_task, atol=1e-12)
    assert not result.saturated and not result.fault


def test_ramp_scales_the_force_linearly_after_reset() -> None:
    renderer = ForceRenderer(max_force_n=10.0, ramp_time_s=0.1, max_rate_n_s=None)
    f = np.array([2.0, 0.0, 0.0])
    for tick in range(150):
        result = renderer.render(f, 1e-3)
        assert result.actuated_dev_n[0] == pytest.approx(2.0 * min(1.0, tick * 1e-3 / 0.1))
    renderer.reset()
    assert renderer.render(f, 1e-3).actuated_dev_n[0] == 0.0


def test_fault_then_recovery_ramps_from_zero_at_the_rate_limit() -> None:
    renderer = ForceRenderer(max_force_n=3.0, ramp_time_s=0.0, max_rate_n_s=1000.0)
    for _ in range(10):
        renderer.render(np.array([2.0, 0.0, 0.0]), 1e-3)
    assert renderer.result.actuated_dev_n[0] == pytest.approx(2.0)
    faulted = renderer.render(np.array([math.inf, 0.0, 0.0]), 1e-3)
    assert faulted.fault and not faulted.actuated_dev_n.any()
    assert renderer.fault_count == 1
    recovered = renderer.render(np.array([2.0, 0.0, 0.0]), 1e-3)
    assert not recovered.fault and recovered.actuated_dev_n[0] == pytest.approx(1.0)  # 1000 N/s * 1 ms
    assert recovered.saturated


@pytest.mark.parametrize(
    "kwargs",
    [{"saturation": "box"}, {"force_scale": 0.0}, {"max_force_n": -1.0}, {"ramp_time_s": math.nan},
     {"max_rate_n_s": 0.0}, {"rotation_device_from_task": np.diag([1.0, 1.0, -1.0])}],
)
def test_renderer_rejects_bad_configuration(kwargs) -> None:
    with pytest.raises(ValueError):
        ForceRenderer(**kwargs)
