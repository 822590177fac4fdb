"""Manipulator models as data: one frozen description per model, nothing computed here.

Frames:
    * **task frame** = the inertial frame of the simulation (PyBullet's world frame).
      At t = 0 the base centre of mass sits at the origin with identity attitude, so
      the base frame and the task frame coincide at the start.
    * **base frame**: attached to the spacecraft base, origin at its centre of mass.
    * **link frame i**: the frame of joint i after its rotation; joint i rotates about
      ``Link.joint_axis`` (a unit vector in that frame) through the frame's origin.

A chain is ``base -> mount -> joint 1 -> link 1 -> ... -> joint n -> link n -> end
effector``. The mounting pose (``mount_xyz_m``, ``mount_rpy_rad``) places the arm's
first joint frame on the base; ``Link.joint_xyz_m`` / ``joint_rpy_rad`` place every
other joint in its parent link's frame (URDF convention: rotation ``Rz(y) Ry(p) Rx(r)``).

The two registered models (:data:`MODELS`, the one list of model names):

``planar-3r``
    The paper's 2-D case (Li & Yan 2019 after Cocuzza et al.): three revolute joints
    about the base z axis, task x-y, reaction torque about z. With 3 joints, a 2-D task
    and a 1-D reaction constraint, ``[J; M]`` is square: the reactionless motion is
    unique and exists wherever that matrix has full rank.

``spatial-7dof``
    An iiwa-like 7-joint arm (KUKA LBR iiwa 7 R800 proportions: 0.34 m shoulder,
    0.40 m upper arm, 0.40 m forearm, 0.126 m flange, plus a 0.10 m capture tool).
    Task: end-effector position; reaction torque about all three base axes, so only one
    degree of freedom is spare and the reactionless workspace is what limits a capture.

How the spatial mounting and start pose were chosen: debris in the scenarios
approaches the end effector, by default along -x from +x (target starts at
``ee0 + (0.28, 0, 0)`` m and moves at ``(-0.1, 0, 0)`` m/s, so over a 6 s trial the
end effector must travel about 0.13 m out toward +x and then 0.45 m back). The arm is
therefore mounted on the **+x face** of the base (the face the debris approaches),
its first joint axis along base +x, so that the capture motion is a reach-and-retract
along the arm's own long axis rather than a sweep across the base. The start pose
``q0_rad`` came from a search (:mod:`trials.pose_search`): random poses around an
elbow-bent one, scored by the smallest ``sigma_ratio`` (σ_min(M (I − J⁺J)) / ‖M‖, the
reaction-singularity gauge) seen during a simulated automatic capture, zero if the
capture failed, ended off the target or the arm passed through the base. Measured: the
hand-picked planar "elbow-up" pose ``(0, 0.6, 0, -1.4, 0, 0.8, 0)`` meets a reaction
singularity 3.5 s into the 6 s capture from +x; the searched pose keeps
``sigma_ratio >= 0.0117`` for the whole 6 s with no joint limit ever active. From +y
and +z the same pose tracks reactionless for about 3.7 s and 3.9 s, then the
singularity is damped and reported. With the tool point on the last joint's axis (as on
an iiwa) joint 7 cannot move the end effector, so the one spare degree of freedom is
the wrist roll and cannot steer away from reaction singularities: the start pose is what
buys the reactionless workspace. The planar start pose was searched the same way, from
+x and +y (``sigma_ratio >= 0.14`` over both captures).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from capture_trainer.registry import Registry

Vec3 = tuple[float, float, float]
Mat3 = tuple[Vec3, Vec3, Vec3]


def _inertia_matrix(inertia_kg_m2: float | tuple[float, ...] | Mat3 | NDArray[np.float64]) -> Mat3:
    """A 3x3 inertia (kg m^2) from a scalar (isotropic), 3 principal values, or a 3x3."""
    arr = np.asarray(inertia_kg_m2, dtype=float)
    if arr.ndim == 0:
        arr = np.eye(3) * float(arr)
    elif arr.shape == (3,):
        arr = np.diag(arr)
    elif arr.shape != (3, 3):
        raise ValueError(f"inertia must be a scalar, 3 principal values or 3x3, got shape {arr.shape}")
    if not np.allclose(arr, arr.T) or np.any(np.linalg.eigvalsh(arr) <= 0.0):
        raise ValueError(f"inertia must be symmetric positive definite, got {arr.tolist()}")
    return tuple(tuple(float(v) for v in row) for row in arr)  # type: ignore[return-value]


def rod_inertia(mass_kg: float, length_m: float, radius_m: float, axis: int = 2) -> Vec3:
    """Principal inertias (kg m^2) of a solid cylinder about its centre of mass.

    Args:
        mass_kg: mass [kg]; length_m: length [m]; radius_m: radius [m].
        axis: index (0, 1, 2) of the frame axis the cylinder lies along.
    """
    along = 0.5 * mass_kg * radius_m**2
    across = mass_kg * (3.0 * radius_m**2 + length_m**2) / 12.0
    values = [across, across, across]
    values[axis] = along
    return (values[0], values[1], values[2])


def box_inertia(mass_kg: float, size_m: Vec3) -> Vec3:
    """Principal inertias (kg m^2) of a solid box with edge lengths ``size_m`` [m]."""
    a, b, c = size_m
    return (mass_kg * (b * b + c * c) / 12.0, mass_kg * (a * a + c * c) / 12.0, mass_kg * (a * a + b * b) / 12.0)


@dataclass(frozen=True)
class Link:
    """One revolute joint and the rigid link it moves.

    Attributes:
        name: link name (URDF link name; the joint is ``<name>_joint``).
        joint_xyz_m: joint origin in the parent link frame [m] (for the first joint: in
            the mount frame).
        joint_rpy_rad: fixed rotation of the joint frame in the parent frame [rad], URDF rpy.
        joint_axis: unit rotation axis in the joint (= link) frame.
        mass_kg: link mass [kg].
        com_m: centre of mass in the link frame [m].
        inertia_kg_m2: principal inertias about the centre of mass, link-frame axes [kg m^2].
        length_m: drawn length (visual only) along ``visual_axis`` [m].
        radius_m: drawn radius (visual only) [m].
        visual_axis: link-frame axis index the drawn cylinder lies along.
    """

    name: str
    joint_xyz_m: Vec3
    joint_rpy_rad: Vec3
    joint_axis: Vec3
    mass_kg: float
    com_m: Vec3
    inertia_kg_m2: Vec3
    length_m: float
    radius_m: float
    visual_axis: int = 2


@dataclass(frozen=True)
class CaptureTool:
    """The capture probe on the end effector (drawn in the window; the arm's only
    collision shape, see :mod:`robot.debris`).

    A sphere of radius ``tip_radius_m`` centred on the end-effector point. The capture
    envelope is the sphere of radius ``envelope_radius_m`` about that point: the tool
    can close on a grapple fixture whose centre is inside it.

    Attributes:
        tip_radius_m: probe tip radius [m].
        envelope_radius_m: capture envelope radius about the end-effector point [m].
    """

    tip_radius_m: float = 0.0016
    envelope_radius_m: float = 0.012

    def __post_init__(self) -> None:
        if not (0.0 < self.tip_radius_m < self.envelope_radius_m and math.isfinite(self.envelope_radius_m)):
            raise ValueError(f"capture tool: need 0 < tip_radius_m < envelope_radius_m, got {self.tip_radius_m}, "
                             f"{self.envelope_radius_m}")


@dataclass(frozen=True)
class KinematicArrays:
    """The model packed into contiguous arrays for the compiled kernels (robot._kernels).

    Attributes:
        joint_xyz: (n, 3) joint origins in the parent frame (joint 1 includes the mount) [m].
        joint_rot: (n, 3, 3) fixed rotations parent <- joint frame.
        joint_axis: (n, 3) unit axes in the joint frames.
        link_mass: (n,) [kg]; link_com: (n, 3) [m]; link_inertia: (n, 3, 3) [kg m^2].
        ee_offset: (3,) end effector in the last link frame [m].
        base_mass: [kg]; base_inertia: (3, 3) about the base centre of mass, base frame.
        task_rows: rows of the 3-D velocity that form the task (x, y or x, y, z).
        reaction_rows: rows of the 3-D base torque that are constrained (z or x, y, z).
        q_min, q_max: (n,) [rad]; qd_max: (n,) [rad/s]; qdd_max: (n,) [rad/s^2].
    """

    joint_xyz: NDArray[np.float64]
    joint_rot: NDArray[np.float64]
    joint_axis: NDArray[np.float64]
    link_mass: NDArray[np.float64]
    link_com: NDArray[np.float64]
    link_inertia: NDArray[np.float64]
    ee_offset: NDArray[np.float64]
    base_mass: float
    base_inertia: NDArray[np.float64]
    task_rows: NDArray[np.int64]
    reaction_rows: NDArray[np.int64]
    q_min: NDArray[np.float64]
    q_max: NDArray[np.float64]
    qd_max: NDArray[np.float64]
    qdd_max: NDArray[np.float64]


def rpy_matrix(rpy_rad: Vec3 | NDArray[np.float64]) -> NDArray[np.float64]:
    """Rotation matrix of URDF roll-pitch-yaw angles: ``Rz(yaw) @ Ry(pitch) @ Rx(roll)``."""
    r, p, y = (float(v) for v in rpy_rad)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


@dataclass(frozen=True)
class ManipulatorModel:
    """A redundant manipulator on a free-floating base, all in SI units.

    Attributes:
        name: registry key (``planar-3r`` or ``spatial-7dof``).
        task_dim: 2 (x-y task, torque about z) or 3 (x-y-z task, torque about x, y, z).
        links: the joints and links, base to tip.
        base_mass_kg: spacecraft base mass [kg].
        base_inertia_kg_m2: 3x3 base inertia about its centre of mass, base frame [kg m^2].
        base_size_m: base box edge lengths (visual and documentation) [m].
        mount_xyz_m: first joint frame origin in the base frame [m] (on a face of the base).
        mount_rpy_rad: first joint frame orientation in the base frame [rad] (URDF rpy).
        q0_rad: default start pose [rad].
        q_min_rad, q_max_rad: joint position limits [rad].
        qd_max_rad_s: joint rate limits [rad/s]; qdd_max_rad_s2: acceleration limits [rad/s^2].
        ee_offset_m: end-effector point in the last link frame [m].
        ee_link: name of the link that carries the end effector (the last link).
        capture_tool: the capture probe at the end-effector point.
        description: one line for listings.
    """

    name: str
    task_dim: int
    links: tuple[Link, ...]
    base_mass_kg: float
    base_inertia_kg_m2: Mat3
    base_size_m: Vec3
    mount_xyz_m: Vec3
    mount_rpy_rad: Vec3
    q0_rad: tuple[float, ...]
    q_min_rad: tuple[float, ...]
    q_max_rad: tuple[float, ...]
    qd_max_rad_s: tuple[float, ...]
    qdd_max_rad_s2: tuple[float, ...]
    ee_offset_m: Vec3
    description: str = ""
    ee_link: str = field(default="")
    capture_tool: CaptureTool = field(default_factory=CaptureTool)

    def __post_init__(self) -> None:
        n = len(self.links)
        if self.task_dim not in (2, 3):
            raise ValueError(f"model {self.name!r}: task_dim must be 2 or 3, got {self.task_dim}")
        for label in ("q0_rad", "q_min_rad", "q_max_rad", "qd_max_rad_s", "qdd_max_rad_s2"):
            if len(getattr(self, label)) != n:
                raise ValueError(f"model {self.name!r}: {label} needs {n} values, got {len(getattr(self, label))}")
        if self.base_mass_kg <= 0.0:
            raise ValueError(f"model {self.name!r}: base_mass_kg must be > 0, got {self.base_mass_kg}")
        object.__setattr__(self, "base_inertia_kg_m2", _inertia_matrix(self.base_inertia_kg_m2))
        if not self.ee_link:
            object.__setattr__(self, "ee_link", self.links[-1].name)

    @property
    def n_joints(self) -> int:
        """Number of revolute joints."""
        return len(self.links)

    @property
    def reaction_dim(self) -> int:
        """Number of constrained base-torque components (1 planar: z; 3 spatial)."""
        return 1 if self.task_dim == 2 else 3

    def with_base(self, mass_kg: float, inertia_kg_m2: float | tuple[float, ...] | Mat3) -> ManipulatorModel:
        """The same arm on a different base (a scenario's spacecraft).

        Args:
            mass_kg: base mass [kg], > 0.
            inertia_kg_m2: base inertia about its centre of mass, base frame [kg m^2]:
                a scalar (isotropic), 3 principal values or a 3x3 matrix.
        """
        if not (mass_kg > 0.0 and math.isfinite(mass_kg)):
            raise ValueError(f"base mass must be a positive finite number of kg, got {mass_kg}")
        return replace(self, base_mass_kg=float(mass_kg), base_inertia_kg_m2=_inertia_matrix(inertia_kg_m2))

    @cached_property
    def arrays(self) -> KinematicArrays:
        """The model packed for the compiled kernels (computed once per model object)."""
        n = self.n_joints
        joint_xyz = np.zeros((n, 3))
        joint_rot = np.zeros((n, 3, 3))
        mount_rot = rpy_matrix(self.mount_rpy_rad)
        for i, link in enumerate(self.links):
            rot = rpy_matrix(link.joint_rpy_rad)
            xyz = np.array(link.joint_xyz_m, dtype=float)
            if i == 0:
                xyz = np.array(self.mount_xyz_m) + mount_rot @ xyz
                rot = mount_rot @ rot
            joint_xyz[i] = xyz
            joint_rot[i] = rot
        axes = np.array([link.joint_axis for link in self.links], dtype=float)
        axes /= np.linalg.norm(axes, axis=1)[:, None]
        task_rows = np.array([0, 1] if self.task_dim == 2 else [0, 1, 2], dtype=np.int64)
        reaction_rows = np.array([2] if self.task_dim == 2 else [0, 1, 2], dtype=np.int64)
        return KinematicArrays(
            joint_xyz=joint_xyz,
            joint_rot=joint_rot,
            joint_axis=axes,
            link_mass=np.array([link.mass_kg for link in self.links], dtype=float),
            link_com=np.array([link.com_m for link in self.links], dtype=float),
            link_inertia=np.array([np.diag(link.inertia_kg_m2) for link in self.links], dtype=float),
            ee_offset=np.array(self.ee_offset_m, dtype=float),
            base_mass=float(self.base_mass_kg),
            base_inertia=np.array(self.base_inertia_kg_m2, dtype=float),
            task_rows=task_rows,
            reaction_rows=reaction_rows,
            q_min=np.array(self.q_min_rad, dtype=float),
            q_max=np.array(self.q_max_rad, dtype=float),
            qd_max=np.array(self.qd_max_rad_s, dtype=float),
            qdd_max=np.array(self.qdd_max_rad_s2, dtype=float),
        )


def _planar_3r() -> ManipulatorModel:
    base_size = (0.8, 0.8, 0.8)
    lengths = (0.45, 0.40, 0.25)
    masses = (4.0, 3.0, 1.5)
    radius = 0.03
    links = []
    for i, (length, mass) in enumerate(zip(lengths, masses)):
        previous = lengths[i - 1] if i else 0.0
        links.append(
            Link(
                name=f"link{i + 1}",
                joint_xyz_m=(previous, 0.0, 0.0),
                joint_rpy_rad=(0.0, 0.0, 0.0),
                joint_axis=(0.0, 0.0, 1.0),
                mass_kg=mass,
                com_m=(0.5 * length, 0.0, 0.0),
                inertia_kg_m2=rod_inertia(mass, length, radius, axis=0),
                length_m=length,
                radius_m=radius,
                visual_axis=0,
            )
        )
    return ManipulatorModel(
        name="planar-3r",
        task_dim=2,
        links=tuple(links),
        base_mass_kg=80.0,
        base_inertia_kg_m2=_inertia_matrix(box_inertia(80.0, base_size)),
        base_size_m=base_size,
        mount_xyz_m=(0.5 * base_size[0], 0.0, 0.0),
        mount_rpy_rad=(0.0, 0.0, 0.0),
        q0_rad=PLANAR_Q0_RAD,
        q_min_rad=(-2.9, -2.9, -2.9),
        q_max_rad=(2.9, 2.9, 2.9),
        qd_max_rad_s=(2.0, 2.5, 3.0),
        qdd_max_rad_s2=(20.0, 25.0, 30.0),
        ee_offset_m=(lengths[-1], 0.0, 0.0),
        description="3-joint planar arm on a free-floating base (task x-y, reaction torque about z)",
    )


def _spatial_7dof() -> ManipulatorModel:
    base_size = (1.0, 1.0, 1.0)
    # (joint-1 offset from the face [m], axis in the joint frame, mass [kg], length to the
    # next joint or the tool point along the link's z [m])
    chain = (
        (0.1575, (0.0, 0.0, 1.0), 3.4, 0.1825),
        (0.1825, (0.0, 1.0, 0.0), 3.4, 0.2045),
        (0.2045, (0.0, 0.0, 1.0), 2.8, 0.1955),
        (0.1955, (0.0, -1.0, 0.0), 2.7, 0.2045),
        (0.2045, (0.0, 0.0, 1.0), 1.7, 0.1955),
        (0.1955, (0.0, 1.0, 0.0), 1.8, 0.081),
        (0.081, (0.0, 0.0, 1.0), 0.8, 0.145),
    )
    links = []
    for i, (_, axis, mass, length) in enumerate(chain):
        radius = 0.06 if i < 4 else 0.045
        links.append(
            Link(
                name=f"link{i + 1}",
                joint_xyz_m=(0.0, 0.0, chain[i - 1][3] if i else 0.0),
                joint_rpy_rad=(0.0, 0.0, 0.0),
                joint_axis=axis,
                mass_kg=mass,
                com_m=(0.0, 0.0, 0.5 * length),
                inertia_kg_m2=rod_inertia(mass, length, radius, axis=2),
                length_m=length,
                radius_m=radius,
                visual_axis=2,
            )
        )
    deg = math.pi / 180.0
    return ManipulatorModel(
        name="spatial-7dof",
        task_dim=3,
        links=tuple(links),
        base_mass_kg=120.0,
        base_inertia_kg_m2=_inertia_matrix(box_inertia(120.0, base_size)),
        base_size_m=base_size,
        mount_xyz_m=(0.5 * base_size[0] + chain[0][0], 0.0, 0.0),
        mount_rpy_rad=(0.0, 0.5 * math.pi, 0.0),
        q0_rad=SPATIAL_Q0_RAD,
        q_min_rad=tuple(-a * deg for a in (170, 120, 170, 120, 170, 120, 175)),
        q_max_rad=tuple(a * deg for a in (170, 120, 170, 120, 170, 120, 175)),
        qd_max_rad_s=tuple(a * deg for a in (98, 98, 100, 130, 140, 180, 180)),
        qdd_max_rad_s2=(8.0, 8.0, 10.0, 10.0, 12.0, 15.0, 15.0),
        ee_offset_m=(0.0, 0.0, 0.145),
        description="iiwa-like 7-joint arm on the +x face of a free-floating base (task x-y-z, torque x-y-z)",
    )


#: Start poses chosen by trials.pose_search (see the module docstring); planar scored from
#: +x and +y, spatial from +x (then checked from +y and +z).
PLANAR_Q0_RAD: tuple[float, ...] = (0.758, -0.868, 1.57)
SPATIAL_Q0_RAD: tuple[float, ...] = (-1.416, -0.654, -0.413, -1.177, 0.071, 1.676, 1.609)

#: The manipulator models by name (each model's own ``name``): the one list of model names.
MODELS: Registry[ManipulatorModel] = Registry("manipulator model")
for _model in (_planar_3r(), _spatial_7dof()):
    MODELS.register(_model.name, _model)


def get_model(name: str) -> ManipulatorModel:
    """The registered model called ``name``.

    Raises:
        capture_trainer.errors.UnknownNameError: (a ``ValueError``) unknown name; the
            message lists the known names and a close match.
    """
    return MODELS.get(name)
