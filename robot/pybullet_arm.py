"""The simulated plant: the free-floating arm in PyBullet, behind the ArmBackend seam.

Set-up (each a measured necessity with pybullet 3.2.7):
    * DIRECT by default (GUI on request), gravity zero, the base floating, fixed step ``dt_s``.
    * Masses and inertias from the URDF (``URDF_USE_INERTIA_FROM_FILE``; the URDF's one
      collision shape is the capture probe, so the only contact is probe-debris when a
      debris is added with :meth:`PyBulletArm.add_debris`).
    * Link linear and angular damping set to 0 (default 0.04 drains momentum).
    * Velocity motors with a large force limit track the commanded joint rate exactly.
      The motor constraints are solved directly (``CONSTRAINT_SOLVER_LCP_DANTZIG``, an
      MLCP solve; Bullet falls back to its iterative PGS solver should that fail, which
      then runs 100 iterations with ``solverResidualThreshold = 0``: the default 1e-7
      stops early and leaves ~1e-4 rad/s rate errors that drift the base). The direct
      solve gives the same base torques as 100 PGS iterations (2.1e-7 N m RMS in the
      planar automatic capture; 3e-6 at 50 iterations) in 5 instead of 7-12 us a step
      for 3 joints and 12 instead of 19 for 7.

Per servo tick the owner calls ``state()`` (through the controller), ``send()``,
``advance()`` and ``measure()``; PyBullet is queried once per tick (joint states, base pose,
base velocity, after the step) and the result is cached for the next ``state()``. The
fused tick calls ``advance_raw()`` instead of the last two and runs ``measure()``'s
kernels on :attr:`PyBulletArm.readout_buffers` in its own compiled call; or, where
PyBullet's C API can be reached (:mod:`robot.pybullet_native`), sends, steps and reads in
one native call from that compiled call (:meth:`PyBulletArm.native_plant`, then
:meth:`PyBulletArm.stepped_natively`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import math
import os
import sys
import tempfile
from collections.abc import Iterator
from types import ModuleType
from typing import cast

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import ArmError, PhysicsError
from robot import _kernels as kern
from robot.arm import ArmMeasurement, ArmState, BaseState, JointCommand
from robot.debris import DebrisSpec, PathMotion, Payload, combined_link_mass, tool_effective_mass_kg
from robot.models import ManipulatorModel
from robot.pybullet_clients import client_pool
from robot.pybullet_debris import PyBulletDebris
from robot.pybullet_native import NativePlant, native_plant
from robot.urdf import LinkInertial, model_urdf

log = logging.getLogger(__name__)

MOTOR_FORCE_LIMIT = 1.0e5  # [N m]; large: the plant tracks the commanded rate exactly
SOLVER_ITERATIONS = 100


@contextlib.contextmanager
def _c_output_silenced(fd: int = 1) -> Iterator[None]:
    """Send what C code prints to ``fd`` (1: stdout, 2: stderr) to /dev/null meanwhile.

    For the few PyBullet calls that print unasked: a command's stdout (the bench
    commands' JSON, ``analyze --json``) must carry only what the command writes, and its
    stderr only its one-line errors (importing pybullet prints its build time there).
    """
    try:
        (sys.stdout if fd == 1 else sys.stderr).flush()
        saved = os.dup(fd)
    except (OSError, ValueError, AttributeError):  # no such stream (closed, detached): nothing to keep clean
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), fd)
            try:
                yield
            finally:
                _libc().fflush(None)  # what C buffered goes to /dev/null, not to the stream later
                os.dup2(saved, fd)
    finally:
        os.close(saved)


def _import_pybullet() -> ModuleType:
    """pybullet, imported without its build-time banner on stderr."""
    if "pybullet" not in sys.modules:
        with _c_output_silenced(2):
            import pybullet
    return sys.modules["pybullet"]


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None)


def _raw_size(n_joints: int) -> int:
    return 2 * n_joints + 13


def _state_view(raw: NDArray[np.float64], n: int) -> ArmState:
    """An ArmState whose arrays are views of ``raw`` (q, qd, base p, quat xyzw, v, w)."""
    base = BaseState(raw[2 * n:2 * n + 3], raw[2 * n + 3:2 * n + 7], raw[2 * n + 7:2 * n + 10],
                     raw[2 * n + 10:2 * n + 13])
    return ArmState(0.0, raw[:n], raw[n:2 * n], base)


def _momentum(pb: ModuleType, client: int, body: int, n_links: int) -> tuple[
        float, NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Mass [kg], centre of mass [m], linear momentum [kg m/s], angular momentum about the
    task origin [kg m^2/s] and inertia about the centre of mass [kg m^2] of a body's base
    and ``n_links`` links, from PyBullet's link states (once per capture: allocates)."""
    parts = []
    for link in range(-1, n_links):
        info = pb.getDynamicsInfo(body, link, physicsClientId=client)
        if link == -1:
            position, orientation = pb.getBasePositionAndOrientation(body, physicsClientId=client)
            velocity, spin = pb.getBaseVelocity(body, physicsClientId=client)
        else:
            s = pb.getLinkState(body, link, computeLinkVelocity=1, computeForwardKinematics=1, physicsClientId=client)
            position, orientation, velocity, spin = s[0], s[1], s[6], s[7]
        rotation = np.array(pb.getMatrixFromQuaternion(orientation)).reshape(3, 3)
        parts.append((float(info[0]), np.asarray(position), np.asarray(velocity),
                      rotation @ np.diag(info[2]) @ rotation.T, np.asarray(spin)))
    mass = sum(p[0] for p in parts)
    centre = sum((p[0] * p[1] for p in parts), np.zeros(3)) / mass
    linear = sum((p[0] * p[2] for p in parts), np.zeros(3))
    angular = sum((p[0] * np.cross(p[1], p[2]) + p[3] @ p[4] for p in parts), np.zeros(3))
    inertia = sum((p[3] + p[0] * (float((p[1] - centre) @ (p[1] - centre)) * np.eye(3)
                                  - np.outer(p[1] - centre, p[1] - centre)) for p in parts), np.zeros((3, 3)))
    return mass, centre, linear, angular, inertia


