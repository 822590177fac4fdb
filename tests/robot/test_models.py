from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from capture_trainer.errors import UnknownNameError
from robot.models import MODELS, get_model
from robot.pybullet_arm import PyBulletArm


def test_the_registry_holds_every_model_under_its_own_name():
    assert MODELS.names() == ("planar-3r", "spatial-7dof")
    for name in MODELS.names():
        assert get_model(name).name == name


def test_unknown_model_lists_names_and_suggests():
    with pytest.raises(UnknownNameError) as info:
        get_model("planar-3")
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "unknown manipulator model 'planar-3'; did you mean 'planar-3r'?" in message
    assert "\n" not in message
    for name in MODELS.names():
        assert name in message


def test_model_dimensions(model):
    n = model.n_joints
    assert model.task_dim in (2, 3)
    assert (n, model.task_dim) in ((3, 2), (7, 3))
    assert np.all(np.array(model.q_min_rad) < np.array(model.q0_rad))
    assert np.all(np.array(model.q0_rad) < np.array(model.q_max_rad))
    assert np.all(np.array(model.qd_max_rad_s) > 0) and np.all(np.array(model.qdd_max_rad_s2) > 0)


def test_with_base_overrides_only_the_base(model):
    heavy = model.with_base(500.0, (10.0, 20.0, 30.0))
    assert heavy.base_mass_kg == 500.0
    assert np.allclose(np.diag(heavy.base_inertia_kg_m2), (10.0, 20.0, 30.0))
    assert heavy.links == model.links and heavy.q0_rad == model.q0_rad
    with pytest.raises(ValueError):
        model.with_base(-1.0, 1.0)
    with pytest.raises(ValueError):
        model.with_base(10.0, (1.0, -1.0, 1.0))


def test_urdf_loads_the_model_mass_properties(model):
    """PyBullet must see the masses and inertias of the data, not recomputed ones."""
    with PyBulletArm(model) as arm:
        base = pb.getDynamicsInfo(arm.body_id, -1, physicsClientId=arm.client_id)
        assert base[0] == pytest.approx(model.base_mass_kg, rel=1e-12)
        assert np.allclose(sorted(base[2]), sorted(np.linalg.eigvalsh(np.array(model.base_inertia_kg_m2))), rtol=1e-9)
        for j, link in enumerate(model.links):
            info = pb.getDynamicsInfo(arm.body_id, j, physicsClientId=arm.client_id)
            assert info[0] == pytest.approx(link.mass_kg, rel=1e-12)
            assert np.allclose(info[2], link.inertia_kg_m2, rtol=1e-9)
            assert info[3] == pytest.approx(link.com_m, abs=1e-12)
