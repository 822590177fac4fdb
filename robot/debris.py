"""The debris as a body and the capture tool that touches it (task frame, SI units).

The debris is a free rigid body in the arm's PyBullet world: mass and inertia from the
scenario, moving and spinning freely (zero gravity, no damping), pushed by what touches
it. Its **grapple fixture** is a sphere of radius ``fixture_radius_m`` whose centre is the
scenario's capture point (``lever_arm_m`` from the debris' centre of mass at ``t = 0``);
it is the debris' only collision shape. The end effector carries a **capture probe**
(:class:`robot.models.CaptureTool`): a sphere of radius ``tip_radius_m`` centred on the
end-effector point, the arm's only collision shape. Contact is the two spheres touching,
as PyBullet finds it; the paper's "reach" (``|ee − target| ≤ radius``) is kept with the
radius ``fixture_radius_m + tip_radius_m``, so that it is the geometric first touch.

Contact model (:class:`ContactModel`): Bullet's restitution is not used (its maintainer
says grasping does not rely on it; restitution is 0 on both shapes). The contact is a
documented soft constraint: a spring-damper of stiffness ``k = m ω_c²`` and damping
``c = 2 ζ m ω_c`` with ``m`` the reduced mass of the debris and the tool (the arm and
base as one rigid body seen at the end effector), so its natural frequency ``ω_c`` and
damping ratio ``ζ`` are the same for a 2 kg part and a 4500 kg payload, and a 1-D hit
bounces with restitution ``e = exp(−ζ π / sqrt(1 − ζ²))`` (0.16 at the default ζ = 0.5).
The force is applied by :class:`robot.pybullet_debris.PenaltyContact` on PyBullet's
contact geometry. Friction: regularised Coulomb. Validated by
``tests/robot/test_debris_contact.py`` (closed-form 1-D impact, momentum, energy).

A curved debris path (``CurvedMotion``) needs a force: the debris is then under a
thrust ``m a(t)`` of the closed-form path until its first contact (a tethered or
propelled object), after which it is free. Linear motion and tumbling about a principal
axis (or with an isotropic inertia) are free motion from the start.

Closing the tool (:meth:`PyBulletDebris.attach`) joins the debris to the end-effector
link with a fixed constraint and returns the payload's mass properties in that link's
frame, for the slave controller's momentum maps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robot import _kernels as kern
from robot.models import ManipulatorModel


Vec3 = tuple[float, float, float]
Mat3 = tuple[Vec3, Vec3, Vec3]


class PathMotion(Protocol):
    """A closed-form path of the capture point (``scenarios.motion.TargetMotion``)."""

    def state(self, t_s: float, pos_out: NDArray[np.float64], vel_out: NDArray[np.float64],
              acc_out: NDArray[np.float64]) -> None:
        """Position [m], velocity [m/s], acceleration [m/s²] at ``t_s`` into the (3,) outs."""
        ...

    def sample(self, times_s: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Positions, velocities, accelerations at ``times_s``, each (n, 3)."""
        ...


@dataclass(frozen=True)
class ContactModel:
    """The tool-debris contact as a spring-damper set from the debris' mass.

    Attributes:
        natural_frequency_rad_s: ``ω_c`` [rad/s]; the contact lasts about ``π/ω_c``
            (52 ms at 60 rad/s: 52 servo ticks, well resolved at 1 kHz).
        damping_ratio: ``ζ`` (dimensionless, 0 < ζ < 1).
        friction: Coulomb friction coefficient on both shapes.
    """

    natural_frequency_rad_s: float = 60.0
    damping_ratio: float = 0.5
    friction: float = 0.3

    def stiffness_n_m(self, mass_kg: float) -> float:
        """``k = m ω_c²`` [N/m] for the (reduced) mass ``m`` [kg]."""
        return mass_kg * self.natural_frequency_rad_s ** 2

    def damping_n_s_m(self, mass_kg: float) -> float:
        """``c = 2 ζ m ω_c`` [N s/m]."""
        return 2.0 * self.damping_ratio * mass_kg * self.natural_frequency_rad_s

    @property
    def restitution(self) -> float:
        """Coefficient of restitution of a 1-D spring-damper impact, ``exp(−ζπ/sqrt(1−ζ²))``."""
        zeta = self.damping_ratio
        return math.exp(-zeta * math.pi / math.sqrt(1.0 - zeta * zeta))


