"""Workspace mapping: round trips, power consistency, clutch without jumps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from haptics.mapping import WorkspaceMapping

finite = st.floats(min_value=-10.0, max_value=10.0)
vec3 = st.tuples(finite, finite, finite).map(np.array)
quaternion = st.tuples(*[st.floats(-1.0, 1.0)] * 4).filter(lambda q: sum(c * c for c in q) > 1e-3)
scale = st.floats(min_value=0.1, max_value=10.0)


def mapping_from(q: tuple[float, ...], s: float, k_f: float, offset: np.ndarray) -> WorkspaceMapping:
    r = Rotation.from_quat(q).as_matrix()
    return WorkspaceMapping(scale=s, rotation_task_from_device=r, offset_m=offset, force_scale=k_f)


@settings(max_examples=100, deadline=None)
@given(quaternion, scale, scale, vec3, vec3, vec3, vec3)
def test_round_trips_and_power(q, s, k_f, offset, p_dev, v_dev, f_task) -> None:  # type: ignore[no-untyped-def]
    m = mapping_from(q, s, k_f, offset)
    r = Rotation.from_quat(q).as_matrix()
    p_task, v_task = np.zeros(3), np.zeros(3)
    m.to_task(p_dev, v_dev, p_task, v_task)
    assert np.allclose(p_task, offset + s * r @ p_dev, atol=1e-9)  # the documented map
    back = np.zeros(3)
    m.to_device_position(p_task, back)
    assert np.allclose(back, p_dev, atol=1e-9)
    m.to_device_velocity(v_task, back)
    assert np.allclose(back, v_dev, atol=1e-9)
    both_p, both_v = np.zeros(3), np.zeros(3)
    m.to_device_state(p_task, v_task, both_p, both_v)
    assert np.allclose(both_p, p_dev, atol=1e-9) and np.allclose(both_v, v_dev, atol=1e-9)
    f_dev = np.zeros(3)
    m.to_device_force(f_task, f_dev)
    # Power at the stylus = (force_scale / scale) x power at the end effector.
    assert f_dev @ v_dev == pytest.approx(k_f / s * (f_task @ v_task), abs=1e-7)
    f_back = np.zeros(3)
    m.to_task_force(f_dev, f_back)
    assert np.allclose(f_back, f_task, atol=1e-9)


def test_power_preserving_choice() -> None:
    m = WorkspaceMapping(scale=2.5, force_scale=2.5)
    v_dev = np.array([0.1, -0.2, 0.05])
    p, v = np.zeros(3), np.zeros(3)
    m.to_task(np.zeros(3), v_dev, p, v)
    f_task = np.array([1.0, 2.0, -3.0])
    f_dev = np.zeros(3)
    m.to_device_force(f_task, f_dev)
    assert f_dev @ v_dev == pytest.approx(f_task @ v)


def test_clutch_decouples_and_release_does_not_jump() -> None:
    m = WorkspaceMapping(scale=2.0, offset_m=(1.0, 0.0, 0.0))
    p, v, f = np.zeros(3), np.zeros(3), np.zeros(3)
    vel = np.array([0.1, 0.0, 0.0])
    m.to_task(np.array([0.05, 0.0, 0.0]), vel, p, v)
    assert np.allclose(p, [1.1, 0.0, 0.0])
    m.set_clutch(True)
    assert m.clutched
    for x in np.linspace(0.05, -0.05, 11):  # the person re-centres the stylus
        m.to_task(np.array([x, 0.02, 0.0]), vel, p, v)
        assert np.allclose(p, [1.1, 0.0, 0.0]) and np.all(v == 0.0)
        m.to_device_force(np.array([5.0, 5.0, 5.0]), f)
        assert np.all(f == 0.0)  # decoupled: no force while clutched
    m.set_clutch(False)
    m.to_task(np.array([-0.05, 0.02, 0.0]), vel, p, v)
    assert np.allclose(p, [1.1, 0.0, 0.0])  # no jump on release
    m.to_task(np.array([0.0, 0.02, 0.0]), vel, p, v)
    assert np.allclose(p, [1.2, 0.0, 0.0])  # then moves by scale x displacement
    assert np.allclose(v, 2.0 * vel)
    back = np.zeros(3)
    m.to_device_position(p, back)
    assert np.allclose(back, [0.0, 0.02, 0.0])  # the inverse uses the new anchor
    m.reset()
    m.to_task(np.array([0.05, 0.0, 0.0]), vel, p, v)
    assert np.allclose(p, [1.1, 0.0, 0.0])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"scale": 0.0},
        {"force_scale": -1.0},
        {"rotation_task_from_device": np.diag([1.0, 1.0, -1.0])},  # a reflection
        {"rotation_task_from_device": np.ones((3, 3))},
        {"offset_m": (0.0, np.nan, 0.0)},
    ],
)
def test_rejects_invalid_configuration(kwargs: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError):
        WorkspaceMapping(**kwargs)
