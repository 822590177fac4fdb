"""The debris body in the arm's PyBullet world (see :mod:`robot.debris` for the model).

Per servo tick :meth:`PyBulletDebris.read` costs two PyBullet queries (base pose and
velocity of the debris; one while it coasts, one of the tool link once the arm carries
it) and one compiled call (:func:`robot._kernels.debris_reading`: the fixture's point,
velocity and acceleration, the offset and the gap); the contact (:class:`PenaltyContact`: ``getClosestPoints``
between the debris and the tool's link, and while they touch the two bodies' velocities
and two ``applyExternalForce``) runs only while the tool is within
:data:`CONTACT_QUERY_MARGIN_M` of the fixture, and a thrust (curved paths only) one
``applyExternalForce`` until the first contact.

Why a penalty force rather than Bullet's contact response: the plant's MLCP (Dantzig)
solver, chosen for exact joint-rate tracking (:mod:`robot.pybullet_arm`), ignores
``contactStiffness``/``contactDamping`` (measured: every impact perfectly plastic, e = 0),
and Bullet's restitution is not meant for this. The collision geometry and the contact
point and normal are still PyBullet's (``getClosestPoints``); the force is the
spring-damper of :class:`robot.debris.ContactModel`, applied equal and opposite at one
point, so momentum and angular momentum are conserved by construction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike, NDArray

from capture_trainer.errors import PhysicsError
from robot import _kernels as kern
from robot.debris import (ContactModel, DebrisReading, DebrisSpec, PathMotion, Payload, PayloadRelease,
                          quaternion_matrix)
from robot.pybullet_native import DEBRIS_FULL, DEBRIS_NONE, DEBRIS_POSE

#: The contact query runs while the surface gap is below this plus one tick's closing [m].
CONTACT_QUERY_MARGIN_M = 0.01
#: Force limit of the closed tool's fixed constraint [N]: far above any contact here.
TOOL_CONSTRAINT_FORCE_N = 1.0e9


class PenaltyContact:
    """The spring-damper contact between two PyBullet bodies (or links).

    While PyBullet's closest points of the two shapes overlap by ``δ > 0`` along the
    normal ``n`` (from B toward A), A gets ``F = (k δ + c δ̇) n + F_t`` and B gets ``−F``,
    both at the midpoint of the two closest points, for the next step; ``δ̇`` is the
    closing speed of the two contact points, ``F_t = −min(μ |F_n|, c |v_t|) v̂_t`` a
    regularised Coulomb friction against the tangential slip ``v_t`` of A relative to B.
    ``k`` and ``c`` come from :class:`robot.debris.ContactModel` and ``mass_kg``.
    """

    def __init__(self, pb: ModuleType, client: int, body_a: int, link_a: int, body_b: int, link_b: int,
                 model: ContactModel, mass_kg: float, wait_apart: bool = False) -> None:
        self._pb, self._client = pb, client
        self._a, self._link_a, self._b, self._link_b = body_a, link_a, body_b, link_b
        self.stiffness_n_m = model.stiffness_n_m(mass_kg)
        self.damping_n_s_m = model.damping_n_s_m(mass_kg)
        self.friction = model.friction
        self._active = True
        #: the shapes overlap as the contact is made (a tool that just opened): no force
        #: until they have been apart once, so the opening pushes nothing
        self.wait_apart = wait_apart
        self._velocity_a = np.zeros(3)
        self._velocity_b = np.zeros(3)
        pb.setCollisionFilterPair(body_a, body_b, link_a, link_b, 0, physicsClientId=client)

    def release(self) -> None:
        """Stop applying contact forces (the tool has closed)."""
        self._active = False

    def _point_velocity(self, body: int, link: int, point: NDArray[np.float64], out: NDArray[np.float64]) -> None:
        pb, client = self._pb, self._client
        if link < 0:
            centre = pb.getBasePositionAndOrientation(body, physicsClientId=client)[0]
            velocity, angular = pb.getBaseVelocity(body, physicsClientId=client)
        else:
            state = pb.getLinkState(body, link, computeLinkVelocity=1, computeForwardKinematics=1,
                                    physicsClientId=client)
            centre, velocity, angular = state[0], state[6], state[7]
        out[:] = np.add(velocity, np.cross(angular, point - np.asarray(centre)))

    def update(self, force_on_a: NDArray[np.float64], point_out: NDArray[np.float64],
               normal_out: NDArray[np.float64], a_motion: tuple[NDArray[np.float64], ...] | None = None,
               b_point_velocity: NDArray[np.float64] | None = None) -> bool:
        """Compute and apply this step's contact force; True while the shapes overlap.

        Writes the force on A [N], the contact point [m] and the normal (B toward A).
        ``a_motion`` (A's centre of mass [m], velocity [m/s], angular velocity [rad/s])
        and ``b_point_velocity`` (B's velocity at the contact [m/s]) spare the queries
        when the caller already has them.
        """
        force_on_a[:] = 0.0
        if not self._active:
            return False
        pb, client = self._pb, self._client
        points = pb.getClosestPoints(self._a, self._b, 0.0, self._link_a, self._link_b, physicsClientId=client)
        if not points:
            self.wait_apart = False
            return False
        closest = min(points, key=lambda p: p[8])
        depth = -float(closest[8])
        if depth <= 0.0:
            self.wait_apart = False
            return False
        if self.wait_apart:
            return False
        normal = np.asarray(closest[7], dtype=float)
        point = 0.5 * (np.asarray(closest[5]) + np.asarray(closest[6]))
        if a_motion is None:
            self._point_velocity(self._a, self._link_a, point, self._velocity_a)
        else:
            centre, velocity, angular = a_motion
            self._velocity_a[:] = velocity + np.cross(angular, point - centre)
        if b_point_velocity is None:
            self._point_velocity(self._b, self._link_b, point, self._velocity_b)
        else:
            self._velocity_b[:] = b_point_velocity
            if self._link_b >= 0:  # after a step PyBullet's link pose is stale until forward kinematics
                pb.getLinkState(self._b, self._link_b, computeForwardKinematics=1, physicsClientId=client)
        relative = self._velocity_a - self._velocity_b
        closing = -float(relative @ normal)
        normal_force = self.stiffness_n_m * depth + self.damping_n_s_m * closing
        force_on_a += normal_force * normal
        slip = relative - float(relative @ normal) * normal
        slip_speed = float(np.linalg.norm(slip))
        if slip_speed > 0.0 and self.friction > 0.0:
            magnitude = min(self.friction * abs(normal_force), self.damping_n_s_m * slip_speed)
            force_on_a -= magnitude * slip / slip_speed
        at = point.tolist()
        pb.applyExternalForce(self._a, self._link_a, force_on_a.tolist(), at, pb.WORLD_FRAME, physicsClientId=client)
        pb.applyExternalForce(self._b, self._link_b, (-force_on_a).tolist(), at, pb.WORLD_FRAME,
                              physicsClientId=client)
        point_out[:] = point
        normal_out[:] = normal
        return True


class PyBulletDebris:
    """A :class:`robot.debris.CaptureScene` in PyBullet: the debris body and the contact
    between it and the end effector's capture probe.

    Args:
        pb: the pybullet module; client: the physics client (the arm's).
        arm_body: the arm's body id; tool_link: the link carrying the probe (the last).
        tool_tip_radius_m: the probe sphere's radius [m].
        tool_link_com_m: the tool link's centre of mass in its link frame [m] (PyBullet
            reports link poses at the centre of mass).
        tool_mass_kg: the tool's effective mass for a push (the arm and base as one rigid
            body seen at the end effector, lowest over directions) [kg]; the contact's
            spring-damper is set from the reduced mass of debris and tool.
        spec: the debris.
        prediction: its contact-free path (for :meth:`sample`).
        carrier: makes a payload part of the arm's multibody and returns the arm's new
            body id (``PyBulletArm.carry``); None: the closed tool stays a fixed constraint.
        shedder: the inverse: takes the payload out of the arm's multibody, given the
            debris body already put where it is and moving as it does, keeping the
            momentum; returns the arm's new body id and the size of the rigid twist that
            took out round-off (``PyBulletArm.shed``).

    Closing the tool (:meth:`attach`) takes two steps with a carrier: the fixed
    constraint closes the relative velocity in the step after the capture (the closing
    impulse, shared by arm and debris through the constraint), and at the next
    :meth:`read` the carrier merges the debris into the arm's last link; from then on the
    debris body is a proxy put every tick where the tool holds it (for drawing and for
    contact queries), its mass carried by the arm, and forces on the payload go to the
    tool link (:meth:`apply_payload_force`).
    """

    physical = True
    contact_model = "physics"

    def __init__(self, pb: ModuleType, client: int, arm_body: int, tool_link: int, tool_tip_radius_m: float,
                 tool_link_com_m: ArrayLike, spec: DebrisSpec, prediction: PathMotion,
                 tool_mass_kg: float = math.inf, carrier: Callable[[Payload, int], int] | None = None,
                 shedder: Callable[[int], tuple[int, tuple[float, float]]] | None = None,
                 carried_reader: Callable[[NDArray[np.float64], NDArray[np.float64], bool], float] | None = None
                 ) -> None:
        if not (spec.mass_kg > 0.0 and math.isfinite(spec.mass_kg)):
            raise PhysicsError(f"debris mass must be a positive number of kg, got {spec.mass_kg}")
        self._pb, self._client, self._arm, self._tool_link = pb, client, arm_body, tool_link
        self._tool_com = np.asarray(tool_link_com_m, dtype=float)
        self.spec = spec
        self.prediction = prediction
        self.contact_radius_m = spec.fixture_radius_m + tool_tip_radius_m
        self.contact_mass_kg = (spec.mass_kg if math.isinf(tool_mass_kg)
                                else spec.mass_kg * tool_mass_kg / (spec.mass_kg + tool_mass_kg))
        self.reading = DebrisReading()
        self._lever = np.asarray(spec.lever_arm_m, dtype=float)
        self._has_lever = bool(np.any(self._lever != 0.0))
        self._t_s = 0.0
        self._touched = False
        # the read-out buffer of robot._kernels.debris_reading (layout DB_*): the body's
        # state, the fixture's, the offset and gap, and the constants the kernel needs;
        # the reading's arrays are views of it
        buf = self._buf = np.zeros(kern.N_DEBRIS)
        buf[kern.DB_LEVER:kern.DB_LEVER + 3] = self._lever
        buf[kern.DB_HAS_LEVER] = 1.0 if self._has_lever else 0.0
        buf[kern.DB_RADIUS] = self.contact_radius_m
        self._thrust = spec.thrust
        buf[kern.DB_THRUST] = 0.0 if self._thrust is None else 1.0
        self._thrust_acc = np.zeros(3)
        self._scratch = (np.zeros(3), np.zeros(3))
        self._constraint = -1
        self._carrier = carrier
        self._shedder = shedder
        self._carried_reader = carried_reader
        self._correction = (math.nan, math.nan)
        #: the tool's last opening (None: it never opened)
        self.released: PayloadRelease | None = None
        self._to_carry: Payload | None = None  # closed, to be merged at the next read
        self.carried = False
        #: once the arm carries the debris: keep its body (a proxy) where the tool holds it,
        #: every tick (for the fixtures or the PyBullet GUI that read it); otherwise the
        #: reading alone follows the tool, two PyBullet calls cheaper
        self.proxy_follows = False
        self._in_tool: tuple[tuple[float, ...], tuple[float, ...]] = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
        # centre [m], velocity [m/s], angular velocity [rad/s] of the body
        self._centre = buf[kern.DB_CENTRE:kern.DB_CENTRE + 3]
        self._velocity = buf[kern.DB_VELOCITY:kern.DB_VELOCITY + 3]
        r = self.reading
        r.angular_velocity_rad_s = buf[kern.DB_SPIN:kern.DB_SPIN + 3]
        if self._has_lever:
            r.point_m = buf[kern.DB_POINT:kern.DB_POINT + 3]
            r.point_velocity_m_s = buf[kern.DB_POINT_V:kern.DB_POINT_V + 3]
        else:  # the fixture is the centre
            r.point_m, r.point_velocity_m_s = self._centre, self._velocity
        r.point_acceleration_m_s2 = buf[kern.DB_POINT_A:kern.DB_POINT_A + 3]
        r.offset_m = buf[kern.DB_OFFSET:kern.DB_OFFSET + 3]
        self._no_ee = np.zeros(3)  # the end effector of a read-out without the gap
        omega = np.asarray(spec.angular_velocity_rad_s, dtype=float)
        gyroscopic = np.cross(omega, np.asarray(spec.inertia_kg_m2, dtype=float) @ omega)
        #: Free flight with constant velocities (no thrust, no contact yet, spin about a
        #: principal axis): the velocity query is skipped until something acts on it.
        self._coasting = spec.thrust is None and not np.any(gyroscopic != 0.0)
        self._initial_velocities = (tuple(map(float, spec.velocity_m_s)), tuple(map(float, omega)))
        self._body = self._create()
        self._configure_contact()
        self._read_body()

    # ----------------------------------------------------------------- set-up
    def _create(self) -> int:
        pb, client, spec = self._pb, self._client, self.spec
        collision = pb.createCollisionShape(pb.GEOM_SPHERE, radius=spec.fixture_radius_m,
                                            collisionFramePosition=list(map(float, spec.lever_arm_m)),
                                            physicsClientId=client)
        visual = pb.createVisualShape(pb.GEOM_BOX, halfExtents=[0.5 * s for s in spec.size_m],
                                      rgbaColor=[0.55, 0.55, 0.6, 0.6], physicsClientId=client)
        body: int = pb.createMultiBody(baseMass=spec.mass_kg, baseCollisionShapeIndex=collision,
                                       baseVisualShapeIndex=visual, basePosition=spec.centre0_m.tolist(),
                                       physicsClientId=client)
        if body < 0:
            raise PhysicsError("PyBullet could not create the debris body")
        inertia = np.asarray(spec.inertia_kg_m2, dtype=float)
        if np.any(np.abs(inertia - np.diag(np.diag(inertia))) > 1e-12 * np.abs(inertia).max()):
            raise PhysicsError("the debris inertia must be diagonal in the task axes at t = 0 (principal axes)")
        pb.changeDynamics(body, -1, localInertiaDiagonal=np.diag(inertia).tolist(), linearDamping=0.0,
                          angularDamping=0.0, physicsClientId=client)
        pb.resetBaseVelocity(body, list(map(float, spec.velocity_m_s)), list(map(float, spec.angular_velocity_rad_s)),
                             physicsClientId=client)
        return body

    def _configure_contact(self) -> None:
        """Bullet's own contact response between tool and debris is switched off (its
        restitution is not trusted and its MLCP solver ignores soft-contact parameters);
        :class:`PenaltyContact` applies the documented spring-damper instead."""
        pb, client = self._pb, self._client
        pb.changeDynamics(self._body, -1, restitution=0.0, physicsClientId=client)
        self._penalty = PenaltyContact(pb, client, self._body, -1, self._arm, self._tool_link, self.spec.contact,
                                       self.contact_mass_kg)

    @property
    def body_id(self) -> int:
        """The debris' PyBullet body id (tests and drawing only)."""
        return self._body

    # ------------------------------------------------------------ per tick
    def read(self, t_s: float, ee_position_m: NDArray[np.float64], ee_velocity_m_s: NDArray[np.float64]) -> None:
        """Refill the reading after a plant step (plant time ``t_s`` [s]); queue the
        thrust of the next step. :meth:`query`, the read-out kernel, :meth:`settle`."""
        body = self.query(t_s)
        if body is None:  # carried: the arm's read-out has the motion
            gap = self.read_carried(ee_position_m)
            self.settle(self._centre, gap, ee_velocity_m_s)
            return
        position, orientation, velocity, angular = body
        gap = kern.debris_reading(self._buf, position, orientation, velocity, angular, ee_position_m, True)
        self.settle(position, gap, ee_velocity_m_s)

    def read_carried(self, ee_position_m: NDArray[np.float64]) -> float:
        """The reading of a carried debris from the arm's own read-out
        (:func:`robot._kernels.carried_reading` on the arm's state after the step);
        returns the gap. Only when :meth:`query` returned None."""
        assert self._carried_reader is not None
        return self._carried_reader(self._buf, ee_position_m, True)

    def query(self, t_s: float) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...],
                                         tuple[float, ...]] | None:
        """The first part of :meth:`read`: the body's centre [m], attitude (quaternion
        xyzw), velocity [m/s] and spin [rad/s] after the step (task frame), as PyBullet
        gives them (the tool link's, once the arm carries the debris). The caller passes
        them to :func:`robot._kernels.debris_reading` on :attr:`readout_buffer` with the
        end effector, then to :meth:`settle` with the gap (the fused tick does the
        kernel's part in its own compiled call).

        None once the arm carries the debris and can read its motion itself (a carrier
        with a ``carried_reader`` and no proxy to keep in place; not on the tick of the
        merge): the caller then fills the reading with :meth:`read_carried` (or
        :func:`robot._kernels.carried_reading` on the arm's read-out buffers), two
        PyBullet calls cheaper."""
        self._t_s = t_s
        if self._to_carry is not None:
            self._merge(self._to_carry)
            return self._payload_pose(self.proxy_follows)
        if self.carried:
            if self._carried_reader is not None and not self.proxy_follows:
                return None
            return self._payload_pose(self.proxy_follows)
        return self._body_pose()

    def native_read(self, t_s: float) -> int:
        """What :meth:`query` at ``t_s`` reads, for a caller that reads the body itself
        (the native plant step, :mod:`robot.pybullet_native`): ``DEBRIS_FULL`` (its pose
        and velocities), ``DEBRIS_POSE`` (its pose: it coasts, its velocities are
        :attr:`coasting_velocities`), ``DEBRIS_NONE`` (carried: its reading comes off the
        arm's, as when :meth:`query` gives None); -1 when only :meth:`query` can (the tick
        of the merge, a carried proxy kept in place), then nothing is done."""
        if self._to_carry is not None or (self.carried and (self._carried_reader is None or self.proxy_follows)):
            return -1
        self._t_s = t_s
        if self.carried:
            return DEBRIS_NONE
        return DEBRIS_POSE if self._coasting else DEBRIS_FULL

    @property
    def thrusting(self) -> bool:
        """A thrust pushes the debris along its curved path (until the first contact)."""
        return self._thrust is not None

    @property
    def point_slots(self) -> tuple[int, int]:
        """Where :attr:`readout_buffer` keeps the reading's fixture centre and its velocity
        (``DB_POINT``, ``DB_POINT_V``; the body's centre and velocity for a fixture at the
        centre)."""
        if self._has_lever:
            return kern.DB_POINT, kern.DB_POINT_V
        return kern.DB_CENTRE, kern.DB_VELOCITY

    @property
    def coasting_velocities(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Its velocity [m/s] and spin [rad/s] while nothing acts on it (the initial ones)."""
        return self._initial_velocities

    def _body_pose(self) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """The free body's centre [m], attitude (xyzw), velocity [m/s] and spin [rad/s]."""
        pb, client, body = self._pb, self._client, self._body
        position, orientation = pb.getBasePositionAndOrientation(body, physicsClientId=client)
        if self._coasting:  # nothing has acted on it: its velocities are the initial ones
            return position, orientation, *self._initial_velocities
        return position, orientation, *pb.getBaseVelocity(body, physicsClientId=client)

    @property
    def readout_buffer(self) -> NDArray[np.float64]:
        """The buffer :func:`robot._kernels.debris_reading` fills (layout ``DB_*``); the
        reading's arrays are views of it."""
        return self._buf

    @property
    def centre_m(self) -> NDArray[np.float64]:
        """The body's centre of mass [m] as last read (a view of :attr:`readout_buffer`)."""
        return self._centre

    def settle(self, centre: tuple[float, ...] | NDArray[np.float64], gap_m: float,
               ee_velocity_m_s: NDArray[np.float64]) -> None:
        """The last part of :meth:`read`, once the read-out kernel has filled the
        reading: the contact (near the fixture) and the thrust of the next step."""
        r = self.reading
        r.gap_m = gap_m
        if r.attached:  # its force stays zero: attach zeroed it, and only the contact writes it
            r.in_contact = True
        elif gap_m < CONTACT_QUERY_MARGIN_M:
            self._coasting = False
            self._contact(ee_velocity_m_s)
        elif r.in_contact:
            r.in_contact = False
            r.force_on_debris_n[:] = 0.0
        if self._thrust is not None:
            self._push(centre)

    def _merge(self, payload: Payload) -> None:
        """Hand the payload to the carrier (the arm rebuilds itself with it); the
        constraint goes with the old arm body, and the debris body becomes a proxy that
        collides with nothing (the tool's contact is over; the posts' is closed-form)."""
        pb, client = self._pb, self._client
        self._to_carry = None
        if self._constraint >= 0:
            pb.removeConstraint(self._constraint, physicsClientId=client)
            self._constraint = -1
        assert self._carrier is not None
        self._arm = self._carrier(payload, self._body)
        pb.setCollisionFilterGroupMask(self._body, -1, 0, 0, physicsClientId=client)  # a proxy: collides with nothing
        self.carried = True
        self._coasting = False

    def release(self, t_s: float) -> PayloadRelease:
        """Open the tool (the inverse of :meth:`attach`): the debris body is put where
        the tool holds it, with the tool link's rigid motion at its centre of mass
        (``v = v_c + ω × (c_d − c)``, ``ω`` the link's), the arm sheds the payload
        (the shedder keeps the system's momentum), and the debris is a free body again.
        The tool-debris contact is live again once the two shapes have been apart (the
        probe resting on the fixture as it opens pushes nothing); the capture monitor
        decides whether the tool ever closes again.

        Raises:
            PhysicsError: the tool is not closed.
        """
        pb, client, r = self._pb, self._client, self.reading
        if not r.attached:
            raise PhysicsError("the tool is not closed: nothing to release")
        self._correction = (math.nan, math.nan)
        self._to_carry = None  # closed on this very tick and not merged yet: nothing to merge
        if self.carried:
            position = self._payload_motion(place=True)
            if self._shedder is not None:
                self._arm, self._correction = self._shedder(self._body)
            self.carried = False
        else:
            position = self._read_body()
        if self._constraint >= 0:
            pb.removeConstraint(self._constraint, physicsClientId=client)
            self._constraint = -1
        self._coasting = False
        r.attached = False
        r.in_contact = False
        r.force_on_debris_n[:] = 0.0
        self._penalty = PenaltyContact(pb, client, self._body, -1, self._arm, self._tool_link, self.spec.contact,
                                       self.contact_mass_kg, wait_apart=True)
        self.released = PayloadRelease(t_s, np.array(position, dtype=float), self._velocity.copy(),
                                       r.angular_velocity_rad_s.copy(), r.point_m.copy(), *self._correction)
        return self.released

    def _payload_motion(self, place: bool) -> tuple[float, ...]:
        """The debris' pose and velocities from the tool link that carries it
        (:meth:`_payload_pose`) into the reading; the body is put there when ``place``.
        Returns the centre."""
        return self._fill(*self._payload_pose(place))

    def _payload_pose(self, place: bool) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...],
                                                  tuple[float, ...]]:
        """Centre [m], attitude (xyzw), velocity [m/s] and spin [rad/s] of the debris the
        tool link carries (rigidly, at the pose it had when the tool closed); the body
        is put there when ``place``."""
        pb, client = self._pb, self._client
        link = pb.getLinkState(self._arm, self._tool_link, computeLinkVelocity=1, computeForwardKinematics=1,
                               physicsClientId=client)
        position, orientation = pb.multiplyTransforms(link[4], link[5], *self._in_tool)
        angular = link[7]
        com = link[0]
        arm = (position[0] - com[0], position[1] - com[1], position[2] - com[2])
        wx, wy, wz = angular
        velocity = (link[6][0] + wy * arm[2] - wz * arm[1], link[6][1] + wz * arm[0] - wx * arm[2],
                    link[6][2] + wx * arm[1] - wy * arm[0])
        if place:
            pb.resetBasePositionAndOrientation(self._body, position, orientation, physicsClientId=client)
            pb.resetBaseVelocity(self._body, velocity, angular, physicsClientId=client)
        return position, orientation, velocity, angular

    def apply_payload_force(self, force_n: ArrayLike, point_m: ArrayLike) -> None:
        """A force [N] on the debris at ``point_m`` [m] (task frame) for the next step:
        on the debris body, or on the tool link once the arm carries it."""
        force = [float(v) for v in np.asarray(force_n, dtype=float)]
        point = [float(v) for v in np.asarray(point_m, dtype=float)]
        if self.carried:
            self._pb.getLinkState(self._arm, self._tool_link, computeForwardKinematics=1, physicsClientId=self._client)
            self._pb.applyExternalForce(self._arm, self._tool_link, force, point, self._pb.WORLD_FRAME,
                                        physicsClientId=self._client)
        else:
            self._pb.applyExternalForce(self._body, -1, force, point, self._pb.WORLD_FRAME,
                                        physicsClientId=self._client)

    def _read_body(self) -> tuple[float, ...]:
        """The free body's state into the reading; returns the centre of mass."""
        return self._fill(*self._body_pose())

    def _fill(self, position: tuple[float, ...], orientation: tuple[float, ...], velocity: tuple[float, ...],
              angular: tuple[float, ...]) -> tuple[float, ...]:
        """The reading from the body's centre, attitude, velocity and spin (task frame),
        without the offset and gap (:func:`robot._kernels.debris_reading`); returns the
        centre."""
        kern.debris_reading(self._buf, position, orientation, velocity, angular, self._no_ee, False)
        return position

    def _contact(self, ee_velocity_m_s: NDArray[np.float64]) -> None:
        """The contact force of this step, applied to both bodies for the next one. The
        tool's velocity at the contact is the end effector's (the probe is a sphere
        centred on it; the link's rotation adds at most ``|ω| r_tip``, under 1 mm/s)."""
        r = self.reading
        touching = self._penalty.update(r.force_on_debris_n, r.contact_point_m, r.contact_normal,
                                        (self._centre, self._velocity, r.angular_velocity_rad_s), ee_velocity_m_s)
        r.in_contact = touching
        if touching:
            self._touched = True

    def _push(self, centre: tuple[float, ...] | NDArray[np.float64]) -> None:
        """The thrust of a curved path for the next step, until the first contact."""
        if self._touched:
            self._thrust = None
            self._buf[kern.DB_THRUST] = 0.0
            self.reading.point_acceleration_m_s2[:] = 0.0
            return
        pos, vel = self._scratch
        self._thrust.state(self._t_s, pos, vel, self._thrust_acc)  # type: ignore[union-attr]
        force = (self.spec.mass_kg * self._thrust_acc).tolist()
        self._pb.applyExternalForce(self._body, -1, force, list(centre), self._pb.WORLD_FRAME,
                                    physicsClientId=self._client)
        self.reading.point_acceleration_m_s2[:] += self._thrust_acc

    # ------------------------------------------------------ CaptureScene
    def state(self, t_s: float, pos_out: NDArray[np.float64], vel_out: NDArray[np.float64],
              acc_out: NDArray[np.float64]) -> None:
        """The fixture centre of the last reading, task frame (``t_s`` is the plant's)."""
        r = self.reading
        pos_out[:] = r.point_m
        vel_out[:] = r.point_velocity_m_s
        acc_out[:] = r.point_acceleration_m_s2

    def sample(self, times_s: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """The contact-free path (closed form)."""
        return self.prediction.sample(times_s)

    def attach(self) -> Payload:
        """Close the tool: a fixed constraint joins the debris, at its current pose
        relative to the tool link, to that link; contact between the two is switched off
        (the constraint carries the load). Returns the payload in the model's link frame."""
        pb, client = self._pb, self._client
        link = pb.getLinkState(self._arm, self._tool_link, computeForwardKinematics=1, physicsClientId=client)
        link_position, link_orientation = link[0], link[1]
        position, orientation = pb.getBasePositionAndOrientation(self._body, physicsClientId=client)
        inverse_position, inverse_orientation = pb.invertTransform(link_position, link_orientation)
        relative_position, relative_orientation = pb.multiplyTransforms(inverse_position, inverse_orientation,
                                                                         position, orientation)
        self._constraint = pb.createConstraint(self._arm, self._tool_link, self._body, -1, pb.JOINT_FIXED,
                                               [0.0, 0.0, 0.0], relative_position, [0.0, 0.0, 0.0],
                                               relative_orientation, [0.0, 0.0, 0.0, 1.0], physicsClientId=client)
        pb.changeConstraint(self._constraint, maxForce=TOOL_CONSTRAINT_FORCE_N, physicsClientId=client)
        frame = pb.getLinkState(self._arm, self._tool_link, physicsClientId=client)
        self._in_tool = pb.multiplyTransforms(*pb.invertTransform(frame[4], frame[5]), position, orientation)
        self._buf[kern.DB_IN_TOOL:kern.DB_IN_TOOL + 7] = self._in_tool[0] + self._in_tool[1]
        self._thrust = None
        self._buf[kern.DB_THRUST] = 0.0
        self._coasting = False
        self._penalty.release()
        self.reading.attached = True
        self.reading.in_contact = True
        self.reading.force_on_debris_n[:] = 0.0
        rotation = quaternion_matrix(relative_orientation)
        inertia = rotation @ np.asarray(self.spec.inertia_kg_m2, dtype=float) @ rotation.T
        velocity, angular = pb.getBaseVelocity(self._body, physicsClientId=client)
        payload = Payload(self.spec.mass_kg, np.asarray(relative_position, dtype=float) + self._tool_com, inertia,
                          velocity_m_s=np.array(velocity, dtype=float),
                          angular_velocity_rad_s=np.array(angular, dtype=float))
        if self._carrier is not None:
            self._to_carry = payload
        return payload

    def close(self) -> None:
        """Nothing of its own: the debris goes with the arm's world."""

    def momentum(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Linear momentum [kg m/s] and angular momentum about the task origin [kg m²/s]
        of the debris (tests: conservation checks); zero once the arm carries it (its
        momentum is then the tool link's)."""
        pb, client, spec = self._pb, self._client, self.spec
        if self.carried:
            return np.zeros(3), np.zeros(3)
        position, orientation = pb.getBasePositionAndOrientation(self._body, physicsClientId=client)
        velocity, angular = pb.getBaseVelocity(self._body, physicsClientId=client)
        rotation = quaternion_matrix(orientation)
        inertia = rotation @ np.asarray(spec.inertia_kg_m2, dtype=float) @ rotation.T
        p = spec.mass_kg * np.asarray(velocity)
        return p, np.cross(position, p) + inertia @ np.asarray(angular)
