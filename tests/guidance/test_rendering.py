"""Force rendering frames the guidance force for the device and never limits it.

The limits (saturation, ramp, rate, non-finite guard, ...) are the safety layer's, proven
on the same path in ``tests/haptics/test_safety.py``.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guidance.rendering import ForceRenderer, as_rotation

any_float = st.floats(allow_nan=True, allow_infinity=True)
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
@given(force=finite_vec, q=quaternions, scale=st.floats(1e-3, 1e3))
def test_calculated_force_is_the_scaled_rotation_of_the_task_force(force, q, scale) -> None:
    r = rotation_from(q)
    renderer = ForceRenderer(r, scale)
    out = np.full(3, np.nan)
    renderer.render(np.array(force), out)
    expected = scale * r @ np.array(force)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-9 * scale * max(1.0, np.abs(force).max()))
    # A rotation keeps the norm: the force is scaled, nothing is clamped.
    assert np.linalg.norm(out) == pytest.approx(scale * np.linalg.norm(force), rel=1e-12, abs=1e-9)


def test_nothing_is_limited_here_not_even_a_nan() -> None:
    renderer = ForceRenderer(np.eye(3), 2.0)
    out = np.zeros(3)
    renderer.render(np.array([1e6, -2e6, 0.5]), out)
    np.testing.assert_array_equal(out, [2e6, -4e6, 1.0])  # no saturation
    renderer.render(np.array([math.nan, 1.0, 0.0]), out)
    assert np.isnan(out).all()  # passed on (0 * NaN is NaN): the safety layer guards it


def test_render_may_write_over_its_input() -> None:
    r = rotation_from((0.3, -0.2, 0.9, 0.1))
    f = np.array([0.3, -1.2, 0.7])
    expected = 2.5 * r @ f
    ForceRenderer(r, 2.5).render(f, f)
    np.testing.assert_allclose(f, expected, atol=1e-12)


def test_render_allocates_nothing_per_call() -> None:
    renderer = ForceRenderer(rotation_from((0.3, -0.2, 0.9, 0.1)), 0.5)
    f, out = np.array([0.3, -1.2, 0.7]), np.zeros(3)
    renderer.render(f, out)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(10_000):
            renderer.render(f, out)
        grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename") if s.size_diff > 0)
    finally:
        tracemalloc.stop()
    assert grown < 10_000  # well under one byte per call


@pytest.mark.parametrize(
    "kwargs",
    [{"force_scale": 0.0}, {"force_scale": math.inf}, {"force_scale": -1.0},
     {"rotation_device_from_task": np.diag([1.0, 1.0, -1.0])}, {"rotation_device_from_task": np.ones((2, 3))}],
)
def test_renderer_rejects_bad_configuration(kwargs) -> None:
    args = {"rotation_device_from_task": np.eye(3), "force_scale": 1.0, **kwargs}
    with pytest.raises(ValueError):
        ForceRenderer(**args)


def test_as_rotation_accepts_a_proper_rotation_only() -> None:
    r = rotation_from((0.3, -0.2, 0.9, 0.1))
    np.testing.assert_array_equal(as_rotation(r), r)
    with pytest.raises(ValueError, match="proper rotation"):
        as_rotation(2.0 * r)