@dataclass(frozen=True)
class DebrisSpec:
    """One debris body, task frame at ``t = 0``.

    Attributes:
        mass_kg: [kg].
        inertia_kg_m2: about the centre of mass, body axes = task axes at ``t = 0`` [kg m²].
        fixture_radius_m: radius of the grapple fixture sphere [m].
        fixture0_m: fixture centre (the capture point) at ``t = 0`` [m].
        lever_arm_m: fixture centre relative to the centre of mass at ``t = 0`` [m].
        velocity_m_s: the centre of mass' velocity at ``t = 0`` [m/s].
        angular_velocity_rad_s: [rad/s].
        size_m: the drawn body (a box around the centre of mass) [m]; visual only.
        thrust: the closed-form path whose acceleration is applied as a thrust until the
            first contact (curved paths), or None (free from the start).
        contact: the contact model.
    """

    mass_kg: float
    inertia_kg_m2: Mat3
    fixture_radius_m: float
    fixture0_m: Vec3
    lever_arm_m: Vec3 = (0.0, 0.0, 0.0)
    velocity_m_s: Vec3 = (0.0, 0.0, 0.0)
    angular_velocity_rad_s: Vec3 = (0.0, 0.0, 0.0)
    size_m: Vec3 = (0.2, 0.2, 0.2)
    thrust: PathMotion | None = field(default=None, compare=False)
    contact: ContactModel = field(default_factory=ContactModel)

    @property
    def centre0_m(self) -> NDArray[np.float64]:
        """Centre of mass at ``t = 0`` [m]."""
        centre: NDArray[np.float64] = np.asarray(self.fixture0_m, dtype=float) - np.asarray(self.lever_arm_m, dtype=float)
        return centre


#: Payload frames: the tool link's own frame, or the end-effector point with task axes
#: (a scene that does not know the link's pose; the slave converts with its model).
PAYLOAD_FRAMES = ("tool_link", "end_effector_task_axes")


@dataclass(frozen=True)
class Payload:
    """A captured debris as a rigid addition to the end-effector link.

    Attributes:
        mass_kg: [kg]; com_m: (3,) centre of mass [m]; inertia_kg_m2: (3, 3) about the
            centre of mass [kg m²].
        frame: ``tool_link`` (the model's last link frame, origin on the joint axis) or
            ``end_effector_task_axes`` (origin at the end-effector point, task axes, at the
            moment of the capture).
        velocity_m_s, angular_velocity_rad_s: (3,) the debris' centre-of-mass velocity
            [m/s] and angular velocity [rad/s], task frame, as the tool closed; None when
            the scene does not know them. With them the slave closes reactionlessly (the
            joint rates jump so that the base keeps its rate: ``robot.slave``).
    """

    mass_kg: float
    com_m: NDArray[np.float64]
    inertia_kg_m2: NDArray[np.float64]
    frame: str = "tool_link"
    velocity_m_s: NDArray[np.float64] | None = None
    angular_velocity_rad_s: NDArray[np.float64] | None = None


@dataclass(frozen=True)
class PayloadRelease:
    """The tool opened: the debris, a free body again, as it left the tool (task frame).

    Attributes:
        t_s: plant time of the release [s].
        centre_m, velocity_m_s, angular_velocity_rad_s: (3,) the debris' centre of mass
            [m], its velocity [m/s] and angular velocity [rad/s]: the tool link's rigid
            motion at that point (the debris leaves with the motion it had as a part of
            the arm).
        fixture_m: (3,) the grapple fixture's centre [m].
        correction_m_s, correction_rad_s: the rigid twist the arm was given to keep the
            system's linear and angular momentum (round-off of the rebuilt inertias; NaN:
            the scene does not know it).
    """

    t_s: float
    centre_m: NDArray[np.float64]
    velocity_m_s: NDArray[np.float64]
    angular_velocity_rad_s: NDArray[np.float64]
    fixture_m: NDArray[np.float64]
    correction_m_s: float = math.nan
    correction_rad_s: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        """For the trial log's metadata (non-finite numbers as None)."""
        def number(value: float) -> float | None:
            return value if math.isfinite(value) else None

        return {"t_s": self.t_s, "centre_m": self.centre_m.tolist(), "velocity_m_s": self.velocity_m_s.tolist(),
                "angular_velocity_rad_s": self.angular_velocity_rad_s.tolist(), "fixture_m": self.fixture_m.tolist(),
                "correction_m_s": number(self.correction_m_s), "correction_rad_s": number(self.correction_rad_s)}


