"""The debris in a world of its own, for an arm whose world has none (an arm over the link).

An arm server, or a real arm, simulates no debris. :class:`LocalDebrisWorld` keeps the
debris as a body with the same contact physics on the trial's side: its own PyBullet
client holds the debris (:class:`robot.pybullet_debris.PyBulletDebris`) and a *kinematic*
capture probe, a sphere put every tick where the arm's measured end effector is, with
its measured velocity. The debris is pushed by the probe exactly as in the arm's own
world; what differs is that the arm is not pushed back: the contact force stays on this
side of the link (a real arm would feel it through its own structure). The first contact
and the impact velocities are the same as in process (nothing has touched the debris
before); after the contact, trials over the link and in process may part by that
missing push. Once the tool closes, the debris moves with the end effector (its pose
relative to the probe kept; no constraint forces, the payload is the real arm's to carry)
and the slave controller gets the payload's mass properties as in process.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robot.debris import DebrisReading, DebrisSpec, PathMotion, Payload, quaternion_matrix
from robot.pybullet_arm import SOLVER_ITERATIONS, _c_output_silenced, _import_pybullet
from robot.pybullet_clients import client_pool
from robot.pybullet_debris import PyBulletDebris


class LocalDebrisWorld:
    """A :class:`robot.debris.CaptureScene` in a PyBullet world of its own, with a
    kinematic probe that follows the measured end effector.

    Args:
        spec: the debris; prediction: its contact-free path.
        tip_radius_m: the probe's radius [m]; tool_mass_kg: the arm's effective mass at the
            end effector [kg] (:func:`robot.debris.tool_effective_mass_kg`).
        dt_s: the step [s].
    """

    physical = True
    contact_model = "physics_local"

    def __init__(self, spec: DebrisSpec, prediction: PathMotion, tip_radius_m: float, tool_mass_kg: float,
                 dt_s: float) -> None:
        pb = _import_pybullet()
        self._pb = pb
        self._client: int = client_pool(pb).acquire()  # an empty world; given back emptied by close
        try:
            pb.setGravity(0.0, 0.0, 0.0, physicsClientId=self._client)
            pb.setPhysicsEngineParameter(fixedTimeStep=dt_s, numSolverIterations=SOLVER_ITERATIONS,
                                         solverResidualThreshold=0.0, numSubSteps=0, physicsClientId=self._client)
            with _c_output_silenced(1):
                pb.setPhysicsEngineParameter(constraintSolverType=pb.CONSTRAINT_SOLVER_LCP_DANTZIG,
                                             physicsClientId=self._client)
            shape = pb.createCollisionShape(pb.GEOM_SPHERE, radius=tip_radius_m, physicsClientId=self._client)
            self._tool = pb.createMultiBody(baseMass=1.0, baseCollisionShapeIndex=shape,
                                            basePosition=[0.0, 0.0, -10.0], physicsClientId=self._client)
            # the probe as the tool "link" -1 of a one-body multibody; its centre of mass is its centre
            self._debris = PyBulletDebris(pb, self._client, self._tool, -1, tip_radius_m, (0.0, 0.0, 0.0), spec,
                                          prediction, tool_mass_kg=tool_mass_kg)
        except Exception:
            self.close()
            raise
        self.reading: DebrisReading = self._debris.reading
        self.contact_radius_m = self._debris.contact_radius_m
        self._offset = np.zeros(3)

    def read(self, t_s: float, ee_position_m: NDArray[np.float64], ee_velocity_m_s: NDArray[np.float64]) -> None:
        """Step this world (not at ``t = 0``), put the probe on the measured end effector
        and read the debris and the contact as in the arm's own world."""
        pb, client, r = self._pb, self._client, self.reading
        if r.attached:
            np.add(ee_position_m, self._offset, out=r.point_m)
            r.point_velocity_m_s[:] = ee_velocity_m_s
            r.point_acceleration_m_s2[:] = 0.0
            r.offset_m[:] = self._offset
            r.gap_m = float(np.linalg.norm(self._offset)) - self.contact_radius_m
            return
        if t_s > 0.0:  # the debris' step, under the force of the last reading (as in the arm's world)
            pb.stepSimulation(physicsClientId=client)
        pb.resetBasePositionAndOrientation(self._tool, ee_position_m.tolist(), [0.0, 0.0, 0.0, 1.0],
                                           physicsClientId=client)
        pb.resetBaseVelocity(self._tool, ee_velocity_m_s.tolist(), [0.0, 0.0, 0.0], physicsClientId=client)
        self._debris.read(t_s, ee_position_m, ee_velocity_m_s)

    def state(self, t_s: float, pos_out: NDArray[np.float64], vel_out: NDArray[np.float64],
              acc_out: NDArray[np.float64]) -> None:
        """The fixture centre of the last reading."""
        self._debris.state(t_s, pos_out, vel_out, acc_out)

    def sample(self, times_s: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """The contact-free path."""
        return self._debris.sample(times_s)

    def attach(self) -> Payload:
        """Close the tool: the debris keeps its offset from the end effector from now on;
        the payload in the tool link's frame is unknown here (no link pose), so its
        inertia is about its centre in task axes and its centre is given relative to the
        end effector (the slave adds it to its last link at the end-effector point)."""
        r = self.reading
        pb, client = self._pb, self._client
        position, orientation = pb.getBasePositionAndOrientation(self._debris.body_id, physicsClientId=client)
        self._offset[:] = r.offset_m
        r.attached = True
        r.in_contact = True
        r.force_on_debris_n[:] = 0.0
        rotation = quaternion_matrix(orientation)
        inertia = rotation @ np.asarray(self._debris.spec.inertia_kg_m2, dtype=float) @ rotation.T
        centre = np.asarray(position) - (r.point_m - r.offset_m)
        return Payload(self._debris.spec.mass_kg, centre, inertia, frame="end_effector_task_axes")

    def close(self) -> None:
        """Give this world's client back to the process's pool, emptied (idempotent)."""
        client, self._client = self._client, -1
        if client >= 0:
            client_pool(self._pb).release(client)