class PyBulletArm:
    """A :class:`robot.arm.ArmBackend` simulated in PyBullet (one physics client each, taken
    from the process's pool and given back emptied by :meth:`close`).

    Args:
        model: the manipulator (the URDF is generated from it).
        q0_rad: start pose [rad]; the model's ``q0_rad`` when None.
        dt_s: plant step [s] (1 kHz by default).
        gui: open the PyBullet GUI instead of DIRECT.
    """

    def __init__(self, model: ManipulatorModel, q0_rad: NDArray[np.float64] | None = None,
                 dt_s: float = 1e-3, gui: bool = False) -> None:
        pb = _import_pybullet()

        if not (dt_s > 0.0 and math.isfinite(dt_s)):
            raise PhysicsError(f"dt_s must be a positive number of seconds, got {dt_s}")
        self._pb = pb
        self._gui = gui
        self.model = model
        self.dt_s = float(dt_s)
        n = model.n_joints
        self._n = n
        self._arrays = model.arrays
        q0 = np.array(model.q0_rad if q0_rad is None else q0_rad, dtype=float)
        if q0.shape != (n,) or not np.all(np.isfinite(q0)):
            raise PhysicsError(f"q0_rad must be {n} finite joint angles, got {q0.tolist()}")
        self._q0 = q0
        # DIRECT: a client of the process's pool (robot/pybullet_clients.py), given back
        # emptied on close; the GUI: a connection of its own
        self._client: int = pb.connect(pb.GUI) if gui else client_pool(pb).acquire()
        if self._client < 0:
            raise PhysicsError("could not connect to PyBullet")
        try:
            self._body = self._load(pb)
        except Exception:
            self.close()
            raise
        self._joints = list(range(n))
        self._shape = (n,)
        self._forces = [MOTOR_FORCE_LIMIT] * n
        self._force_limits = np.array(self._forces)
        self._t_s = 0.0
        # The plant state lives in one flat buffer (q, qd, base position, quaternion xyzw,
        # velocity, angular velocity) refilled by one assignment per read; the state and
        # the measurement hand out views of it. _before keeps the state before the step.
        self._raw = np.zeros(_raw_size(n))
        self._raw[2 * n + 6] = 1.0
        self._before = self._raw.copy()
        self._state = _state_view(self._raw, n)
        self._fresh = False  # is self._raw the plant's current state?
        self._have_before = False
        self._measurement = ArmMeasurement(n)
        self._measurement.q_rad = self._state.q_rad
        self._measurement.qd_rad_s = self._state.qd_rad_s
        # This plant always knows its base: _state_view fills it.
        self._measurement.base_angular_velocity_rad_s = cast(BaseState, self._state.base).angular_velocity_rad_s
        self._points = np.zeros((n + 2, 3))
        self._arena = np.empty(kern.arena_size(n))  # scratch space of the read-out kernel
        self.debris: PyBulletDebris | None = None
        #: The payload the last link carries as part of the multibody (:meth:`carry`).
        self.carried: Payload | None = None
        #: The rigid twist :meth:`shed` added to keep the momentum: norms of its linear
        #: [m/s] and angular [rad/s] parts (NaN before a release).
        self.shed_correction = (math.nan, math.nan)
        # the joint motors' rate targets, as last set (the native step's: its command array)
        self._targets: list[float] | NDArray[np.float64] | None = None
        self._native: NativePlant | str | None = None  # native_plant's, or why there is none
        self.reset()

    # ----------------------------------------------------------------- set-up
    def _load(self, pb: ModuleType) -> int:
        client = self._client
        pb.setGravity(0.0, 0.0, 0.0, physicsClientId=client)
        pb.setPhysicsEngineParameter(fixedTimeStep=self.dt_s, numSolverIterations=SOLVER_ITERATIONS,
                                     solverResidualThreshold=0.0, numSubSteps=0, physicsClientId=client)
        with _c_output_silenced(1):  # PyBullet announces the solver switch on stdout
            pb.setPhysicsEngineParameter(constraintSolverType=pb.CONSTRAINT_SOLVER_LCP_DANTZIG,
                                         physicsClientId=client)
        return self._load_body(pb)

    def _load_body(self, pb: ModuleType, last_link_inertial: LinkInertial | None = None) -> int:
        """Load the URDF (the last link carrying ``last_link_inertial`` when given)."""
        client = self._client
        fd, path = tempfile.mkstemp(suffix=".urdf", prefix=f"{self.model.name}-")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(model_urdf(self.model, last_link_inertial))
            body: int = pb.loadURDF(path, useFixedBase=False, flags=pb.URDF_USE_INERTIA_FROM_FILE,
                               physicsClientId=client)
        finally:
            os.unlink(path)
        if pb.getNumJoints(body, physicsClientId=client) != self._n:
            raise PhysicsError(f"URDF of {self.model.name} loaded with the wrong number of joints")
        for link in range(-1, self._n):
            pb.changeDynamics(body, link, linearDamping=0.0, angularDamping=0.0, jointDamping=0.0,
                              physicsClientId=client)
        return body

    def reset(self, q_rad: NDArray[np.float64] | None = None) -> None:
        """Back to rest: base at the origin with identity attitude, joints at ``q_rad``
        (the start pose when None), all velocities zero, time zero."""
        if self.carried is not None:  # back to the arm without a payload
            self._replace_body(None)
        pb, client, body = self._pb, self._client, self._body
        q = self._q0 if q_rad is None else np.asarray(q_rad, dtype=float)
        pb.resetBasePositionAndOrientation(body, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], physicsClientId=client)
        pb.resetBaseVelocity(body, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], physicsClientId=client)
        for j in range(self._n):
            pb.resetJointState(body, j, float(q[j]), 0.0, physicsClientId=client)
        pb.setJointMotorControlArray(body, self._joints, pb.VELOCITY_CONTROL, targetVelocities=[0.0] * self._n,
                                     forces=self._forces, physicsClientId=client)
        self._targets = None
        self._t_s = 0.0
        self._fresh = False
        self._have_before = False

    def set_state(self, q_rad: NDArray[np.float64], qd_rad_s: NDArray[np.float64], base_position_m: NDArray[np.float64],
                  base_orientation_xyzw: NDArray[np.float64], base_velocity_m_s: NDArray[np.float64],
                  base_angular_velocity_rad_s: NDArray[np.float64]) -> None:
        """Put the plant in an arbitrary state (tests); the motors then hold ``qd_rad_s``."""
        pb, client, body = self._pb, self._client, self._body
        pb.resetBasePositionAndOrientation(body, list(map(float, base_position_m)),
                                           list(map(float, base_orientation_xyzw)), physicsClientId=client)
        pb.resetBaseVelocity(body, list(map(float, base_velocity_m_s)), list(map(float, base_angular_velocity_rad_s)),
                             physicsClientId=client)
        for j in range(self._n):
            pb.resetJointState(body, j, float(q_rad[j]), float(qd_rad_s[j]), physicsClientId=client)
        pb.setJointMotorControlArray(body, self._joints, pb.VELOCITY_CONTROL,
                                     targetVelocities=[float(v) for v in qd_rad_s], forces=self._forces,
                                     physicsClientId=client)
        self._targets = [float(v) for v in qd_rad_s]
        self._fresh = False
        self._have_before = False

    # ------------------------------------------------------------ ArmBackend
    @property
    def n_joints(self) -> int:
        """Number of joints."""
        return self._n

    @property
    def body_id(self) -> int:
        """PyBullet body id (tests and the GUI only; never crosses the ArmBackend seam)."""
        return self._body

    @property
    def client_id(self) -> int:
        """PyBullet physics client id (tests and the GUI only)."""
        return self._client

    def _read(self) -> None:
        pb, client, body = self._pb, self._client, self._body
        joint_states = pb.getJointStates(body, self._joints, physicsClientId=client)
        position, orientation = pb.getBasePositionAndOrientation(body, physicsClientId=client)
        velocity, angular = pb.getBaseVelocity(body, physicsClientId=client)
        self._raw[:] = ([s[0] for s in joint_states] + [s[1] for s in joint_states]
                        + list(position + orientation + velocity + angular))
        self._state.t_s = self._t_s
        self._fresh = True

    def state(self) -> ArmState:
        """The current plant state (one instance, refilled; base state always known)."""
        if not self._fresh:
            self._read()
        return self._state

    def send(self, command: JointCommand) -> None:
        """Set the joint-rate motors to ``command.qd_rad_s`` (held until the next send).

        Raises:
            ArmError: wrong length or a non-finite value anywhere in the command.
        """
        velocities = command.qd_rad_s.tolist()
        q, qdd = command.q_rad, command.qdd_rad_s2
        if len(velocities) != self._n or q.shape != self._shape or qdd.shape != self._shape:
            raise ArmError(f"joint command must have {self._n} joints, got {len(velocities)}")
        positions, accelerations = q.tolist(), qdd.tolist()
        # a sum of finite floats is finite unless it overflows; only then, or with a
        # non-finite value in it, does the exact test run (a cheap refusal on the tick)
        total = sum(velocities) + sum(positions) + sum(accelerations)
        if total - total != 0.0 and not (all(map(math.isfinite, velocities)) and all(map(math.isfinite, positions))
                                         and all(map(math.isfinite, accelerations))):
            raise ArmError(f"joint command holds a non-finite value: {velocities}")
        self._pb.setJointMotorControlArray(self._body, self._joints, self._pb.VELOCITY_CONTROL,
                                           targetVelocities=velocities, forces=self._forces,
                                           physicsClientId=self._client)
        self._targets = velocities

    def advance(self) -> None:
        """Step the plant by one period ``dt_s``."""
        if not self._fresh:
            self._read()
        self._before[:] = self._raw
        self._have_before = True
        self._pb.stepSimulation(physicsClientId=self._client)
        self._t_s += self.dt_s
        self._fresh = False

    def measure(self) -> ArmMeasurement:
        """Plant read-outs after the last step (one instance, refilled per call).

        The base torque is that of the last step (zero before the first step).
        """
        if not self._fresh:
            self._read()
        out = self._measurement
        arrays = self._arrays
        out.t_s = self._state.t_s
        kern.plant_readout(self._raw, self._before, self._have_before, arrays.joint_xyz, arrays.joint_rot,
                           arrays.joint_axis, arrays.ee_offset, arrays.base_inertia, self.dt_s, out.ee_position_m,
                           out.ee_velocity_m_s, out.base_attitude_rad, out.base_torque_n_m, self._arena)
        return out

    def advance_raw(self) -> tuple[tuple[tuple[float, ...], ...], tuple[float, ...], tuple[float, ...],
                                   tuple[float, ...], tuple[float, ...]]:
        """:meth:`advance`, then the plant's state after the step as PyBullet gives it
        (joint states, base position [m], quaternion xyzw, velocity [m/s], angular
        velocity [rad/s], task frame), for a compiled caller (the fused tick) that does
        :meth:`measure`'s part itself: ``kern.plant_load`` of these into
        :attr:`readout_buffers` (the state before the step into the second), then
        ``kern.plant_readout`` on them into :meth:`measure`'s instance. The state counts
        as read: the caller loads it before anything reads the arm again."""
        if not self._fresh:
            self._read()
        pb, client, body = self._pb, self._client, self._body
        pb.stepSimulation(physicsClientId=client)
        self._t_s += self.dt_s
        self._state.t_s = self._measurement.t_s = self._t_s
        self._have_before = True
        self._fresh = True
        return (pb.getJointStates(body, self._joints, physicsClientId=client),
                *pb.getBasePositionAndOrientation(body, physicsClientId=client),
                *pb.getBaseVelocity(body, physicsClientId=client))

    def native_plant(self, targets: NDArray[np.float64]) -> NativePlant | str:
        """This arm's plant step through PyBullet's C API (:mod:`robot.pybullet_native`),
        sending ``targets`` [rad/s] (the joint command's rate array, read at each step;
        :meth:`send`'s checks run in the step) and reading into :attr:`readout_buffers`;
        or why there is none (the GUI, another pybullet build, ...). Built on the first
        call and kept while ``targets`` is the same array."""
        native = self._native
        if isinstance(native, str):
            return native
        if native is not None and native.targets is targets:
            return native
        if self._gui:
            self._native = "the GUI's client is not a DIRECT connection"
            return self._native
        self._native = native_plant(self._pb, self._client, self._body, self._n, targets, self._force_limits,
                                    self._raw, self._before)
        return self._native

    def ready_to_step_natively(self, native: NativePlant) -> bool:
        """Whether ``native`` (from :meth:`native_plant`) may step this arm now (False once
        the arm is closed or has made another); the state before the step is read first
        if it is not (:meth:`advance_raw` does the same)."""
        if native is not self._native:
            return False
        if not self._fresh:
            self._read()
        return True

    def stepped_natively(self, targets: NDArray[np.float64], steps: int = 1) -> None:
        """The bookkeeping of :meth:`send` then :meth:`advance_raw` after ``steps`` native
        plant steps sent ``targets``, stepped and loaded the state into
        :attr:`readout_buffers` (the clock advanced step by step, as one step a call)."""
        self._targets = targets
        t = self._t_s
        dt = self.dt_s
        for _ in range(steps):
            t += dt
        self._t_s = self._state.t_s = self._measurement.t_s = t
        self._have_before = True
        self._fresh = True

    @property
    def readout_buffers(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """The plant state after and before the last step (``kern.plant_readout``'s
        ``state`` and ``before``) and the read-out's work arena: what a compiled caller
        of :meth:`advance_raw` fills and reads (the state and the measurement are views
        of the first)."""
        return self._raw, self._before, self._arena

    def read_carried(self, buf: NDArray[np.float64], ee_position_m: NDArray[np.float64], with_gap: bool) -> float:
        """The reading of the debris this arm carries, into its read-out buffer ``buf``,
        from the plant state after the last step (:func:`robot._kernels.carried_reading`);
        returns the gap to ``ee_position_m`` [m] (NaN without ``with_gap``)."""
        if not self._fresh:
            self._read()
        arrays = self._arrays
        return float(kern.carried_reading(buf, self._raw, arrays.joint_xyz, arrays.joint_rot, arrays.joint_axis,
                                          arrays.ee_offset, ee_position_m, with_gap, self._arena))

    def add_debris(self, spec: DebrisSpec, prediction: PathMotion) -> PyBulletDebris:
        """Put the debris into this arm's world (:class:`robot.debris.SimulatesDebris`);
        the returned scene is read once per tick after :meth:`advance`."""
        self.debris = PyBulletDebris(self._pb, self._client, self._body, self._n - 1,
                                     self.model.capture_tool.tip_radius_m, self.model.links[-1].com_m, spec,
                                     prediction, tool_mass_kg=tool_effective_mass_kg(self.model, self.state().q_rad),
                                     carrier=self.carry, shedder=self.shed, carried_reader=self.read_carried)
        self.debris.proxy_follows = self._gui  # the GUI draws the world's bodies
        return self.debris

    def carry(self, payload: Payload, debris_body: int | None = None) -> int:
        """Make a captured payload part of the arm's own multibody: the body is rebuilt
        with the payload merged into the last link (mass, centre of mass and full inertia
        by the parallel-axis theorem, :func:`robot.debris.combined_link_mass`) and given
        the current state (base pose and twist, joint angles and rates, the motors' rate
        targets). Returns the new body id.

        Why: a fixed constraint between the tool link and a separate debris body is solved
        with its own error correction every step (the two bodies are integrated apart, in
        joint space and in Cartesian space, and pulled back together), which the reaction
        constraint of eq. 6 cannot know about; measured on the planar arm with a payload
        ten times its mass, 0.11 N m RMS on the base over the second after the capture
        with the constraint against 1.2e-5 N m with the payload a part of the multibody.
        Call it once the tool's fixed constraint has closed the relative velocity (the
        step after :meth:`robot.pybullet_debris.PyBulletDebris.attach`), so the merged
        body's momentum is that of arm plus debris.

        The merge is a plastic one: what relative velocity the constraint's error
        correction left between tool and debris (a few 1e-5 m/s) is taken out by a rigid
        twist added to the merged body that keeps the linear and angular momentum of arm
        plus ``debris_body`` exactly (the joint rates are kept as they are).

        Args:
            payload: mass [kg], centre of mass [m] and inertia [kg m^2] in the last link's
                frame (``Payload.frame == "tool_link"``).
            debris_body: the debris' PyBullet body whose momentum joins the arm's; None:
                the payload's momentum is whatever the tool link's motion gives it.
        """
        if payload.frame != "tool_link":
            raise PhysicsError(f"carry needs the payload in the tool link's frame, got {payload.frame!r}")
        before = None
        if debris_body is not None:
            before = np.add(_momentum(self._pb, self._client, self._body, self._n)[2:4],
                            _momentum(self._pb, self._client, debris_body, 0)[2:4])
        self._replace_body(payload)
        if before is not None:
            self._conserve(before[0], before[1])
        return self._body

    def shed(self, debris_body: int) -> tuple[int, tuple[float, float]]:
        """Open the tool: the inverse of :meth:`carry`. The body is rebuilt without the
        payload (the model's own last link) and given the current state (base pose and
        twist, joint angles and rates, the motors' rate targets); ``debris_body`` must
        already be a free body at the payload's pose with the payload's velocity and
        angular velocity (the tool link's rigid motion at the payload's centre of mass:
        ``PyBulletDebris.release`` puts it there). Returns the new body id and
        :attr:`shed_correction`.

        Every part keeps its velocity, so the arm without the payload plus the debris
        hold the merged body's linear and angular momentum; what round-off the rebuilt
        inertias leave is taken out by a rigid twist added to the arm (as in
        :meth:`carry`), so that arm plus base plus debris keep the momentum exactly. The
        twist's size is :attr:`shed_correction` ((linear [m/s], angular [rad/s]) norms).
        """
        if self.carried is None:
            raise PhysicsError("shed needs a payload the arm carries")
        pb, client = self._pb, self._client
        before = np.asarray(_momentum(pb, client, self._body, self._n)[2:4])
        debris = np.asarray(_momentum(pb, client, debris_body, 0)[2:4])
        self._replace_body(None)
        self.shed_correction = self._conserve(before[0] - debris[0], before[1] - debris[1])
        return self._body, self.shed_correction

    def _conserve(self, linear_kg_m_s: NDArray[np.float64], angular_kg_m2_s: NDArray[np.float64]) -> tuple[
            float, float]:
        """Add the rigid twist (about the system's centre of mass) that gives the body the
        linear and angular momentum (about the task origin) given; returns the norms of
        its linear [m/s] and angular [rad/s] parts."""
        pb, client, body = self._pb, self._client, self._body
        mass, centre, linear, angular, inertia = _momentum(pb, client, body, self._n)
        dv = (linear_kg_m_s - linear) / mass
        # angular momentum about the centre of mass: L_o = L_c + c x P
        dl = (angular_kg_m2_s - np.cross(centre, linear_kg_m_s)) - (angular - np.cross(centre, linear))
        dw = np.linalg.solve(inertia, dl)
        position = np.asarray(pb.getBasePositionAndOrientation(body, physicsClientId=client)[0])
        velocity, spin = pb.getBaseVelocity(body, physicsClientId=client)
        pb.resetBaseVelocity(body, (np.asarray(velocity) + dv + np.cross(dw, position - centre)).tolist(),
                             (np.asarray(spin) + dw).tolist(), physicsClientId=client)
        self._fresh = False
        return float(np.linalg.norm(dv)), float(np.linalg.norm(dw))

    def _replace_body(self, payload: Payload | None) -> None:
        """Swap the multibody for one whose last link carries ``payload`` (None: the
        model's own), keeping the state and the motors' rate targets."""
        pb, client, n = self._pb, self._client, self._n
        old = self._body
        position, orientation = pb.getBasePositionAndOrientation(old, physicsClientId=client)
        velocity, angular = pb.getBaseVelocity(old, physicsClientId=client)
        joints = pb.getJointStates(old, self._joints, physicsClientId=client)
        targets = [float(s[1]) for s in joints] if self._targets is None else [float(v) for v in self._targets]
        inertial: LinkInertial | None = None
        if payload is not None:
            last = self.model.links[-1]
            inertial = combined_link_mass(last.mass_kg, np.asarray(last.com_m, dtype=float),
                                          np.diag(np.asarray(last.inertia_kg_m2, dtype=float)), payload)
        body = self._load_body(pb, inertial)
        pb.resetBasePositionAndOrientation(body, position, orientation, physicsClientId=client)
        pb.resetBaseVelocity(body, velocity, angular, physicsClientId=client)
        for j, s in enumerate(joints):
            pb.resetJointState(body, j, float(s[0]), float(s[1]), physicsClientId=client)
        pb.setJointMotorControlArray(body, self._joints, pb.VELOCITY_CONTROL, targetVelocities=targets,
                                     forces=self._forces, physicsClientId=client)
        pb.removeBody(old, physicsClientId=client)
        self._body = body
        self.carried = payload
        self._fresh = False
        if isinstance(self._native, NativePlant):
            self._native.bind_arm(body)

    def link_positions_m(self) -> NDArray[np.float64]:
        """(n_joints + 2, 3) points for drawing, task frame: base centre, joint origins,
        end effector. A fresh array (called at display rate, not per tick)."""
        state = self.state()
        base = cast(BaseState, state.base)
        arrays = self._arrays
        kern.link_points(state.q_rad, base.position_m, base.orientation_xyzw, arrays.joint_xyz,
                         arrays.joint_rot, arrays.joint_axis, arrays.ee_offset, self._points)
        return self._points.copy()

    def close(self) -> None:
        """Give the physics client back to the process's pool, its world emptied (the GUI:
        disconnect). Idempotent."""
        client, self._client = self._client, -1
        if client < 0:
            return
        self._native = None
        if not self._gui:
            client_pool(self._pb).release(client)
            return
        try:
            self._pb.disconnect(physicsClientId=client)
        except self._pb.error:  # already disconnected
            log.debug("PyBullet client %s was already disconnected", client)

    def __enter__(self) -> PyBulletArm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
