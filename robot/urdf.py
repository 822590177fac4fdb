"""URDF text generated from a :class:`robot.models.ManipulatorModel` (the one source of truth).

The base link's frame is the base centre of mass; every link's inertial frame has the
link frame's orientation (``rpy = 0``) so that PyBullet's centre-of-mass frame and the
model's link frame share axes. No collision shapes are written: the plant is a
free-floating multibody without self-contacts, and without collision shapes PyBullet takes
masses and inertias only from the file (load it with ``URDF_USE_INERTIA_FROM_FILE``).
The one exception is the capture probe (``model.capture_tool``): a sphere on the last
link at the end-effector point, the shape that touches the debris (:mod:`robot.debris`).
The first joint's origin folds the mounting pose in, so joint indices are 0..n-1 and
the end effector is a point (``ee_offset_m``) in the last link's frame.
"""

from __future__ import annotations

import math

from numpy.typing import NDArray

from robot.models import Link, ManipulatorModel, rpy_matrix

#: A link's mass [kg], centre of mass (3,) [m] and inertia (3, 3) [kg m^2], link frame.
LinkInertial = tuple[float, NDArray, NDArray]

_BASE_RGBA = "0.75 0.75 0.8 1"
_LINK_RGBA = ("0.9 0.5 0.1 1", "0.2 0.5 0.9 1")


def _vec(values: tuple[float, ...] | list[float]) -> str:
    return " ".join(f"{float(v):.17g}" for v in values)


def _rpy_of_matrix(rot: object) -> tuple[float, float, float]:
    """URDF rpy of a rotation matrix (inverse of :func:`robot.models.rpy_matrix`)."""
    import numpy as np

    m = np.asarray(rot)
    pitch = math.asin(max(-1.0, min(1.0, -m[2, 0])))
    if abs(math.cos(pitch)) > 1e-9:
        roll = math.atan2(m[2, 1], m[2, 2])
        yaw = math.atan2(m[1, 0], m[0, 0])
    else:  # gimbal lock: put everything in yaw
        roll = 0.0
        yaw = math.atan2(-m[0, 1], m[1, 1])
    return (roll, pitch, yaw)


def _inertial(mass_kg: float, com: tuple[float, ...], inertia: tuple[tuple[float, ...], ...]) -> str:
    return (
        f'    <inertial>\n      <origin xyz="{_vec(com)}" rpy="0 0 0"/>\n      <mass value="{mass_kg:.17g}"/>\n'
        f'      <inertia ixx="{inertia[0][0]:.17g}" ixy="{inertia[0][1]:.17g}" ixz="{inertia[0][2]:.17g}" '
        f'iyy="{inertia[1][1]:.17g}" iyz="{inertia[1][2]:.17g}" izz="{inertia[2][2]:.17g}"/>\n    </inertial>\n'
    )


def _link_visual(link: Link, rgba: str) -> str:
    half = [0.0, 0.0, 0.0]
    half[link.visual_axis] = 0.5 * link.length_m
    rpy = {0: (0.0, 0.5 * math.pi, 0.0), 1: (-0.5 * math.pi, 0.0, 0.0), 2: (0.0, 0.0, 0.0)}[link.visual_axis]
    return (
        f'    <visual>\n      <origin xyz="{_vec(half)}" rpy="{_vec(rpy)}"/>\n'
        f'      <geometry><cylinder radius="{link.radius_m:.6g}" length="{link.length_m:.6g}"/></geometry>\n'
        f'      <material name="{link.name}_mat"><color rgba="{rgba}"/></material>\n    </visual>\n'
    )


def model_urdf(model: ManipulatorModel, last_link_inertial: LinkInertial | None = None) -> str:
    """The URDF document of ``model`` (a string; write it to a file for PyBullet).

    Args:
        model: the manipulator.
        last_link_inertial: mass [kg], centre of mass [m] and full 3x3 inertia about it
            [kg m^2] of the last link, link frame, replacing the model's (the last link
            carrying a captured payload, :meth:`robot.pybullet_arm.PyBulletArm.carry`);
            off-diagonal terms are written as such and PyBullet takes the principal axes.
    """
    parts = [f'<?xml version="1.0"?>\n<robot name="{model.name}">\n']
    parts.append('  <link name="base">\n')
    parts.append(_inertial(model.base_mass_kg, (0.0, 0.0, 0.0), model.base_inertia_kg_m2))
    parts.append(
        f'    <visual>\n      <origin xyz="0 0 0" rpy="0 0 0"/>\n'
        f'      <geometry><box size="{_vec(model.base_size_m)}"/></geometry>\n'
        f'      <material name="base_mat"><color rgba="{_BASE_RGBA}"/></material>\n    </visual>\n'
    )
    parts.append("  </link>\n")
    mount_rot = rpy_matrix(model.mount_rpy_rad)
    parent = "base"
    for i, link in enumerate(model.links):
        inertia = tuple(tuple(v if r == c else 0.0 for c, v in enumerate(link.inertia_kg_m2)) for r in range(3))
        mass, com = link.mass_kg, tuple(link.com_m)
        if last_link_inertial is not None and i == model.n_joints - 1:
            mass, com, inertia = (float(last_link_inertial[0]), tuple(float(v) for v in last_link_inertial[1]),
                                  tuple(tuple(float(v) for v in row) for row in last_link_inertial[2]))
        parts.append(f'  <link name="{link.name}">\n')
        parts.append(_inertial(mass, com, inertia))
        parts.append(_link_visual(link, _LINK_RGBA[i % 2]))
        if i == model.n_joints - 1:
            parts.append(
                f'    <collision>\n      <origin xyz="{_vec(model.ee_offset_m)}" rpy="0 0 0"/>\n'
                f'      <geometry><sphere radius="{model.capture_tool.tip_radius_m:.17g}"/></geometry>\n'
                '    </collision>\n'
            )
        parts.append("  </link>\n")
        if i == 0:
            xyz = tuple(float(v) for v in (mount_rot @ link.joint_xyz_m) + model.mount_xyz_m)
            rpy = _rpy_of_matrix(mount_rot @ rpy_matrix(link.joint_rpy_rad))
        else:
            xyz, rpy = link.joint_xyz_m, link.joint_rpy_rad
        lower, upper = model.q_min_rad[i], model.q_max_rad[i]
        parts.append(
            f'  <joint name="{link.name}_joint" type="revolute">\n'
            f'    <parent link="{parent}"/>\n    <child link="{link.name}"/>\n'
            f'    <origin xyz="{_vec(xyz)}" rpy="{_vec(rpy)}"/>\n    <axis xyz="{_vec(link.joint_axis)}"/>\n'
            f'    <limit lower="{lower:.17g}" upper="{upper:.17g}" effort="100000" '
            f'velocity="{model.qd_max_rad_s[i]:.17g}"/>\n'
            '    <dynamics damping="0" friction="0"/>\n  </joint>\n'
        )
        parent = link.name
    parts.append("</robot>\n")
    return "".join(parts)
