"""The one slave-control path: capture law (eq. 10) -> reactionless IK (eq. 6) -> joint command.

:class:`SlaveController` depends only on the :class:`robot.arm.ArmBackend` protocol and
the model, so the same object drives the PyBullet plant and a real-arm bridge. Each
:meth:`SlaveController.step` reads ``arm.state()``, computes, and ``arm.send()``-s one
command; it never advances a simulated plant (the owner calls ``ArmBackend.advance()``
afterwards; a real arm runs on its own clock).

The whole computation is one compiled call (:func:`robot._kernels.controller_step`):
the dynamics terms at the measured state, ``ẍ_d = ẍ_cmd − k_p e − k_d ė`` with
``e = ee − x_cmd`` (eq. 10, the end effector from the model at the measured state), the
base-feedback torque, the IK with limits, and the integration
``q̇_cmd = q̇ + q̈ dt``, ``q_cmd = q + q̇ dt + q̈ dt²/2`` from the measured state.
It makes no heap allocation: its scratch arrays live in a work arena the controller
allocates once (``kern.arena_size``).

Safety: a non-finite input (command or measured state) or solution never reaches the
arm: the controller re-sends the last good command (re-stamped), sets ``status.fault``
for that tick and counts it in :attr:`SlaveController.fault_count`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from robot import _kernels as kern
from robot.arm import ArmBackend, JointCommand
from robot.debris import Payload, combined_link_mass, quaternion_matrix, split_link_mass
from robot.dynamics import system_momentum
from robot.ik import IKSettings, settings_vector, solver_code
from robot.models import ManipulatorModel



@dataclass
class SlaveStatus:
    """What one controller tick computed. :meth:`SlaveController.step` refills one instance.

    Attributes:
        t_s: time of the tick [s].
        ee_position_m: (3,) end effector from the controller's model at the measured
            state [m], task frame.
        ee_velocity_m_s: (3,) J q̇ from the model at the measured state [m/s].
        base_torque_predicted_n_m: (3,) T = M q̈ + n (eq. 2) for the chosen q̈ [N m].
        qdd_rad_s2: (n,) chosen joint accelerations [rad/s^2].
        sigma_ratio: σ_min(M (I − J⁺J)) / ‖M‖ (reaction-singularity gauge).
        singular: sigma_ratio under the damping threshold.
        limited: a joint limit was active, or the base-rate bound scaled the task.
        residual: eq. 1 residual over the task rows [m/s^2] (non-zero when a joint limit
            made the IK scale the task down rather than push on the base).
        jacobian_pinv: (n, 3) ``∂q/∂x`` [rad/m]: the pseudoinverse of the Generalized
            Jacobian's task rows at the measured state (task frame; damped like the IK's
            near kinematic singularities; planar: the z column is zero).
        fault: the tick's inputs or solution were non-finite; the last good command was held.
        base_rate_rad_s: |base angular velocity| the momentum model predicts after the
            step [rad/s] (eq. 2's torque on the base; the base-rate bound's gauge).
        rate_bounded: the base-rate bound engaged on this tick (the IK's solution would
            have turned the base faster than ``IKSettings.base_rate_max_rad_s``).
        rate_scale: the task scale the bound chose (1: the task untouched; the end
            effector lags where it is below 1).
    """

    n_joints: int
    t_s: float = 0.0
    ee_position_m: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    ee_velocity_m_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    base_torque_predicted_n_m: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    qdd_rad_s2: NDArray[np.float64] = field(init=False)
    jacobian_pinv: NDArray[np.float64] = field(init=False)
    sigma_ratio: float = 1.0
    singular: bool = False
    limited: bool = False
    residual: float = 0.0
    fault: bool = False
    base_rate_rad_s: float = 0.0
    rate_bounded: bool = False
    rate_scale: float = 1.0

    def __post_init__(self) -> None:
        self.qdd_rad_s2 = np.zeros(self.n_joints)
        self.jacobian_pinv = np.zeros((self.n_joints, 3))

    @classmethod
    def viewing(cls, status_vector: NDArray[np.float64], qdd_rad_s2: NDArray[np.float64]) -> SlaveStatus:
        """A status whose vectors are views of the compiled controller's output buffers:
        ``status_vector`` (``kern.N_STATUS``,) and ``qdd_rad_s2`` (n,), so a tick copies
        only its scalars."""
        status = cls(qdd_rad_s2.shape[0])
        status.ee_position_m = status_vector[kern.S_EE:kern.S_EE + 3]
        status.ee_velocity_m_s = status_vector[kern.S_EE_V:kern.S_EE_V + 3]
        status.base_torque_predicted_n_m = status_vector[kern.S_TORQUE:kern.S_TORQUE + 3]
        status.qdd_rad_s2 = qdd_rad_s2
        return status


_IDENTITY_QUAT = np.array([0.0, 0.0, 0.0, 1.0])
#: On the tick the tool closes the joint rates jump (an impact, taken up by the joints
#: rather than the base); the acceleration limits are widened by this factor for that one
#: tick (the rate and position limits still hold). Measured: the spatial arm closing on
#: 10x its mass needs up to ~50 rad/s^2 for one tick against limits of 8-15.
CLOSING_ACCELERATION_FACTOR = 100.0


class SlaveController:
    """Capture law + reactionless IK + integration, driving any :class:`ArmBackend`.

    Args:
        model: the manipulator the arm is (its limits and mass properties).
        arm: the backend (``PyBulletArm`` or a real-arm bridge).
        solver: ``lse`` (eq. 6, reactionless) or ``pinv`` (minimum-norm baseline).
        k_p: position gain of eq. 10 [1/s^2]; k_d: velocity gain [1/s].
        dt_s: servo period [s].
        settings: IK damping, limits and base-feedback gains.
    """

    def __init__(self, model: ManipulatorModel, arm: ArmBackend, solver: str = "lse", k_p: float = 7.7,
                 k_d: float = 5.0, dt_s: float = 1e-3, settings: IKSettings | None = None) -> None:
        solver_code(solver)
        if arm.n_joints != model.n_joints:
            raise ValueError(f"arm has {arm.n_joints} joints, model {model.name} has {model.n_joints}")
        if not dt_s > 0.0:
            raise ValueError(f"dt_s must be > 0, got {dt_s}")
        n = model.n_joints
        self.model = model
        self.arm = arm
        self.solver = solver
        self.settings = settings or IKSettings()
        self._a = model.arrays
        self._params = settings_vector(self.settings, solver, dt_s, k_p, k_d)
        self._tuning = (solver, dt_s, k_p, k_d)
        self._qdd = np.zeros(n)
        self._status_vec = np.zeros(kern.N_STATUS)
        self._diag = np.zeros(8)
        self._good = JointCommand.zeros(n)
        self._have_good = False
        self._zero3 = np.zeros(3)
        self._status = SlaveStatus.viewing(self._status_vec, self._qdd)
        self._jac_pinv = self._status.jacobian_pinv
        self._arena = np.empty(kern.arena_size(n))  # the compiled tick's scratch space
        self.fault_count = 0
        #: ticks on which the base-rate bound engaged, and the first and last of them [s]
        #: (NaN: never); see ``IKSettings.base_rate_max_rad_s``
        self.rate_bound_ticks = 0
        self.rate_bound_first_s = math.nan
        self.rate_bound_last_s = math.nan
        self.payload: Payload | None = None
        self._priority_before = self.settings.singularity_priority  # what attach_payload overrode
        self._momentum_l = np.zeros(3)  # the system's angular momentum for the closing tick
        self._closing = False
        self._closing_qdd_max = model.arrays.qdd_max
        #: (3,) an external force on the tool during the coming step [N] and where it acts
        #: [m], task frame: the owner fills these from its contact physics (zeros: none),
        #: so that the reaction constraint holds under the push.
        self.external_force_n = np.zeros(3)
        self.external_point_m = np.zeros(3)

    def attach_payload(self, payload: Payload) -> None:
        """A captured payload is now rigidly part of the last link: the momentum maps
        (``M``, ``n`` of eq. 2) and the base-torque prediction use the combined link
        (mass, centre of mass and inertia in that link's frame, parallel-axis theorem), and
        at a reaction singularity the task gives way, whatever the settings said."""
        a = self._a
        if payload.frame != "tool_link":
            payload = self._in_tool_link(payload)
        closing = self._closing_momentum(payload)
        self.external_force_n[:] = 0.0  # the tool's contact is now internal to the system
        mass, com, inertia = combined_link_mass(float(a.link_mass[-1]), a.link_com[-1], a.link_inertia[-1], payload)
        link_mass, link_com, link_inertia = a.link_mass.copy(), a.link_com.copy(), a.link_inertia.copy()
        link_mass[-1], link_com[-1], link_inertia[-1] = mass, com, inertia
        self._a = replace(a, link_mass=link_mass, link_com=link_com, link_inertia=link_inertia)
        self.payload = payload
        self._priority_before = self.settings.singularity_priority
        self.settings = replace(self.settings, singularity_priority="reaction", system_momentum="measured")
        self._params = settings_vector(self.settings, *self._tuning)
        if closing is not None:
            self._closing_qdd_max = self._a.qdd_max * CLOSING_ACCELERATION_FACTOR
            self._momentum_l[:] = closing
            self._params[kern.P_MOMENTUM] = kern.MOMENTUM_GIVEN
            self._closing = True

    def detach_payload(self) -> Payload | None:
        """The tool has opened: the inverse of :meth:`attach_payload`. The last link
        sheds the payload (:func:`robot.debris.split_link_mass`: mass, centre of mass and
        inertia by the parallel-axis theorem run backwards), the singularity priority is
        again the one before the capture. The system's momentum stays ``measured``: the
        arm keeps what momentum the release leaves it (the debris takes its own away).
        Returns the payload shed (None: none was attached)."""
        payload = self.payload
        if payload is None:
            return None
        a = self._a
        mass, com, inertia = split_link_mass(float(a.link_mass[-1]), a.link_com[-1], a.link_inertia[-1], payload)
        link_mass, link_com, link_inertia = a.link_mass.copy(), a.link_com.copy(), a.link_inertia.copy()
        link_mass[-1], link_com[-1], link_inertia[-1] = mass, com, inertia
        self._a = replace(a, link_mass=link_mass, link_com=link_com, link_inertia=link_inertia)
        self.payload = None
        self.settings = replace(self.settings, singularity_priority=self._priority_before)
        self._params = settings_vector(self.settings, *self._tuning)
        self._closing = False
        self._closing_qdd_max = self._a.qdd_max
        return payload

    @property
    def mass_model(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """The links' masses [kg], centres of mass [m] and inertias [kg m²] (link frames)
        the momentum maps use now (copies; tests)."""
        a = self._a
        return a.link_mass.copy(), a.link_com.copy(), a.link_inertia.copy()

    def _closing_momentum(self, payload: Payload) -> NDArray[np.float64] | None:
        """The angular momentum of arm plus debris about their common centre of mass
        [kg m^2/s], task frame, as the tool closes (None when the debris' velocities or
        the base state are unknown). The next :meth:`step` solves with it, so that the
        joint rates take up the debris' momentum and the base keeps its rate: the closing
        is reactionless like the approach (a free-floating arm can absorb an impact
        without turning its base when its joint rates may jump; Nenchev & Yoshida 1999)."""
        state = self.arm.state()
        base = state.base
        if payload.velocity_m_s is None or payload.angular_velocity_rad_s is None or base is None:
            return None
        a, n = self._a, self.model.n_joints
        origins, axes, rots, ee = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3, 3)), np.zeros(3)
        kern.forward_kinematics(np.ascontiguousarray(state.q_rad, dtype=float), a.joint_xyz, a.joint_rot,
                                a.joint_axis, a.ee_offset, origins, axes, rots, ee)
        rot0 = quaternion_matrix(base.orientation_xyzw)
        link_rotation = rot0 @ rots[-1]
        centre = base.position_m + rot0 @ (origins[-1] + rots[-1] @ payload.com_m)
        inertia = link_rotation @ payload.inertia_kg_m2 @ link_rotation.T
        debris = (payload.mass_kg, centre, payload.velocity_m_s, inertia, payload.angular_velocity_rad_s)
        momentum = system_momentum(self.model, state.q_rad, state.qd_rad_s, base.position_m, base.orientation_xyzw,
                                   base.velocity_m_s, base.angular_velocity_rad_s, (debris,))
        return momentum.angular_kg_m2_s

    def _in_tool_link(self, payload: Payload) -> Payload:
        """A payload given at the end-effector point with task axes, in the last link's
        frame at the arm's current state (forward kinematics of the model)."""
        a, n = self._a, self.model.n_joints
        state = self.arm.state()
        origins, axes, rots, ee = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3, 3)), np.zeros(3)
        kern.forward_kinematics(np.ascontiguousarray(state.q_rad, dtype=float), a.joint_xyz, a.joint_rot,
                                a.joint_axis, a.ee_offset, origins, axes, rots, ee)
        base_rotation = np.eye(3) if state.base is None else quaternion_matrix(state.base.orientation_xyzw)
        link_rotation = base_rotation @ rots[-1]  # task <- link
        centre_in_base = ee + base_rotation.T @ payload.com_m  # base frame, from the end effector
        com = rots[-1].T @ (centre_in_base - origins[-1])
        inertia = link_rotation.T @ payload.inertia_kg_m2 @ link_rotation
        return Payload(payload.mass_kg, com, inertia, velocity_m_s=payload.velocity_m_s,
                       angular_velocity_rad_s=payload.angular_velocity_rad_s)

    def rate_bound_metadata(self) -> dict[str, float | int | None]:
        """What the base-rate bound did over the run, for the trial log's metadata:
        ``bound_rad_s``, ``ticks`` (the bound engaged), ``first_s``, ``last_s`` (None: never)."""
        engaged = self.rate_bound_ticks > 0
        return {"bound_rad_s": self.settings.base_rate_max_rad_s, "ticks": self.rate_bound_ticks,
                "first_s": self.rate_bound_first_s if engaged else None,
                "last_s": self.rate_bound_last_s if engaged else None}

    @property
    def status(self) -> SlaveStatus:
        """The status the last :meth:`step` refilled (the same instance every tick)."""
        return self._status

    @property
    def last_command(self) -> JointCommand:
        """The last command handed to the arm (one instance, refilled)."""
        return self._good

    def step(self, t_s: float, x_cmd_m: NDArray[np.float64], v_cmd_m_s: NDArray[np.float64],
             a_cmd_m_s2: NDArray[np.float64]) -> SlaveStatus:
        """One servo tick: read the arm, solve, send one joint command.

        Args:
            t_s: controller time [s] (stamped on the command).
            x_cmd_m, v_cmd_m_s, a_cmd_m_s2: (3,) commanded EE position [m], velocity
                [m/s] and acceleration [m/s^2], task frame (planar: z ignored). Pass
                contiguous float64 arrays (anything else is converted, costing a little).

        Returns:
            The refilled :class:`SlaveStatus` (copy what you keep).
        """
        if type(x_cmd_m) is not np.ndarray or type(v_cmd_m_s) is not np.ndarray or type(a_cmd_m_s2) is not np.ndarray:
            x_cmd_m, v_cmd_m_s, a_cmd_m_s2 = (np.ascontiguousarray(v, dtype=float) for v in (x_cmd_m, v_cmd_m_s, a_cmd_m_s2))
        state = self.arm.state()
        base = state.base
        a = self._a
        if base is None:
            pos, quat, w, v, have = self._zero3, _IDENTITY_QUAT, self._zero3, self._zero3, 0.0
        else:
            pos, quat, w, v, have = (base.position_m, base.orientation_xyzw, base.angular_velocity_rad_s,
                                     base.velocity_m_s, 1.0)
        good = self._good
        sv = self._status_vec
        kern.controller_step(state.q_rad, state.qd_rad_s, pos, quat, w, v, have, self._momentum_l,
                             self.external_force_n, self.external_point_m, x_cmd_m, v_cmd_m_s, a_cmd_m_s2,
                             a.joint_xyz, a.joint_rot, a.joint_axis, a.link_mass, a.link_com, a.link_inertia,
                             a.ee_offset, a.base_mass, a.base_inertia, a.task_rows, a.reaction_rows, a.q_min,
                             a.q_max, a.qd_max, self._closing_qdd_max if self._closing else a.qdd_max,
                             self._params, self._qdd, good.q_rad, good.qd_rad_s,
                             good.qdd_rad_s2, sv, self._diag, self._jac_pinv, self._arena)
        if self._closing:  # the tool has closed: from now on the momentum is measured
            self._closing = False
            self._params[kern.P_MOMENTUM] = kern.MOMENTUM_MEASURED
        status = self._status
        status.t_s = t_s
        sigma_ratio, singular, limited, residual, _, fault, rate, bounded, scale = (
            sv[kern.S_SIGMA_RATIO:kern.S_RATE_SCALE + 1].tolist())
        status.sigma_ratio = sigma_ratio
        status.singular = singular > 0.0
        status.limited = limited > 0.0
        status.residual = residual
        status.fault = fault > 0.0
        status.base_rate_rad_s = rate
        status.rate_bounded = bounded > 0.0
        status.rate_scale = scale
        if bounded > 0.0:
            self.rate_bound_ticks += 1
            self.rate_bound_last_s = t_s
            if self.rate_bound_ticks == 1:
                self.rate_bound_first_s = t_s
        if status.fault:  # the kernel left the last good command in place
            self.fault_count += 1
            status.jacobian_pinv[:] = 0.0  # never hand a non-finite map downstream
            if not self._have_good:  # nothing sent yet: hold still
                good.q_rad[:] = state.q_rad if np.all(np.isfinite(state.q_rad)) else 0.0
                good.qd_rad_s[:] = 0.0
                good.qdd_rad_s2[:] = 0.0
                self._have_good = True
        else:
            self._have_good = True
        good.t_s = t_s
        self.arm.send(good)
        return status