class DebrisReading:
    """What the tick reads of the debris after a plant step (one instance, refilled).

    Attributes (task frame, SI):
        point_m, point_velocity_m_s, point_acceleration_m_s2: the fixture centre.
        angular_velocity_rad_s: the debris' angular velocity [rad/s].
        in_contact: the tool touches the fixture (a contact carrying force).
        force_on_debris_n: (3,) the contact force the tool exerts on the debris [N]
            (normal plus friction; zero without contact).
        contact_point_m: (3,) the contact point on the debris [m] (the last one seen).
        contact_normal: (3,) unit normal from the tool toward the debris (last seen).
        offset_m: (3,) fixture centre minus end-effector point [m].
        gap_m: surface gap between tool and fixture (negative: penetration) [m].
        attached: the tool is closed on the debris.
    """

    def __init__(self) -> None:
        self.point_m = np.zeros(3)
        self.point_velocity_m_s = np.zeros(3)
        self.point_acceleration_m_s2 = np.zeros(3)
        self.angular_velocity_rad_s = np.zeros(3)
        self.force_on_debris_n = np.zeros(3)
        self.contact_point_m = np.zeros(3)
        self.contact_normal = np.zeros(3)
        self.offset_m = np.zeros(3)
        self.in_contact = False
        self.gap_m = math.inf
        self.attached = False


