"""Static fixtures in the arm's PyBullet world for the post-capture phase: berthing posts
and the captured payload's berthing pin (task frame, SI units).

* A **post** is a static body (mass 0: fixed in the inertial task frame, as a berthing
  fixture on a structure much heavier than the servicer), a cylinder of ``radius_m`` and
  height :data:`POST_HEIGHT_M` whose axis is the task z axis (for the planar models a
  circle in the x-y plane). Posts are made when the world is (``frame = "task"``) or, for
  posts placed relative to where the payload was caught (``frame = "capture"``), when the
  tool closes.
* The **pin** is a sphere of ``radius_m`` on the payload at ``offset_m`` from the debris'
  centre of mass, in the debris' body axes (the task axes at ``t = 0``). It is geometry
  only: its pose is the debris body's (the payload the arm carries), read every tick.

Contact between the pin and a post uses the debris' own contact law (the one
:class:`robot.pybullet_debris.PenaltyContact` applies to the tool and the debris): with
``δ`` the overlap along the normal ``n`` (post toward pin, in the x-y plane) and ``δ̇``
the closing speed, the post pushes the pin with ``F = (k δ + c δ̇) n + F_t``, ``F_t =
−min(μ |F_n|, c |v_t|) v̂_t`` against the slip (regularised Coulomb), ``k = m ω_c²``,
``c = 2 ζ m ω_c`` with ``m`` the payload mass and ω_c, ζ, μ from the fixtures'
:class:`robot.debris.ContactModel`. The geometry is closed form (sphere against a
vertical cylinder), because the pin is not a body of its own: once the tool closes the
payload is part of the arm (``PyBulletArm.carry``), and the force goes to whatever
carries it through the scene's ``apply_payload_force`` (the tool link), so it reaches
the arm and the free-floating base: what the behaviours cost the base. The post's half
goes into the static structure.

:meth:`BerthingWorld.update` runs once per tick after the plant step and fills the
contact wrench on the payload (force [N]; torque about the port [N m]), task frame; the
force is applied for the next step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from capture_trainer.errors import PhysicsError
from robot.debris import ContactModel, quaternion_matrix

#: Height of a post along the task z axis [m] (planar models live at z = 0).
POST_HEIGHT_M = 0.1
#: Frames a post's position may be given in: the task frame, or an offset from the pin's
#: position when the tool closed.
POST_FRAMES = ("task", "capture")

Vec3 = tuple[float, float, float]


class PayloadForceSink(Protocol):
    """Where a force on the captured payload goes (``PyBulletDebris.apply_payload_force``)."""

    def apply_payload_force(self, force_n: ArrayLike, point_m: ArrayLike) -> None:
        """Apply ``force_n`` [N] at ``point_m`` [m] (task frame) for the next step."""
        ...


@dataclass(frozen=True)
class PostSpec:
    """One berthing post.

    Attributes:
        name: how results and messages name it.
        position_m: its axis' centre [m]: task frame, or from the pin at the capture.
        radius_m: [m] (> 0).
    """

    name: str
    position_m: Vec3
    radius_m: float = 0.01


@dataclass(frozen=True)
class PinSpec:
    """The payload's berthing pin.

    Attributes:
        offset_m: its centre from the debris' centre of mass, debris body axes [m].
        radius_m: [m] (> 0).
    """

    offset_m: Vec3 = (0.0, 0.0, 0.0)
    radius_m: float = 0.01


class BerthingWorld:
    """Posts in the arm's world and, after the capture, the pin's contacts with them.

    Args:
        pb: the pybullet module; client: the arm's physics client.
        posts: the posts.
        pin: the payload's pin.
        contact: the pin-post contact law.
        frame: ``task`` (post positions in the task frame, made now) or ``capture``
            (offsets from the pin's position at the capture, made then).

    Attributes (refilled by :meth:`update`):
        force_n: (3,) contact force of the posts on the payload [N], task frame.
        torque_n_m: (3,) its moment about the port [N m], task frame.
        post_force_n: (n_posts,) normal force on each post [N].
        pin_m: (3,) the pin centre [m] (NaN before the capture).
        post_positions_m: (n_posts, 3) the posts' centres, task frame (NaN until made).
    """

    def __init__(self, pb: ModuleType, client: int, posts: tuple[PostSpec, ...], pin: PinSpec,
                 contact: ContactModel, frame: str = "task") -> None:
        names = [post.name for post in posts]
        if len(set(names)) != len(names):
            raise PhysicsError(f"berthing posts need distinct names, got {names}")
        if frame not in POST_FRAMES:
            raise PhysicsError(f"post frame must be one of {', '.join(POST_FRAMES)}, got {frame!r}")
        for post in posts:
            if not (post.radius_m > 0.0 and math.isfinite(post.radius_m)):
                raise PhysicsError(f"post {post.name!r}: radius_m must be > 0, got {post.radius_m}")
        self._pb, self._client = pb, client
        self.posts = tuple(posts)
        self.pin = pin
        self.contact = contact
        self.frame = frame
        self.force_n = np.zeros(3)
        self.torque_n_m = np.zeros(3)
        self.post_force_n = np.zeros(len(posts))
        self.pin_m = np.full(3, math.nan)
        self.pin_velocity_m_s = np.zeros(3)
        self.post_positions_m = np.full((len(posts), 3), math.nan)
        self._offset = np.asarray(pin.offset_m, dtype=float)
        self._has_offset = bool(np.any(self._offset != 0.0))
        self._body = -1
        self._sink: PayloadForceSink | None = None
        self._stiffness = self._damping = 0.0
        self._force = np.zeros(3)
        self._point = np.zeros(3)
        self.post_bodies: list[int] = []
        if frame == "task":
            self._make_posts(np.zeros(3))

    def _make_posts(self, origin_m: NDArray[np.float64]) -> None:
        pb, client = self._pb, self._client
        for index, post in enumerate(self.posts):
            position = origin_m + np.asarray(post.position_m, dtype=float)
            collision = pb.createCollisionShape(pb.GEOM_CYLINDER, radius=post.radius_m, height=POST_HEIGHT_M,
                                                physicsClientId=client)
            visual = pb.createVisualShape(pb.GEOM_CYLINDER, radius=post.radius_m, length=POST_HEIGHT_M,
                                          rgbaColor=[0.8, 0.5, 0.2, 1.0], physicsClientId=client)
            body: int = pb.createMultiBody(baseMass=0.0, baseCollisionShapeIndex=collision,
                                           baseVisualShapeIndex=visual, basePosition=position.tolist(),
                                           physicsClientId=client)
            if body < 0:
                raise PhysicsError(f"PyBullet could not create post {post.name!r}")
            # the pin-post contact is ours alone: Bullet's own response is off for posts
            pb.setCollisionFilterGroupMask(body, -1, 0, 0, physicsClientId=client)
            self.post_bodies.append(body)
            self.post_positions_m[index] = position

    @property
    def attached(self) -> bool:
        """The tool has closed on the payload: the pin's contacts are live."""
        return self._body >= 0

    def attach(self, debris_body: int, payload_mass_kg: float, sink: PayloadForceSink | None = None) -> None:
        """The tool has closed: the pin rides on ``debris_body``; its contact's stiffness
        and damping come from ``payload_mass_kg`` [kg]; forces go to ``sink`` (the scene),
        or to the debris body when there is none."""
        if self.attached:
            return
        if not (payload_mass_kg > 0.0 and math.isfinite(payload_mass_kg)):
            raise PhysicsError(f"payload mass must be a positive number of kg, got {payload_mass_kg}")
        self._body, self._sink = debris_body, sink
        self._stiffness = self.contact.stiffness_n_m(payload_mass_kg)
        self._damping = self.contact.damping_n_s_m(payload_mass_kg)
        self._read_pin()
        if self.frame == "capture":
            self._make_posts(self.pin_m.copy())

    def _read_pin(self) -> None:
        pb, client = self._pb, self._client
        position, orientation = pb.getBasePositionAndOrientation(self._body, physicsClientId=client)
        velocity, angular = pb.getBaseVelocity(self._body, physicsClientId=client)
        if not self._has_offset:  # the pin on the centre of mass: no lever, nothing to rotate
            self.pin_m[:] = position
            self.pin_velocity_m_s[:] = velocity
            return
        lever = quaternion_matrix(orientation) @ self._offset
        self.pin_m[:] = np.add(position, lever)
        self.pin_velocity_m_s[:] = np.add(velocity, np.cross(angular, lever))

    def update(self, port_m: NDArray[np.float64]) -> None:
        """This tick's pin-post contact forces (applied for the next step) and the wrench
        on the payload about the port ``port_m`` [m] (task frame)."""
        self.force_n[:] = 0.0
        self.torque_n_m[:] = 0.0
        self.post_force_n[:] = 0.0
        if self._body < 0:
            return
        self._read_pin()
        pin, v = self.pin_m, self.pin_velocity_m_s
        r, k, c, mu = self.pin.radius_m, self._stiffness, self._damping, self.contact.friction
        force, point = self._force, self._point
        for index, post in enumerate(self.posts):
            centre = self.post_positions_m[index]
            if abs(pin[2] - centre[2]) > 0.5 * POST_HEIGHT_M + r:
                continue
            dx, dy = pin[0] - centre[0], pin[1] - centre[1]
            distance = math.hypot(dx, dy)
            depth = post.radius_m + r - distance
            if depth <= 0.0 or distance == 0.0:
                continue
            nx, ny = dx / distance, dy / distance
            along = v[0] * nx + v[1] * ny
            normal_force = k * depth - c * along  # closing speed = −v·n
            force[:] = (normal_force * nx, normal_force * ny, 0.0)
            sx, sy, sz = v[0] - along * nx, v[1] - along * ny, v[2]
            slip = math.sqrt(sx * sx + sy * sy + sz * sz)
            if slip > 0.0 and mu > 0.0:
                friction = min(mu * abs(normal_force), c * slip) / slip
                force[0] -= friction * sx
                force[1] -= friction * sy
                force[2] -= friction * sz
            # the contact point: midway between the two surfaces along the normal
            reach = r - 0.5 * depth
            point[:] = (pin[0] - reach * nx, pin[1] - reach * ny, pin[2])
            self.force_n += force
            rx, ry, rz = point[0] - port_m[0], point[1] - port_m[1], point[2] - port_m[2]
            fx, fy, fz = force[0], force[1], force[2]
            torque = self.torque_n_m
            torque[0] += ry * fz - rz * fy
            torque[1] += rz * fx - rx * fz
            torque[2] += rx * fy - ry * fx
            self.post_force_n[index] = abs(normal_force)
            if self._sink is not None:
                self._sink.apply_payload_force(force, point)
            else:
                self._pb.applyExternalForce(self._body, -1, force.tolist(), point.tolist(), self._pb.WORLD_FRAME,
                                            physicsClientId=self._client)

    def clearance_m(self, index: int) -> float:
        """Surface gap between the pin and post ``index`` in the x-y plane [m] (negative:
        overlap); NaN before the capture."""
        centre = self.post_positions_m[index]
        return (math.hypot(self.pin_m[0] - centre[0], self.pin_m[1] - centre[1])
                - self.posts[index].radius_m - self.pin.radius_m)