@runtime_checkable
class CaptureScene(Protocol):
    """The debris and the tool as the servo tick sees them; also the tick's target
    (a ``scenarios.motion.TargetMotion``: the fixture centre).

    ``read`` is called once per tick after the plant step; ``state`` then hands out that
    reading whatever ``t_s`` (a physical debris is where the plant put it); ``sample``
    predicts the path without contact (drawing, planning).
    """

    reading: DebrisReading
    #: True when contact comes from a physics engine; False for a proximity stand-in.
    physical: bool
    #: ``physics`` (in the arm's world), ``physics_local`` (a world of its own with a
    #: kinematic probe) or ``proximity`` (a distance test); recorded in the trial log.
    contact_model: str
    #: Radius at which the tool first touches the fixture (fixture + tool tip) [m].
    contact_radius_m: float

    def read(self, t_s: float, ee_position_m: NDArray[np.float64], ee_velocity_m_s: NDArray[np.float64]) -> None:
        """Refill :attr:`reading` after a plant step, at plant time ``t_s`` [s] (the end
        effector as measured)."""
        ...

    def state(self, t_s: float, pos_out: NDArray[np.float64], vel_out: NDArray[np.float64],
              acc_out: NDArray[np.float64]) -> None:
        """The fixture centre's position, velocity, acceleration (last reading)."""
        ...

    def sample(self, times_s: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """The contact-free path at ``times_s``."""
        ...

    def attach(self) -> Payload:
        """Close the tool on the debris; return the payload for the slave's momentum maps."""
        ...

    def close(self) -> None:
        """Release what the scene holds of its own (idempotent)."""
        ...


@runtime_checkable
class ReleasesPayload(Protocol):
    """A capture scene whose tool can open again (the debris a free body once more)."""

    def release(self, t_s: float) -> PayloadRelease:
        """Open the tool at plant time ``t_s`` [s]: the debris leaves with the tool's
        motion; the reading is no longer ``attached``."""
        ...


@runtime_checkable
class SimulatesDebris(Protocol):
    """An arm backend whose world can hold the debris (the in-process PyBullet plant)."""

    def add_debris(self, spec: DebrisSpec, prediction: PathMotion) -> CaptureScene:
        """Put the debris into the arm's world; return the scene the tick reads."""
        ...


def quaternion_matrix(xyzw: ArrayLike) -> NDArray[np.float64]:
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    x, y, z, w = np.asarray(xyzw, dtype=float).reshape(4).tolist()
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def combined_link_mass(mass_kg: float, com_m: NDArray[np.float64], inertia_kg_m2: NDArray[np.float64],
                       payload: Payload) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
    """A link plus a rigid payload, in the link frame: total mass [kg], centre of mass
    [m] and inertia about it [kg m²] (parallel-axis theorem)."""
    total = mass_kg + payload.mass_kg
    com = (mass_kg * com_m + payload.mass_kg * payload.com_m) / total
    inertia = np.asarray(inertia_kg_m2, dtype=float) + payload.inertia_kg_m2
    for mass, centre in ((mass_kg, com_m), (payload.mass_kg, payload.com_m)):
        d = np.asarray(centre, dtype=float) - com
        inertia = inertia + mass * (float(d @ d) * np.eye(3) - np.outer(d, d))
    return total, com, inertia


def split_link_mass(mass_kg: float, com_m: NDArray[np.float64], inertia_kg_m2: NDArray[np.float64],
                    payload: Payload) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
    """The inverse of :func:`combined_link_mass`: a link that carries ``payload`` (total
    mass [kg], centre of mass [m] and inertia about it [kg m²], link frame) without it.

    ``m = m_c − m_p``, ``c = (m_c c_c − m_p c_p) / m`` and, the parallel-axis theorem run
    backwards, ``I = I_c − I_p − m S(c − c_c) − m_p S(c_p − c_c)`` with
    ``S(d) = |d|² 1 − d dᵀ`` (the combined inertia about ``c_c`` is the two parts' moved
    there).

    Raises:
        ValueError: the payload is not lighter than the link that carries it.
    """
    total = float(mass_kg)
    mass = total - payload.mass_kg
    if not mass > 0.0:
        raise ValueError(f"a link of {total:g} kg cannot shed a payload of {payload.mass_kg:g} kg")
    com_c = np.asarray(com_m, dtype=float)
    com = (total * com_c - payload.mass_kg * payload.com_m) / mass
    inertia = np.asarray(inertia_kg_m2, dtype=float) - payload.inertia_kg_m2
    for part_mass, centre in ((mass, com), (payload.mass_kg, payload.com_m)):
        d = np.asarray(centre, dtype=float) - com_c
        inertia = inertia - part_mass * (float(d @ d) * np.eye(3) - np.outer(d, d))
    return mass, com, inertia


def tool_effective_mass_kg(model: ManipulatorModel, q_rad: ArrayLike) -> float:
    """The smallest mass the end effector presents to a push at ``q_rad`` [kg]: base and
    arm as one rigid body (joints held), ``1/m(n) = 1/M + (r × n)ᵀ I⁻¹ (r × n)`` with
    ``M``, ``I`` the composite mass and inertia about the composite centre of mass and
    ``r`` the end effector from it, minimised over the push direction ``n`` (the contact's
    reduced mass uses it; invariant under the base's attitude)."""
    a = model.arrays
    n = model.n_joints
    q = np.ascontiguousarray(q_rad, dtype=float)
    origins, axes, rots, ee = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3, 3)), np.zeros(3)
    kern.forward_kinematics(q, a.joint_xyz, a.joint_rot, a.joint_axis, a.ee_offset, origins, axes, rots, ee)
    masses = [model.base_mass_kg] + [link.mass_kg for link in model.links]
    centres = [np.zeros(3)] + [origins[i] + rots[i] @ a.link_com[i] for i in range(n)]
    inertias = [np.array(model.base_inertia_kg_m2)] + [rots[i] @ a.link_inertia[i] @ rots[i].T for i in range(n)]
    total = float(sum(masses))
    centre = sum(m * c for m, c in zip(masses, centres)) / total
    inertia = np.zeros((3, 3))
    for m, c, i in zip(masses, centres, inertias):
        d = c - centre
        inertia += i + m * (float(d @ d) * np.eye(3) - np.outer(d, d))
    r = ee - centre
    cross = np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])
    mobility = np.eye(3) / total + cross.T @ np.linalg.inv(inertia) @ cross
    return float(1.0 / np.linalg.eigvalsh(mobility).max())
